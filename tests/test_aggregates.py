"""Aggregates with denominators (simpler_env_protocol.md: "Report coverage, successes, completed failures,
typed errors, `success_rate` over protocol-completed episodes, and `attempt_success_rate` over all attempts")."""

import pytest

from evaluator.protocol.aggregates import CellResult, Rate, aggregate, wilson_interval
from evaluator.protocol.scoring import Outcome


def test_wilson_interval_of_one_in_twenty_four():
    low, high = wilson_interval(1, 24)
    assert round(low, 3) == 0.007 and round(high, 3) == 0.202


def test_wilson_interval_of_zero_in_twenty_four():
    low, high = wilson_interval(0, 24)
    assert low == 0.0 and round(high, 3) == 0.138


def test_wilson_interval_of_all_successes_reaches_one():
    low, high = wilson_interval(24, 24)
    assert round(low, 3) == 0.862 and high == 1.0


@pytest.mark.parametrize("successes, trials", [(0, 0), (3, 2), (-1, 5)])
def test_wilson_interval_refuses_impossible_counts(successes, trials):
    with pytest.raises(ValueError):
        wilson_interval(successes, trials)


def test_a_rate_without_denominator_has_no_value():
    assert Rate(0, 0).value is None and Rate(0, 0).interval is None
    assert Rate(0, 0).as_dict()["denominator"] == 0


CELLS = [
    CellResult("spoon", Outcome.SUCCESS),
    CellResult("spoon", Outcome.TASK_FAILURE),
    CellResult("spoon", Outcome.INFRASTRUCTURE_ERROR),
    CellResult("carrot", Outcome.POLICY_ERROR),
    CellResult("carrot", Outcome.CONTRACT_VIOLATION),
    CellResult("carrot", None),  # selected, not attempted
    CellResult("cube", Outcome.SUCCESS, autonomous=False),  # a human intervened
]


def test_overall_counts_keep_every_denominator():
    overall = aggregate(CELLS).overall
    assert overall.selected == 7
    assert overall.attempted == 5  # the non-autonomous attempt is not an autonomous attempt
    assert overall.successes == 1
    assert overall.completed_failures == 1
    assert overall.errors == {"policy_error": 1, "contract_violation": 1, "infrastructure_error": 1}
    assert (overall.coverage.numerator, overall.coverage.denominator) == (5, 7)
    # success_rate over protocol-completed episodes
    assert (overall.success_rate.numerator, overall.success_rate.denominator) == (1, 2)
    # attempt_success_rate over all attempts
    assert (overall.attempt_success_rate.numerator, overall.attempt_success_rate.denominator) == (1, 5)
    assert overall.attempt_success_rate.interval == wilson_interval(1, 5)


def test_non_autonomous_attempts_are_counted_apart():
    # "A human correction during an episode changes the policy under evaluation and must not be presented
    # as an autonomous model result."
    report = aggregate(CELLS)
    assert report.non_autonomous.attempted == 1 and report.non_autonomous.successes == 1
    assert report.per_task["cube"].successes == 0
    assert report.per_task["cube"].attempted == 0
    assert report.overall.successes == 1


def test_per_task_aggregates_follow_the_plan_order():
    report = aggregate(CELLS)
    assert list(report.per_task) == ["spoon", "carrot", "cube"]
    carrot = report.per_task["carrot"]
    assert (carrot.selected, carrot.attempted, carrot.success_rate.denominator) == (3, 2, 0)
    assert carrot.success_rate.value is None


def test_the_report_serialises_every_rate_with_interval():
    data = aggregate(CELLS).as_dict()
    rate = data["overall"]["attempt_success_rate"]
    assert set(rate) == {"numerator", "denominator", "value", "wilson95_low", "wilson95_high"}
    assert rate["value"] == pytest.approx(0.2)
