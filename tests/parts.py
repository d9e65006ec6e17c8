"""What a test may need that a machine may lack, one home for each part: how to tell it is here, and what installs
it. A test names its parts with `@pytest.mark.needs("lerobot", ...)` (or `require_module` for a package it imports
inside). On a developer's machine a test whose part is missing is skipped, saying what installs it; under CI=true it
fails instead, naming the part (issue 55, point 7: "a CI that lost one of them would go green without that coverage").
The opt-in whole-matrix run is the only skip CI allows (tests/test_scale_out.py)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Part:
    present: Callable[[], bool]
    installed_by: str


def _lerobot() -> bool:
    from evaluator.policies.lerobot_checkpoint import lerobot_python

    try:
        return Path(lerobot_python()).exists()
    except Exception:  # no release found at all: the same missing part
        return False


def _sapien() -> bool:
    from evaluator.native.backends import worker_spec

    return Path(worker_spec("maniskill2").python).exists()


def _chromium() -> bool:
    from tests.servers.browser import CHROMIUM

    return os.path.exists(CHROMIUM)


def _importable(name: str) -> Callable[[], bool]:
    return lambda: importlib.util.find_spec(name) is not None


PARTS = {
    "lerobot": Part(_lerobot, "make lerobot-env builds .venv-lerobot (make test does)"),
    "openpi": Part(lambda: (ROOT / ".venv-openpi" / "bin" / "python").exists(), "make openpi-env builds .venv-openpi"),
    "sapien": Part(_sapien, "make sapien-env builds .venv-sapien (make test does)"),
    "tracking": Part(
        lambda: (ROOT / ".venv-tracking" / "bin" / "python").exists(), "make tracking-env builds .venv-tracking"
    ),
    "torch": Part(_importable("torch"), "the torch extra, requirements-torch.txt (make venv-test)"),
    "playwright": Part(_importable("playwright"), "requirements-dev.txt (make venv-test)"),
    "chromium": Part(_chromium, "Debian's chromium (scripts/system-packages.sh test)"),
    "root": Part(lambda: os.geteuid() == 0, "root privileges (mounting a tmpfs; CI runs as root)"),
}


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def missing(names: tuple[str, ...]) -> list[str]:
    """The named parts absent here; KeyError for a name that is no part (a typo must not read as absent)."""
    return [name for name in names if not PARTS[name].present()]


def refuse_missing(names: tuple[str, ...]) -> None:
    """Skip the running test (fail it under CI=true) when any of `names` is absent, saying what installs it."""
    absent = missing(names)
    if not absent:
        return
    why = "; ".join(f"{name} is missing: {PARTS[name].installed_by}" for name in absent)
    if in_ci():
        pytest.fail(f"CI=true and a required part is missing: {why}", pytrace=False)
    pytest.skip(why)


def require_module(name: str):
    """`name` imported, or the test skipped (failed under CI=true) as its package's part is missing."""
    refuse_missing((name.split(".")[0],))
    return importlib.import_module(name)
