"""Rendering and runtime preflight: what each benchmark would run on here, and why not if it cannot.

Every check runs the real thing in a subprocess (a Vulkan device listing, SAPIEN creating its
renderer in the SAPIEN environment, MuJoCo making a GL context), so the verdicts are observed,
not inferred from package lists. environment/RENDERING.md explains each finding.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

from evaluator.benchmarks import LAYER_DIR, ROOT, mujoco_gl, vulkan_layer_env, worker_spec

OPTIX_FILES = ("/usr/share/nvidia/nvoptix.bin",)
SAPIEN_PROBE = "import sapien.core as s; s.SapienRenderer(offscreen_only=True); print('renderer ok')"
SIMPLER_PROBE = (
    "import json, importlib.metadata as m\n"
    "out = {}\n"
    "for name in ('simpler_env', 'mani_skill2_real2sim'):\n"
    "    try:\n"
    "        d = m.distribution(name); out[name] = {'version': d.version, 'direct_url': d.read_text('direct_url.json')}\n"
    "    except m.PackageNotFoundError:\n"
    "        out[name] = None\n"
    "print(json.dumps(out))"
)


def _run(command: list[str], env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def vulkan_devices(env: dict | None = None) -> dict:
    if not shutil.which("vulkaninfo"):
        return {"available": False, "reason": "vulkaninfo not installed (Debian package vulkan-tools)", "devices": []}
    summary = _run(["vulkaninfo", "--summary"], env)
    names = re.findall(r"deviceName\s*=\s*(.+)", summary.stdout)
    types = re.findall(r"deviceType\s*=\s*(\S+)", summary.stdout)
    drivers = re.findall(r"driverName\s*=\s*(\S+)", summary.stdout)
    full = _run(["vulkaninfo"], env).stdout
    return {
        "available": bool(names),
        "devices": [{"name": n.strip(), "type": t, "driver": d} for n, t, d in zip(names, types, drivers)],
        "ray_tracing": "VK_KHR_ray_tracing_pipeline" in full,
        "external_fd": all(x in full for x in ("VK_KHR_external_semaphore_fd", "VK_KHR_external_fence_fd")),
        "reason": "" if names else (summary.stderr.strip().splitlines() or ["no Vulkan device"])[-1],
    }


def sapien_renderer(python: str, layer: bool) -> dict:
    if not Path(python).exists():
        return {"ok": False, "reason": f"no SAPIEN environment at {python} (make sapien-env)"}
    result = _run([python, "-c", SAPIEN_PROBE], vulkan_layer_env() if layer else {"VK_INSTANCE_LAYERS": ""})
    lines = (result.stderr or result.stdout).strip().splitlines()
    return {"ok": result.returncode == 0 and "renderer ok" in result.stdout,
            "reason": "" if result.returncode == 0 else (lines[-1] if lines else f"exit {result.returncode}")}


def diagnose() -> dict:
    sapien = worker_spec("maniskill2").python
    layer_built = (LAYER_DIR / "rsi_external_fd_layer.json").exists()
    layer_on = bool(vulkan_layer_env())
    devices = vulkan_devices(vulkan_layer_env() if layer_on else None)
    renderer = sapien_renderer(sapien, layer_on)
    gl = mujoco_gl(worker_spec("fetch").python)
    gl_ok = _run([worker_spec("fetch").python, "-c", "import mujoco; c = mujoco.GLContext(8, 8); c.make_current()"],
                 {"MUJOCO_GL": gl}).returncode == 0
    simpler = _run([sapien, "-c", SIMPLER_PROBE]) if Path(sapien).exists() else None
    simpler_packages = {}
    if simpler is not None and simpler.returncode == 0:
        import json

        simpler_packages = json.loads(simpler.stdout)
    cpu_only = bool(devices["devices"]) and all(d["driver"] == "llvmpipe" for d in devices["devices"])
    render_note = ""
    if cpu_only:
        render_note = "lavapipe (CPU)" + (", through RSI's Vulkan layer" if layer_on else "")
        render_note += ": not the NVIDIA reference renderer"
    sapien_versions = {}
    if Path(sapien).exists():
        listing = _run([sapien, "-m", "pip", "list", "--format=freeze"]).stdout
        sapien_versions = {name.lower().replace("_", "-"): version
                           for name, version in (line.split("==", 1) for line in listing.splitlines() if "==" in line)}

    def verdict(ready: bool, reason: str, note: str = "") -> dict:
        return {"ready": ready, "reason": reason, "note": note}

    benchmarks = {
        "fetch": verdict(gl_ok, f"MuJoCo renders with MUJOCO_GL={gl}" if gl_ok else f"no GL context with MUJOCO_GL={gl}"),
        "maniskill2": verdict(
            renderer["ok"],
            "SAPIEN creates its renderer" if renderer["ok"] else f"RenderDeviceUnavailable: {renderer['reason']}",
            render_note,
        ),
        "simpler_env": verdict(
            renderer["ok"] and all(simpler_packages.get(n) for n in ("simpler_env", "mani_skill2_real2sim")),
            "pinned upstream installed" if all(simpler_packages.get(n) for n in ("simpler_env", "mani_skill2_real2sim"))
            else "the pinned upstream is not installed: pip install -r environment/sapien/requirements-simpler-env.txt "
                 "into .venv-sapien on a host with its assets",
            (render_note + "; " if render_note else "")
            + ("ray tracing (drawer and apple tasks) without the OptiX denoiser is not an equivalent repair"
               if not any(Path(f).exists() for f in OPTIX_FILES) else ""),
        ),
        "simple_humanoid": verdict(False, "no SIMPLE worker on this host: SIMPLE needs its own venv, cuRobo and an "
                                          "RTX-class GPU (upstream_simple_facts.md §4-5)"),
    }
    names = [d["name"] for d in devices["devices"]]
    devices["sapien_would_use"] = (
        names[0] if len(names) == 1 else f"the first suitable of: {', '.join(names)}" if names else None
    )
    return {
        "vulkan": devices,
        "vulkan_layer": {"built": layer_built, "enabled": layer_on, "path": str(LAYER_DIR)},
        "sapien_renderer": renderer,
        "optix_denoiser": {f: Path(f).exists() for f in OPTIX_FILES},
        "mujoco_gl": {"backend": gl, "ok": gl_ok, "MUJOCO_GL_set": os.environ.get("MUJOCO_GL")},
        "environments": {
            "evaluator": {"python": worker_spec("fetch").python,
                          "packages": {n: _version(n) for n in ("mujoco", "gymnasium", "gymnasium-robotics", "numpy")}},
            "sapien": {"python": sapien, "packages": {n: sapien_versions.get(n) for n in
                                                      ("sapien", "mani-skill2", "numpy", "gymnasium")},
                       "pinned": (ROOT / "environment/sapien/requirements.txt").read_text().count("==")},
            "simpler_env_upstream": simpler_packages,
        },
        "benchmarks": benchmarks,
    }


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
