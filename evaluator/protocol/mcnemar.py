"""McNemar's exact test, and its power for a paired design, computed exactly.

The test: the two-sided binomial test of the discordant pairs against 1/2 (Q. McNemar, "Note on the sampling error
of the difference between correlated proportions or percentages", Psychometrika 12(2):153-157, 1947; exact form as
in M. W. Fagerland, S. Lydersen and P. Laake, Statistics in Medicine 33(16):2850-2875, 2014).

Its power: n independent pairs, each only-A with probability p10 and only-B with p01. The discordant count D is
Binomial(n, p10 + p01); given D = d, the candidate's wins C are Binomial(d, w), w = p01 / (p10 + p01). The test at
level alpha declares B better when C reaches c*(d), the fewest wins among d whose exact p-value is under alpha, so

    power(n) = sum_d P(D = d) P(C >= c*(d) | D = d)

summed exactly in log space, as R. Schork and G. Williams compute it ("Number of observations required for the
comparison of two correlated proportions", Communications in Statistics - Simulation and Computation
9(4):349-357, 1980); the normal approximation is W. T. Connor's ("Sample size for testing differences in
proportions for the paired-sample design", Biometrics 43(1):207-211, 1987). An exact test's power is not monotone
in n (a saw-tooth): the pairs needed are the smallest n that reaches the power asked.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

# Beyond this many pairs a projection says "more than", not a number: no campaign plans more cells.
MOST_PAIRS_PROJECTED = 10_000


def mcnemar_exact_p(only_a: int, only_b: int) -> float:
    """Two-sided exact McNemar p-value: twice the smaller binomial tail of the discordant pairs at 1/2, at most 1."""
    discordant = only_a + only_b
    if discordant == 0:
        return 1.0
    smaller = min(only_a, only_b)
    term, tail = 1, 0  # comb(discordant, k), exact integers
    for k in range(smaller + 1):
        tail += term
        term = term * (discordant - k) // (k + 1)
    return min(1.0, ratio_to_power(2 * tail, discordant))


def ratio_to_power(numerator: int, power_of_two: int) -> float:
    """numerator / 2**power_of_two without overflowing a float on the way."""
    shift = max(0, numerator.bit_length() - 60)
    return math.ldexp(numerator >> shift, shift - power_of_two)


@dataclass(frozen=True)
class PairDesign:
    """The chances of each kind of discordant pair."""

    only_a: float  # p10: the baseline succeeds, the candidate fails
    only_b: float  # p01

    @property
    def discordance(self) -> float:
        return self.only_a + self.only_b

    @property
    def difference(self) -> float:
        return self.only_b - self.only_a


@functools.cache
def log_factorials(most: int) -> np.ndarray:
    """log k!, k = 0..most (a running sum of logs: within 1e-11 of lgamma up to 10,000)."""
    return np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, most + 1)))))


def log_binomial_pmf(n: int, p: float, ks: np.ndarray) -> np.ndarray:
    """log P(X = k) for each k of `ks` (within 0..n), X ~ Binomial(n, p); -inf where the chance is zero."""
    factorials = log_factorials(max(1024, 1 << n.bit_length()))  # a few sizes, each computed once
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(ks > 0, ks * np.log(p), 0.0) + np.where(ks < n, (n - ks) * np.log1p(-p), 0.0)
    return factorials[n] - factorials[ks] - factorials[n - ks] + np.nan_to_num(terms, nan=-np.inf)


def window(n: int, p: float, low: int = 0, high: int | None = None) -> np.ndarray:
    """The counts of Binomial(n, p) within [low, high] that carry its mass: 13 standard deviations and 30 each side
    of the mean, beyond which every term is below 1e-30 of the total."""
    spread = 13 * math.sqrt(n * p * (1 - p)) + 30
    first, last = max(low, math.floor(n * p - spread)), min(n if high is None else high, math.ceil(n * p + spread))
    return np.arange(first, last + 1)


def windows(ns: np.ndarray, p: float, lows: np.ndarray | int = 0) -> tuple[np.ndarray, np.ndarray]:
    """`window` of Binomial(n, p) for each n of `ns`: its first and last counts (first > last: none)."""
    spread = 13 * np.sqrt(ns * p * (1 - p)) + 30
    firsts = np.maximum(lows, np.floor(ns * p - spread)).astype(int)
    return firsts, np.minimum(ns, np.ceil(ns * p + spread)).astype(int)


def log_pmf_rows(ns: np.ndarray, p: float, firsts: np.ndarray, lasts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The counts k from the least first to the largest last, and log P(X_n = k) for each n of `ns` (a row each),
    X_n ~ Binomial(n, p): `log_binomial_pmf`'s terms within each row's [first, last], -inf outside it."""
    ks = np.arange(firsts.min(), lasts.max() + 1) if len(ns) else np.arange(0)
    n, k = ns[:, None], ks[None, :]
    inside = (k >= firsts[:, None]) & (k <= lasts[:, None])
    factorials = log_factorials(max(1024, 1 << int(ns.max(initial=0)).bit_length()))
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(k > 0, k * np.log(p), 0.0) + np.where(k < n, (n - k) * np.log1p(-p), 0.0)
        logs = factorials[n] - factorials[np.where(inside, k, 0)] - factorials[np.where(inside, n - k, 0)]
        return ks, np.where(inside, logs + np.nan_to_num(terms, nan=-np.inf), -np.inf)


def log_sum(terms: np.ndarray) -> float:
    top = terms.max() if terms.size else -np.inf
    return -np.inf if top == -np.inf else float(top + np.log(np.exp(terms - top).sum()))


