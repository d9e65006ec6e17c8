"""`python manage.py protocol ...` prints the resolved configuration and exits 2 with a one-line
reason on an invalid combination (issue: "Foundation", item 5)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def protocol(*args):
    return subprocess.run(
        [sys.executable, "manage.py", "protocol", *args], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_it_prints_the_resolved_configuration_as_json():
    result = protocol("simpler_env", "--task", "widowx_spoon_on_towel", "--json")
    assert result.returncode == 0, result.stderr
    resolved = json.loads(result.stdout)
    assert resolved["protocol_id"] == "simpler-prepackaged-development/rgb/v1"
    for key in (
        "protocol_id",
        "native_horizon",
        "evaluation_horizon",
        "max_policy_calls",
        "replan_interval",
        "runner_step_cap",
        "max_executable_steps",
        "interaction_mode",
        "action_rejection_feedback",
        "sensors",
    ):
        assert key in resolved
    assert (resolved["native_horizon"], resolved["evaluation_horizon"], resolved["max_executable_steps"]) == (
        60,
        60,
        60,
    )


def test_it_resolves_every_option():
    result = protocol(
        "simpler_env",
        "--task",
        "google_robot_open_top_drawer",
        "--sensors",
        "rgb-qpos",
        "--interaction-mode",
        "agent_method",
        "--action-rejection-feedback",
        "--budget-mode",
        "decisions",
        "--max-policy-calls",
        "3",
        "--replan-interval",
        "5",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    resolved = json.loads(result.stdout)
    assert resolved["protocol_id"] == (
        "simpler-prepackaged-development/rgb-qpos/decision-3-prefix-5/action-feedback/agent-method/v1"
    )
    assert (resolved["native_horizon"], resolved["evaluation_horizon"], resolved["max_executable_steps"]) == (
        113,
        15,
        15,
    )
    assert resolved["action_rejection_feedback"] is True and resolved["interaction_mode"] == "agent_method"


def test_the_extended_track_keeps_the_native_horizon():
    resolved = json.loads(
        protocol(
            "simpler_env",
            "--task",
            "google_robot_place_apple_in_closed_top_drawer",
            "--horizon-multiplier",
            "2",
            "--max-policy-calls",
            "80",
            "--runner-step-cap",
            "400",
            "--json",
        ).stdout
    )
    assert (resolved["native_horizon"], resolved["evaluation_horizon"], resolved["max_executable_steps"]) == (
        200,
        400,
        400,
    )


def test_simple_humanoid_resolves_its_decision_track():
    resolved = json.loads(protocol("simple_humanoid", "--task", "G1WholebodyBendPickMP-v0", "--json").stdout)
    assert resolved["protocol_id"] == "simple-humanoid-development/rgb-qpos31/decision-200-prefix-5/v2"
    assert (resolved["native_horizon"], resolved["evaluation_horizon"]) == (400, 1000)


def test_without_a_task_the_task_dependent_numbers_are_null_in_horizon_mode():
    resolved = json.loads(protocol("simpler_env", "--json").stdout)
    assert resolved["native_horizon"] is None and resolved["max_executable_steps"] is None
    decisions = json.loads(protocol("simpler_env", "--budget-mode", "decisions", "--json").stdout)
    assert decisions["evaluation_horizon"] == 1000 and decisions["max_executable_steps"] == 1000


@pytest.mark.parametrize(
    "args, reason",
    [
        (["simpler_env", "--budget-mode", "decisions", "--horizon-multiplier", "2"], "cannot be combined"),
        (["simpler_env", "--horizon-multiplier", "3"], "must be 1 or 2"),
        (["simpler_env", "--budget-mode", "decisions", "--max-policy-calls", "0"], "at least 1"),
        (["simpler_env", "--replan-interval", "0"], "at least 1"),
        (["simpler_env", "--interaction-mode", "chat"], "unknown interaction mode"),
        (["simpler_env", "--budget-mode", "steps"], "unknown budget mode"),
        (["simpler_env", "--task", "nope"], "no task 'nope'"),
        (["simple_humanoid", "--task-scope", "released-12", "--sensors", "rgb"], "default task scope"),
        (["simple_humanoid", "--task", "G1WholebodyCloseDoorTeleop-v0"], "released-12"),
        (["libero"], "unknown benchmark"),
    ],
)
def test_it_exits_2_with_a_one_line_reason(args, reason):
    result = protocol(*args, "--json")
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and reason in lines[0]
