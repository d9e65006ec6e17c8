"""The SAPIEN path for real on this CPU: ManiSkill2 0.5.3 episodes through the SAPIEN worker in
its own interpreter (.venv-sapien), rendered by Mesa's lavapipe with RSI's Vulkan layer
(issue "The SimplerEnv backend": Done when, first point)."""

import math
import os
import signal

import numpy as np
import pytest
from PIL import Image

from evaluator.benchmarks import worker_spec
from evaluator.policies.base import Policy, PolicyReply
from tests.servers.processes import child_workers

pytestmark = pytest.mark.skipif(not os.path.exists(worker_spec("maniskill2").python),
                                reason="make sapien-env builds .venv-sapien (make test does)")


def _frames(attempt, media_root):
    return [np.asarray(Image.open(media_root / a.path)) for a in attempt.artifacts.filter(kind="message_image")]


def test_a_maniskill2_episode_renders_real_frames_and_scores_the_last_step(run_cell, media_root):
    attempt = run_cell(benchmark="maniskill2", task="pick_cube", policy="noop", seed=0, budget_mode="decisions",
                       max_policy_calls=4)
    assert attempt.campaign.protocol.protocol_id == "maniskill2-development/rgb/decision-4-prefix-5/v1"
    assert (attempt.outcome, attempt.environment_steps, attempt.termination_reason) == ("task_failure", 20, "call_budget")
    # Success is the last executed step's own flag.
    assert attempt.success is attempt.steps.order_by("-index").first().native_success is False
    frames = _frames(attempt, media_root)
    assert len(frames) == 4 and frames[0].shape == (480, 640, 3)
    for frame in frames:  # real renders: not blank, not a flat colour
        assert frame.std() > 5 and len(np.unique(frame.reshape(-1, 3), axis=0)) > 200
    packages = attempt.provenance["worker"]["describe"]["packages"]
    assert (packages["sapien"], packages["mani_skill2"]) == ("2.2.2", "0.5.3") and packages["numpy"].startswith("1.")
    assert attempt.provenance["worker"]["env"]["VK_INSTANCE_LAYERS"] == "VK_LAYER_RSI_external_fd_stub"
    assert "not the NVIDIA reference renderer" in attempt.provenance["rendering"]["caveat"]


class NanArm(Policy):
    def act(self, message):
        return PolicyReply({"actions": [[0.0, math.nan, 0.0, 0.0, 0.0, 0.0, 0.0]]})


def test_a_bad_action_never_reaches_the_sapien_env(run_cell, register_policy):
    register_policy("nan-arm", NanArm)
    attempt = run_cell(benchmark="maniskill2", task="lift_cube", policy="nan-arm", seed=1)
    assert (attempt.outcome, attempt.error_type) == ("contract_violation", "non_finite")
    assert attempt.provenance["worker"]["closed"]["native_steps"] == 0


class KillAtThirdCall(Policy):
    def start_episode(self, start):
        self.calls = 0

    def act(self, message):
        self.calls += 1
        if self.calls == 3:
            for pid in child_workers("environment/workers/sapien_worker.py"):
                os.kill(pid, signal.SIGKILL)
        return PolicyReply({"actions": [[0.0] * 7] * 5})


def test_a_sapien_worker_killed_mid_episode_is_an_infrastructure_error(run_cell, register_policy):
    register_policy("killer", KillAtThirdCall)
    attempt = run_cell(benchmark="maniskill2", task="stack_cube", policy="killer", seed=2)
    assert (attempt.outcome, attempt.error_type) == ("infrastructure_error", "worker_lost")
    assert attempt.environment_steps == 10 and attempt.artifacts.filter(kind="video").exists()


def test_without_the_layer_lavapipe_is_a_typed_render_device_error(run_cell, monkeypatch):
    monkeypatch.setenv("RSI_VULKAN_LAYER", "off")
    attempt = run_cell(benchmark="maniskill2", task="pick_cube", policy="noop", seed=0)
    assert (attempt.outcome, attempt.error_type) == ("infrastructure_error", "render_device_unavailable")
    assert "ErrorExtensionNotPresent" in attempt.error_detail
    assert attempt.environment_steps == 0


def test_doctor_gives_the_verdict_with_and_without_the_layer(monkeypatch):
    from evaluator.doctor import diagnose

    monkeypatch.setenv("RSI_VULKAN_LAYER", "on")
    with_layer = diagnose()
    assert with_layer["vulkan_layer"]["enabled"] and with_layer["sapien_renderer"]["ok"]
    assert with_layer["benchmarks"]["maniskill2"]["ready"]
    assert "lavapipe" in with_layer["benchmarks"]["maniskill2"]["note"]
    assert with_layer["vulkan"]["external_fd"]  # the layer advertises the two extensions
    monkeypatch.setenv("RSI_VULKAN_LAYER", "off")
    without = diagnose()
    assert not without["sapien_renderer"]["ok"] and not without["vulkan"]["external_fd"]
    assert not without["benchmarks"]["maniskill2"]["ready"]
    assert without["benchmarks"]["maniskill2"]["reason"].startswith("RenderDeviceUnavailable")
    assert "ErrorExtensionNotPresent" in without["benchmarks"]["maniskill2"]["reason"]
    assert with_layer["benchmarks"]["fetch"]["ready"] and not with_layer["benchmarks"]["simple_humanoid"]["ready"]


def test_simpler_env_without_the_pinned_upstream_is_an_install_error_before_any_control(run_cell):
    # Here .venv-sapien holds ManiSkill2 0.5.3 but not the pinned SimplerEnv upstream.
    attempt = run_cell(benchmark="simpler_env", task="widowx_spoon_on_towel", policy="noop", seed=1)
    assert (attempt.outcome, attempt.error_type) == ("infrastructure_error", "install")
    assert "simpler_env is not installed here" in attempt.error_detail
    assert attempt.environment_steps == 0 and attempt.policy_calls == 0
