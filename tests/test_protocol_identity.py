"""Protocol identities (simpler_env_protocol.md "Protocol"; simple_humanoid_protocol.md)."""

import itertools

import pytest

from evaluator.protocol.errors import (
    InvalidBudget,
    InvalidCombination,
    MalformedIdentity,
    UnknownBenchmark,
    UnknownOption,
)
from evaluator.protocol.identity import configure, parse_protocol_id


def test_the_default_track_is_the_historical_rgb_identity():
    # "Protocol: `simpler-prepackaged-development/rgb/v1`."
    config = configure("simpler_env")
    assert config.protocol_id == "simpler-prepackaged-development/rgb/v1"
    assert config.interaction_mode == "single_response"
    assert config.action_rejection_feedback is False
    assert config.horizon_multiplier == 1


def test_it_names_the_spec_example_with_feedback_and_agent_method():
    # "For example, `simpler-prepackaged-development/rgb/action-feedback/agent-method/v1`"
    config = configure("simpler_env", action_rejection_feedback=True, interaction_mode="agent_method")
    assert config.protocol_id == "simpler-prepackaged-development/rgb/action-feedback/agent-method/v1"


def test_agent_method_alone_goes_immediately_before_v1():
    # "adds `/agent-method` immediately before the final `/v1`"
    assert configure("simpler_env", interaction_mode="agent_method").protocol_id == (
        "simpler-prepackaged-development/rgb/agent-method/v1"
    )


def test_action_feedback_alone_goes_before_v1():
    # "`action_rejection_feedback=true` adds `/action-feedback` before the optional `/agent-method` and final `/v1`"
    assert configure("simpler_env", action_rejection_feedback=True).protocol_id == (
        "simpler-prepackaged-development/rgb/action-feedback/v1"
    )


def test_decision_mode_adds_its_segment_before_the_other_suffixes():
    # "The protocol adds `/decision-D-prefix-K/v1`" and agent-method comes "after any budget or
    # action-feedback suffix".
    config = configure(
        "simpler_env",
        budget_mode="decisions",
        max_policy_calls=200,
        replan_interval=5,
        action_rejection_feedback=True,
        interaction_mode="agent_method",
    )
    assert config.protocol_id == (
        "simpler-prepackaged-development/rgb/decision-200-prefix-5/action-feedback/agent-method/v1"
    )


def test_decision_mode_defaults_to_the_fast_campaign_budget():
    # "The current fast campaign defaults to **200 decisions × at most 5 actions** (1000-step safety cap)."
    config = configure("simpler_env", budget_mode="decisions")
    assert config.protocol_id == "simpler-prepackaged-development/rgb/decision-200-prefix-5/v1"
    assert (config.max_policy_calls, config.replan_interval, config.runner_step_cap) == (200, 5, 1000)


def test_the_joint_position_track_has_its_own_identity():
    # "Optional joint-position input has the separate identity `simpler-prepackaged-development/rgb-qpos/v1`"
    assert configure("simpler_env", sensors="rgb-qpos").protocol_id == "simpler-prepackaged-development/rgb-qpos/v1"


def test_the_extended_horizon_track_has_a_distinct_identity():
    # "`horizon_multiplier=2` is an extended-horizon track with a separate protocol identity"
    extended = configure("simpler_env", horizon_multiplier=2)
    assert extended.protocol_id == "simpler-prepackaged-development/rgb/extended-horizon-2h/v1"
    assert extended.protocol_id != configure("simpler_env").protocol_id


def test_simple_humanoid_defaults_to_the_v2_decision_track_with_qpos31():
    # "The current executable interface is v2", "RGB+qpos31 and the decision-200/prefix-5 track"
    config = configure("simple_humanoid")
    assert config.protocol_id == "simple-humanoid-development/rgb-qpos31/decision-200-prefix-5/v2"
    assert (config.max_policy_calls, config.replan_interval, config.runner_step_cap) == (200, 5, 1000)


def test_simple_humanoid_v1_stays_a_distinct_frozen_identity():
    # "Frozen v1 source and results remain unchanged and must be reported separately."
    v1 = configure("simple_humanoid", interface_version=1)
    assert v1.protocol_id == "simple-humanoid-development/rgb-qpos31/decision-200-prefix-5/v1"
    assert not v1.is_current_interface
    assert parse_protocol_id(v1.protocol_id) == v1


def test_simple_humanoid_scopes_sensors_and_budget_modes_have_separate_identities():
    ids = {
        configure("simple_humanoid").protocol_id,
        configure("simple_humanoid", task_scope="released-12").protocol_id,
        configure("simple_humanoid", sensors="rgb").protocol_id,
        configure("simple_humanoid", budget_mode="horizon").protocol_id,
    }
    assert ids == {
        "simple-humanoid-development/rgb-qpos31/decision-200-prefix-5/v2",
        "simple-humanoid-development/released-12/rgb-qpos31/decision-200-prefix-5/v2",
        "simple-humanoid-development/rgb/decision-200-prefix-5/v2",
        "simple-humanoid-development/rgb-qpos31/v2",
    }


def _all_valid_configs():
    for sensors, mode, feedback, budget in itertools.product(
        ("rgb", "rgb-qpos"),
        ("single_response", "agent_method"),
        (False, True),
        ({}, {"horizon_multiplier": 2}, {"budget_mode": "decisions", "max_policy_calls": 3, "replan_interval": 5}),
    ):
        yield configure(
            "simpler_env", sensors=sensors, interaction_mode=mode, action_rejection_feedback=feedback, **budget
        )
    for version, scope, sensors, budget in itertools.product(
        (1, 2), ("default", "released-12"), ("rgb-qpos31", "rgb"), ("decisions", "horizon")
    ):
        if scope == "released-12" and (sensors == "rgb" or budget == "horizon"):
            continue
        yield configure(
            "simple_humanoid", interface_version=version, task_scope=scope, sensors=sensors, budget_mode=budget
        )


