"""How many episodes a question needs (issue 46, point 2).

"Before a launch: for a baseline campaign (or a stated baseline rate) and a difference to detect, the pairs a fixed
paired design needs for 80% and 90% power at the declared level (exact McNemar, by computation, not a normal
approximation), and the expected pairs of a sequential campaign beside it (from the bench's simulation, or
computed)." Done when: "The power numbers match a simulation of the exact test within its Monte Carlo error."
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats
from statsmodels.stats.contingency_tables import mcnemar

from evaluator.protocol.mcnemar import (
    SCAN_FROM_SHARE_OF_NORMAL,
    PairDesign,
    PowerCurve,
    fixed_pairs,
    log_binomial_pmf,
    log_sum,
    mcnemar_exact_p,
    normal_pairs,
    window,
)
from evaluator.protocol.power import InvalidDesign, design_from_rates, plan_power, simulate_sequential
from evaluator.protocol.sequential import first_decisions, first_decisions_of_counts, running_bounds


def power_by_enumeration(pairs: int, design: PairDesign, level: float) -> float:
    """Every table of `pairs` pairs, weighted by its multinomial chance, tested by statsmodels' exact McNemar."""
    concordant = 1 - design.discordance
    total = 0.0
    for only_a in range(pairs + 1):
        for only_b in range(pairs - only_a + 1):
            chance = stats.multinomial.pmf(
                [only_a, only_b, pairs - only_a - only_b], pairs, [design.only_a, design.only_b, concordant]
            )
            p_value = mcnemar([[0, only_a], [only_b, 0]], exact=True).pvalue
            total += chance * (p_value < level and only_b > only_a)
    return total


@pytest.mark.parametrize(
    ("pairs", "only_a", "only_b", "level"), [(12, 0.1, 0.4, 0.05), (25, 0.15, 0.3, 0.05), (30, 0.2, 0.35, 0.1)]
)
def test_the_exact_power_is_the_sum_over_every_table_tested_by_statsmodels(pairs, only_a, only_b, level):
    design = PairDesign(only_a, only_b)
    assert PowerCurve(design, level)(pairs) == pytest.approx(power_by_enumeration(pairs, design, level), abs=1e-12)


@pytest.mark.parametrize(
    ("pairs", "rate_a", "rate_b"), [(46, 0.2, 0.5), (103, 0.5, 0.7), (1500, 0.5, 0.55), (4000, 0.4, 0.43)]
)
def test_the_exact_power_is_scipys_binomial_sum_at_any_size(pairs, rate_a, rate_b):
    """Past a thousand discordant pairs the critical values come from log-space tails: still scipy's numbers."""
    design = design_from_rates(rate_a, rate_b - rate_a)
    wins = design.only_b / design.discordance
    expected = 0.0
    for discordant in range(pairs + 1):
        weight = stats.binom.pmf(discordant, pairs, design.discordance)
        if weight < 1e-18:
            continue
        # the fewest wins whose two-sided exact p-value is under the level, by scipy's binomial test
        losers = stats.binom.ppf(0.025, discordant, 0.5)
        critical = next(
            c
            for c in range(max(0, int(discordant - losers) - 3), discordant + 2)
            if c > discordant or (2 * c > discordant and 2 * stats.binom.sf(c - 1, discordant, 0.5) < 0.05)
        )
        expected += weight * stats.binom.sf(critical - 1, discordant, wins)
    assert PowerCurve(design, 0.05)(pairs) == pytest.approx(expected, abs=1e-9)


def test_the_power_matches_a_simulation_of_the_exact_test_within_its_monte_carlo_error():
    rng = np.random.default_rng(7)
    for pairs, design in ((40, PairDesign(0.1, 0.35)), (120, PairDesign(0.2, 0.3))):
        runs = 4000
        tables = rng.multinomial(pairs, [design.only_a, design.only_b, 1 - design.discordance], size=runs)
        rejected = np.mean([b > a and mcnemar_exact_p(int(a), int(b)) < 0.05 for a, b, _ in tables])
        exact = PowerCurve(design, 0.05)(pairs)
        assert abs(rejected - exact) < 4 * math.sqrt(exact * (1 - exact) / runs)


