"""Which native worker runs each benchmark, in which interpreter, with which environment.

RSI_FETCH_PYTHON   interpreter of the Fetch worker (default: the evaluator's own)
MUJOCO_GL          egl or osmesa; when unset RSI probes EGL first, then OSMesa
RSI_SAPIEN_PYTHON  interpreter of the SAPIEN worker (default: .venv-sapien/bin/python, `make sapien-env`)
RSI_VULKAN_LAYER   on | off: load RSI's Vulkan layer for lavapipe (default: on when it is built)
RSI_WORKER_TIMEOUTS          e.g. "reset=900,step=120": seconds per request, overriding everything below
RSI_CPU_RENDER_TIMEOUT_FACTOR  how much longer SAPIEN requests may take when the only Vulkan device is
                               the CPU (lavapipe); default 10
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from evaluator.native import WorkerSpec
from evaluator.protocol.errors import ProtocolError, UnknownBenchmark

ROOT = Path(__file__).resolve().parents[1]
WORKERS_DIR = ROOT / "environment" / "workers"
LAYER_DIR = ROOT / "environment" / "vulkan" / "build"
LAYER_NAME = "VK_LAYER_RSI_external_fd_stub"
SAPIEN_FAMILIES = ("maniskill2", "simpler_env")

VULKAN_PROBE = ROOT / "environment" / "vulkan" / "probe.py"
# Seconds each worker request may take on the reference hardware (a GPU host for SAPIEN; MuJoCo's
# Fetch renders on the CPU everywhere). Ray-traced SimplerEnv tasks (shader "rt") step slower.
TIMEOUTS = {
    "fetch": {"describe": 60.0, "reset": 120.0, "step": 30.0, "close": 30.0},
    "sapien": {"describe": 60.0, "reset": 600.0, "step": 60.0, "close": 30.0},
}
RAY_TRACED_STEP = 120.0
# Measured on a 2-core CPU: a ray-traced SimplerEnv step 41 s, a reset past 600 s under load.
CPU_RENDER_FACTOR = 10.0


class BadTimeoutSetting(ProtocolError):
    """RSI_WORKER_TIMEOUTS or RSI_CPU_RENDER_TIMEOUT_FACTOR is not what it must be."""


_GL_PROBE = "import mujoco; c = mujoco.GLContext(8, 8); c.make_current(); c.free()"


@functools.cache
def mujoco_gl(python: str) -> str:
    """The MuJoCo rendering backend for this interpreter: explicit, else the first that works."""
    if explicit := os.environ.get("MUJOCO_GL"):
        return explicit
    for backend in ("egl", "osmesa"):
        probe = subprocess.run(
            [python, "-c", _GL_PROBE], env={**os.environ, "MUJOCO_GL": backend}, capture_output=True, timeout=60
        )
        if probe.returncode == 0:
            return backend
    return "egl"  # neither works: the worker then fails with a typed render error


def worker_spec(benchmark: str, task_details: Mapping | None = None) -> WorkerSpec:
    """The worker of a benchmark; with a task's catalog details, its request timeouts too."""
    if benchmark == "fetch":
        python = os.environ.get("RSI_FETCH_PYTHON", sys.executable)
        env = {"MUJOCO_GL": mujoco_gl(python)}
        script, base, cpu_fallback = "fetch_worker.py", dict(TIMEOUTS["fetch"]), False
    elif benchmark in SAPIEN_FAMILIES:
        python = os.environ.get("RSI_SAPIEN_PYTHON", str(ROOT / ".venv-sapien" / "bin" / "python"))
        env = vulkan_layer_env()
        script, base = "sapien_worker.py", dict(TIMEOUTS["sapien"])
        if (task_details or {}).get("shader") == "rt":
            base["step"] = RAY_TRACED_STEP
        cpu_fallback = task_details is not None and renders_on_cpu(env)
    else:
        raise UnknownBenchmark(f"no native worker for {benchmark!r} on this host")
    timeouts, basis = _timeouts(base, cpu_fallback)
    return WorkerSpec(benchmark, python, WORKERS_DIR / script, env, timeouts, basis)