@pytest.mark.parametrize("config", list(_all_valid_configs()), ids=lambda c: c.protocol_id)
def test_every_identity_parses_back_into_its_configuration(config):
    assert parse_protocol_id(config.protocol_id) == config
    assert parse_protocol_id(config.protocol_id).protocol_id == config.protocol_id


def test_identities_of_different_configurations_differ():
    configs = list(_all_valid_configs())
    assert len({c.protocol_id for c in configs}) == len(configs)


def test_horizon_mode_call_budgets_are_run_settings_outside_the_identity():
    # The spec's identity grammar names no horizon-mode call budget; it is recorded per attempt.
    config = configure("simpler_env", max_policy_calls=80, replan_interval=5, runner_step_cap=400)
    assert config.protocol_id == "simpler-prepackaged-development/rgb/v1"
    assert parse_protocol_id(config.protocol_id).max_policy_calls == 40


@pytest.mark.parametrize(
    "options, error",
    [
        # "Horizon multipliers cannot be combined with decision-primary mode."
        ({"budget_mode": "decisions", "horizon_multiplier": 2}, InvalidCombination),
        ({"horizon_multiplier": 3}, InvalidBudget),
        ({"horizon_multiplier": 0}, InvalidBudget),
        ({"budget_mode": "decisions", "horizon_multiplier": 3}, InvalidBudget),
        ({"horizon_multiplier": True}, InvalidBudget),
        ({"budget_mode": "decisions", "max_policy_calls": 0}, InvalidBudget),
        ({"budget_mode": "decisions", "replan_interval": 0}, InvalidBudget),
        ({"max_policy_calls": -1}, InvalidBudget),
        ({"replan_interval": 2.5}, InvalidBudget),
        ({"runner_step_cap": 0}, InvalidBudget),
        (
            {"budget_mode": "decisions", "max_policy_calls": 3, "replan_interval": 5, "runner_step_cap": 20},
            InvalidCombination,
        ),
        ({"interaction_mode": "conversation"}, UnknownOption),
        ({"budget_mode": "tokens"}, UnknownOption),
        ({"sensors": "rgbd"}, UnknownOption),
        ({"task_scope": "released-12"}, UnknownOption),
        ({"interface_version": 2}, UnknownOption),
    ],
)
def test_it_refuses_invalid_simpler_env_combinations(options, error):
    with pytest.raises(error):
        configure("simpler_env", **options)


@pytest.mark.parametrize(
    "options, error",
    [
        # "An explicit RGB-only track exists for the default task scope"
        ({"task_scope": "released-12", "sensors": "rgb"}, InvalidCombination),
        # "The default task scope also offers budget_mode="horizon"."
        ({"task_scope": "released-12", "budget_mode": "horizon"}, InvalidCombination),
        # "The implemented decision track fixes 200 maximum policy calls, prefix cap 5"
        ({"max_policy_calls": 100}, InvalidCombination),
        ({"replan_interval": 16}, InvalidCombination),
        ({"horizon_multiplier": 2}, InvalidCombination),
        ({"budget_mode": "horizon", "horizon_multiplier": 2}, InvalidCombination),
        ({"interaction_mode": "agent_method"}, InvalidCombination),
        ({"sensors": "rgb-qpos"}, UnknownOption),
        ({"interface_version": 3}, UnknownOption),
    ],
)
def test_it_refuses_invalid_simple_humanoid_combinations(options, error):
    with pytest.raises(error):
        configure("simple_humanoid", **options)


def test_simple_humanoid_feedback_is_part_of_its_service():
    # "reports bounded validation feedback without a control or sequence advance"
    assert configure("simple_humanoid").action_rejection_feedback is True


def test_it_refuses_an_unknown_benchmark():
    with pytest.raises(UnknownBenchmark, match="unknown benchmark"):
        configure("libero")


@pytest.mark.parametrize(
    "identity",
    [
        "simpler-prepackaged-development/rgb",
        "simpler-prepackaged-development/rgb/v",
        "simpler-prepackaged-development/v1",
        "simpler-prepackaged/rgb/v1",
        "simpler-prepackaged-development/rgb/agent-method/action-feedback/v1",
        "simpler-prepackaged-development/rgb/action-feedback/decision-200-prefix-5/v1",
        "simpler-prepackaged-development/rgb/decision-0-prefix-5/v1",
        "simpler-prepackaged-development/rgb/decision-05-prefix-5/v1",
        "simpler-prepackaged-development/rgb/decision-x-prefix-5/v1",
        "simpler-prepackaged-development/rgb/extended-horizon-2h/decision-200-prefix-5/v1",
        "simpler-prepackaged-development/rgb/extra/v1",
        "simple-humanoid-development/rgb-qpos31/decision-200-prefix-5/action-feedback/v2",
        "",
    ],
)
def test_it_refuses_malformed_identities(identity):
    with pytest.raises(MalformedIdentity):
        parse_protocol_id(identity)


@pytest.mark.parametrize(
    "identity, error",
    [
        ("simpler-prepackaged-development/rgb/v2", UnknownOption),
        ("simple-humanoid-development/released-12/rgb/decision-200-prefix-5/v2", InvalidCombination),
        ("simple-humanoid-development/rgb-qpos31/decision-100-prefix-5/v2", InvalidCombination),
    ],
)
def test_identities_of_invalid_combinations_are_refused_like_the_options(identity, error):
    with pytest.raises(error):
        parse_protocol_id(identity)
