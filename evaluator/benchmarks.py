"""Which native worker runs each benchmark, in which interpreter, with which environment.

RSI_FETCH_PYTHON   interpreter of the Fetch worker (default: the evaluator's own)
MUJOCO_GL          egl or osmesa; when unset RSI probes EGL first, then OSMesa
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

from evaluator.native import WorkerSpec
from evaluator.protocol.errors import UnknownBenchmark

WORKERS_DIR = Path(__file__).resolve().parents[1] / "environment" / "workers"

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
    raise UnknownBenchmark(f"no native worker for {benchmark!r} on this host")
