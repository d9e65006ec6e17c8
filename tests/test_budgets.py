"""Budgets (simpler_env_protocol.md, "Budgets and instruction transitions" and
"Explicit extended-horizon evaluation")."""

import pytest

from evaluator.protocol.budgets import full_chunk_calls, resolve_budget
from evaluator.protocol.catalogs import load_catalog
from evaluator.protocol.errors import InvalidBudget
from evaluator.protocol.identity import configure

SIMPLER = load_catalog("simpler_env")
NATIVE_HORIZONS = sorted({t.native_horizon for t in SIMPLER.tasks.values()})


def test_forty_calls_of_five_actions_permit_two_hundred_native_actions():
    # "40 calls with five actions each permit at most **200 native actions**, enough to reach every
    # listed native horizon."
    config = configure("simpler_env", max_policy_calls=40, replan_interval=5)
    for task in SIMPLER.tasks.values():
        budget = resolve_budget(config, task.native_horizon)
        assert budget.max_policy_calls * budget.replan_interval == 200
        assert budget.max_executable_steps == task.native_horizon
        assert budget.reaches(task.native_horizon)


@pytest.mark.parametrize("horizon, calls", [(60, 12), (80, 16), (113, 23), (120, 24), (200, 40)])
def test_full_five_action_chunks_need_the_spec_call_counts(horizon, calls):
    # "Full five-action chunks require 12 calls for a 60-step task, 16 for 80, 23 for 113, 24 for 120, and 40 for 200."
    assert full_chunk_calls(horizon, 5) == calls


def test_the_listed_native_horizons_are_those_of_the_spec():
    assert NATIVE_HORIZONS == [60, 80, 113, 120, 200]


def test_an_episode_never_exceeds_the_smallest_of_the_three_limits():
    # "an episode cannot exceed `min(evaluation_horizon, runner_step_cap, C * K)` executed steps"
    assert (
        resolve_budget(configure("simpler_env", max_policy_calls=10, replan_interval=5), 80).max_executable_steps == 50
    )
    assert resolve_budget(configure("simpler_env", runner_step_cap=30), 80).max_executable_steps == 30
    assert resolve_budget(configure("simpler_env", replan_interval=1), 80).max_executable_steps == 40
    assert resolve_budget(configure("simpler_env"), 80).max_executable_steps == 80


def test_forty_calls_reach_a_doubled_sixty_step_horizon_but_not_the_apples():
    # "With 40 calls and prefix five, a 60-step task can reach its extended 120-step horizon; an apple
    # task with H=200 cannot reach 2H=400."
    config = configure("simpler_env", horizon_multiplier=2, max_policy_calls=40, replan_interval=5)
    spoon = resolve_budget(config, 60)
    apple = resolve_budget(config, SIMPLER.task("google_robot_place_apple_in_closed_top_drawer").native_horizon)
    assert (spoon.native_horizon, spoon.evaluation_horizon, spoon.max_executable_steps) == (60, 120, 120)
    assert (apple.native_horizon, apple.evaluation_horizon) == (200, 400)
    assert not apple.reaches(400)
    assert apple.max_executable_steps == 200


def test_eighty_decisions_and_a_400_cap_reach_every_doubled_horizon():
    # "Reaching all doubled horizons requires a predeclared budget of at least 80 full-five-action
    # decisions and a runner-step cap of at least 400."
    config = configure("simpler_env", horizon_multiplier=2, max_policy_calls=80, replan_interval=5, runner_step_cap=400)
    for task in SIMPLER.tasks.values():
        budget = resolve_budget(config, task.native_horizon)
        assert budget.native_horizon == task.native_horizon  # H is preserved
        assert budget.max_executable_steps == budget.evaluation_horizon == 2 * task.native_horizon
    assert not resolve_budget(
        configure("simpler_env", horizon_multiplier=2, max_policy_calls=79, replan_interval=5, runner_step_cap=400), 200
    ).reaches(400)
    assert not resolve_budget(
        configure("simpler_env", horizon_multiplier=2, max_policy_calls=80, replan_interval=5, runner_step_cap=399), 200
    ).reaches(400)


def test_decision_mode_sets_the_evaluation_horizon_to_d_times_k_and_keeps_h():
    # "the predeclared environment safety cap is `D × K` (`evaluation_horizon` retains this resolved value).
    # Upstream `native_horizon` stays unchanged as a reference"
    budget = resolve_budget(
        configure("simpler_env", budget_mode="decisions", max_policy_calls=3, replan_interval=5), 60
    )
    assert (budget.native_horizon, budget.evaluation_horizon, budget.runner_step_cap, budget.max_executable_steps) == (
        60,
        15,
        15,
        15,
    )
    fast = resolve_budget(configure("simpler_env", budget_mode="decisions"), 113)
    assert (fast.native_horizon, fast.evaluation_horizon, fast.max_executable_steps) == (113, 1000, 1000)


def test_the_simple_decision_track_records_both_its_cap_and_the_reference_horizon():
    # "The 1000-control track extends some tasks and shortens the 1200-control task; record both values"
    config = configure("simple_humanoid", task_scope="released-12")
    catalog = load_catalog("simple_humanoid")
    loco = resolve_budget(config, catalog.task("G1WholebodyLocomotionPickBetweenTablesTeleop-v0").native_horizon)
    bend = resolve_budget(config, catalog.task("G1WholebodyBendPickMP-v0").native_horizon)
    assert (loco.native_horizon, loco.max_executable_steps, loco.steps_beyond_native_horizon) == (1200, 1000, -200)
    assert (bend.native_horizon, bend.max_executable_steps, bend.steps_beyond_native_horizon) == (400, 1000, 600)
    assert loco.as_dict()["steps_beyond_native_horizon"] == -200  # stored with the attempt


def test_simple_horizon_mode_runs_to_the_reference_horizon():
    config = configure("simple_humanoid", budget_mode="horizon")
    assert resolve_budget(config, 1200).max_executable_steps == 1200
    assert resolve_budget(config, 400).max_executable_steps == 400


@pytest.mark.parametrize("horizon", [0, -5, True, 80.0])
def test_it_refuses_a_native_horizon_that_is_not_a_positive_integer(horizon):
    with pytest.raises(InvalidBudget):
        resolve_budget(configure("simpler_env"), horizon)


@pytest.mark.parametrize(
    "option, value",
    [
        ("max_policy_calls", 10_001),
        ("replan_interval", 1_001),
        ("runner_step_cap", 100_001),
        ("max_policy_calls", 10**9),
    ],
)
def test_run_budgets_have_documented_upper_bounds(option, value):
    # Issue "The dashboard as reviewers and operators need it", point 3: "a 10^9-call plan is refused with the bound".
    from evaluator.protocol.errors import ProtocolError
    from evaluator.protocol.identity import BUDGET_LIMITS, configure

    with pytest.raises(ProtocolError, match=f"{option} must be at most {BUDGET_LIMITS[option]}"):
        configure("simpler_env", **{option: value})
    assert configure("simpler_env", **{option: BUDGET_LIMITS[option]})  # the bound itself is allowed
