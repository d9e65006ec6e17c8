"""Which variation hurts a policy: the effect of each factor of a full matrix, paired against its base condition.

A factor is one kind of variation the matrix declares (Variant Aggregation's groups: background, lighting,
distractors, table texture, cabinet texture, camera; or any axis of a matrix, such as Visual Matching's robot
colour, `urdf_version`, against a base label). A level is one value of it (`darker`, `background_1`). A level's
cell pairs with the base cell of the same family and every other dimension the same (the same task, object pose or
episode), so the policy's own luck on that episode cancels out:

- per level: its success rate with a Wilson interval, and the paired difference (level minus base) over the cells
  that pair, with Tango's score interval and McNemar's exact test (evaluator/protocol/paired.py);
- per factor: the mean over the base cells it pairs with of (the mean success of the factor's levels there minus
  the base's success), with a percentile bootstrap interval that resamples base cells, since every level of a
  factor reuses the same base cell (evaluator/protocol/resampling.py);
- the factors ordered by that effect, the most harmful first.

A cell pairs only if both are autonomous and protocol-completed, as in every paired comparison.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass

import numpy as np

from .aggregates import CellResult, Rate
from .errors import ComparisonRefused
from .paired import DEFAULT_LEVEL, PairCounts, PairedComparison, compare_pairs, pair_of
from .resampling import RESAMPLES, SEED, percentile_interval, resample_indices
from .scoring import Outcome

BASE = "base"
MOST_FAILURES_LISTED = 20  # per level: the first failing episodes linked; the attempts table has them all


@dataclass(frozen=True)
class FactorCell:
    pairing: Hashable  # what a level's cell shares with its base: the family and every other dimension
    factor: str  # BASE for the base condition
    level: str
    result: CellResult
    scored: bool = True  # upstream's metric scores it (Variant Aggregation's camera cells are run, not scored)
    attempt: int | None = None  # to link the failing episodes


@dataclass(frozen=True)
class LevelEffect:
    level: str
    rate: Rate  # successes over autonomous protocol-completed attempts at this level
    comparison: PairedComparison  # this level (B) against the base (A) over the cells that pair
    failures: tuple[int, ...]  # attempts that failed the task at this level, the first MOST_FAILURES_LISTED
    failure_count: int

    def as_dict(self) -> dict:
        return {
            "level": self.level,
            "success_rate": self.rate.as_dict(),
            "against_base": self.comparison.as_dict(),
            "failing_attempts": list(self.failures),
            "failure_count": self.failure_count,
        }


@dataclass(frozen=True)
class FactorEffect:
    factor: str
    levels: tuple[LevelEffect, ...]
    rate: Rate
    base_cells: int  # base cells at least one level pairs with: the bootstrap's units
    effect: float | None  # mean over those base cells of (mean level success - base success)
    interval: tuple[float, float] | None
    scored: bool  # False when none of its cells is scored by upstream's metric

    def as_dict(self) -> dict:
        return {
            "factor": self.factor,
            "success_rate": self.rate.as_dict(),
            "base_cells_paired": self.base_cells,
            "effect": self.effect,
            "interval_low": self.interval[0] if self.interval else None,
            "interval_high": self.interval[1] if self.interval else None,
            "interval_method": f"percentile bootstrap over base cells, {RESAMPLES} resamples",
            "scored": self.scored,
            "levels": [level.as_dict() for level in self.levels],
        }


@dataclass(frozen=True)
class FactorReport:
    base_rate: Rate
    factors: tuple[FactorEffect, ...]  # the most harmful first; factors without a pair last
    level: float

    def as_dict(self) -> dict:
        return {
            "level": self.level,
            "base_success_rate": self.base_rate.as_dict(),
            "factors": [factor.as_dict() for factor in self.factors],
        }


def rate_of(cells: list[FactorCell]) -> Rate:
    outcomes = [c.result.outcome for c in cells if c.result.autonomous and c.result.outcome is not None]
    completed = [o for o in outcomes if o.protocol_completed]
    return Rate(sum(o is Outcome.SUCCESS for o in completed), len(completed))


def level_effect(level: str, cells: list[FactorCell], bases: dict, level_alpha: float) -> LevelEffect:
    tally = [0, 0, 0, 0]  # both, only_a (base only), only_b (level only), neither
    for cell in cells:
        pair = pair_of(bases[cell.pairing].result, cell.result) if cell.pairing in bases else "unmatched"
        if not isinstance(pair, str):
            base_success, level_success = pair
            tally[2 * (not base_success) + (not level_success)] += 1
    both, only_a, only_b, neither = tally
    failures = [c.attempt for c in cells if c.result.outcome is Outcome.TASK_FAILURE and c.attempt is not None]
    return LevelEffect(
        level=level,
        rate=rate_of(cells),
        comparison=compare_pairs(PairCounts(both=both, neither=neither, only_a=only_a, only_b=only_b), level_alpha),
        failures=tuple(failures[:MOST_FAILURES_LISTED]),
        failure_count=len(failures),
    )


def factor_effect(factor: str, cells: list[FactorCell], bases: dict, level_alpha: float) -> FactorEffect:
    by_level: dict[str, list[FactorCell]] = {}
    for cell in cells:
        by_level.setdefault(cell.level, []).append(cell)
    # Per base cell, the paired differences of each level that pairs with it.
    differences: dict[Hashable, list[float]] = {}
    for cell in cells:
        pair = pair_of(bases[cell.pairing].result, cell.result) if cell.pairing in bases else "unmatched"
        if not isinstance(pair, str):
            differences.setdefault(cell.pairing, []).append(float(pair[1]) - float(pair[0]))
    per_base = np.array([np.mean(values) for values in differences.values()])
    interval = None
    if per_base.size:
        means = per_base[resample_indices(per_base.size, RESAMPLES, SEED)].mean(axis=1)
        interval = percentile_interval(means, level_alpha)
    return FactorEffect(
        factor=factor,
        levels=tuple(level_effect(name, members, bases, level_alpha) for name, members in by_level.items()),
        rate=rate_of(cells),
        base_cells=int(per_base.size),
        effect=float(per_base.mean()) if per_base.size else None,
        interval=interval,
        scored=any(c.scored for c in cells),
    )


def factor_effects(cells: Iterable[FactorCell], level: float = DEFAULT_LEVEL) -> FactorReport:
    """Every factor's effect against the base condition, the most harmful first."""
    cells = list(cells)
    bases = {c.pairing: c for c in cells if c.factor == BASE}
    factors: dict[str, list[FactorCell]] = {}
    for cell in cells:
        if cell.factor != BASE:
            factors.setdefault(cell.factor, []).append(cell)
    effects = [factor_effect(name, members, bases, level) for name, members in factors.items()]
    effects.sort(key=lambda e: (e.effect is None, e.effect if e.effect is not None else 0.0, e.factor))
    return FactorReport(rate_of(list(bases.values())), tuple(effects), level)


