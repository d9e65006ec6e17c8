"""How many pairs a paired comparison needs: the power of McNemar's exact test, computed exactly, and the pairs a
sequential campaign takes, simulated through its own rule.

The design: n independent pairs (a cell run by the baseline A and the candidate B); each pair is only-A with
probability p10, only-B with p01, concordant otherwise. The discordant count D is Binomial(n, p10 + p01); given
D = d, the candidate's wins C are Binomial(d, w), w = p01 / (p10 + p01). McNemar's exact test at level alpha
rejects, B better, when C reaches c*(d), the fewest wins among d with a two-sided exact p-value under alpha. So

    power(n) = sum_d P(D = d) P(C >= c*(d) | D = d)

summed exactly (log-space binomial terms), as R. Schork and G. Williams compute it ("Number of observations
required for the comparison of two correlated proportions", Communications in Statistics - Simulation and
Computation 9(4):349-357, 1980); their approximation's normal form is W. T. Connor's ("Sample size for testing
differences in proportions for the paired-sample design", Biometrics 43(1):207-211, 1987). Power is not monotone in
n for an exact test (a saw-tooth): the pairs needed are the smallest n that reaches the power asked.

From rates: a baseline rate p_A and a difference delta give p_B = p_A + delta; unless a discordance psi (the share
of pairs whose outcomes differ) is stated, the two outcomes of a pair are taken as independent, psi = p_A (1 - p_B)
+ p_B (1 - p_A), the most discordance two policies with these rates usually show (policies that find the same
cells hard agree more, and need fewer pairs). Then p10 = (psi - delta) / 2 and p01 = (psi + delta) / 2.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .errors import ComparisonRefused
from .mcnemar import MOST_PAIRS_PROJECTED, PairDesign, fixed_pairs
from .paired import DEFAULT_LEVEL, DEFAULT_MARGIN, check_level_and_margin
from .sequential import decision_codes, edges_reached, first_of

POWERS = (0.8, 0.9)
SEQUENTIAL_RUNS = 400  # simulated sequences per preview: the mean's Monte Carlo error is said beside it
SEQUENTIAL_SEED = 20261206
# Past this many pairs a preview does not simulate (seconds of work per call): the plan says so instead.
MOST_PAIRS_SIMULATED = 5_000
CELLS_PER_CHUNK = 200_000  # simulated pairs held at once (each with 20 bets): about 32 MB


class InvalidDesign(ComparisonRefused):
    """Rates, a difference or a discordance that no pair of policies can have."""


def design_from_rates(baseline_rate: float, difference: float, discordance: float | None = None) -> PairDesign:
    """The pair chances for a baseline rate and the difference to detect (module docstring); every reason at once."""
    problems = []
    for name, value in (("baseline rate", baseline_rate), ("difference", difference), ("discordance", discordance)):
        if value is None and name == "discordance":
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            problems.append(f"the {name} must be a number, got {value!r}")
    if problems:
        raise InvalidDesign(problems)
    candidate = baseline_rate + difference
    if not 0 <= baseline_rate <= 1:
        problems.append(f"the baseline rate must be in [0, 1], got {baseline_rate}")
    if difference == 0:
        problems.append("the difference to detect must not be 0")
    elif not 0 <= candidate <= 1:
        problems.append(
            f"the baseline rate {baseline_rate} plus the difference {difference} is {candidate}, not a rate"
        )
    if problems:
        raise InvalidDesign(problems)
    if discordance is None:
        discordance = baseline_rate * (1 - candidate) + candidate * (1 - baseline_rate)
    only_a, only_b = (discordance - difference) / 2, (discordance + difference) / 2
    # Each kind of pair needs its policy's outcome: only-A pairs are among A's successes and B's failures.
    most = min(baseline_rate, 1 - candidate) + min(candidate, 1 - baseline_rate)
    if not abs(difference) <= discordance <= most + 1e-12 or min(only_a, only_b) < -1e-12:
        problems.append(
            f"a discordance of {discordance:.4g} is impossible with rates {baseline_rate} and {candidate}: "
            f"it must be in [{abs(difference):.4g}, {most:.4g}]"
        )
        raise InvalidDesign(problems)
    return PairDesign(max(0.0, only_a), max(0.0, only_b))


@dataclass(frozen=True)
class SequentialPairs:
    """Where a sequential campaign stops, over simulated sequences: the mean pairs with its Monte Carlo error."""

    runs: int
    most: int  # the pairs it may run: the baseline's cells
    mean: float
    standard_error: float
    median: float
    decided: float  # the share of sequences decided within `most`
    right_direction: float  # the share decided in the true direction

    def as_dict(self) -> dict:
        return {
            "runs": self.runs,
            "most_pairs": self.most,
            "mean_pairs": self.mean,
            "mean_standard_error": self.standard_error,
            "median_pairs": self.median,
            "decided_share": self.decided,
            "right_direction_share": self.right_direction,
            "method": "simulated through the campaign's own rule (evaluator/protocol/sequential.py)",
        }


def simulate_sequential(
    design: PairDesign,
    most: int,
    level: float = DEFAULT_LEVEL,
    margin: float = DEFAULT_MARGIN,
    runs: int = SEQUENTIAL_RUNS,
    seed: int = SEQUENTIAL_SEED,
) -> SequentialPairs:
    """`runs` sequences of up to `most` pairs drawn from the design, each stopped where the campaign would stop."""
    check_level_and_margin(level, margin)
    rng = np.random.default_rng(seed)
    stop, verdict = np.full(runs, most), np.zeros(runs, dtype=int)
    counts = np.zeros((runs, 3))  # plus, zero, minus so far
    lower, upper = np.zeros(runs, dtype=bool), np.zeros(runs, dtype=bool)  # the margin's edges cleared so far
    open_runs = np.arange(runs)
    block = max(1, min(most, CELLS_PER_CHUNK // runs))
    # Block by block of pairs, the undecided sequences only: most decide long before the baseline's cells run out.
    for first in range(0, most, block):
        size = min(block, most - first)
        draws = rng.random((runs, size))[open_runs]  # every sequence draws, so a seed gives the same pairs
        minus, plus = draws < design.only_a, (draws >= design.only_a) & (draws < design.discordance)
        steps = np.stack([plus, ~plus & ~minus, minus], axis=-1).cumsum(axis=1) + counts[open_runs, None, :]
        above, below, over, under = edges_reached(steps[..., 0], steps[..., 1], steps[..., 2], level, margin)
        over, under = over | lower[open_runs, None], under | upper[open_runs, None]
        code, at = first_of(decision_codes(above, below, over, under))
        decided = code > 0
        stop[open_runs[decided]], verdict[open_runs[decided]] = first + at[decided], code[decided]
        counts[open_runs], lower[open_runs], upper[open_runs] = steps[:, -1], over[:, -1], under[:, -1]
        open_runs = open_runs[~decided]
        if not open_runs.size:
            break
    right = 1 if design.difference > 0 else 2  # VERDICT_ORDER: improved, regressed
    return SequentialPairs(
        runs=runs,
        most=most,
        mean=float(stop.mean()),
        standard_error=float(stop.std(ddof=1) / math.sqrt(runs)) if runs > 1 else math.nan,
        median=float(np.median(stop)),
        decided=float((verdict > 0).mean()),
        right_direction=float((verdict == right).mean()),
    )


@dataclass(frozen=True)
class PowerPlan:
    """What a launch against a baseline would need: pairs for each power and the sequential campaign beside them."""

    baseline_rate: float
    difference: float
    design: PairDesign
    level: float
    margin: float
    fixed: dict[float, int | None]  # power -> pairs (None: more than MOST_PAIRS_PROJECTED)
    sequential: SequentialPairs | None  # None past MOST_PAIRS_SIMULATED pairs, or without a fixed design's pairs
    cells: int | None  # the baseline campaign's cells, where one was named

    def as_dict(self) -> dict:
        return {
            "baseline_rate": self.baseline_rate,
            "difference": self.difference,
            "candidate_rate": self.baseline_rate + self.difference,
            "only_a_chance": self.design.only_a,
            "only_b_chance": self.design.only_b,
            "discordance": self.design.discordance,
            "level": self.level,
            "margin": self.margin,
            "fixed_design": [
                {"power": power, "pairs": pairs, "more_than": pairs is None, "fits_baseline": fits(pairs, self.cells)}
                for power, pairs in self.fixed.items()
            ],
            "fixed_method": "McNemar's exact test, power summed exactly (Schork & Williams 1980)",
            "most_pairs_computed": MOST_PAIRS_PROJECTED,
            "baseline_cells": self.cells,
            "sequential": self.sequential.as_dict() if self.sequential else None,
            "most_pairs_simulated": MOST_PAIRS_SIMULATED,
        }


def fits(pairs: int | None, cells: int | None) -> bool | None:
    if cells is None:
        return None
    return pairs is not None and pairs <= cells


@functools.lru_cache(maxsize=1024)  # a plan is a pure function of its inputs (the simulation's seed is fixed)
def plan_power(
    baseline_rate: float,
    difference: float,
    level: float = DEFAULT_LEVEL,
    margin: float = DEFAULT_MARGIN,
    discordance: float | None = None,
    cells: int | None = None,
) -> PowerPlan:
    """The pairs a fixed paired design needs at 80% and 90% power, and a sequential campaign's pairs over the
    baseline's `cells` (or three times the 80% design's pairs, without a baseline campaign)."""
    check_level_and_margin(level, margin)
    design = design_from_rates(baseline_rate, difference, discordance)
    fixed = {power: fixed_pairs(design, level, power) for power in POWERS}
    most = cells if cells else 3 * fixed[POWERS[0]] if fixed[POWERS[0]] else None
    sequential = None
    if most and most <= MOST_PAIRS_SIMULATED:
        sequential = simulate_sequential(design, most, level, margin)
    return PowerPlan(baseline_rate, difference, design, level, margin, fixed, sequential, cells)
