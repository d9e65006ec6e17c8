"""Two policies on the same cells: the paired difference of their success rates, its test, and a verdict.

A pair is one cell (task and seed) that both campaigns ran to a protocol-completed, autonomous end. Each pair
is one of four kinds: both succeed, neither does, only the baseline A does (`only_a`, b in McNemar's notation)
or only the candidate B does (`only_b`, c). The difference reported is B's success rate minus A's over the
pairs, (c - b) / n: positive means B is better.

- The interval: Tango's asymptotic score interval for the difference of paired proportions (T. Tango,
  "Equivalence test and confidence interval for the difference in proportions for the paired-sample design",
  Statistics in Medicine 17(8):891-908, 1998), recommended for this use by M. W. Fagerland, S. Lydersen and
  P. Laake ("Recommended tests and confidence intervals for paired binomial proportions", Statistics in
  Medicine 33(16):2850-2875, 2014). It inverts the score test, with the variance of c - b taken at the
  restricted maximum-likelihood estimate under each candidate difference, so it stays inside [-1, 1] and is not
  degenerate when b or c is zero.
- The test: McNemar's exact test, the two-sided binomial test of the discordant pairs against 1/2
  (Q. McNemar, Psychometrika 12(2):153-157, 1947; exact form as in Fagerland et al. 2014).
- The verdict, at a declared level and margin: `improved` when the test rejects at that level and the interval
  lies above zero; `regressed` when it rejects and the interval lies below zero; `no_difference` when the
  interval lies within (-margin, +margin); otherwise `underpowered`, with how many pairs would decide it if the
  proportions observed so far held (docs/statistics.md).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from statistics import NormalDist

from .aggregates import CellResult
from .errors import ComparisonRefused
from .mcnemar import MOST_PAIRS_PROJECTED, PairDesign, fixed_pairs, mcnemar_exact_p
from .scoring import Outcome

DEFAULT_LEVEL = 0.05
DEFAULT_MARGIN = 0.05
LEVEL_RANGE = (0.001, 0.2)
MARGIN_RANGE = (0.01, 0.5)
# The power an underpowered comparison's "pairs that would decide it" aim at.
PROJECTED_POWER = 0.8


class Verdict(enum.StrEnum):
    IMPROVED = "improved"
    REGRESSED = "regressed"
    NO_DIFFERENCE = "no_difference"
    UNDERPOWERED = "underpowered"

    @property
    def label(self) -> str:
        return VERDICT_LABELS[self]


VERDICT_LABELS = {
    Verdict.IMPROVED: "improved",
    Verdict.REGRESSED: "regressed",
    Verdict.NO_DIFFERENCE: "no difference within the margin",
    Verdict.UNDERPOWERED: "underpowered",
}


class InvalidComparisonSetting(ComparisonRefused):
    """A level or margin outside the range a comparison accepts."""


def check_level_and_margin(level: float, margin: float) -> None:
    """Both at once: every reason in one error."""
    problems = []
    for name, value, (low, high) in (("level", level, LEVEL_RANGE), ("margin", margin, MARGIN_RANGE)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            problems.append(f"the {name} must be a number, got {value!r}")
        elif not low <= value <= high:
            problems.append(f"the {name} must be in [{low}, {high}], got {value}")
    if problems:
        raise InvalidComparisonSetting(problems)


@dataclass(frozen=True)
class PairCounts:
    both: int = 0
    neither: int = 0
    only_a: int = 0  # b: the baseline succeeds, the candidate fails
    only_b: int = 0  # c: the candidate succeeds, the baseline fails

    @property
    def pairs(self) -> int:
        return self.both + self.neither + self.only_a + self.only_b

    @property
    def discordant(self) -> int:
        return self.only_a + self.only_b

    @property
    def difference(self) -> float | None:
        """B's success rate minus A's over the pairs."""
        return (self.only_b - self.only_a) / self.pairs if self.pairs else None

    def __add__(self, other: PairCounts) -> PairCounts:
        return PairCounts(
            self.both + other.both,
            self.neither + other.neither,
            self.only_a + other.only_a,
            self.only_b + other.only_b,
        )


@dataclass(frozen=True)
class PairedCells:
    """The cells of two campaigns matched by key (task, seed; a full matrix's cell adds its dimensions): the pairs
    per task, and every matched or unmatched cell kept out of them, by why."""

    per_task: Mapping[str, PairCounts] = field(default_factory=dict)
    unmatched: int = 0  # a cell only one campaign planned
    not_run: int = 0  # left unrun in either by a sequential campaign's stop
    unfinished: int = 0  # pending, queued or running in either
    non_autonomous: int = 0  # a human intervened in either
    errored: int = 0  # either ended in an error, not protocol-completed

    @property
    def overall(self) -> PairCounts:
        return sum(self.per_task.values(), PairCounts())

    @property
    def kept_out(self) -> int:
        return self.unmatched + self.not_run + self.unfinished + self.non_autonomous + self.errored


def pair_of(x: CellResult | None, y: CellResult | None) -> tuple[bool, bool] | str:
    """Two cells' results as a pair (A's success, B's), or the reason they make none: only two autonomous,
    protocol-completed outcomes pair."""
    if x is None or y is None:
        return "unmatched"
    if x.not_run or y.not_run:
        return "not_run"
    if x.outcome is None or y.outcome is None:
        return "unfinished"
    if not (x.autonomous and y.autonomous):
        return "non_autonomous"
    if not (x.outcome.protocol_completed and y.outcome.protocol_completed):
        return "errored"
    return x.outcome is Outcome.SUCCESS, y.outcome is Outcome.SUCCESS


def pair_cells(a: Mapping[Hashable, CellResult], b: Mapping[Hashable, CellResult]) -> PairedCells:
    """Pair two campaigns' cells by key, per task, counting each cell kept out by its reason."""
    rows: dict[str, list[int]] = {}  # task -> [both, only_a, only_b, neither]
    kept_out = dict.fromkeys(("unmatched", "not_run", "unfinished", "non_autonomous", "errored"), 0)
    for key in dict.fromkeys([*a, *b]):
        pair = pair_of(a.get(key), b.get(key))
        if isinstance(pair, str):
            kept_out[pair] += 1
            continue
        success_a, success_b = pair
        rows.setdefault(a[key].task, [0, 0, 0, 0])[2 * (not success_a) + (not success_b)] += 1
    per_task = {task: PairCounts(both=r[0], only_a=r[1], only_b=r[2], neither=r[3]) for task, r in rows.items()}
    return PairedCells(per_task=per_task, **kept_out)


def z_for(level: float) -> float:
    """The two-sided normal quantile of a level: 1.96 for 0.05."""
    return NormalDist().inv_cdf(1 - level / 2)


def restricted_only_a(only_a: float, only_b: float, pairs: float, delta: float) -> float:
    """The maximum-likelihood probability of an only-A pair when the difference is `delta` (Tango 1998): the
    positive root of 2n q^2 + B q - b delta (1 - delta) = 0, B = -(b + c) + delta (2n - c + b), from setting the
    derivative of b log q + c log(q + delta) + (n - b - c) log(1 - 2q - delta) to zero."""
    linear = -(only_a + only_b) + delta * (2 * pairs - only_b + only_a)
    root = math.sqrt(max(0.0, linear * linear + 8 * pairs * only_a * delta * (1 - delta)))
    return (root - linear) / (4 * pairs)


def score_statistic(only_a: float, only_b: float, pairs: float, delta: float) -> float:
    """Tango's score statistic for a difference `delta`: (c - b - n delta) over its standard deviation under that
    difference, n (2q + delta (1 - delta)). Decreasing in delta; zero where it equals the estimate."""
    numerator = only_b - only_a - pairs * delta
    if numerator == 0:
        return 0.0
    q = restricted_only_a(only_a, only_b, pairs, delta)
    variance = pairs * (2 * q + delta * (1 - delta))
    if variance <= 0:
        return math.copysign(math.inf, numerator)
    return numerator / math.sqrt(variance)


def tango_interval(only_a: float, only_b: float, pairs: float, level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """The (1 - level) score interval of the difference B - A. Counts may be fractional (a projection)."""
    if pairs <= 0 or only_a < 0 or only_b < 0 or only_a + only_b > pairs:
        raise ValueError(f"need 0 <= b, c and b + c <= n > 0, got b={only_a}, c={only_b}, n={pairs}")
    z = z_for(level)
    estimate = (only_b - only_a) / pairs

    def solve(target: float, low: float, high: float) -> float:
        # score_statistic(low) >= target >= score_statistic(high): bisect to the crossing.
        for _ in range(100):
            middle = (low + high) / 2
            if score_statistic(only_a, only_b, pairs, middle) >= target:
                low = middle
            else:
                high = middle
        return (low + high) / 2

    edge = 1 - 1e-12
    lower = -1.0 if score_statistic(only_a, only_b, pairs, -edge) <= z else solve(z, -edge, estimate)
    upper = 1.0 if score_statistic(only_a, only_b, pairs, edge) >= -z else solve(-z, estimate, edge)
    return lower, upper


@dataclass(frozen=True)
class PairedComparison:
    counts: PairCounts
    level: float
    margin: float
    interval: tuple[float, float] | None  # None without a pair
    p_value: float
    verdict: Verdict
    pairs_needed: int | None  # underpowered: the pairs that would decide it (pairs_to_decide); None: unknown
    more_than: bool = False  # pairs_needed is a floor (MOST_PAIRS_PROJECTED) rather than the number

    @property
    def confidence_percent(self) -> str:
        """The interval's confidence as a percentage, e.g. "95" at level 0.05."""
        return f"{100 * (1 - self.level):.10g}"

    @property
    def basis(self) -> str | None:
        return None if self.pairs_needed is None else projection_basis(self.counts)

    @property
    def more_pairs(self) -> int | None:
        return None if self.pairs_needed is None else max(0, self.pairs_needed - self.counts.pairs)

    def as_dict(self) -> dict:
        counts = self.counts
        return {
            "pairs": counts.pairs,
            "both": counts.both,
            "neither": counts.neither,
            "only_a": counts.only_a,
            "only_b": counts.only_b,
            "discordant": counts.discordant,
            "difference": counts.difference,
            "interval_low": self.interval[0] if self.interval else None,
            "interval_high": self.interval[1] if self.interval else None,
            "interval_method": "Tango score interval",
            "mcnemar_exact_p": self.p_value,
            "level": self.level,
            "margin": self.margin,
            "verdict": self.verdict.value,
            "verdict_label": self.verdict.label,
            "pairs_needed": self.pairs_needed,
            "more_pairs": self.more_pairs,
            "more_than": self.more_than,
            "pairs_needed_basis": self.basis,
        }


def verdict_of(interval: tuple[float, float], margin: float, rejects: bool = True) -> Verdict:
    """The verdict an interval supports: the direction needs `rejects` too (the test's own say)."""
    low, high = interval
    if low > 0 and rejects:
        return Verdict.IMPROVED
    if high < 0 and rejects:
        return Verdict.REGRESSED
    if -margin < low and high < margin:
        return Verdict.NO_DIFFERENCE
    return Verdict.UNDERPOWERED


def compare_pairs(counts: PairCounts, level: float = DEFAULT_LEVEL, margin: float = DEFAULT_MARGIN) -> PairedComparison:
    """The fixed-design comparison of paired outcomes: interval, exact test, verdict."""
    check_level_and_margin(level, margin)
    p_value = mcnemar_exact_p(counts.only_a, counts.only_b)
    if not counts.pairs:
        return PairedComparison(counts, level, margin, None, p_value, Verdict.UNDERPOWERED, None)
    interval = tango_interval(counts.only_a, counts.only_b, counts.pairs, level)
    verdict = verdict_of(interval, margin, rejects=p_value < level)
    needed, more_than = None, False
    if verdict is Verdict.UNDERPOWERED:

        def decides(pairs: int) -> bool:
            scale = pairs / counts.pairs
            scaled = tango_interval(counts.only_a * scale, counts.only_b * scale, pairs, level)
            return verdict_of(scaled, margin) is not Verdict.UNDERPOWERED

        needed, more_than = pairs_to_decide(counts, level, decides)
    return PairedComparison(counts, level, margin, interval, p_value, verdict, needed, more_than)


def projection_basis(counts: PairCounts) -> str:
    """What an undecided comparison's pairs that would decide it rest on, in words (pairs_to_decide)."""
    if counts.only_a == counts.only_b:
        return "if the proportions seen so far held"
    return f"with {PROJECTED_POWER:.0%} power to detect the difference seen so far (McNemar's exact test)"


def pairs_to_decide(counts: PairCounts, level: float, within_margin: Callable[[int], bool]) -> tuple[int, bool]:
    """An undecided comparison's pairs that would decide it. With a difference seen (b != c): the pairs at which
    McNemar's exact test has PROJECTED_POWER to detect it at the proportions seen, computed as a launch's power
    plan computes it (evaluator/protocol/mcnemar.py). With none (b = c) there is no direction to power: the fewest
    pairs at which the interval, its counts scaled, would lie within the margin (`within_margin`)."""
    if counts.only_a == counts.only_b:
        return pairs_needed(counts.pairs, within_margin)
    design = PairDesign(counts.only_a / counts.pairs, counts.only_b / counts.pairs)
    needed = fixed_pairs(design, level, PROJECTED_POWER)
    return (MOST_PAIRS_PROJECTED, True) if needed is None else (needed, False)


def pairs_needed(pairs: int, decides: Callable[[int], bool]) -> tuple[int, bool]:
    """The fewest pairs (more than `pairs`) at which `decides` holds, if the proportions seen so far held: a
    projection, not a power calculation. (MOST_PAIRS_PROJECTED, True) when even that many would not decide."""
    low, high = pairs, max(pairs + 1, 2 * pairs)
    while not decides(high):
        if high >= MOST_PAIRS_PROJECTED:
            return MOST_PAIRS_PROJECTED, True
        low, high = high, min(MOST_PAIRS_PROJECTED, 2 * high)
    while high - low > 1:  # decides(high), not decides(low)
        middle = (low + high) // 2
        if decides(middle):
            high = middle
        else:
            low = middle
    return high, False
