"""SIMPLE humanoid episodes end to end: the real SIMPLE worker (environment/workers/simple_worker.py), the
evaluator and its budgets, against a named double of a SIMPLE checkout (tests/doubles/simple_checkout.py):
SIMPLE itself needs cuRobo, CUDA and assets this machine cannot have (issue 15, Done when, first point).
The double's interpreter is the evaluator's own, with the double's src/ on PYTHONPATH."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evaluator.native.backends import benchmark_verdict
from evaluator.policies.base import Policy, PolicyReply
from evaluator.protocol.catalogs import load_catalog
from tests.simple_humanoid import BEND_PICK, BETWEEN_TABLES, BETWEEN_TABLES_INSTRUCTION, FAUCET, INSTRUCTION, Forward

_ONNX_BALANCE = "third_party/decoupled_wbc/sim2mujoco/resources/robots/g1/policy/GR00T-WholeBodyControl-Balance.onnx"


def test_an_amo_episode_succeeds_on_the_native_counter_with_initialization_outside_the_budget(
    simple_double, forward, run_cell
):
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    assert attempt.campaign.protocol.protocol_id == "simple-humanoid-development/rgb-qpos31/decision-200-prefix-5/v2"
    # the counter gains 2 x 0.03 per control while vx > 0.5: the CLI's criterion 0.9 at the fifteenth control
    assert (attempt.outcome, attempt.success, attempt.environment_steps) == ("success", True, 15)
    assert (attempt.policy_calls, attempt.first_success_step) == (3, 15)
    reset = attempt.provenance["reset_info"]
    # "Initialization controls are outside policy budgets and recorded separately": AMO's 60 stands
    assert reset["initialization"] == {"backend": "amo", "controls": 60, "success_seen": False}
    # "20 ms per public control: AMO 10 x 2 ms": read from MuJoCo's clock, per control and for the stand, after
    # reset's own single mj_step of 2 ms (robot.command is None then: engines/mujoco.py:68-73)
    physics = reset["physics"]
    assert (physics["timestep_s"], physics["substeps_per_control"]) == (0.002, 10)
    assert physics["initialization_s"] == pytest.approx(0.002 + 60 * 0.02)
    # AMO's path reads no wall clock; the env is made at the released dataset's fps, as the CLI makes it
    assert (physics["wbc_clock"], physics["render_hz"]) == (None, 50)
    infos = [step.info for step in attempt.steps.order_by("index")]
    assert [i["physics_substeps"] for i in infos] == [10] * 15
    assert infos[-1]["physics_time_s"] == pytest.approx(0.002 + (60 + 15) * 0.02)
    assert (
        reset["inventory"]["problems"] == []
        and reset["inventory"]["revision"] == (load_catalog("simple_humanoid").upstream["simple"]["revision"])
    )
    # "Everything checked is recorded": the weights and the robot's MJCF (no published hash) by sha256,
    # the released reset read, and SIMPLE's scene repair applied to it
    files = reset["inventory"]["files"]
    assert set(files) == set(load_catalog("simple_humanoid").settings["inventory"]["amo"])
    assert len(files["data/robots/g1/g1_29dof_wholebody_dex3.xml"]["sha256"]) == 64
    released = reset["released_reset"]
    assert (released["episode_index"], released["scene_repaired"]) == (0, True)
    assert released["scene_repair"] == {"field": "dr_state_dict.scene.uid", "replace": ["102344280", "scene3"]}
    assert released["file"] == f"data/simple-eval/{BEND_PICK}/level-0/meta/episodes.jsonl"


def test_the_evidence_and_the_native_log_lie_under_the_policys_results_simple_humanoid_namespace(
    simple_double, forward, run_cell, settings, operator
):
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    # "Retain ... native logs ... under the selected model's results/simple_humanoid/ namespace"
    policy = attempt.campaign.policy
    namespace = f"policies/{policy.pk:04d}-forward/results/simple_humanoid/"
    assert attempt.evidence_dir.startswith(namespace)
    paths = {a.name: a.path for a in attempt.artifacts.all()}
    assert {"video.mp4", "steps.jsonl", "provenance.json", "native.log"} <= set(paths)
    assert all(path.startswith(attempt.evidence_dir + "/") for path in paths.values())
    native_log = (Path(settings.MEDIA_ROOT) / paths["native.log"]).read_text()
    assert f"building {BEND_PICK} in mujoco\n" in native_log
    # served by name inside the attempt's folder, like every other artifact
    response = operator.get(f"/attempts/{attempt.pk}/files/native.log")
    assert response.status_code == 200 and b"".join(response.streaming_content).decode() == native_log


def test_the_policy_sees_the_exact_instruction_the_frame_and_31_encoders_only(
    simple_double, forward, run_cell, monkeypatch
):
    seen, act = [], Forward.act
    monkeypatch.setattr(forward, "act", lambda self, message: seen.append(message) or act(self, message))
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    assert attempt.outcome == "success"
    message = seen[0]
    assert message.instruction == INSTRUCTION
    assert (message.rgb.shape, message.rgb.dtype) == ((360, 640, 3), np.uint8)
    assert set(message.sensors) == {"qpos31"} and message.sensors["qpos31"].shape == (31,)


def test_a_valid_1e3_target_reaches_the_native_controller_unchanged(simple_double, register_policy, run_cell):
    # "Version 2 passes valid finite targets unchanged to the pinned native controller"
    class Probe(Policy):
        def start_episode(self, start):
            self.calls = 0

        def act(self, message):
            self.calls += 1
            if self.calls == 2:  # the double moved the joint halfway to its target at each of 5 controls
                Probe.left_shoulder = float(message.sensors["qpos31"][14])
                return PolicyReply({"stop": True})
            action = [0.0] * 36
            action[14], action[31] = 1e3, 0.75
            return PolicyReply({"actions": [action] * 5})

    register_policy("probe", Probe)
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="probe", seed=20260907)
    assert attempt.termination_reason == "policy_stop" and attempt.environment_steps == 5
    assert Probe.left_shoulder == pytest.approx(1e3 * (1 - 0.5**5), rel=1e-6)


def test_success_already_true_while_standing_is_an_error_before_any_policy_call(
    simple_double, forward, run_cell, monkeypatch
):
    monkeypatch.setenv("SIMPLE_DOUBLE_SUCCESS_WHILE_STANDING", "1")
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    assert (attempt.outcome, attempt.error_type) == ("infrastructure_error", "reset")
    assert attempt.policy_calls == 0 and "already true at reset" in attempt.error_detail


@pytest.mark.parametrize(
    "task, path, change, problem",
    [
        (BEND_PICK, "src/simple/robots/policy/amo_jit.pt", "alter", "has sha256"),
        (BEND_PICK, "data/robots/g1/g1_29dof_wholebody_dex3.xml", "remove", "is missing"),
        (FAUCET, _ONNX_BALANCE, "alter", "has sha256"),
    ],
)
def test_an_inventory_mismatch_stops_the_episode_before_the_first_policy_call(
    simple_double, forward, run_cell, task, path, change, problem
):
    if change == "alter":
        (simple_double / path).write_bytes(b"other weights")
    else:
        (simple_double / path).unlink()
    attempt = run_cell(benchmark="simple_humanoid", task=task, policy="forward", seed=20260907)
    assert (attempt.outcome, attempt.error_type) == ("infrastructure_error", "install")
    assert attempt.policy_calls == 0 and f"{path} {problem}" in attempt.error_detail


def test_a_crash_of_the_native_runtime_mid_episode_is_an_environment_error(
    simple_double, forward, run_cell, monkeypatch
):
    monkeypatch.setenv("SIMPLE_DOUBLE_CRASH_AT", str(60 + 3))  # the third policy control
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    assert (attempt.outcome, attempt.error_type) == ("infrastructure_error", "worker_lost")
    assert attempt.environment_steps == 2


def test_doctor_checks_the_checkout_against_the_catalogs_pin_and_weights(simple_double):
    verdict = benchmark_verdict("simple_humanoid")
    # the double's placeholder weights are not the pinned ones: named, file by file
    assert verdict["ready"] is False
    assert "src/simple/robots/policy/amo_jit.pt has sha256" in verdict["reason"]
    assert "expected 6d867ed2dd2261d0..." in verdict["reason"]


WORKER = Path(__file__).resolve().parents[1] / "environment" / "workers" / "simple_worker.py"


def test_the_workers_own_checks_run_without_simple(tmp_path):
    # "The worker script has import-time and argument checks that run without SIMPLE installed"
    request = json.dumps({"pinned_revision": "0" * 40, "files": {"src/simple/robots/policy/amo_jit.pt": "6d867ed2"}})
    run = subprocess.run(
        [sys.executable, str(WORKER), "--check", str(tmp_path)], input=request, capture_output=True, text=True
    )
    assert run.returncode == 0 and json.loads(run.stdout)["problems"] == [
        f"{tmp_path} is not a SIMPLE checkout (no src/simple)"
    ]
    bad = subprocess.run([sys.executable, str(WORKER), "--check"], capture_output=True, text=True)
    assert bad.returncode == 1 and "usage: simple_worker.py --check CHECKOUT" in bad.stderr


def test_a_sonic_episode_stabilizes_outside_the_budget_then_succeeds_on_consecutive_controls(
    simple_double, forward, run_cell
):
    attempt = run_cell(benchmark="simple_humanoid", task=FAUCET, policy="forward", seed=20260907)
    # The WBC's output at a control is the goal of the control before (its interpolation at 20 ms a control),
    # so the thumb closes from the second control on; the faucet counter gains two increments of 0.03 per
    # control while held and succeeds at 0.2: the fifth control
    assert (attempt.outcome, attempt.environment_steps, attempt.policy_calls) == ("success", 5, 1)
    initialization = attempt.provenance["reset_info"]["initialization"]
    # the double's base comes to rest after the 271 controls the real decoupled WBC took (facts §8)
    assert (initialization["backend"], initialization["controls"], initialization["success_seen"]) == (
        "sonic",
        271,
        False,
    )
    # "SONIC 4 x 5 ms", after reset's own mj_step of 5 ms (sonic_loco_manip.py:140; facts §8)
    physics = attempt.provenance["reset_info"]["physics"]
    assert (physics["timestep_s"], physics["substeps_per_control"], physics["wbc_clock"]) == (0.005, 4, "mujoco")
    assert physics["initialization_s"] == pytest.approx(0.005 + 271 * 0.02)
    assert [step.info["physics_substeps"] for step in attempt.steps.all()] == [4] * 5


def test_a_control_that_is_not_20_ms_of_physics_is_an_environment_error(simple_double, forward, run_cell, monkeypatch):
    monkeypatch.setenv("SIMPLE_DOUBLE_SUBSTEPS", "5")
    monkeypatch.setenv("SIMPLE_DOUBLE_SUBSTEPS_AFTER", "60")  # the stand's 60 controls keep 20 ms each
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    assert (attempt.outcome, attempt.error_type, attempt.environment_steps) == (
        "infrastructure_error",
        "native_runtime",
        0,
    )
    assert "control 1 advanced the physics 0.010000 s (5 x 0.002 s), not 10 x 0.002 s" in attempt.error_detail


def test_an_unstable_sonic_start_is_an_error_before_any_policy_call(simple_double, forward, run_cell, monkeypatch):
    monkeypatch.setenv("SIMPLE_DOUBLE_SETTLE_AT", "100000")  # a base that never comes to rest
    attempt = run_cell(benchmark="simple_humanoid", task=FAUCET, policy="forward", seed=20260907)
    assert (attempt.outcome, attempt.error_type, attempt.policy_calls) == ("infrastructure_error", "reset", 0)
    assert "did not stabilize within 300 controls" in attempt.error_detail


class StandStill(Policy):
    def start_episode(self, start):
        self.instructions = set()

    def act(self, message):
        StandStill.instruction = message.instruction
        return PolicyReply({"actions": [[0.0] * 31 + [0.75, 0.0, 0.0, 0.0, 0.0]] * 5})


def test_the_1000_control_cap_ends_the_1200_control_task_and_the_instruction_keeps_its_space(
    simple_double, register_policy, run_cell
):
    # "The 1000-control track ... shortens the 1200-control task; record both values and the difference"
    register_policy("stand-still", StandStill)
    attempt = run_cell(
        benchmark="simple_humanoid", task=BETWEEN_TABLES, policy="stand-still", seed=20260907, task_scope="released-12"
    )
    assert (attempt.outcome, attempt.termination_reason) == ("task_failure", "call_budget")
    assert (attempt.environment_steps, attempt.policy_calls) == (1000, 200)
    budget = attempt.budget
    assert (budget["native_horizon"], budget["max_executable_steps"], budget["steps_beyond_native_horizon"]) == (
        1200,
        1000,
        -200,
    )
    # "Episode metadata trims outer instruction whitespace; native/public observations preserve it."
    assert StandStill.instruction == BETWEEN_TABLES_INSTRUCTION
    assert attempt.provenance["reset_info"]["released_reset"]["metadata_tasks"] == [BETWEEN_TABLES_INSTRUCTION.strip()]


def test_the_timeline_groups_the_36_numbers_by_body_part_and_keeps_initialization_apart(
    simple_double, forward, run_cell, admin_client
):
    # "the review timeline show[s] the 36-number action grouped by body part (legs/locomotion command,
    # torso, arms, hands) instead of 36 unlabeled traces, and the initialization phase apart"
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    timeline = admin_client.get(f"/attempts/{attempt.pk}/timeline.json").json()
    groups = {g["label"]: g["components"] for g in timeline["action_groups"]}
    assert list(groups) == ["legs: locomotion command", "torso", "arms", "hands"]
    assert sorted(sum(groups.values(), [])) == list(range(36)) and timeline["gripper"] is None
    assert [timeline["action_components"][i] for i in groups["torso"]] == ["waist_roll", "waist_pitch", "waist_yaw"]
    assert timeline["initialization"] == {"backend": "amo", "controls": 60, "success_seen": False}
    assert [s["index"] for s in timeline["steps"]] == list(range(1, 16))  # the policy's controls only


@pytest.mark.parametrize(
    "bad, violation",
    [
        ([float("nan")] + [0.0] * 35, "non_finite"),
        ([True] + [0.0] * 35, "boolean"),
        ([0.0] * 35, "wrong_length"),
        ([0.0] * 37, "wrong_length"),
    ],
)
def test_a_malformed_action_never_reaches_the_native_controller(
    simple_double, register_policy, run_cell, bad, violation
):
    # "Reject invalid dimensions, booleans and non-finite values" ... "without a control or sequence advance"
    class Malformed(Policy):
        def act(self, message):
            return PolicyReply({"actions": [bad]})

    register_policy("malformed", Malformed)
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="malformed", seed=20260907)
    assert attempt.environment_steps == 0 and attempt.rejected_calls == attempt.policy_calls == 200
    assert {d.violation["kind"] for d in attempt.decisions.all()} == {violation}
    assert attempt.provenance["worker"]["closed"]["native_steps"] == 0
