"""Worker request timeouts fit the renderer: per benchmark and per task, scaled when the only Vulkan
device is the CPU, overridable by setting, and recorded in provenance (issue "Fidelity and
recovery", point 4: a ray-traced SimplerEnv step took 41 s on a 2-core CPU against a 60 s limit)."""

import pytest

from evaluator.native import backends, environment
from evaluator.native.backends import worker_spec
from evaluator.native.environment import BadWorkerSetting
from evaluator.protocol.catalogs import load_catalog

SIMPLER = load_catalog("simpler_env")
RASTER = SIMPLER.task("google_robot_pick_horizontal_coke_can").details
RAY_TRACED = SIMPLER.task("google_robot_open_top_drawer").details
GPU = {"available": True, "reason": "", "devices": [{"name": "NVIDIA H200", "type": "discrete_gpu"}]}


def test_fetch_keeps_its_own_limits_whatever_the_vulkan_device():
    spec = worker_spec("fetch", {})
    assert dict(spec.timeouts) == backends.BACKENDS["fetch"].timeouts
    assert spec.timeout_basis == "reference hardware"


def test_sapien_limits_are_scaled_on_lavapipe_and_recorded_with_the_reason():
    assert RASTER["shader"] != "rt" and RAY_TRACED["shader"] == "rt"
    raster, ray_traced = worker_spec("simpler_env", RASTER), worker_spec("simpler_env", RAY_TRACED)
    # This machine's only Vulkan device is lavapipe: reset and step get ten times the GPU limits.
    assert raster.timeouts["step"] == 600.0 and raster.timeouts["reset"] == 6000.0
    assert ray_traced.timeouts["step"] == 1200.0  # a ray-traced task's own limit, scaled
    assert raster.timeouts["describe"] == 60.0 and raster.timeouts["close"] == 30.0
    assert raster.timeout_basis == "the only Vulkan device is the CPU: reset and step x10"


def test_on_a_gpu_the_reference_limits_hold(monkeypatch):
    monkeypatch.setattr(environment, "vulkan_devices", lambda env=None: GPU)
    assert worker_spec("simpler_env", RASTER).timeouts["step"] == 60.0
    assert worker_spec("simpler_env", RAY_TRACED).timeouts["step"] == 120.0


def test_settings_override_the_factor_and_each_request(monkeypatch):
    monkeypatch.setenv("RSI_CPU_RENDER_TIMEOUT_FACTOR", "3")
    monkeypatch.setenv("RSI_WORKER_TIMEOUTS", "reset=900, step=45")
    spec = worker_spec("maniskill2", {})
    assert (spec.timeouts["reset"], spec.timeouts["step"]) == (900.0, 45.0)
    assert spec.timeout_basis.endswith("x3; RSI_WORKER_TIMEOUTS=reset=900, step=45")


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("RSI_WORKER_TIMEOUTS", "steps=10", "'steps' is not one of describe, reset, step, close"),
        ("RSI_WORKER_TIMEOUTS", "step=-1", "must be a number of seconds"),
        ("RSI_WORKER_TIMEOUTS", "step=nan", "must be a number of seconds"),
        ("RSI_CPU_RENDER_TIMEOUT_FACTOR", "ten", "RSI_CPU_RENDER_TIMEOUT_FACTOR must be a number"),
    ],
)
def test_a_bad_timeout_setting_is_refused_with_its_reason(monkeypatch, name, value, message):
    monkeypatch.setenv(name, value)
    with pytest.raises(BadWorkerSetting, match=message):
        worker_spec("maniskill2", {})


def test_an_attempt_under_a_bad_setting_ends_before_any_control(run_cell, monkeypatch):
    monkeypatch.setenv("RSI_WORKER_TIMEOUTS", "step=0")
    attempt = run_cell(policy="noop")
    assert (attempt.outcome, attempt.error_type) == ("infrastructure_error", "install")
    assert "RSI_WORKER_TIMEOUTS step must be a number of seconds" in attempt.error_detail
    assert attempt.policy_calls == 0 and attempt.environment_steps == 0
