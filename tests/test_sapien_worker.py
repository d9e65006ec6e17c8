"""The SAPIEN path for real on this CPU: ManiSkill2 0.5.3 episodes through the SAPIEN worker in
its own interpreter (.venv-sapien), rendered by Mesa's lavapipe with RSI's Vulkan layer
(issue "The SimplerEnv backend": Done when, first point)."""

import json
import math
import os
import signal

import numpy as np
import pytest
from PIL import Image

from evaluator.policies.base import Policy, PolicyReply
from tests.servers.processes import child_workers

pytestmark = pytest.mark.needs("sapien")


def _frames(attempt, media_root):
    return [np.asarray(Image.open(media_root / a.path)) for a in attempt.artifacts.filter(kind="message_image")]


def test_a_maniskill2_episode_renders_real_frames_and_scores_the_last_step(run_cell, media_root):
    attempt = run_cell(
        benchmark="maniskill2", task="pick_cube", policy="noop", seed=0, budget_mode="decisions", max_policy_calls=4
    )
    assert attempt.campaign.protocol.protocol_id == "maniskill2-development/rgb/decision-4-prefix-5/v1"
    assert (attempt.outcome, attempt.environment_steps, attempt.termination_reason) == (
        "task_failure",
        20,
        "call_budget",
    )
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


def test_without_the_layer_lavapipe_is_refused_at_launch_and_a_typed_render_device_error_in_the_worker(
    run_cell, make_attempt, media_root, monkeypatch
):
    from evaluator.protocol.errors import LaunchRefused
    from evaluator.running.recorder import do_run_attempt

    monkeypatch.setenv("RSI_VULKAN_LAYER", "off")
    # "refuse to start cells that nothing can run, with that reason"
    with pytest.raises(LaunchRefused, match="this executor cannot run maniskill2: RenderDeviceUnavailable"):
        run_cell(benchmark="maniskill2", task="pick_cube", policy="noop", seed=0)
    # Should a cell start anyway (made before the host changed), the worker types the failure.
    attempt = do_run_attempt(make_attempt("pick_cube", seed=0, benchmark="maniskill2"))
    assert (attempt.outcome, attempt.error_type) == ("infrastructure_error", "render_device_unavailable")
    assert "ErrorExtensionNotPresent" in attempt.error_detail
    assert attempt.environment_steps == 0


def test_doctor_gives_the_verdict_with_and_without_the_layer(monkeypatch):
    # The device list comes from the Vulkan loader itself (no vulkaninfo), both ways in one report.
    from evaluator.readiness.doctor import host_report

    monkeypatch.setenv("RSI_VULKAN_LAYER", "on")
    report = host_report()
    with_layer, without = report["vulkan"]["with_layer"], report["vulkan"]["without_layer"]
    assert [d["type"] for d in with_layer["devices"]] == ["cpu"] and "llvmpipe" in with_layer["devices"][0]["name"]
    assert with_layer["devices"][0]["external_fd"] and not without["devices"][0]["external_fd"]
    assert report["sapien_renderer"]["with_layer"]["ok"]
    assert "ErrorExtensionNotPresent" in report["sapien_renderer"]["without_layer"]["reason"]
    assert report["benchmarks"]["maniskill2"]["ready"]
    assert "lavapipe" in report["benchmarks"]["maniskill2"]["note"]
    assert report["benchmarks"]["fetch"]["ready"] and not report["benchmarks"]["simple_humanoid"]["ready"]
    monkeypatch.setenv("RSI_VULKAN_LAYER", "off")
    off = host_report()["benchmarks"]["maniskill2"]
    assert not off["ready"] and off["reason"].startswith("RenderDeviceUnavailable")
    assert "ErrorExtensionNotPresent" in off["reason"]


