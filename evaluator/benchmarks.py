"""Which native worker runs each benchmark, in which interpreter, with which environment.

RSI_FETCH_PYTHON   interpreter of the Fetch worker (default: the evaluator's own)
MUJOCO_GL          egl or osmesa; when unset RSI probes EGL first, then OSMesa
RSI_SAPIEN_PYTHON  interpreter of the SAPIEN worker (default: .venv-sapien/bin/python, `make sapien-env`)
RSI_VULKAN_LAYER   on | off: load RSI's Vulkan layer for lavapipe (default: on when it is built)
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

from evaluator.native import WorkerSpec
from evaluator.protocol.errors import UnknownBenchmark

ROOT = Path(__file__).resolve().parents[1]
WORKERS_DIR = ROOT / "environment" / "workers"
LAYER_DIR = ROOT / "environment" / "vulkan" / "build"
LAYER_NAME = "VK_LAYER_RSI_external_fd_stub"
SAPIEN_FAMILIES = ("maniskill2", "simpler_env")

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


def worker_spec(benchmark: str) -> WorkerSpec:
    if benchmark == "fetch":
        python = os.environ.get("RSI_FETCH_PYTHON", sys.executable)
        return WorkerSpec(
            benchmark="fetch",
            python=python,
            script=WORKERS_DIR / "fetch_worker.py",
            env={"MUJOCO_GL": mujoco_gl(python)},
        )
    if benchmark in SAPIEN_FAMILIES:
        return WorkerSpec(
            benchmark=benchmark,
            python=os.environ.get("RSI_SAPIEN_PYTHON", str(ROOT / ".venv-sapien" / "bin" / "python")),
            script=WORKERS_DIR / "sapien_worker.py",
            env=vulkan_layer_env(),
        )
    raise UnknownBenchmark(f"no native worker for {benchmark!r} on this host")


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
        "caveat": "not the NVIDIA reference renderer; ray tracing without the OptiX denoiser is not an equivalent repair",
    }


def reset_options(benchmark: str, task, evaluation_horizon: int, catalog) -> dict:
    """What the benchmark's worker needs to build and reset the env of a catalog task."""
    options = {"env_id": task.env_id, "instruction": task.instruction, "max_episode_steps": evaluation_horizon}
    if benchmark == "maniskill2":
        options.update(family="maniskill2", camera=task.camera, control_mode=catalog.settings["control_mode"])
    elif benchmark == "simpler_env":
        upstream = catalog.provenance["upstream"]
        options.update(
            family="simpler_env",
            env_id=task.name,  # the adapter builds by alias
            camera=task.camera,
            required_assets=list(task.details.get("required_assets", [])),
            pinned_revisions={"simpler_env": upstream["simpler_env"]["revision"],
                              "mani_skill2_real2sim": upstream["maniskill2_real2sim"]["revision"]},
        )
    return options
