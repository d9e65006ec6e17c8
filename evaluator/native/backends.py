"""The host side of each benchmark, one registry entry per backend: its native worker script and
interpreter, the worker's environment and request timeouts, what the worker needs to build and reset
a task's env, and its probe of whether it can run here (native/probes.py). The protocol side of the same benchmark
(identity family, sensor arrays, action contracts, catalog schema) is its entry in
evaluator/protocol/registry.py; environment/README.md has the checklist for adding one.

RSI_FETCH_PYTHON   interpreter of the Fetch worker (default: the evaluator's own)
RSI_SAPIEN_PYTHON  interpreter of the SAPIEN worker (default: .venv-sapien/bin/python, `make sapien-env`)
RSI_SIMPLE_CHECKOUT  the pinned SIMPLE checkout (environment/README.md, "SIMPLE")
RSI_SIMPLE_PYTHON  interpreter of the SIMPLE worker (default: the checkout's own .venv/bin/python)
(the worker environment's settings: evaluator/native/environment.py)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from evaluator.native import probes
from evaluator.native.client import WorkerSpec
from evaluator.native.environment import (
    LAYER_NAME,
    ROOT,
    WORKERS_DIR,
    mujoco_gl,
    renders_on_cpu,
    scaled_timeouts,
    simple_checkout,
    simpler_pins,
    vulkan_layer_env,
)
from evaluator.protocol.catalogs import plain
from evaluator.protocol.errors import UnknownBenchmark

# Ray-traced SimplerEnv tasks (shader "rt") step slower than the SAPIEN default below.
RAY_TRACED_STEP = 120.0


def _no_options(task, catalog, full_cell: dict | None) -> dict:
    return {}


def _maniskill2_options(task, catalog, full_cell: dict | None) -> dict:
    return {"family": "maniskill2", "camera": task.camera, "control_mode": catalog.settings["control_mode"]}


def _simple_humanoid_options(task, catalog, full_cell: dict | None) -> dict:
    fast = catalog.settings["fast_mode"]
    return {
        "family": "simple_humanoid",
        "task": task.name,
        "backend": task.details["backend"],
        "dr_level": fast["dr_level"],
        "episode_index": fast["released_episode_index"],
        "max_initialization_controls": catalog.settings["backends"]["sonic"]["max_initialization_controls"],
        "pinned_revision": catalog.upstream["simple"]["revision"],
        "expected_files": plain(catalog.settings["inventory"]),
    }


def _simpler_env_options(task, catalog, full_cell: dict | None) -> dict:
    options = {
        "family": "simpler_env",
        "env_id": task.name,  # the adapter builds by alias
        "camera": task.camera,
        "required_assets": list(task.details.get("required_assets", [])),
        "pinned_revisions": simpler_pins(catalog),
    }
    if full_cell:  # a cell of a full matrix: its own env id, kwargs and assets (the build), its reset options
        options.update(
            env_id=full_cell["env_id"],
            full_cell={key: full_cell[key] for key in ("env_id", "build_kwargs")},
            cell_reset={key: full_cell[key] for key in ("key", "reset_options")},
            required_assets=list(full_cell["assets"]),
        )
    return options


@dataclass(frozen=True)
class Backend:
    name: str
    script: str  # its native worker under environment/workers
    python_setting: str  # the environment variable that names the worker's interpreter
    default_python: Callable[[], str]
    environment: Callable[[str], dict[str, str]]  # interpreter -> what the worker's environment adds
    timeouts: Mapping[str, float]  # seconds per request on the reference hardware
    renders_with_vulkan: bool  # CPU-fallback timeouts and the rendering caveat apply
    options: Callable[[Any, Any, dict | None], dict]  # (task, catalog, full cell) -> what its worker needs
    verdict: Callable[[str], dict]  # interpreter -> can it run here, and why not (doctor's check)
    # Its worker may serve the next cell of the same build (native/warm.py): only where a reused env is proven
    # equal to a fresh build at every step (tests/test_warm_workers.py, docs/warm_workers.md).
    reuse: bool = False
    # Where its evidence goes inside the policy's own folder; empty: the shared attempts/ folder.
    results_namespace: str = ""

    def python(self) -> str:
        return os.environ.get(self.python_setting) or self.default_python()


SAPIEN_TIMEOUTS = {"describe": 60.0, "reset": 600.0, "step": 60.0, "close": 30.0}


def _sapien_python() -> str:
    return str(ROOT / ".venv-sapien" / "bin" / "python")


def _simple_python() -> str:
    checkout = simple_checkout()
    return str(checkout / ".venv" / "bin" / "python") if checkout else ""


def _simple_environment(python: str) -> dict[str, str]:
    checkout = simple_checkout()
    return {"RSI_SIMPLE_CHECKOUT": str(checkout or ""), "MUJOCO_GL": mujoco_gl(python) if python else "egl"}


def _sapien_backend(name: str, options, verdict) -> Backend:
    """ManiSkill2 and SimplerEnv share the SAPIEN worker and its interpreter; their options and checks differ."""
    return Backend(
        name=name,
        script="sapien_worker.py",
        python_setting="RSI_SAPIEN_PYTHON",
        default_python=_sapien_python,
        environment=lambda python: vulkan_layer_env(),
        timeouts=SAPIEN_TIMEOUTS,
        renders_with_vulkan=True,
        options=options,
        verdict=verdict,
        reuse=True,
    )


BACKENDS: dict[str, Backend] = {
    b.name: b
    for b in (
        Backend(
            name="fetch",
            script="fetch_worker.py",
            python_setting="RSI_FETCH_PYTHON",
            default_python=lambda: sys.executable,
            environment=lambda python: {"MUJOCO_GL": mujoco_gl(python)},
            timeouts={"describe": 60.0, "reset": 120.0, "step": 30.0, "close": 30.0},
            renders_with_vulkan=False,
            options=_no_options,
            verdict=probes.fetch_verdict,
            reuse=True,
        ),
        _sapien_backend("maniskill2", _maniskill2_options, probes.maniskill2_verdict),
        _sapien_backend("simpler_env", _simpler_env_options, probes.simpler_env_verdict),
        # AMO loads its TorchScript controller and runs 60 standing controls inside reset. Never reused: SIMPLE draws
        # from the process's global generators and builds its scene in reset (docs/warm_workers.md).
        Backend(
            name="simple_humanoid",
            script="simple_worker.py",
            python_setting="RSI_SIMPLE_PYTHON",
            default_python=_simple_python,
            environment=_simple_environment,
            timeouts={"describe": 60.0, "reset": 600.0, "step": 60.0, "close": 30.0},
            renders_with_vulkan=False,
            options=_simple_humanoid_options,
            verdict=probes.simple_humanoid_verdict,
            # The spec keeps SIMPLE's evidence "under the selected model's results/simple_humanoid/ namespace".
            results_namespace="results/simple_humanoid",
        ),
    )
}


def backend(benchmark: str) -> Backend:
    try:
        return BACKENDS[benchmark]
    except KeyError:
        raise UnknownBenchmark(f"no native worker for {benchmark!r} on this host") from None


def worker_spec(benchmark: str, task_details: Mapping | None = None) -> WorkerSpec:
    """The worker of a benchmark; with a task's catalog details, its request timeouts too."""
    entry = backend(benchmark)
    python = entry.python()
    env = {**entry.environment(python), **render_device()}
    base = dict(entry.timeouts)
    if (task_details or {}).get("shader") == "rt":
        base["step"] = RAY_TRACED_STEP
    cpu_fallback = entry.renders_with_vulkan and task_details is not None and renders_on_cpu(env)
    timeouts, basis = scaled_timeouts(base, cpu_fallback)
    return WorkerSpec(benchmark, python, WORKERS_DIR / entry.script, env, timeouts, basis)