@dataclass(frozen=True)
class FactorChoice:
    """Which dimension's levels are compared against which base label; `grouped` reads the levels' groups as the
    factors (Variant Aggregation's variants: background_1 and background_2 are two levels of background)."""

    dimension: str
    base: str
    grouped: bool = False

    def as_dict(self) -> dict:
        return {"dimension": self.dimension, "base": self.base, "grouped": self.grouped}


def factor_cells(rows: Iterable[tuple], choice: FactorChoice, group_of: dict | None = None) -> list[FactorCell]:
    """FactorCells from (family, dimensions, scored, CellResult, attempt) rows: a cell pairs with the base cell of its
    family whose every other dimension is the same. `group_of` maps (family, level) to its group when grouped."""
    cells = []
    for family, dimensions, scored, result, attempt in rows:
        level = dimensions.get(choice.dimension)
        if level is None:
            continue
        others = tuple(sorted((k, v) for k, v in dimensions.items() if k != choice.dimension))
        factor = group_of[family, level] if choice.grouped else choice.dimension
        if level == choice.base or (choice.grouped and factor == BASE):
            factor = BASE
        cells.append(FactorCell((family, others), factor, level, result, scored, attempt))
    return cells


class InvalidFactor(ComparisonRefused):
    """A dimension or base label the campaign's matrix does not have."""


def check_choice(choice: FactorChoice, levels_by_dimension: dict[str, list[str]]) -> None:
    """The dimension must be one of the matrix's axes and the base one of its labels: every reason at once."""
    if choice.dimension not in levels_by_dimension:
        raise InvalidFactor(
            [f"no dimension {choice.dimension!r} in this campaign's matrix; one of {', '.join(levels_by_dimension)}"]
        )
    labels = levels_by_dimension[choice.dimension]
    if not choice.grouped and choice.base not in labels:
        raise InvalidFactor([f"{choice.dimension} has no level {choice.base!r}; one of {', '.join(labels)}"])
