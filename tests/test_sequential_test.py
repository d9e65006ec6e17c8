"""The sequential campaign's test: an anytime-valid confidence sequence for the paired difference (issue 34).

"after each finished pair, updates an anytime-valid test of the paired difference (a betting/e-value or mixture
confidence sequence for paired Bernoulli outcomes, written from the published method ...); it stops starting cells
when the verdict is decided at the declared level". "A simulation test (no robots: Bernoulli pairs with known
rates) shows the sequential test's type-I error at most the declared level over many runs under no difference,
and a median number of pairs below the fixed design's under a real difference".
"""

from __future__ import annotations

import numpy as np
import pytest

from bench.sequential_test import Scenario, simulate
from evaluator.protocol.mcnemar import PairDesign, PowerCurve, fixed_pairs
from evaluator.protocol.paired import Verdict
from evaluator.protocol.power import design_from_rates
from evaluator.protocol.sequential import BET_FRACTIONS, bounds, run_order, sequential_state

LEVEL = 0.05


def capital(outcomes: list[float], m: float, upward: bool) -> float:
    """The mixture capital of the published construction, by hand: the mean over the bets c of
    prod(1 - c + c y / m) (upward) or prod(1 - c + c (1 - y) / (1 - m)) (downward), y = (D + 1) / 2."""
    total = 0.0
    for c in BET_FRACTIONS:
        wealth = 1.0
        for y in outcomes:
            wealth *= 1 - c + c * (y / m if upward else (1 - y) / (1 - m))
        total += wealth
    return total / len(BET_FRACTIONS)


def test_the_bet_fractions_are_the_midpoints_of_twenty_equal_steps():
    assert list(BET_FRACTIONS) == pytest.approx([(d - 0.5) / 20 for d in range(1, 21)])


def test_each_bound_is_where_the_capital_reaches_two_over_the_level():
    """Bounds of D = (+1, +1, 0, +1, -1, +1, +1, 0): the upward capital at the lower bound (mean scale) is
    2 / level, and below it more; the downward one likewise at the upper bound."""
    differences = [1, 1, 0, 1, -1, 1, 1, 0]
    y = [(d + 1) / 2 for d in differences]
    low, high = bounds(differences.count(1), differences.count(0), differences.count(-1), LEVEL)
    mu_low, mu_high = (float(low) + 1) / 2, (float(high) + 1) / 2
    assert capital(y, mu_low, upward=True) == pytest.approx(2 / LEVEL, rel=1e-6)
    assert capital(y, mu_low - 0.01, upward=True) > 2 / LEVEL > capital(y, mu_low + 0.01, upward=True)
    assert capital(y, mu_high, upward=False) == pytest.approx(2 / LEVEL, rel=1e-6)


def test_pairs_that_all_favour_the_candidate_decide_improved_where_the_capital_at_zero_crosses():
    """Every pair only-B: at Delta = 0 (m = 1/2) the upward capital is mean((1 + c)^k); the campaign is decided
    `improved` at the first k where that reaches 2 / level (computed here by hand: 8 at level 0.05)."""
    expected = next(k for k in range(1, 50) if capital([1.0] * k, 0.5, upward=True) >= 2 / LEVEL)
    assert expected == 8
    state = sequential_state([(False, True)] * 20, LEVEL, 0.05)
    assert state.verdict is Verdict.IMPROVED
    assert state.decided_at == expected
    assert state.points[expected - 1].low > 0 >= state.points[expected - 2].low


def test_pairs_that_all_favour_the_baseline_decide_regressed():
    state = sequential_state([(True, False)] * 20, LEVEL, 0.05)
    assert state.verdict is Verdict.REGRESSED and state.decided_at == 8
    assert state.interval[1] < 0


def test_the_sequence_only_narrows_and_starts_at_minus_one_to_one():
    rng = np.random.default_rng(7)
    pairs = [(bool(a), bool(b)) for a, b in zip(rng.random(150) < 0.4, rng.random(150) < 0.55, strict=True)]
    state = sequential_state(pairs, LEVEL, 0.05)
    lows = [p.low for p in state.points]
    highs = [p.high for p in state.points]
    assert lows == sorted(lows) and highs == sorted(highs, reverse=True)
    assert sequential_state([], LEVEL, 0.05).interval == (-1.0, 1.0)
    assert state.counts.pairs == 150


