"""Aggregates with their denominators (simpler_env_protocol.md, "Native scoring and error accounting").

Report coverage, successes, completed failures, typed errors, success_rate over
protocol-completed episodes and attempt_success_rate over all attempts; each rate keeps
its denominator and a Wilson 95% interval. Non-autonomous attempts (a human intervened)
are counted apart and never enter the autonomous rates. The cells a sequential campaign
left unrun once its test had decided are counted apart too (`not_run`): the aggregates
cover the cells that were run, never counting those as failures.
"""

from __future__ import annotations

import functools
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .scoring import Outcome

Z_95 = 1.959963984540054


def wilson_interval(successes: int, trials: int, z: float = Z_95) -> tuple[float, float]:
    if trials < 1 or not 0 <= successes <= trials:
        raise ValueError(f"need 0 <= successes <= trials and trials >= 1, got {successes}/{trials}")
    p = successes / trials
    z2 = z * z
    denominator = 1 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / denominator
    # At 0 and n successes the bounds are exactly 0 and 1; subtraction would leave rounding residue.
    low = 0.0 if successes == 0 else centre - half
    high = 1.0 if successes == trials else centre + half
    return low, high


@dataclass(frozen=True)
class Rate:
    numerator: int
    denominator: int

    @property
    def value(self) -> float | None:
        return self.numerator / self.denominator if self.denominator else None

    @functools.cached_property
    def interval(self) -> tuple[float, float] | None:
        """Computed once per rate (a leaderboard asks each row's many times)."""
        return wilson_interval(self.numerator, self.denominator) if self.denominator else None

    def as_dict(self) -> dict:
        interval = self.interval
        return {
            "numerator": self.numerator,
            "denominator": self.denominator,
            "value": self.value,
            "wilson95_low": interval[0] if interval else None,
            "wilson95_high": interval[1] if interval else None,
        }


@dataclass(frozen=True)
class CellResult:
    task: str
    outcome: Outcome | None  # None: selected, not attempted (yet)
    autonomous: bool = True
    not_run: bool = False  # a sequential campaign's cell, left unrun once its test had decided


@dataclass(frozen=True)
class Aggregate:
    selected: int
    attempted: int
    successes: int
    completed_failures: int
    errors: Mapping[str, int]  # by outcome class: policy_error, contract_violation, infrastructure_error
    not_run: int = 0  # planned, then left unrun by a sequential campaign's stop: not among `selected`

    @property
    def coverage(self) -> Rate:
        return Rate(self.attempted, self.selected)

    @property
    def success_rate(self) -> Rate:
        return Rate(self.successes, self.successes + self.completed_failures)

    @property
    def attempt_success_rate(self) -> Rate:
        return Rate(self.successes, self.attempted)

    def as_dict(self) -> dict:
        return {
            "selected": self.selected,
            "attempted": self.attempted,
            "successes": self.successes,
            "completed_failures": self.completed_failures,
            "errors": dict(self.errors),
            "not_run": self.not_run,
            "coverage": self.coverage.as_dict(),
            "success_rate": self.success_rate.as_dict(),
            "attempt_success_rate": self.attempt_success_rate.as_dict(),
        }


def aggregate_of(selected: int, outcomes: list[Outcome], not_run: int = 0) -> Aggregate:
    """The counts of `outcomes` among `selected` cells, the cells without an outcome counted as selected."""
    counts = Counter(outcomes)
    return Aggregate(
        selected=selected,
        attempted=len(outcomes),
        successes=counts[Outcome.SUCCESS],
        completed_failures=counts[Outcome.TASK_FAILURE],
        errors={o.value: counts[o] for o in Outcome if not o.protocol_completed},
        not_run=not_run,
    )


@dataclass(frozen=True)
class Report:
    overall: Aggregate  # autonomous attempts only, over every selected cell
    per_task: Mapping[str, Aggregate]
    non_autonomous: Aggregate  # the attempts a human intervened in, apart

    def as_dict(self) -> dict:
        return {
            "overall": self.overall.as_dict(),
            "per_task": {task: agg.as_dict() for task, agg in self.per_task.items()},
            "non_autonomous": self.non_autonomous.as_dict(),
        }


def aggregate(cells: Iterable[CellResult]) -> Report:
    cells = list(cells)
    run = [c for c in cells if not c.not_run]
    autonomous = [c for c in run if c.autonomous and c.outcome is not None]
    human = [c.outcome for c in run if not c.autonomous and c.outcome is not None]
    tasks = list(dict.fromkeys(c.task for c in cells))

    def of(task: str | None) -> Aggregate:
        mine = [c for c in cells if task is None or c.task == task]
        return aggregate_of(
            sum(1 for c in mine if not c.not_run),
            [c.outcome for c in autonomous if task is None or c.task == task],
            not_run=sum(1 for c in mine if c.not_run),
        )

    return Report(
        overall=of(None),
        per_task={task: of(task) for task in tasks},
        non_autonomous=aggregate_of(len(human), human),
    )
