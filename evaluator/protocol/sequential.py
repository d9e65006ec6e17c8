"""A campaign run against a baseline that stops when the answer is known: an anytime-valid confidence sequence.

Each finished pair (the candidate's cell and the baseline's same task and seed) gives D = s_B - s_A in {-1, 0, 1};
the question is the mean difference of success rates, Delta = E[D]. A confidence sequence is a sequence of
intervals that holds the true Delta at every number of pairs at once with probability at least 1 - level, so the
campaign may look after each pair and stop as soon as the interval decides, without the inflated error of
re-testing a fixed-design interval ("p-hacking" by adding trials until it looks good).

The construction is testing by betting (I. Waudby-Smith and A. Ramdas, "Estimating means of bounded random
variables by betting", JRSS Series B 86(1):1-27, 2024). Put Y = (D + 1) / 2 in [0, 1], with mean mu =
(Delta + 1) / 2. For each candidate mean m, a gambler who bets a fraction c of the allowed stake that mu > m holds
capital prod_i (1 - c + c Y_i / m); one who bets that mu < m holds prod_i (1 - c + c (1 - Y_i) / (1 - m)). When
mu = m both are non-negative martingales that start at 1, and so is their average over a fixed grid of c (Robbins'
method of mixtures; the 20 fractions c = (d - 1/2) / 20 are the midpoint rule for a uniform prior on the bet, as
in T. Cover's universal portfolio, Mathematical Finance 1(1):1-29, 1991). By Ville's inequality each reaches
2 / level with probability at most level / 2, ever. The lower bound is the least m whose upward capital has stayed under
2 / level, the upper bound the greatest m whose downward capital has; both capitals are monotone in m, so the
bounds are found by bisection. Since every bet is a constant, the capital depends only on the counts of each
kind of pair, not their order; the running intersection (the tightest bounds seen so far) is still valid and
makes the sequence only narrow.

The verdict is read off the interval as the fixed design's is (evaluator/protocol/paired.py, verdict_of), at the
declared level and margin: improved (above 0), regressed (below 0), no difference (inside the margin); the
first pair count at which one holds is where the campaign stops starting cells. docs/statistics.md has the
formulas and the simulation of its error rate (bench/sequential_test.py).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .paired import PairCounts, Verdict, check_level_and_margin, pairs_to_decide, projection_basis, verdict_of

METHOD = "betting confidence sequence (Waudby-Smith & Ramdas 2024), uniform mixture of 20 constant bets"
BET_FRACTIONS = (np.arange(20) + 0.5) / 20  # the midpoint rule for a uniform prior on the bet
BISECTION_STEPS = 52  # to below 1e-15 of the [0, 1] mean scale


@dataclass(frozen=True)
class SequentialRule:
    """What a sequential campaign declares at launch and records in its plan."""

    baseline: int  # the baseline campaign's id
    level: float
    margin: float
    order_seed: int
    order: tuple[int, ...]  # cell indices in the order they are started

    def __post_init__(self):
        check_level_and_margin(self.level, self.margin)

    def as_dict(self) -> dict:
        return {
            "baseline": self.baseline,
            "level": self.level,
            "margin": self.margin,
            "method": METHOD,
            "order_seed": self.order_seed,
            "order": list(self.order),
        }

    @classmethod
    def from_dict(cls, data: dict) -> SequentialRule:
        return cls(data["baseline"], data["level"], data["margin"], data["order_seed"], tuple(data["order"]))


def run_order(cells: int, seed: int) -> tuple[int, ...]:
    """The predeclared random order of a campaign's cells: a permutation drawn from `seed`."""
    order = list(range(cells))
    random.Random(seed).shuffle(order)
    return tuple(order)


def log_mixture(log_capital: np.ndarray) -> np.ndarray:
    """log of the mean capital over the bets (the last axis)."""
    top = log_capital.max(axis=-1, keepdims=True)
    return (top + np.log(np.exp(log_capital - top).mean(axis=-1, keepdims=True)))[..., 0]