def test_the_pairs_needed_are_the_first_to_reach_the_power_and_none_before():
    """An exact test's power is a saw-tooth in n: the pairs needed are the smallest n that reaches it. The search
    starts at a share of Connor's normal approximation; below that share no design of the grid reaches it."""
    for only_a, only_b, level, power in itertools.product(
        (0.02, 0.1, 0.3), (0.05, 0.2, 0.45), (0.01, 0.05), (0.8, 0.9)
    ):
        if only_a >= only_b:
            continue
        design = PairDesign(only_a, only_b)
        curve = PowerCurve(design, level)
        needed = fixed_pairs(design, level, power)
        assert curve(needed) >= power
        assert all(curve(n) < power for n in range(1, needed))
        assert needed >= SCAN_FROM_SHARE_OF_NORMAL * normal_pairs(design, level, power) / 0.9


def test_a_regression_needs_as_many_pairs_as_the_mirrored_improvement():
    assert fixed_pairs(PairDesign(0.35, 0.15), 0.05, 0.8) == fixed_pairs(PairDesign(0.15, 0.35), 0.05, 0.8)


def test_a_difference_too_small_to_detect_in_ten_thousand_pairs_says_more_than():
    assert fixed_pairs(PairDesign(0.25, 0.255), 0.05, 0.9) is None
    plan = plan_power(0.5, 0.005)
    assert plan.as_dict()["fixed_design"][0] == {"power": 0.8, "pairs": None, "more_than": True, "fits_baseline": None}


def test_rates_give_the_independent_discordance_unless_one_is_stated():
    design = design_from_rates(0.3, 0.3)
    assert (design.only_a, design.only_b) == pytest.approx((0.3 * 0.4, 0.6 * 0.7))
    agreeing = design_from_rates(0.3, 0.3, discordance=0.34)
    assert (agreeing.only_a, agreeing.only_b) == pytest.approx((0.02, 0.32))
    # Policies that agree more need fewer pairs.
    assert fixed_pairs(agreeing, 0.05, 0.8) < fixed_pairs(design, 0.05, 0.8)


def test_impossible_designs_are_refused_with_every_reason():
    with pytest.raises(InvalidDesign) as refused:
        design_from_rates(1.2, 0.0)
    assert "baseline rate must be in [0, 1], got 1.2" in str(refused.value)
    assert "difference to detect must not be 0" in str(refused.value)
    with pytest.raises(InvalidDesign, match="0.9 plus the difference 0.2 is 1.1"):
        design_from_rates(0.9, 0.2)
    with pytest.raises(InvalidDesign, match=r"discordance of 0.1 is impossible .* must be in \[0.3, 0.9\]"):
        design_from_rates(0.3, 0.3, discordance=0.1)
    with pytest.raises(InvalidDesign, match="difference must be a number, got nan"):
        design_from_rates(0.3, math.nan)


@pytest.mark.slow  # simulated campaigns
def test_the_sequential_simulation_stops_where_the_campaigns_own_rule_stops():
    """The preview finds each simulated campaign's stop from one capital per look and edge; the campaign finds it
    from its bounds, by bisection. Over random sequences both stop at the same pair with the same verdict."""
    rng = np.random.default_rng(3)
    for only_a, only_b, margin in ((0.3, 0.3, 0.05), (0.2, 0.4, 0.05), (0.1, 0.05, 0.2), (0.02, 0.02, 0.1)):
        draws = rng.random((200, 300))
        minus, plus = draws < only_a, (draws >= only_a) & (draws < only_a + only_b)
        counts = np.cumsum(plus, 1), np.cumsum(~plus & ~minus, 1), np.cumsum(minus, 1)
        by_bounds = first_decisions(*running_bounds(*counts, 0.05), margin)
        by_capital = first_decisions_of_counts(*counts, 0.05, margin)
        assert (by_bounds[0] == by_capital[0]).all() and (by_bounds[1] == by_capital[1]).all()


