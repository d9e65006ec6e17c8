"""The environment of every process RSI starts (native workers, policy hosts, probes): built from an allow-list,
never by deleting names, so that no secret of the server's (its secret key, database, Redis and broker URLs,
tokens) reaches code that a checkpoint, a benchmark or a policy can steer.

What passes: the names a process needs to find its interpreter, libraries and renderer (PATH, HOME, the locale,
MuJoCo's, Mesa's and Vulkan's, CUDA's and the thread pools' settings), the settings the pinned upstream benchmarks
document (UPSTREAM_SETTINGS, each with where it is documented), the names the caller adds for this one
process (its backend's own variables), and the names an operator lists in RSI_CHILD_ENV_PASS (comma-separated; NAME_*
passes every name that begins NAME_), except a name that looks like a credential (in any case: `db_password` is one),
which is never passed whoever lists it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

PASSED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TERM",
        "DISPLAY",
        "XDG_RUNTIME_DIR",
        "LD_LIBRARY_PATH",
        "MUJOCO_GL",
        "PYOPENGL_PLATFORM",
        "GALLIUM_DRIVER",
        "__EGL_VENDOR_LIBRARY_FILENAMES",
        "OMP_NUM_THREADS",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONUNBUFFERED",
        "SOURCE_DATE_EPOCH",
    }
)
# What the pinned upstreams read from the environment, passed as the operator set them: without these a worker does
# not find what the upstream's own docs tell the operator to point it at.
UPSTREAM_SETTINGS = {
    "MS2_REAL2SIM_ASSET_DIR": "ManiSkill2_real2sim's asset folder (the FileNotFoundError text of "
    "mani_skill2_real2sim/envs/custom_scenes/base_env.py tells users to export it)",
    "MS2_ASSET_DIR": "ManiSkill2 0.5.3's asset folder (mani_skill2/__init__.py, ASSET_DIR)",
}
# Whole families of rendering, accelerator and math-library settings.
PASSED_PREFIXES = ("LC_", "VK_", "MESA_", "LIBGL_", "LP_", "EGL_", "CUDA_", "NVIDIA_", "OPENBLAS_", "MKL_")
# Never passed, even when an operator or a caller names it: what a credential's name looks like.
CREDENTIAL = re.compile(
    r"SECRET|PASS|TOKEN|CREDENTIAL|KEY|PRIVATE|DATABASE|REDIS|BROKER|DSN|AUTH|COOKIE|SESSION|_URL$|_URI$|^RSI_",
    re.IGNORECASE,
)


def operator_passed() -> frozenset[str]:
    """RSI_CHILD_ENV_PASS: the further names this deployment lets its child processes see."""
    return frozenset(name.strip() for name in os.environ.get("RSI_CHILD_ENV_PASS", "").split(",") if name.strip())


def passes(name: str) -> bool:
    if CREDENTIAL.search(name):
        return False
    listed = operator_passed()
    return (
        name in PASSED_NAMES
        or name in UPSTREAM_SETTINGS
        or name.startswith(PASSED_PREFIXES)
        or name in listed
        or any(entry.endswith("*") and name.startswith(entry[:-1]) for entry in listed)
    )


def child_environment(adds: Mapping[str, str] | None = None, source: Mapping[str, str] | None = None) -> dict:
    """The environment of one child process: the allowed names of `source` (this process's environment), then
    `adds`, the caller's own settings for it (RSI's, such as RSI_SIMPLE_CHECKOUT, which hold no secret)."""
    source = os.environ if source is None else source
    return {**{name: value for name, value in source.items() if passes(name)}, **(adds or {})}
