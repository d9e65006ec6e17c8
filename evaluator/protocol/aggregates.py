"""Aggregates with their denominators (simpler_env_protocol.md, "Native scoring and error accounting").

Report coverage, successes, completed failures, typed errors, success_rate over
protocol-completed episodes and attempt_success_rate over all attempts; each rate keeps
its denominator and a Wilson 95% interval. Non-autonomous attempts (a human intervened)
are counted apart and never enter the autonomous rates.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Iterable, Mapping
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

    @property
    def interval(self) -> tuple[float, float] | None:
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


@dataclass(frozen=True)
class Aggregate:
    selected: int
    attempted: int
    successes: int
    completed_failures: int
    errors: Mapping[str, int]  # by outcome class: policy_error, contract_violation, infrastructure_error

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
            "coverage": self.coverage.as_dict(),
            "success_rate": self.success_rate.as_dict(),
            "attempt_success_rate": self.attempt_success_rate.as_dict(),
        }


def aggregate_of(selected: int, outcomes: list[Outcome]) -> Aggregate:
    """The counts of `outcomes` among `selected` cells, the cells without an outcome counted as selected."""
    counts = Counter(outcomes)
    return Aggregate(
        selected=selected,
        attempted=len(outcomes),
        successes=counts[Outcome.SUCCESS],
        completed_failures=counts[Outcome.TASK_FAILURE],
        errors={o.value: counts[o] for o in Outcome if not o.protocol_completed},
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
    autonomous = [c for c in cells if c.autonomous and c.outcome is not None]
    human = [c.outcome for c in cells if not c.autonomous and c.outcome is not None]
    tasks = list(dict.fromkeys(c.task for c in cells))
    return Report(
        overall=aggregate_of(len(cells), [c.outcome for c in autonomous]),
        per_task={
            task: aggregate_of(
                sum(1 for c in cells if c.task == task), [c.outcome for c in autonomous if c.task == task]
            )
            for task in tasks
        },
        non_autonomous=aggregate_of(len(human), human),
    )


@dataclass(frozen=True)
class Comparison:
    """Two campaigns on the same cells, paired cell by cell (a cell: task and seed)."""

    pairs: int  # cells finished and protocol-completed in both
    both: int
    neither: int
    only_a: int
    only_b: int
    unpaired: int  # cells in only one campaign, or not completed in both
    non_autonomous: int = 0  # cells a human intervened in, in either campaign: kept out of every count above

    @property
    def discordant(self) -> int:
        return self.only_a + self.only_b


def compare(
    a: Mapping[tuple, Outcome | None], b: Mapping[tuple, Outcome | None], non_autonomous: Collection[tuple] = ()
) -> Comparison:
    """Pair the cells two campaigns share; only protocol-completed outcomes of autonomous attempts pair."""
    counts = Counter()
    for key in set(a) | set(b):
        if key in non_autonomous:
            counts["non_autonomous"] += 1
            continue
        outcome_a, outcome_b = a.get(key), b.get(key)
        if (
            outcome_a is None
            or outcome_b is None
            or not (outcome_a.protocol_completed and outcome_b.protocol_completed)
        ):
            counts["unpaired"] += 1
            continue
        success_a, success_b = outcome_a is Outcome.SUCCESS, outcome_b is Outcome.SUCCESS
        counts[
            {(True, True): "both", (False, False): "neither", (True, False): "only_a", (False, True): "only_b"}[
                (success_a, success_b)
            ]
        ] += 1
    pairs = counts["both"] + counts["neither"] + counts["only_a"] + counts["only_b"]
    return Comparison(
        pairs=pairs,
        both=counts["both"],
        neither=counts["neither"],
        only_a=counts["only_a"],
        only_b=counts["only_b"],
        unpaired=counts["unpaired"],
        non_autonomous=counts["non_autonomous"],
    )