def test_agreeing_pairs_stay_undecided_with_a_projection():
    """A copy of the baseline: every pair concordant. 40 of them cannot show a difference within 5 points at 95%:
    underpowered, with the pairs that would decide it if every pair kept agreeing."""
    state = sequential_state([(True, True)] * 20 + [(False, False)] * 20, LEVEL, 0.05)
    assert state.verdict is Verdict.UNDERPOWERED and state.decided_at is None
    needed, more_than = state.projection()
    assert not more_than and needed > 40
    low, high = bounds(0, needed, 0, LEVEL)
    assert float(low) > -0.05 and float(high) < 0.05
    low, high = bounds(0, needed - 1, 0, LEVEL)
    assert not (float(low) > -0.05 and float(high) < 0.05)


def test_the_run_order_is_a_permutation_fixed_by_its_seed():
    order = run_order(40, 12345)
    assert sorted(order) == list(range(40))
    assert order == run_order(40, 12345) and order != run_order(40, 12346)
    assert order != tuple(range(40))


@pytest.mark.slow  # thousands of simulated campaigns
@pytest.mark.parametrize(
    "scenario", [Scenario(0.5, 0.5, max_pairs=200), Scenario(0.7, 0.7, agreement=0.6, max_pairs=200)], ids=str
)
def test_under_no_difference_a_direction_is_declared_at_most_at_the_level(scenario):
    """800 simulated campaigns of up to 200 pairs each, looking after every pair: the share that ever declared
    improved or regressed (the type-I error of the sequential test) stays at most the level."""
    found = simulate(scenario, runs=800, level=LEVEL, margin=0.05, seed=11)
    wrong = found.share(Verdict.IMPROVED, Verdict.REGRESSED)
    assert wrong <= LEVEL, wrong


def test_the_same_looks_at_a_fixed_design_interval_would_exceed_the_level():
    """Why a sequential test at all: re-testing a fixed-design interval after every pair (Tango's, at 95%) and
    stopping at the first rejection declares a direction far more often than 5% under no difference."""
    from evaluator.protocol.paired import tango_interval

    rng = np.random.default_rng(3)
    runs, declared = 300, 0
    for _ in range(runs):
        a, b = rng.random(200) < 0.5, rng.random(200) < 0.5
        only_a, only_b = np.cumsum(a & ~b), np.cumsum(b & ~a)
        for n in range(10, 201, 5):
            low, high = tango_interval(int(only_a[n - 1]), int(only_b[n - 1]), n)
            if low > 0 or high < 0:
                declared += 1
                break
    assert declared / runs > 2 * LEVEL


@pytest.mark.slow
def test_under_a_real_difference_the_median_pairs_are_below_the_fixed_designs():
    """Candidate 60% against a baseline at 30%: the fixed design (McNemar's exact test at 80% power, computed
    exactly) needs 50 pairs; the sequential campaign decides `improved` in fewer, in the median, and always."""
    scenario = Scenario(0.3, 0.6, max_pairs=300)
    design = design_from_rates(scenario.rate_a, scenario.rate_b - scenario.rate_a)
    fixed = fixed_pairs(design, LEVEL, 0.8)
    assert fixed == 50
    power = PowerCurve(design, LEVEL)
    assert power(fixed) >= 0.8 > power(fixed - 1)
    found = simulate(scenario, runs=400, level=LEVEL, margin=0.05, seed=5)
    assert found.share(Verdict.IMPROVED) == 1.0
    assert float(np.median(found.pairs_run)) < fixed


@pytest.mark.slow
def test_the_coverage_of_the_sequence_holds_at_every_look_under_a_difference():
    """The true difference (0.6 - 0.3 = 0.3) lies inside the sequence at every pair count at once, in at least
    95% of the runs."""
    from evaluator.protocol.sequential import running_bounds

    rng = np.random.default_rng(9)
    a, b = rng.random((400, 150)) < 0.3, rng.random((400, 150)) < 0.6
    low, high = running_bounds(np.cumsum(b & ~a, 1), np.cumsum(a == b, 1), np.cumsum(a & ~b, 1), LEVEL)
    missed = ((low > 0.3) | (high < 0.3)).any(axis=1).mean()
    assert missed <= LEVEL


def test_a_fixed_design_power_by_hand():
    """Rates 0 and 1: every pair is a candidate win. Five of them give p = 2/32 = 0.0625, never below 0.05; six give
    2/64, always."""
    power = PowerCurve(PairDesign(0.0, 1.0), LEVEL)
    assert power(5) == 0.0
    assert power(6) == pytest.approx(1.0)
