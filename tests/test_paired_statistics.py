"""The fixed-design paired comparison: Tango's interval, McNemar's exact test, the verdict (issue 34).

"per task and overall: pairs, both success rates with Wilson intervals, the paired difference with its interval
(Newcombe's method for paired proportions, or Tango's), the discordant counts, an exact McNemar p-value" and "a
verdict per comparison with a declared margin and level: improved, regressed, no difference within the margin,
or underpowered (with how many more pairs would be needed at the observed discordance)".
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import optimize, stats
from statsmodels.stats.contingency_tables import mcnemar

from evaluator.protocol.mcnemar import PairDesign, PowerCurve
from evaluator.protocol.paired import (
    InvalidComparisonSetting,
    PairCounts,
    Verdict,
    compare_pairs,
    mcnemar_exact_p,
    restricted_only_a,
    score_statistic,
    tango_interval,
    z_for,
)

TABLES = [(b, c, n) for b, c, n in itertools.product((0, 1, 3, 8, 25), (0, 2, 5, 13), (20, 60, 300)) if b + c <= n]


@pytest.mark.parametrize(("only_a", "only_b"), [(0, 0), (5, 0), (0, 7), (3, 9), (40, 41), (120, 80), (3000, 3100)])
def test_mcnemars_exact_p_value_is_scipys_binomial_test_and_statsmodels_mcnemar(only_a, only_b):
    """McNemar's exact test: the two-sided binomial test of the discordant pairs against 1/2."""
    ours = mcnemar_exact_p(only_a, only_b)
    table = [[10, only_a], [only_b, 10]]
    assert ours == pytest.approx(mcnemar(table, exact=True).pvalue, rel=1e-12)
    if only_a + only_b:
        assert ours == pytest.approx(stats.binomtest(only_b, only_a + only_b, 0.5).pvalue, rel=1e-9)


def test_mcnemars_exact_p_value_by_hand():
    # 5 discordant pairs all one way: 2 * (1/2)^5 = 1/16; 1 of 4 one way: 2 * (1 + 4) / 16 = 5/8.
    assert mcnemar_exact_p(0, 5) == 1 / 16
    assert mcnemar_exact_p(1, 3) == 5 / 8
    assert mcnemar_exact_p(2, 2) == 1.0


@pytest.mark.parametrize(("only_a", "only_b", "pairs"), TABLES)
def test_the_restricted_estimate_maximises_the_likelihood_as_scipy_finds_it(only_a, only_b, pairs):
    """Tango's q is the maximum-likelihood probability of an only-A pair given the difference: found here
    by scipy's bounded scalar search over the multinomial log-likelihood instead of the closed-form root."""
    for delta in (-0.4, -0.05, 0.0, 0.1, 0.3):

        def negative_log_likelihood(q, delta=delta):
            cells = np.array([q, q + delta, 1 - 2 * q - delta])
            counts = np.array([only_a, only_b, pairs - only_a - only_b])
            return -np.sum(np.where(counts > 0, counts * np.log(np.maximum(cells, 1e-300)), 0.0))

        low, high = max(0.0, -delta), (1 - delta) / 2
        found = optimize.minimize_scalar(
            negative_log_likelihood, bounds=(low, high), method="bounded", options={"xatol": 1e-12}
        )
        ours = restricted_only_a(only_a, only_b, pairs, delta)
        assert negative_log_likelihood(ours) <= found.fun + 1e-7


@pytest.mark.parametrize(("only_a", "only_b", "pairs"), TABLES)
def test_the_interval_inverts_the_score_test(only_a, only_b, pairs):
    """Each bound is where the score statistic crosses the normal quantile; the estimate lies inside."""
    low, high = tango_interval(only_a, only_b, pairs)
    z = z_for(0.05)
    estimate = (only_b - only_a) / pairs
    assert -1 <= low <= estimate <= high <= 1
    if low > -1:
        assert score_statistic(only_a, only_b, pairs, low) == pytest.approx(z, abs=1e-6)
    if high < 1:
        assert score_statistic(only_a, only_b, pairs, high) == pytest.approx(-z, abs=1e-6)


@pytest.mark.parametrize(("only_a", "only_b", "pairs"), TABLES)
def test_zero_is_outside_the_interval_exactly_when_mcnemars_asymptotic_test_rejects(only_a, only_b, pairs):
    """At a difference of zero Tango's statistic is McNemar's (c - b) / sqrt(b + c): statsmodels' uncorrected
    chi-square is its square."""
    low, high = tango_interval(only_a, only_b, pairs)
    if only_a + only_b == 0:
        assert low < 0 < high
        return
    chi2 = mcnemar([[1, only_a], [only_b, 1]], exact=False, correction=False).statistic
    assert (low > 0 or high < 0) == (chi2 > z_for(0.05) ** 2)