def _timeouts(base: dict[str, float], cpu_fallback: bool) -> tuple[dict[str, float], str]:
    basis = "reference hardware"
    if cpu_fallback:
        factor = _positive("RSI_CPU_RENDER_TIMEOUT_FACTOR", os.environ.get("RSI_CPU_RENDER_TIMEOUT_FACTOR", "10"))
        base = {op: seconds * factor if op in ("reset", "step") else seconds for op, seconds in base.items()}
        basis = f"the only Vulkan device is the CPU: reset and step x{factor:g}"
    override = os.environ.get("RSI_WORKER_TIMEOUTS", "").strip()
    if override:
        for item in override.split(","):
            op, _, seconds = item.partition("=")
            if op.strip() not in base:
                raise BadTimeoutSetting(f"RSI_WORKER_TIMEOUTS: {op.strip()!r} is not one of {', '.join(base)}")
            base[op.strip()] = _positive(f"RSI_WORKER_TIMEOUTS {op.strip()}", seconds)
        basis += f"; RSI_WORKER_TIMEOUTS={override}"
    return base, basis


def _positive(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1e6:
        raise BadTimeoutSetting(f"{name} must be a number of seconds in (0, 1e6), got {raw!r}")
    return value


@functools.cache
def _vulkan_probe(env_items: frozenset) -> dict:
    try:
        result = subprocess.run(
            [sys.executable, str(VULKAN_PROBE)],
            env={**os.environ, **dict(env_items)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        return json.loads(result.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        return {"available": False, "reason": f"the Vulkan probe failed: {exc}", "devices": []}


def vulkan_devices(env: Mapping[str, str] | None = None) -> dict:
    """What the Vulkan loader offers under `env` (RSI's layer or not), asked in a subprocess."""
    return _vulkan_probe(frozenset((env or {}).items()))


def renders_on_cpu(env: Mapping[str, str]) -> bool:
    devices = vulkan_devices(env)["devices"]
    return bool(devices) and all(d["type"] == "cpu" for d in devices)


def vulkan_layer_env() -> dict[str, str]:
    """The environment that loads RSI's lavapipe layer, when it is built and not switched off."""
    wanted = os.environ.get("RSI_VULKAN_LAYER", "on") != "off"
    if not (wanted and (LAYER_DIR / "rsi_external_fd_layer.json").exists()):
        return {}
    return {"VK_LAYER_PATH": str(LAYER_DIR), "VK_INSTANCE_LAYERS": LAYER_NAME}


def rendering_provenance(benchmark: str, env: dict) -> dict:
    """How this attempt's pictures were made, when that is not the upstream's reference renderer."""
    if benchmark not in SAPIEN_FAMILIES or env.get("VK_INSTANCE_LAYERS") != LAYER_NAME:
        return {}
    return {
        "renderer": "Mesa lavapipe (CPU) with RSI's Vulkan layer VK_LAYER_RSI_external_fd_stub",
        "caveat": "not the NVIDIA reference renderer; "
        "ray tracing without the OptiX denoiser is not an equivalent repair",
    }


def reset_options(benchmark: str, task, evaluation_horizon: int, catalog, full_cell: dict | None = None) -> dict:
    """What the benchmark's worker needs to build and reset the env of a catalog task, or of a cell of a
    full SimplerEnv matrix (its own env id, kwargs, reset options and assets)."""
    options = {"env_id": task.env_id, "instruction": task.instruction, "max_episode_steps": evaluation_horizon}
    if benchmark == "maniskill2":
        options.update(family="maniskill2", camera=task.camera, control_mode=catalog.settings["control_mode"])
    elif benchmark == "simpler_env":
        options.update(
            family="simpler_env",
            env_id=task.name,  # the adapter builds by alias
            camera=task.camera,
            required_assets=list(task.details.get("required_assets", [])),
            pinned_revisions=simpler_pins(catalog),
        )
        if full_cell:
            cell = {key: full_cell[key] for key in ("key", "env_id", "build_kwargs", "reset_options")}
            options.update(env_id=full_cell["key"], full_cell=cell, required_assets=list(full_cell["assets"]))
    return options


def simpler_pins(catalog) -> dict[str, str]:
    """The upstream revisions the SimplerEnv protocol pins, by installed distribution name."""
    upstream = catalog.provenance["upstream"]
    return {
        "simpler_env": upstream["simpler_env"]["revision"],
        "mani_skill2_real2sim": upstream["maniskill2_real2sim"]["revision"],
    }