def _fake_upstream(root, revisions: dict, asset_dir, assets: list[str]):
    """A double of the pinned upstream's installed metadata: two importable packages whose
    dist-info records the commit pip would (direct_url.json), and an asset folder."""
    for name, revision in revisions.items():
        (root / name).mkdir(parents=True)
        body = f"from pathlib import Path\nASSET_DIR = Path({str(asset_dir)!r})\n" if name != "simpler_env" else ""
        (root / name / "__init__.py").write_text(body)
        info = root / f"{name}-0.0.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.0.0\n")
        direct = {"url": f"https://example.invalid/{name}", "vcs_info": {"vcs": "git", "commit_id": revision}}
        (info / "direct_url.json").write_text(json.dumps(direct))
    for path in assets:
        target = asset_dir / path.removeprefix("data/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(b"")


def _required_assets():
    from evaluator.protocol.catalogs import load_catalog

    tasks = load_catalog("simpler_env").tasks
    return {name: list(task.details.get("required_assets", [])) for name, task in tasks.items()}


def test_doctor_says_simpler_env_is_not_ready_without_the_upstream():
    from evaluator.readiness.doctor import host_report

    verdict = host_report()["benchmarks"]["simpler_env"]
    assert not verdict["ready"]
    assert "simpler_env is not installed" in verdict["reason"]
    assert "mani_skill2_real2sim is not installed" in verdict["reason"]


def test_doctor_refuses_the_upstream_at_another_revision(tmp_path, monkeypatch):
    from evaluator.native.environment import simpler_pins
    from evaluator.protocol.catalogs import load_catalog
    from evaluator.readiness.doctor import host_report

    pins = simpler_pins(load_catalog("simpler_env"))
    everything = sorted({p for paths in _required_assets().values() for p in paths})
    wrong = {**pins, "simpler_env": "0" * 40}
    _fake_upstream(tmp_path / "site", wrong, tmp_path / "assets", everything)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    verdict = host_report()["benchmarks"]["simpler_env"]
    assert not verdict["ready"] and verdict["missing_assets"] == {}
    assert f"simpler_env is at {'0' * 40}, the protocol pins {pins['simpler_env']}" in verdict["reason"]
    assert "mani_skill2_real2sim" not in verdict["reason"]  # that one is at its pin


def test_doctor_names_each_missing_asset_of_the_pinned_upstream(tmp_path, monkeypatch):
    from evaluator.native.environment import simpler_pins
    from evaluator.protocol.catalogs import load_catalog
    from evaluator.readiness.doctor import host_report

    required = _required_assets()
    everything = sorted({p for paths in required.values() for p in paths})
    absent = "data/hab2_bench_assets/stages/google_pick_coke_can_1_v4.glb"
    assert absent in everything
    present = [p for p in everything if p != absent]
    _fake_upstream(tmp_path / "site", simpler_pins(load_catalog("simpler_env")), tmp_path / "assets", present)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    verdict = host_report()["benchmarks"]["simpler_env"]
    needing = sorted(task for task, paths in required.items() if absent in paths)
    assert needing and sorted(verdict["missing_assets"]) == needing
    assert all(verdict["missing_assets"][task] == [absent] for task in needing)
    assert not verdict["ready"] and f"{needing[0]} misses {absent}" in verdict["reason"]
    (tmp_path / "assets" / absent.removeprefix("data/")).write_bytes(b"")
    assert host_report()["benchmarks"]["simpler_env"]["ready"]  # the same checks pass once it is there


def test_simpler_env_without_the_pinned_upstream_is_refused_at_launch_and_an_install_error_in_the_worker(
    run_cell, make_attempt, media_root
):
    from evaluator.protocol.errors import LaunchRefused
    from evaluator.running.recorder import do_run_attempt

    # Here .venv-sapien holds ManiSkill2 0.5.3 but not the pinned SimplerEnv upstream.
    with pytest.raises(LaunchRefused, match="this executor cannot run simpler_env: .*not installed"):
        run_cell(benchmark="simpler_env", task="widowx_spoon_on_towel", policy="noop", seed=1)
    attempt = do_run_attempt(make_attempt("widowx_spoon_on_towel", seed=1))
    assert (attempt.outcome, attempt.error_type) == ("infrastructure_error", "install")
    assert "simpler_env is not installed here" in attempt.error_detail
    assert attempt.environment_steps == 0 and attempt.policy_calls == 0