def test_a_plan_against_a_baseline_says_whether_its_cells_are_enough_and_what_a_sequential_campaign_takes():
    plan = plan_power(0.3, 0.3, cells=60).as_dict()
    assert [(row["power"], row["pairs"], row["fits_baseline"]) for row in plan["fixed_design"]] == [
        (0.8, 50, True),
        (0.9, 64, False),
    ]
    sequential = plan["sequential"]
    assert sequential["most_pairs"] == 60 and sequential["runs"] == 400
    # Simulated within its own error of itself: stopping no later than its cells allow, mostly deciding improved.
    assert 0 < sequential["mean_pairs"] <= 60 and sequential["mean_standard_error"] < 3
    assert sequential["right_direction_share"] > 0.7
    again = simulate_sequential(design_from_rates(0.3, 0.3), 60)
    assert again.mean == sequential["mean_pairs"]  # seeded: a page shows the same numbers on every visit


@pytest.mark.slow  # simulated campaigns
@pytest.mark.parametrize(
    ("only_a", "only_b", "most", "runs"), [(0.12, 0.42, 60, 50), (0.2, 0.2, 700, 300), (0.3, 0.1, 90, 40)]
)
def test_each_simulated_campaign_stops_where_its_confidence_sequence_first_decides(only_a, only_b, most, runs):
    """The preview simulates block by block, dropping the sequences already decided; the same pairs through the
    campaign's own bounds (bisection, running intersection, first decision) stop at the same pair every time."""
    from evaluator.protocol.power import CELLS_PER_CHUNK, SEQUENTIAL_SEED, simulate_sequential

    design = PairDesign(only_a, only_b)
    found = simulate_sequential(design, most, runs=runs)
    rng = np.random.default_rng(SEQUENTIAL_SEED)
    block = max(1, min(most, CELLS_PER_CHUNK // runs))
    draws = np.concatenate([rng.random((runs, min(block, most - f))) for f in range(0, most, block)], axis=1)
    minus, plus = draws < only_a, (draws >= only_a) & (draws < only_a + only_b)
    verdicts, at = first_decisions(
        *running_bounds(np.cumsum(plus, 1), np.cumsum(~plus & ~minus, 1), np.cumsum(minus, 1), 0.05), 0.05
    )
    stops = np.where(at > 0, at, most)
    assert found.mean == pytest.approx(stops.mean()) and found.median == np.median(stops)
    assert found.decided == pytest.approx((verdicts > 0).mean())


def test_the_power_of_a_block_of_sizes_is_each_size_s_own_sum():
    """Issue 54: a campaign page's exact power plans stay exact when computed a block of n at a time: the same terms,
    summed to within a few units in the last place of one n at a time."""
    for only_a, only_b, level in itertools.product((0.01, 0.1, 0.3), (0.03, 0.2, 0.45), (0.01, 0.05)):
        curve = PowerCurve(PairDesign(only_a, only_b), level)
        sizes = np.arange(1, 2500, 13)
        assert np.allclose(curve.powers(sizes), [curve(int(n)) for n in sizes], rtol=0, atol=1e-14)


def test_the_win_tails_of_a_block_of_discordant_counts_are_each_count_s_own_sum():
    """P(C >= c*(d) | D = d) for many d at once: each d's window from its critical count, as one d at a time sums it."""
    for only_a, only_b, level in itertools.product((0.01, 0.1, 0.3), (0.03, 0.2, 0.45), (0.01, 0.05)):
        curve, wins = PowerCurve(PairDesign(only_a, only_b), level), only_b / (only_a + only_b)
        counts = np.arange(0, 2500, 7)
        one_at_a_time = []
        for d in counts:
            ks = window(int(d), wins, low=curve.critical[int(d)])
            one_at_a_time.append(math.exp(log_sum(log_binomial_pmf(int(d), wins, ks))) if ks.size else 0.0)
        assert np.allclose(curve.tails_at(counts), one_at_a_time, rtol=0, atol=1e-14)