class CriticalWins:
    """c*(d) for d = 0, 1, ...: grown on demand, since the pairs scanned decide how far it is needed."""

    def __init__(self, level: float):
        self.level = level
        self.values: list[int] = []
        self.loser_most = -1  # the largest loser count k with 2 P(X <= k) < level at the last d

    def __getitem__(self, d: int) -> int:
        while len(self.values) <= d:
            self.grow()
        return self.values[d]

    def grow(self) -> None:
        # Adding a discordant pair moves the binomial to the right, so the largest rejecting loser count never
        # falls and rises by at most one: two tail sums per d.
        d = len(self.values)
        k = self.loser_most
        while k + 1 < d / 2 and self.rejects(d, k + 1):
            k += 1
        self.loser_most = k
        self.values.append(d - k if k >= 0 else d + 1)  # d + 1: no count of wins rejects

    def rejects(self, d: int, losers: int) -> bool:
        """Whether `losers` of `d` discordant pairs against the rest rejects: the page's own exact p-value while
        its integers are cheap, the same tail in log space beyond."""
        if d <= 1000:
            return mcnemar_exact_p(losers, d - losers) < self.level
        tail = log_sum(log_binomial_pmf(d, 0.5, window(d, 0.5, high=losers)))
        return math.log(2) + tail < math.log(self.level)


@functools.cache
def critical_wins(level: float) -> CriticalWins:
    return CriticalWins(level)


class PowerCurve:
    """power(n) for one design and level, each P(C >= c*(d) | D = d) computed once."""

    def __init__(self, design: PairDesign, level: float):
        self.design, self.level = design, level
        self.critical = critical_wins(level)
        self.win_tails = np.full(0, np.nan)

    def win_tail(self, ds: np.ndarray) -> np.ndarray:
        if ds[-1] >= self.win_tails.size:
            self.win_tails = np.concatenate((self.win_tails, np.full(2 * int(ds[-1]) + 64, np.nan)))
        missing = ds[np.isnan(self.win_tails[ds])]
        if missing.size:
            self.win_tails[missing] = self.tails_at(missing)
        return self.win_tails[ds]

    def tails_at(self, ds: np.ndarray) -> np.ndarray:
        """P(C >= c*(d) | D = d) for each d of `ds` at once: each d's own window of wins from its critical count,
        summed in log space as `log_sum` sums one."""
        wins = self.design.only_b / self.design.discordance
        lows = np.array([self.critical[int(d)] for d in ds])
        ks, logs = log_pmf_rows(ds, wins, *windows(ds, wins, lows))
        if not ks.size:
            return np.zeros(len(ds))
        top = logs.max(axis=1)
        with np.errstate(invalid="ignore"):
            sums = np.exp(logs - top[:, None]).sum(axis=1)
        return np.where(top == -np.inf, 0.0, np.exp(top + np.log(sums)))

    def __call__(self, pairs: int) -> float:
        """The chance that McNemar's exact test on `pairs` pairs declares B better."""
        discordance = min(1.0, self.design.discordance)
        if discordance == 0:
            return 0.0
        ds = window(pairs, discordance)
        return float(np.exp(log_binomial_pmf(pairs, discordance, ds)) @ self.win_tail(ds))

    def powers(self, pairs: np.ndarray) -> np.ndarray:
        """power(n) for each n of `pairs` at once: the same terms as one n at a time (each n's own window of D), in
        one array; the sums agree with __call__'s to the last bits (tests/test_power_planning.py)."""
        p = min(1.0, self.design.discordance)
        if p == 0:
            return np.zeros(len(pairs))
        ds, logs = log_pmf_rows(pairs, p, *windows(pairs, p))
        return np.exp(logs) @ self.win_tail(ds)

    def first_reaching(self, first: int, most: int, power: float, block: int = 64) -> int | None:
        """The smallest n in [first, most] whose power reaches `power` (None: none does), `block` n at a time."""
        for start in range(first, most + 1, block):
            pairs = np.arange(start, min(start + block, most + 1))
            reached = np.flatnonzero(self.powers(pairs) >= power)
            if reached.size:
                return int(pairs[reached[0]])
        return None


def normal_pairs(design: PairDesign, level: float, power: float) -> float:
    """Connor's (1987) normal approximation of the pairs needed: (z_a sqrt(psi) + z_b sqrt(psi - delta^2))^2 /
    delta^2, psi the discordance and delta the difference."""
    psi, delta = design.discordance, abs(design.difference)
    z_a, z_b = NormalDist().inv_cdf(1 - level / 2), NormalDist().inv_cdf(power)
    return (z_a * math.sqrt(psi) + z_b * math.sqrt(max(0.0, psi - delta * delta))) ** 2 / (delta * delta)


# The exact test's power stays under the target below this share of Connor's approximation (checked over a grid of
# designs by tests/test_power_planning.py), so the scan starts there; and Connor's n beyond 1.5 times the most
# projected means the exact n is beyond it too.
SCAN_FROM_SHARE_OF_NORMAL = 0.7
NORMAL_BEYOND_MOST = 1.5


@functools.lru_cache(maxsize=4096)
def fixed_pairs(design: PairDesign, level: float, power: float, most: int = MOST_PAIRS_PROJECTED) -> int | None:
    """The smallest n at which the exact test declares the true direction with at least `power`; None: more than
    `most`. A regression is the mirror of an improvement, so its design is swapped. A pure function of its
    arguments, kept for the process: a campaign page asks the same designs on every request."""
    if design.difference == 0:
        return None
    if design.difference < 0:
        design = PairDesign(design.only_b, design.only_a)
    approximate = normal_pairs(design, level, power)
    if approximate > NORMAL_BEYOND_MOST * most:
        return None
    first = max(1, math.floor(SCAN_FROM_SHARE_OF_NORMAL * approximate))
    return PowerCurve(design, level).first_reaching(first, most, power)
