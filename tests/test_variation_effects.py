"""Which variation hurts (issue 46, point 1).

"For a full Variant Aggregation campaign: per factor (background, lighting, distractors, table texture, camera,
robot colour: the matrix's own dimensions) and per level, the success rate with its interval and the paired
difference against the family's base condition on the cells that pair (same task and episode), with its interval;
the factors ordered by effect; each level linked to its failing episodes." Done when: "a test on a synthetic full
campaign where one factor is built to hurt: it is ranked first, with an interval that excludes zero; a factor built
to be harmless has an interval that includes zero."
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from evaluator.protocol.aggregates import CellResult
from evaluator.protocol.factors import BASE, FactorChoice, factor_cells, factor_effects
from evaluator.protocol.full_matrix import VARIANT_AGGREGATION, VISUAL_MATCHING, load_matrix
from evaluator.protocol.paired import compare_pairs
from evaluator.protocol.resampling import bootstrap_mean
from evaluator.protocol.scoring import Outcome


def synthetic_campaign(hurting: str, drop: float, seed: int = 0):
    """Every scored and unscored cell of the Variant Aggregation matrix run by a made-up policy: each base cell
    succeeds with chance 0.6; a cell of the `hurting` group succeeds only where its base did, and then loses with
    chance `drop`; every other variant repeats its base's outcome or, one time in five, draws afresh at 0.6 (harmless
    noise, no shift)."""
    rng = np.random.default_rng(seed)
    matrix = load_matrix(VARIANT_AGGREGATION)
    base_success = {}
    rows, group_of = [], {}
    for cell in matrix.cells:
        group_of[cell.family, cell.dimension("variant")] = cell.group
        pairing = (cell.family, tuple(sorted((k, v) for k, v in cell.dimensions if k != "variant")))
        if pairing not in base_success:
            base_success[pairing] = rng.random() < 0.6
    for index, cell in enumerate(matrix.cells):
        pairing = (cell.family, tuple(sorted((k, v) for k, v in cell.dimensions if k != "variant")))
        success = base_success[pairing]
        if cell.group == hurting:
            success = success and rng.random() >= drop
        elif cell.group != BASE and rng.random() < 0.2:
            success = rng.random() < 0.6
        outcome = Outcome.SUCCESS if success else Outcome.TASK_FAILURE
        rows.append((cell.family, dict(cell.dimensions), cell.scored, CellResult(cell.task, outcome), index + 1))
    return rows, group_of


def test_a_factor_built_to_hurt_ranks_first_and_its_interval_excludes_zero_a_harmless_one_includes_it():
    rows, group_of = synthetic_campaign("lighting", drop=0.5)
    report = factor_effects(factor_cells(rows, FactorChoice("variant", "base", grouped=True), group_of))
    by_name = {factor.factor: factor for factor in report.factors}
    assert set(by_name) == {"table_texture", "distractors", "background", "lighting", "camera", "cabinet_texture"}
    first = report.factors[0]
    assert first.factor == "lighting"
    assert first.interval[1] < 0 and first.effect < -0.2
    for harmless in ("background", "table_texture", "distractors", "cabinet_texture"):
        low, high = by_name[harmless].interval
        assert low < 0 < high, harmless
    # Ordered by effect, the most harmful first.
    effects = [factor.effect for factor in report.factors]
    assert effects == sorted(effects)
    # Every level of the hurting factor is worse than its base, paired, beyond doubt.
    for level in first.levels:
        assert level.comparison.verdict.value == "regressed"
        assert level.comparison.counts.only_b == 0  # built so: a lit cell never succeeds where its base failed


def test_each_level_pairs_with_its_familys_base_on_the_same_episode_and_lists_its_failing_episodes():
    rows, group_of = synthetic_campaign("lighting", drop=0.5, seed=1)
    report = factor_effects(factor_cells(rows, FactorChoice("variant", "base", grouped=True), group_of))
    lighting = next(f for f in report.factors if f.factor == "lighting")
    darker = next(level for level in lighting.levels if level.level == "darker")
    # By hand: every (family, other dimensions) of a darker cell against its base cell.
    cells = {
        (family, tuple(sorted((k, v) for k, v in dims.items() if k != "variant")), dims["variant"]): result
        for family, dims, _, result, _ in rows
    }
    both = only_a = only_b = neither = 0
    for (family, others, variant), result in cells.items():
        if variant != "darker":
            continue
        base = cells[family, others, "base"].outcome is Outcome.SUCCESS
        level = result.outcome is Outcome.SUCCESS
        both += base and level
        only_a += base and not level
        only_b += level and not base
        neither += not base and not level
    counts = darker.comparison.counts
    assert (counts.both, counts.only_a, counts.only_b, counts.neither) == (both, only_a, only_b, neither)
    assert counts.pairs == sum(1 for key in cells if key[2] == "darker")
    failing = [
        attempt
        for family, dims, _, result, attempt in rows
        if dims["variant"] == "darker" and result.outcome is Outcome.TASK_FAILURE
    ]
    assert darker.failure_count == len(failing) and list(darker.failures) == failing[:20]
    assert darker.as_dict()["against_base"]["interval_method"] == "Tango score interval"


def test_a_cell_that_errored_or_was_intervened_in_pairs_with_nothing():
    rows, group_of = synthetic_campaign("lighting", drop=0.5)
    choice = FactorChoice("variant", "base", grouped=True)
    clean = factor_effects(factor_cells(rows, choice, group_of))
    family, dims, scored, result, attempt = next(r for r in rows if r[1]["variant"] == "darker")
    spoiled = [(family, dims, scored, CellResult(result.task, Outcome.POLICY_ERROR), attempt)] + [
        r for r in rows if r[4] != attempt
    ]
    after = factor_effects(factor_cells(spoiled, choice, group_of))

    def darker_pairs(report):
        lighting = next(f for f in report.factors if f.factor == "lighting")
        return next(level for level in lighting.levels if level.level == "darker").comparison.counts.pairs

    assert darker_pairs(after) == darker_pairs(clean) - 1


def test_visual_matchings_robot_colour_is_a_factor_against_the_default_urdf():
    matrix = load_matrix(VISUAL_MATCHING)
    rows = []
    for index, cell in enumerate(matrix.cells):
        recoloured = cell.dimension("urdf_version") != "None"
        outcome = Outcome.TASK_FAILURE if recoloured and index % 2 else Outcome.SUCCESS
        rows.append((cell.family, dict(cell.dimensions), cell.scored, CellResult(cell.task, outcome), index))
    report = factor_effects(factor_cells(rows, FactorChoice("urdf_version", "None")))
    (colour,) = report.factors
    assert colour.factor == "urdf_version"
    assert {level.level for level in colour.levels} == {
        "recolor_tabletop_visual_matching_1",
        "recolor_tabletop_visual_matching_2",
        "recolor_cabinet_visual_matching_1",
    }
    assert colour.interval[1] < 0
    assert report.base_rate.numerator == report.base_rate.denominator  # every default-URDF cell succeeded


def test_the_bootstrap_interval_is_scipys_percentile_bootstrap_within_its_resampling_error():
    values = np.random.default_rng(5).choice([-1.0, -0.5, 0.0, 0.5, 1.0], size=300, p=[0.1, 0.2, 0.4, 0.2, 0.1])
    ours = bootstrap_mean(values)
    theirs = stats.bootstrap((values,), np.mean, method="percentile", n_resamples=20000, random_state=1)
    interval = theirs.confidence_interval
    assert ours == pytest.approx((interval.low, interval.high), abs=0.01)


def test_a_level_against_its_base_is_the_paired_comparison_of_those_cells():
    """The per-level numbers are the comparison's own (Tango and exact McNemar): the same counts give the same
    interval and p-value as the compare page."""
    rows, group_of = synthetic_campaign("background", drop=0.3)
    report = factor_effects(factor_cells(rows, FactorChoice("variant", "base", grouped=True), group_of))
    level = report.factors[0].levels[0]
    assert report.factors[0].factor == "background"
    again = compare_pairs(level.comparison.counts)
    assert again.interval == level.comparison.interval and again.p_value == level.comparison.p_value
