"""The SIMPLE worker against what running SIMPLE's own source showed (upstream_simple_facts.md §7-8; issue 29):
each test runs the real worker (environment/workers/simple_worker.py) against the named double of a checkout
(tests/doubles/simple_checkout.py), which is as strict as the real source on the fact the test names."""

import dataclasses
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from environment.workers.wire import frame_parts, read_frame
from evaluator.native.backends import BACKENDS, reset_options, worker_spec
from evaluator.policies.base import Policy, PolicyReply
from evaluator.protocol.catalogs import load_catalog
from evaluator.records.models import Task
from tests.simple_humanoid import BEND_PICK, FAUCET, Forward

RELEASED = "data/simple-eval/{task}/level-0/meta"


def released_lines(root, task):
    return (root / RELEASED.format(task=task) / "episodes.jsonl").read_text().splitlines()


def first_messages(forward, monkeypatch):
    seen, act = [], Forward.act
    monkeypatch.setattr(forward, "act", lambda self, message: seen.append(message) or act(self, message))
    return seen


def limit_initialization(monkeypatch, controls):
    entry = BACKENDS["simple_humanoid"]
    options = entry.options
    replaced = dataclasses.replace(entry, options=lambda *a: {**options(*a), "max_initialization_controls": controls})
    monkeypatch.setitem(BACKENDS, "simple_humanoid", replaced)


def test_success_exists_only_after_the_first_reset_and_the_worker_reads_it_there(simple_double, forward, run_cell):
    # §7: "`_success` does not exist on the env before the first `reset`: it is a class annotation only ...
    # `hasattr(env.unwrapped, "_success")` is False right after `gym.make`" -- and so in the double:
    probe = (
        "import gymnasium, simple.envs; "
        f"env = gymnasium.make('simple/{BEND_PICK}', sim_mode='mujoco', render_hz=50, success_criteria=0.9); "
        "print(hasattr(env.unwrapped, '_success'))"
    )
    made = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=dict(os.environ))
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines()[-1] == "False"
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    assert (attempt.outcome, attempt.error_type) == ("success", "")


def test_a_released_reset_is_found_by_its_episode_index_never_by_its_line(
    simple_double, forward, run_cell, monkeypatch
):
    # §7: "upstream finds an episode by its `episode_index` (datasets/lerobot.py:20-21), not by its line number"
    lines = released_lines(simple_double, BEND_PICK)
    assert [json.loads(line)["episode_index"] for line in lines] == list(reversed(range(10)))
    seen = first_messages(forward, monkeypatch)
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    released = attempt.provenance["reset_info"]["released_reset"]
    assert (released["episode_index"], released["line_number"]) == (0, 10)
    assert released["line_sha256"] == hashlib.sha256(lines[9].encode()).hexdigest()
    # the double's episode k starts every joint at 0.01 x (k + 1): the policy's first encoders are episode 0's
    assert seen[0].sensors["qpos31"] == pytest.approx(np.full(31, 0.01), rel=1e-6)


def test_a_release_without_its_episode_is_a_reset_error_before_the_first_policy_call(simple_double, forward, run_cell):
    path = simple_double / RELEASED.format(task=BEND_PICK) / "episodes.jsonl"
    path.write_text("\n".join(released_lines(simple_double, BEND_PICK)[:9]) + "\n")  # episodes 9 to 1
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    assert (attempt.outcome, attempt.error_type, attempt.policy_calls) == ("infrastructure_error", "reset", 0)
    assert "has no episode with episode_index 0" in attempt.error_detail


def test_a_release_listing_an_episode_twice_is_refused_never_resolved_by_its_position(simple_double, forward, run_cell):
    # LeRobot keys meta.episodes by episode_index, so the later of two lines would silently win there
    path = simple_double / RELEASED.format(task=BEND_PICK) / "episodes.jsonl"
    lines = released_lines(simple_double, BEND_PICK)
    lines.append(json.dumps({**json.loads(lines[4]), "episode_index": 0}))  # episode 5's state, as episode 0
    path.write_text("\n".join(lines) + "\n")
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    assert (attempt.outcome, attempt.error_type, attempt.policy_calls) == ("infrastructure_error", "install", 0)
    assert "lists episode_index 0 on lines 10, 11: which one is released?" in attempt.error_detail