def test_the_interval_matches_published_propcis_values():
    """Values of R's PropCIs::scoreci.mp (Tango's interval), as printed in two public projects that pinned them:
    scoreci.mp(25, 28, 618) at 90% is [-0.0148, 0.0247]; scoreci.mp(60, 20, 1000) at 95% is [-0.0584, -0.0231]."""
    low, high = tango_interval(25, 28, 618, level=0.10)
    assert (round(low, 4), round(high, 4)) == (-0.0148, 0.0247)
    low, high = tango_interval(60, 20, 1000)
    assert (round(low, 4), round(high, 4)) == (-0.0584, -0.0231)


def test_no_discordant_pair_gives_the_closed_form_interval():
    # b = c = 0: q = 0 for d > 0, so the statistic is -n d / sqrt(n d (1 - d)) and the bound solves
    # n d = z^2 (1 - d): d = z^2 / (n + z^2).
    z2 = z_for(0.05) ** 2
    low, high = tango_interval(0, 0, 20)
    assert high == pytest.approx(z2 / (20 + z2), abs=1e-9)
    assert low == pytest.approx(-high)


def test_the_interval_mirrors_when_a_and_b_swap():
    low, high = tango_interval(3, 11, 40)
    mirrored = tango_interval(11, 3, 40)
    assert mirrored == pytest.approx((-high, -low), abs=1e-9)


def test_a_clear_improvement_is_improved():
    result = compare_pairs(PairCounts(both=10, neither=8, only_a=1, only_b=15))
    assert result.verdict is Verdict.IMPROVED
    assert result.interval[0] > 0 and result.p_value < 0.05
    assert result.counts.difference == pytest.approx(14 / 34)


def test_a_clear_regression_is_regressed():
    result = compare_pairs(PairCounts(both=10, neither=8, only_a=15, only_b=1))
    assert result.verdict is Verdict.REGRESSED
    assert result.interval[1] < 0


def test_many_agreeing_pairs_are_no_difference_within_the_margin():
    result = compare_pairs(PairCounts(both=400, neither=300, only_a=3, only_b=4), margin=0.05)
    assert result.verdict is Verdict.NO_DIFFERENCE
    assert result.interval[0] > -0.05 and result.interval[1] < 0.05
    # The same pairs under a narrower margin cannot say so.
    assert compare_pairs(result.counts, margin=0.01).verdict is Verdict.UNDERPOWERED


def test_few_pairs_are_underpowered_with_the_pairs_that_give_the_exact_test_80_percent_power():
    """Issue 46: "A comparison that ends underpowered already says how many pairs would decide it: use the same
    method" as the launch's power plan: the pairs at which McNemar's exact test has 80% power to detect the
    difference seen, at the proportions seen."""
    counts = PairCounts(both=10, neither=5, only_a=2, only_b=8)
    result = compare_pairs(counts)
    assert result.verdict is Verdict.UNDERPOWERED
    needed = result.pairs_needed
    assert needed > counts.pairs and result.more_pairs == needed - counts.pairs
    curve = PowerCurve(PairDesign(2 / 25, 8 / 25), 0.05)
    assert curve(needed) >= 0.8 > curve(needed - 1)
    assert result.as_dict()["pairs_needed_basis"].startswith("with 80% power to detect the difference seen")


def test_an_undecided_comparison_without_a_difference_projects_its_interval_into_the_margin():
    """b = c: there is no direction to power, so the pairs are those at which the interval, its counts scaled,
    would lie within the margin."""
    counts = PairCounts(both=10, neither=5, only_a=3, only_b=3)
    result = compare_pairs(counts)
    needed = result.pairs_needed

    def interval_at(pairs):
        scale = pairs / counts.pairs
        return tango_interval(counts.only_a * scale, counts.only_b * scale, pairs)

    assert interval_at(needed)[0] > -0.05 and interval_at(needed)[1] < 0.05
    assert not (interval_at(needed - 1)[0] > -0.05 and interval_at(needed - 1)[1] < 0.05)
    assert result.as_dict()["pairs_needed_basis"] == "if the proportions seen so far held"


def test_the_direction_needs_the_exact_test_too():
    """b=1, c=7: the score interval clears zero (McNemar's asymptotic test rejects: 36/8 = 4.5 > 3.84) but the
    exact test does not (p = 2 * 9/256 = 0.0703): the verdict is never one the page's own p-value contradicts."""
    counts = PairCounts(both=2, neither=0, only_a=1, only_b=7)
    result = compare_pairs(counts)
    assert result.interval[0] > 0
    assert result.p_value == pytest.approx(18 / 256)
    assert result.verdict is Verdict.UNDERPOWERED


def test_no_pair_is_underpowered_without_an_interval():
    result = compare_pairs(PairCounts())
    assert result.verdict is Verdict.UNDERPOWERED
    assert result.interval is None and result.pairs_needed is None


def test_it_refuses_levels_and_margins_outside_their_ranges_naming_each():
    with pytest.raises(InvalidComparisonSetting) as refused:
        compare_pairs(PairCounts(1, 1, 1, 1), level=0.5, margin=math.nan)
    assert "level must be in [0.001, 0.2], got 0.5" in str(refused.value)
    assert "margin must be a number, got nan" in str(refused.value)