def log_upward(plus, zero, minus, m) -> np.ndarray:
    """The log capital of the bets that the mean exceeds m (counts with a trailing axis of 1): non-increasing in m."""
    c, m = BET_FRACTIONS, m[..., None]
    return log_mixture(plus * np.log1p(c * (1 / m - 1)) + zero * np.log1p(c * (0.5 / m - 1)) + minus * np.log1p(-c))


def log_downward(plus, zero, minus, m) -> np.ndarray:
    """The log capital of the bets that the mean is below m: the upward bets, mirrored."""
    return log_upward(minus, zero, plus, 1 - m)


def bounds(plus, zero, minus, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The confidence bounds of Delta after `plus` pairs with D = 1, `zero` with D = 0 and `minus` with D = -1
    (arrays of counts, any shape; no running intersection). Every count zero gives [-1, 1]."""
    plus, zero, minus = (np.asarray(x, dtype=float)[..., None] for x in (plus, zero, minus))
    threshold = math.log(2 / level)

    def upward(m):
        return log_upward(plus, zero, minus, m)

    def downward(m):
        return log_downward(plus, zero, minus, m)

    shape = plus.shape[:-1]
    # Lower bound: the least m still in the set (upward capital under the threshold); bisect keeping
    # `excluded_below` out of it and `included` in it. The upper bound the same way, mirrored.
    excluded_below, included = np.zeros(shape), np.ones(shape)
    for _ in range(BISECTION_STEPS):
        middle = (excluded_below + included) / 2
        out = upward(np.maximum(middle, 1e-300)) >= threshold
        excluded_below, included = np.where(out, middle, excluded_below), np.where(out, included, middle)
    low = included
    included, excluded_above = np.zeros(shape), np.ones(shape)
    for _ in range(BISECTION_STEPS):
        middle = (included + excluded_above) / 2
        out = downward(np.minimum(middle, 1 - 1e-16)) >= threshold
        included, excluded_above = np.where(out, included, middle), np.where(out, middle, excluded_above)
    high = included
    return 2 * low - 1, 2 * high - 1


@dataclass(frozen=True)
class SequencePoint:
    pairs: int
    low: float  # the running intersection: the tightest bounds so far
    high: float


@dataclass(frozen=True)
class SequentialState:
    level: float
    margin: float
    points: tuple[SequencePoint, ...]  # one per finished pair, in the order they finished
    counts: PairCounts
    verdict: Verdict  # the first decided verdict; underpowered while none is
    decided_at: int | None  # the pairs at which it was decided

    @property
    def decided(self) -> bool:
        return self.decided_at is not None

    @property
    def interval(self) -> tuple[float, float]:
        return (self.points[-1].low, self.points[-1].high) if self.points else (-1.0, 1.0)

    @property
    def basis(self) -> str:
        """What the projection rests on, in words."""
        return projection_basis(self.counts)

    def projection(self) -> tuple[int, bool] | None:
        """Undecided: the pairs that would decide it (and whether that is a floor), as a fixed comparison's are
        found (paired.pairs_to_decide); None without a pair."""
        if self.decided or not self.counts.pairs:
            return None
        n, counts = self.counts.pairs, self.counts

        def decides(pairs: int) -> bool:
            scale = pairs / n
            low, high = bounds(
                counts.only_b * scale, (counts.both + counts.neither) * scale, counts.only_a * scale, self.level
            )
            return verdict_of((float(low), float(high)), self.margin) is not Verdict.UNDERPOWERED

        return pairs_to_decide(counts, self.level, decides)

    def as_dict(self) -> dict:
        projection = self.projection()
        low, high = self.interval
        return {
            "method": METHOD,
            "level": self.level,
            "margin": self.margin,
            "pairs": self.counts.pairs,
            "difference": self.counts.difference,
            "interval_low": low,
            "interval_high": high,
            "verdict": self.verdict.value,
            "verdict_label": self.verdict.label,
            "decided_at": self.decided_at,
            "pairs_needed": projection[0] if projection else None,
            "more_than": projection[1] if projection else False,
            "pairs_needed_basis": self.basis if projection else None,
        }


def running_bounds(plus, zero, minus, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The confidence sequence along the last axis: cumulative counts in, the running intersection out."""
    low, high = bounds(plus, zero, minus, level)
    return np.maximum.accumulate(low, axis=-1), np.minimum.accumulate(high, axis=-1)


VERDICT_ORDER = (Verdict.UNDERPOWERED, Verdict.IMPROVED, Verdict.REGRESSED, Verdict.NO_DIFFERENCE)


def first_decisions(low: np.ndarray, high: np.ndarray, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """Along the last axis, the first decided verdict (an index into VERDICT_ORDER, 0: none) and the pair count
    where it was decided (0: none): verdict_of, for many sequences at once."""
    return first_of(np.select([low > 0, high < 0, (-margin < low) & (high < margin)], [1, 2, 3], 0))


def first_decisions_of_counts(plus, zero, minus, level: float, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """first_decisions(*running_bounds(plus, zero, minus, level), margin) without finding the bounds: a mean m is
    outside the set exactly when the capital betting against it has reached 2 / level, so whether the running
    bounds have cleared 0 or the margin takes one capital per look and edge (m = 1/2, (1 -+ margin) / 2), not a
    bisection: what lets a launch preview simulate hundreds of campaigns."""
    return first_of(decision_codes(*edges_reached(plus, zero, minus, level, margin)))


def edges_reached(plus, zero, minus, level: float, margin: float) -> tuple[np.ndarray, ...]:
    """Along the last axis, whether the running bounds have yet cleared: 0 from below (the lower bound above 0), 0
    from above, -margin and +margin."""
    plus, zero, minus = (np.asarray(x, dtype=float)[..., None] for x in (plus, zero, minus))
    threshold = math.log(2 / level)

    def reached(capital, m: float) -> np.ndarray:
        return np.maximum.accumulate(capital(plus, zero, minus, np.full(plus.shape[:-1], m)) >= threshold, axis=-1)

    return (
        reached(log_upward, 0.5),
        reached(log_downward, 0.5),
        reached(log_upward, (1 - margin) / 2),
        reached(log_downward, (1 + margin) / 2),
    )


def decision_codes(above, below, over_lower_edge, under_upper_edge) -> np.ndarray:
    """The verdict each look's edges decide (an index into VERDICT_ORDER, 0: none)."""
    return np.select([above, below, over_lower_edge & under_upper_edge], [1, 2, 3], 0)


def first_of(code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    first = (code > 0).argmax(axis=-1)  # 0 where none is decided, and code there is 0
    verdicts = np.take_along_axis(code, first[..., None], axis=-1)[..., 0]
    return verdicts, np.where(verdicts > 0, first + 1, 0)


def sequential_state(pairs: Sequence[tuple[bool, bool]], level: float, margin: float) -> SequentialState:
    """The confidence sequence over pairs (the baseline's success, the candidate's) in the order they finished,
    and its verdict."""
    check_level_and_margin(level, margin)
    outcomes = np.asarray(pairs, dtype=bool).reshape(-1, 2)
    a, b = outcomes[:, 0], outcomes[:, 1]
    low, high = running_bounds(np.cumsum(b & ~a), np.cumsum(a == b), np.cumsum(a & ~b), level)
    points = tuple(SequencePoint(i + 1, float(lo), float(hi)) for i, (lo, hi) in enumerate(zip(low, high, strict=True)))
    verdict, decided_at = Verdict.UNDERPOWERED, None
    if points:
        code, at = first_decisions(low, high, margin)
        verdict, decided_at = VERDICT_ORDER[int(code)], int(at) or None
    counts = PairCounts(
        both=int((a & b).sum()), neither=int((~a & ~b).sum()), only_a=int((a & ~b).sum()), only_b=int((b & ~a).sum())
    )
    return SequentialState(level, margin, points, counts, verdict, decided_at)
