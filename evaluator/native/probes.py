"""Rendering and runtime probes: what each benchmark would run on here, and why not if it cannot.

Every check runs the real thing in a subprocess (the Vulkan loader listing its devices, SAPIEN
creating its renderer in the SAPIEN environment with and without RSI's layer, MuJoCo making a GL
context, the pinned SimplerEnv upstream inventoried by the worker's own checks), so the verdicts
are observed, not inferred from package lists. environment/RENDERING.md explains each finding.
"""

from __future__ import annotations

import json
import os
import subprocess
from importlib import metadata
from pathlib import Path

from evaluator.native.child_env import child_environment
from evaluator.native.environment import (
    LAYER_DIR,
    ROOT,
    WORKERS_DIR,
    mujoco_gl,
    simple_checkout,
    simpler_pins,
    vulkan_devices,
    vulkan_layer_env,
)
from evaluator.protocol.catalogs import load_catalog

OPTIX_FILES = ("/usr/share/nvidia/nvoptix.bin",)
SAPIEN_PROBE = "import sapien.core as s; s.SapienRenderer(offscreen_only=True); print('renderer ok')"
LAYER_OFF = {"VK_INSTANCE_LAYERS": ""}


def _run(command: list[str], env: dict | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=300, env=child_environment(env))


def sapien_renderer(python: str, env: dict) -> dict:
    if not Path(python).exists():
        return {"ok": False, "reason": f"no SAPIEN environment at {python} (make sapien-env)"}
    result = _run([python, "-c", SAPIEN_PROBE], env)
    lines = (result.stderr or result.stdout).strip().splitlines()
    return {
        "ok": result.returncode == 0 and "renderer ok" in result.stdout,
        "reason": "" if result.returncode == 0 else (lines[-1] if lines else f"exit {result.returncode}"),
    }


def simpler_inventory(python: str, assets: dict[str, list[str]] | None = None) -> dict:
    """The worker's own pin and asset checks, for every SimplerEnv task of the catalog (or for the
    groups of asset paths given, e.g. a full matrix's families)."""
    catalog = load_catalog("simpler_env")
    if assets is None:
        assets = {name: list(task.details.get("required_assets", [])) for name, task in catalog.tasks.items()}
    request = {"pinned": simpler_pins(catalog), "assets": assets}
    if not Path(python).exists():
        return {"problems": [f"no SAPIEN environment at {python} (make sapien-env)"], "missing_assets": {}}
    result = _run([python, str(WORKERS_DIR / "simpler_inventory.py")], stdin=json.dumps(request))
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        return {"problems": [lines[-1] if lines else f"exit {result.returncode}"], "missing_assets": {}}
    return json.loads(result.stdout)


def _simpler_verdict(inventory: dict, renderer_ok: bool, render_note: str) -> dict:
    reasons = list(inventory["problems"])
    missing = inventory.get("missing_assets", {})
    if "import_error" in inventory and not any("not installed" in r for r in reasons):
        reasons.append(f"the upstream cannot be imported ({inventory['import_error']})")
    for task, paths in missing.items():
        reasons.append(f"{task} misses {', '.join(paths)}")
    if reasons and any("not installed" in r for r in reasons):
        reasons.append("pip install -r environment/sapien/requirements-simpler-env.txt into .venv-sapien")
    if not renderer_ok:
        reasons.append("SAPIEN cannot create its renderer")
    note = render_note
    if not any(Path(f).exists() for f in OPTIX_FILES):
        note += ("; " if note else "") + "ray tracing (drawer and apple tasks) without the OptiX denoiser "
        note += "is not an equivalent repair"
    ready = not reasons
    reason = (
        f"pinned upstream at {', '.join(f'{d} {r[:7]}' for d, r in inventory['revisions'].items())}, "
        f"every task's assets under {inventory['asset_dir']}"
        if ready
        else "; ".join(reasons)
    )
    return {"ready": ready, "reason": reason, "note": note, "missing_assets": missing}


def _gl_works(python: str, gl: str) -> bool:
    probe = [python, "-c", "import mujoco; c = mujoco.GLContext(8, 8); c.make_current()"]
    return _run(probe, {"MUJOCO_GL": gl}).returncode == 0


def fetch_verdict(python: str) -> dict:
    gl = mujoco_gl(python)
    ok = _gl_works(python, gl)
    return _verdict(ok, f"MuJoCo renders with MUJOCO_GL={gl}" if ok else f"no GL context with MUJOCO_GL={gl}")


def _render_note(devices: list[dict], layer_env: dict) -> str:
    if not (devices and all(d["type"] == "cpu" for d in devices)):
        return ""
    note = "lavapipe (CPU)" + (", through RSI's Vulkan layer" if layer_env else "")
    return note + ": not the NVIDIA reference renderer; SAPIEN request timeouts are scaled for it"


def _sapien_renderer_here(python: str) -> tuple[dict, str]:
    """SAPIEN's renderer as the worker would create it (with RSI's layer when it is on), and a note on it."""
    layer_env = vulkan_layer_env()
    renderer = sapien_renderer(python, layer_env or LAYER_OFF)
    return renderer, _render_note(vulkan_devices(layer_env or LAYER_OFF)["devices"], layer_env)