def render_device() -> dict:
    """RSI_RENDER_DEVICE=N: the native workers render on GPU N alone (CUDA's and MuJoCo's EGL index), whatever device
    a policy's model host uses (its spec's `device`), so that inference and rendering need not share a GPU."""
    device = os.environ.get("RSI_RENDER_DEVICE", "").strip()  # checked at start-up (rsi_site/settings.py)
    return {"CUDA_VISIBLE_DEVICES": device, "MUJOCO_EGL_DEVICE_ID": device} if device else {}


def benchmark_verdict(benchmark: str) -> dict:
    """Whether this host can run one benchmark, and why not: doctor's check for that benchmark alone."""
    entry = backend(benchmark)
    return entry.verdict(entry.python())


def rendering_provenance(benchmark: str, env: dict) -> dict:
    """How this attempt's pictures were made, when that is not the upstream's reference renderer."""
    if not backend(benchmark).renders_with_vulkan or env.get("VK_INSTANCE_LAYERS") != LAYER_NAME:
        return {}
    return {
        "renderer": "Mesa lavapipe (CPU) with RSI's Vulkan layer VK_LAYER_RSI_external_fd_stub",
        "caveat": "not the NVIDIA reference renderer; "
        "ray tracing without the OptiX denoiser is not an equivalent repair",
    }


def reset_options(benchmark: str, task, evaluation_horizon: int, catalog, full_cell: dict | None = None) -> dict:
    """What the benchmark's worker needs to build and reset the env of a catalog task, or of a cell of a
    full SimplerEnv matrix."""
    options = {"env_id": task.env_id, "instruction": task.instruction, "max_episode_steps": evaluation_horizon}
    return {**options, **backend(benchmark).options(task, catalog, full_cell)}
