"""How a native worker's environment is made on this host: MuJoCo's GL backend, RSI's Vulkan layer for
lavapipe, and request timeouts (scaled where the only Vulkan device is the CPU). Shared by every backend
of the registry (evaluator/native/backends.py) and by doctor's checks.

MUJOCO_GL          egl or osmesa; when unset RSI probes EGL first, then OSMesa
RSI_VULKAN_LAYER   on | off: load RSI's Vulkan layer for lavapipe (default: on when it is built)
RSI_WORKER_TIMEOUTS          e.g. "reset=900,step=120": seconds per request, overriding everything below
RSI_CPU_RENDER_TIMEOUT_FACTOR  how much longer Vulkan-rendered requests may take when the only Vulkan
                               device is the CPU (lavapipe); default 10
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from evaluator.native.child_env import child_environment
from evaluator.protocol.errors import ProtocolError

ROOT = Path(__file__).resolve().parents[2]
WORKERS_DIR = ROOT / "environment" / "workers"
LAYER_DIR = ROOT / "environment" / "vulkan" / "build"
LAYER_NAME = "VK_LAYER_RSI_external_fd_stub"
VULKAN_PROBE = ROOT / "environment" / "vulkan" / "probe.py"
# Measured on a 2-core CPU: a ray-traced SimplerEnv step 41 s, a reset past 600 s under load.
CPU_RENDER_FACTOR = 10.0


class BadWorkerSetting(ProtocolError):
    """A native worker setting (RSI_WORKER_TIMEOUTS, RSI_CPU_RENDER_TIMEOUT_FACTOR, RSI_WARM_*) is not what it must
    be."""


_GL_PROBE = "import mujoco; c = mujoco.GLContext(8, 8); c.make_current(); c.free()"


@functools.cache
def mujoco_gl(python: str) -> str:
    """The MuJoCo rendering backend for this interpreter: explicit, else the first that works."""
    if explicit := os.environ.get("MUJOCO_GL"):
        return explicit
    for backend in ("egl", "osmesa"):
        probe = subprocess.run(
            [python, "-c", _GL_PROBE], env=child_environment({"MUJOCO_GL": backend}), capture_output=True, timeout=60
        )
        if probe.returncode == 0:
            return backend
    return "egl"  # neither works: the worker then fails with a typed render error


def scaled_timeouts(base: Mapping[str, float], cpu_fallback: bool) -> tuple[dict[str, float], str]:
    """The seconds each request may take here, and on what basis."""
    base = dict(base)
    basis = "reference hardware"
    if cpu_fallback:
        raw_factor = os.environ.get("RSI_CPU_RENDER_TIMEOUT_FACTOR", "10")
        factor = positive_seconds("RSI_CPU_RENDER_TIMEOUT_FACTOR", raw_factor)
        base = {op: seconds * factor if op in ("reset", "step") else seconds for op, seconds in base.items()}
        basis = f"the only Vulkan device is the CPU: reset and step x{factor:g}"
    override = os.environ.get("RSI_WORKER_TIMEOUTS", "").strip()
    if override:
        for item in override.split(","):
            op, _, seconds = item.partition("=")
            if op.strip() not in base:
                raise BadWorkerSetting(f"RSI_WORKER_TIMEOUTS: {op.strip()!r} is not one of {', '.join(base)}")
            base[op.strip()] = positive_seconds(f"RSI_WORKER_TIMEOUTS {op.strip()}", seconds)
        basis += f"; RSI_WORKER_TIMEOUTS={override}"
    return base, basis


def positive_seconds(name: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not 0 < value < 1e6:
        raise BadWorkerSetting(f"{name} must be a number of seconds in (0, 1e6), got {raw!r}")
    return value


@functools.cache
def _vulkan_probe(env_items: frozenset) -> dict:
    try:
        result = subprocess.run(
            [sys.executable, str(VULKAN_PROBE)],
            env=child_environment(dict(env_items)),
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


def simple_checkout() -> Path | None:
    """The pinned SIMPLE checkout RSI_SIMPLE_CHECKOUT names, if any."""
    raw = os.environ.get("RSI_SIMPLE_CHECKOUT", "").strip()
    return Path(raw) if raw else None


def simpler_pins(catalog) -> dict[str, str]:
    """The upstream revisions the SimplerEnv protocol pins, by installed distribution name."""
    upstream = catalog.provenance["upstream"]
    return {
        "simpler_env": upstream["simpler_env"]["revision"],
        "mani_skill2_real2sim": upstream["maniskill2_real2sim"]["revision"],
    }