def maniskill2_verdict(python: str) -> dict:
    renderer, note = _sapien_renderer_here(python)
    reason = "SAPIEN creates its renderer" if renderer["ok"] else f"RenderDeviceUnavailable: {renderer['reason']}"
    return _verdict(renderer["ok"], reason, note)


def simpler_env_verdict(python: str) -> dict:
    renderer, note = _sapien_renderer_here(python)
    return _simpler_verdict(simpler_inventory(python), renderer["ok"], note)


def simple_humanoid_verdict(python: str) -> dict:
    """The SIMPLE worker's own checks that need no SIMPLE import (the checkout, its revision against the
    pin, the controller weights), run with the checkout's interpreter."""
    checkout = simple_checkout()
    if checkout is None:
        return _verdict(
            False, "RSI_SIMPLE_CHECKOUT is not set: the pinned SIMPLE checkout (environment/README.md, 'SIMPLE')"
        )
    if not Path(python).exists():
        return _verdict(False, f"no interpreter at {python}: SIMPLE's own .venv (or set RSI_SIMPLE_PYTHON)")
    catalog = load_catalog("simple_humanoid")
    files = {name: dict(paths) for name, paths in catalog.settings["inventory"].items()}
    request = {"pinned_revision": catalog.upstream["simple"]["revision"], "files": {**files["amo"], **files["sonic"]}}
    result = _run([python, str(WORKERS_DIR / "simple_worker.py"), "--check", str(checkout)], stdin=json.dumps(request))
    if result.returncode != 0:
        lines = (result.stderr or result.stdout).strip().splitlines()
        return _verdict(False, f"the SIMPLE worker's check failed: {lines[-1] if lines else result.returncode}")
    report = json.loads(result.stdout)
    if report["problems"]:
        return _verdict(False, "; ".join(report["problems"]))
    return _verdict(
        True,
        f"SIMPLE checkout {checkout} at {report['revision'][:7]}, controller weights as pinned",
        "MuJoCo only (no Isaac renders); SONIC's WBC interpolates on wall-clock deadlines, as upstream's does",
    )


def diagnose(fetch_python: str, sapien: str) -> dict:
    """What this host offers the workers: Vulkan with and without RSI's layer, SAPIEN's renderer, MuJoCo's
    GL, each interpreter's packages, the SimplerEnv upstream. The verdict per benchmark, and the scale-out
    executor's state, are readiness.doctor.host_report's."""
    layer_built = (LAYER_DIR / "rsi_external_fd_layer.json").exists()
    layer_env = vulkan_layer_env()
    # Both ways, whatever the setting: what the layer changes is the point of the report.
    devices = {"with_layer": vulkan_devices(layer_env or None), "without_layer": vulkan_devices(LAYER_OFF)}
    renderers = {
        "with_layer": sapien_renderer(sapien, layer_env)
        if layer_env
        else {"ok": False, "reason": "the layer is not built or RSI_VULKAN_LAYER=off"},
        "without_layer": sapien_renderer(sapien, LAYER_OFF),
    }
    used = "with_layer" if layer_env else "without_layer"
    vulkan = devices[used]
    gl = mujoco_gl(fetch_python)
    gl_ok = _gl_works(fetch_python, gl)
    sapien_versions = {}
    if Path(sapien).exists():
        listing = _run([sapien, "-m", "pip", "list", "--format=freeze"]).stdout
        sapien_versions = {
            name.lower().replace("_", "-"): version
            for name, version in (line.split("==", 1) for line in listing.splitlines() if "==" in line)
        }
    inventory = simpler_inventory(sapien)
    names = [d["name"] for d in vulkan["devices"]]
    sapien_would_use = names[0] if len(names) == 1 else f"the first suitable of: {', '.join(names)}" if names else None
    return {
        "vulkan": {**devices, "used": used, "sapien_would_use": sapien_would_use},
        "vulkan_layer": {"built": layer_built, "enabled": bool(layer_env), "path": str(LAYER_DIR)},
        "sapien_renderer": {**renderers, "used": used},
        "optix_denoiser": {f: Path(f).exists() for f in OPTIX_FILES},
        "mujoco_gl": {"backend": gl, "ok": gl_ok, "MUJOCO_GL_set": os.environ.get("MUJOCO_GL")},
        "environments": {
            "evaluator": {
                "python": fetch_python,
                "packages": {n: _version(n) for n in ("mujoco", "gymnasium", "gymnasium-robotics", "numpy")},
            },
            "sapien": {
                "python": sapien,
                "packages": {n: sapien_versions.get(n) for n in ("sapien", "mani-skill2", "numpy", "gymnasium")},
                "pinned": (ROOT / "environment/sapien/requirements.txt").read_text().count("=="),
            },
            "simpler_env_upstream": inventory,
        },
    }


def _verdict(ready: bool, reason: str, note: str = "") -> dict:
    return {"ready": ready, "reason": reason, "note": note}


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