def test_the_scene_repair_rewrites_the_scene_uid_alone_and_the_state_hash_is_of_what_simple_loads(
    simple_double, forward, run_cell
):
    # §7: "the scene-id repair replaces "102344280" only in `dr_state_dict.scene.uid` (dr/manager.py:72-121)";
    # §8: "a replace over the whole state dict also rewrites `scene.name`, `scene.conf.name` and `scene.data_dir`"
    line = released_lines(simple_double, BEND_PICK)[9]
    released_state = json.loads(json.loads(line)["environment_config"])
    scene = released_state["dr_state_dict"]["scene"]
    assert (scene["uid"], scene["name"], scene["conf"]["name"], scene["data_dir"]) == (
        "hssd:102344280",
        "102344280",
        "102344280",
        "scenes/hssd/102344280",
    )
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    assert attempt.outcome == "success"  # the double loads scene3 from its folder, named by the other fields
    scene["uid"] = scene["uid"].replace("102344280", "scene3")  # datasets/lerobot.py:21, and nothing else
    loaded = json.dumps(released_state, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    released = attempt.provenance["reset_info"]["released_reset"]
    assert released["state_dict_sha256"] == hashlib.sha256(loaded).hexdigest()
    assert released["scene_repaired"] is True


def test_a_data_file_simple_lacks_is_an_install_error_naming_it(simple_double, forward, run_cell):
    # §1: "The HSSD zip is fetched even in MuJoCo-only mode (dr/scene.py:47-50, scenes/hssd.py:75-85)": a host
    # without it, or any other asset SIMPLE downloads, lacks part of its installation
    (simple_double / "data/scenes/hssd/102344280").rmdir()
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    assert (attempt.outcome, attempt.error_type, attempt.policy_calls) == ("infrastructure_error", "install", 0)
    assert "SIMPLE is missing a data file: Download did not materialize" in attempt.error_detail
    assert "for scenes/hssd/102344280" in attempt.error_detail


def test_simple_exiting_as_it_builds_the_env_is_an_install_error_never_a_lost_worker(
    simple_double, forward, run_cell, monkeypatch
):
    # AMO_Policy.py:207-212 (run 2026-12-04): weights torch cannot load (Git LFS pointers) make SIMPLE print
    # a hint and exit(0) inside gym.make. Here the inventory is told the pointer's hash, so that gym.make is reached.
    weights = "src/simple/robots/policy/amo_jit.pt"
    pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:6d867ed2\nsize 17819339\n"
    (simple_double / weights).write_bytes(pointer)
    entry = BACKENDS["simple_humanoid"]
    options = entry.options

    def accepting_the_pointer(*args):
        given = options(*args)
        amo = {**given["expected_files"]["amo"], weights: hashlib.sha256(pointer).hexdigest()}
        return {**given, "expected_files": {**given["expected_files"], "amo": amo}}

    monkeypatch.setitem(BACKENDS, "simple_humanoid", dataclasses.replace(entry, options=accepting_the_pointer))
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    assert (attempt.outcome, attempt.error_type, attempt.policy_calls) == ("infrastructure_error", "install", 0)
    assert "SIMPLE exited (status 0) while building the env" in attempt.error_detail
    assert "Error loading JIT models, likely need to run `git lfs pull`." in attempt.error_detail  # its log's tail
    # Issue 42, item 11: "after AMO's loader calls `exit(0)` (it closes stdin first), the next `close` gets no reply
    # and the worker exits 1 (`ValueError: read of closed file` in `wire.py`)". Spoken to over its protocol as
    # a client that goes on after a failed reset would: the worker answers close and exits 0.
    task = Task.objects.get(benchmark__name="simple_humanoid", name=BEND_PICK)
    options = reset_options("simple_humanoid", task, 1000, load_catalog("simple_humanoid"))
    spec = worker_spec("simple_humanoid")
    worker = subprocess.Popen(
        [spec.python, str(spec.script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, **spec.env},
    )
    replies = []
    for request in ({"op": "reset", "seed": 20260907, **options}, {"op": "close"}):
        for part in frame_parts(request):
            worker.stdin.write(part)
        worker.stdin.flush()
        replies.append(read_frame(worker.stdout.read)[0])
    worker.stdin.close()
    assert worker.wait(timeout=30) == 0, worker.stderr.read().decode()[-2000:]
    assert replies[0]["ok"] is False and "SIMPLE exited (status 0)" in replies[0]["error"]["message"]
    assert replies[1] == {"ok": True, "native_steps": 0}


def test_a_sonic_start_reads_stabilized_once_a_control_as_upstreams_loop_does(
    simple_double, forward, run_cell, monkeypatch
):
    # §8: "`robot.stabilized` (g1_sonic.py:164-177) is stateful: each read increments a counter. Read it once
    # per control." A base still from the first control on is stable at the 100th read: after 99 controls.
    monkeypatch.setenv("SIMPLE_DOUBLE_SETTLE_AT", "0")
    limit_initialization(monkeypatch, 98)
    short = run_cell(benchmark="simple_humanoid", task=FAUCET, policy="forward", seed=20260907)
    assert (short.outcome, short.error_type, short.policy_calls) == ("infrastructure_error", "reset", 0)
    assert "did not stabilize within 98 controls" in short.error_detail
    limit_initialization(monkeypatch, 99)
    enough = run_cell(benchmark="simple_humanoid", task=FAUCET, policy="forward", seed=20260907)
    assert (enough.outcome, enough.provenance["reset_info"]["initialization"]["controls"]) == ("success", 99)


def test_a_checkout_older_than_8e5fe20_is_an_install_error_naming_its_revision(simple_double, forward, run_cell):
    # §7: "`StandStabilizationWrapper` (envs/wrappers/stand_stabilization.py) was added in 8e5fe20 (2026-06-13);
    # an older checkout has no such module."
    (simple_double / "src/simple/envs/wrappers/stand_stabilization.py").unlink()
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    assert (attempt.outcome, attempt.error_type, attempt.policy_calls) == ("infrastructure_error", "install", 0)
    revision = attempt.campaign.provenance["upstream"]["simple"]["revision"]
    assert f"SIMPLE at {revision} has no simple.envs.wrappers.stand_stabilization" in attempt.error_detail
    assert "StandStabilizationWrapper came with SIMPLE 8e5fe20" in attempt.error_detail
    assert "Traceback" not in attempt.error_detail


class UpperBodyProbe(Policy):
    """Five controls with the waist turned (roll -0.2, yaw 0.4), the right shoulder pitched (0.5) and the left
    thumb bent (-0.3), then a stop that reads the encoders."""

    def start_episode(self, start):
        self.calls = 0

    def act(self, message):
        self.calls += 1
        if self.calls == 2:
            UpperBodyProbe.encoders = message.sensors["qpos31"]
            return PolicyReply({"stop": True})
        action = [0.0] * 31 + [0.74, 0.0, 0.0, 0.0, 0.0]
        action[28], action[30], action[21], action[0] = -0.2, 0.4, 0.5, -0.3
        return PolicyReply({"actions": [action] * 5})


def test_the_wbcs_upper_body_is_31_joints_from_waist_yaw_and_takes_each_target_by_name(
    simple_double, register_policy, run_cell
):
    # §7: "The WBC upper body is 31 joints beginning with `waist_yaw_joint` (gear_sonic `enable_waist` defaults
    # to True)"; the WBC orders them as pinocchio does, each arm followed by its hand (index, middle, thumb:
    # read from the real decoupled_wbc 33317fa, 2026-12-04)
    register_policy("upper-body-probe", UpperBodyProbe)
    attempt = run_cell(benchmark="simple_humanoid", task=FAUCET, policy="upper-body-probe", seed=20260907)
    assert (attempt.termination_reason, attempt.environment_steps) == ("policy_stop", 5)
    upper = attempt.provenance["reset_info"]["initialization"]["wbc_upper_body_joints"]
    assert len(upper) == 31 and upper[:3] == ["waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint"]
    assert upper[3] == "left_shoulder_pitch_joint"
    assert upper[10:13] == ["left_hand_index_0_joint", "left_hand_index_1_joint", "left_hand_middle_0_joint"]
    assert upper[-1] == "right_hand_thumb_2_joint"
    # the first control carries the last start-up goal (all 0 there), the four after it the policy's; the
    # double's joints go halfway to their target each control: 1 - 0.5**4 of the way. Slots 28-30: waist roll,
    # pitch, yaw; 21: right shoulder pitch; 0: left thumb_0 (action-slot order, as the policy sees them)
    encoders = UpperBodyProbe.encoders
    assert encoders[28:31] == pytest.approx([-0.2 * 0.9375, 0.0, 0.4 * 0.9375], abs=1e-6)
    assert (encoders[21], encoders[0]) == pytest.approx((0.5 * 0.9375, -0.3 * 0.9375), abs=1e-6)


class ThumbSteps(Policy):
    """One control a call, the right thumb and left elbow targets stepping each call; six calls, then a stop."""

    def start_episode(self, start):
        ThumbSteps.runs.append([])

    def act(self, message):
        ThumbSteps.runs[-1].append(message.sensors["qpos31"])
        calls = len(ThumbSteps.runs[-1])
        if calls > 6:
            return PolicyReply({"stop": True})
        action = [0.0] * 31 + [0.74, 0.0, 0.0, 0.0, 0.0]
        action[7], action[17] = 0.1 * calls, -0.3 * calls  # right thumb_0, left elbow
        return PolicyReply({"actions": [action]})


def test_a_slow_host_runs_the_same_sonic_episode_as_a_fast_one(simple_double, register_policy, run_cell, monkeypatch):
    # Issue 29, point 3: upstream's WBC interpolates by wall-clock time (InterpolationPolicy, target_time =
    # now + 1/50), so the episode would depend on how long each control takes; the worker runs it on MuJoCo's
    # time. Controls 150 (start-up), 273 and 275 (the policy's second and fourth) take 0.3 s more here.
    ThumbSteps.runs = []
    register_policy("thumb-steps", ThumbSteps)
    fast = run_cell(benchmark="simple_humanoid", task=FAUCET, policy="thumb-steps", seed=20260907)
    monkeypatch.setenv("SIMPLE_DOUBLE_STALL_AT", "150,273,275")
    slow = run_cell(benchmark="simple_humanoid", task=FAUCET, policy="thumb-steps", seed=20260907)
    assert fast.termination_reason == slow.termination_reason == "policy_stop"
    assert fast.environment_steps == slow.environment_steps == 6
    fast_run, slow_run = ThumbSteps.runs
    assert all(np.array_equal(a, b) for a, b in zip(fast_run, slow_run, strict=True))
    # at 20 ms a control the WBC's output is the goal of the control before: the thumb's target at control k
    # is 0.1 (k - 1), and the double's joint goes halfway there each control
    thumb = 0.0
    for control in range(1, 7):
        thumb += 0.5 * (0.1 * (control - 1) - thumb)
        assert fast_run[control][7] == pytest.approx(thumb, abs=1e-6)


def test_the_env_is_made_at_the_released_datasets_fps(simple_double, forward, run_cell):
    # §7: "SONIC's `render_hz` comes from the dataset's `meta.fps` in upstream's CLI (eval_decoupled_wbc.py:250,272)";
    # at 30 fps SIMPLE's env steps int(200 / 30) = 6 physics steps a control: not the protocol's 20 ms. Issue 42,
    # item 11: "the physics substep count is checked only at policy steps ... check it right after reset."
    info = simple_double / RELEASED.format(task=FAUCET) / "info.json"
    info.write_text(json.dumps({"codebase_version": "v2.1", "fps": 30}))
    attempt = run_cell(benchmark="simple_humanoid", task=FAUCET, policy="forward", seed=20260907)
    assert (attempt.error_type, attempt.policy_calls, attempt.environment_steps) == ("install", 0, 0)
    assert "the env made at the release's 30 fps advances the physics 6 x 0.005 s a control" in attempt.error_detail
    assert "not 4 x 0.005 s: the release does not match the protocol's 20 ms control" in attempt.error_detail
    info.unlink()
    missing = run_cell(benchmark="simple_humanoid", task=FAUCET, policy="forward", seed=20260907)
    assert (missing.error_type, missing.policy_calls) == ("install", 0)
    assert "no frame rate in the released" in missing.error_detail


def test_a_dependency_missing_under_a_module_of_simple_is_named_not_the_module(simple_double, forward, run_cell):
    # Issue 42, item 11: "an `ImportError` of a dependency is worded as 'SIMPLE ... has no
    # simple.envs.wrappers.stand_stabilization' when the module exists and `matplotlib` is what is missing"
    module = simple_double / "src/simple/envs/wrappers/stand_stabilization.py"
    module.write_text("import rsi_absent_plotting_library\n" + module.read_text())
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    assert (attempt.error_type, attempt.policy_calls) == ("install", 0)
    revision = attempt.campaign.provenance["upstream"]["simple"]["revision"]
    assert (
        f"SIMPLE at {revision}: simple.envs.wrappers.stand_stabilization cannot be imported, "
        "rsi_absent_plotting_library is missing"
    ) in attempt.error_detail
    assert "has no simple.envs.wrappers.stand_stabilization" not in attempt.error_detail


def test_a_released_scene_simple_does_not_know_is_an_install_error_naming_it(simple_double, forward, run_cell):
    # Issue 42, item 11: "a released episode whose scene uid SIMPLE does not know is a `reset` error (`KeyError`
    # through the catch-all): it is the release not matching the data, an `install` error naming the uid"
    path = simple_double / RELEASED.format(task=BEND_PICK) / "episodes.jsonl"
    lines = released_lines(simple_double, BEND_PICK)
    entry = json.loads(lines[9])
    state = json.loads(entry["environment_config"])
    state["dr_state_dict"]["scene"]["uid"] = "hssd:555"
    entry["environment_config"] = json.dumps(state)
    path.write_text("\n".join([*lines[:9], json.dumps(entry)]) + "\n")
    attempt = run_cell(benchmark="simple_humanoid", task=BEND_PICK, policy="forward", seed=20260907)
    assert (attempt.outcome, attempt.error_type, attempt.policy_calls) == ("infrastructure_error", "install", 0)
    assert "the released episode's scene 'hssd:555' is unknown to SIMPLE at" in attempt.error_detail
    assert "the release does not match the checkout" in attempt.error_detail
