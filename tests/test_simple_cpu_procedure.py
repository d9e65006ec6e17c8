"""The procedure that runs RSI's SIMPLE worker against a real SIMPLE checkout on a CPU host
(environment/simple/cpu_run.py; issue 29, point 4): what of it runs without SIMPLE. Its run against the real
source is not CI's: it needs SIMPLE's checkout and interpreter (environment/README.md)."""

import os
import subprocess
import sys
from pathlib import Path

from tests.simple_humanoid import FAUCET

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "environment" / "simple" / "cpu_run.py"
STANDINS = ROOT / "environment" / "simple" / "standins"


def run(*args, env=None):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, env=env)


def test_it_refuses_a_folder_that_is_no_simple_checkout_with_its_submodules(tmp_path):
    (tmp_path / "src" / "simple").mkdir(parents=True)  # SIMPLE without gear_sonic and decoupled_wbc
    refused = run(tmp_path, "--python", sys.executable)
    assert refused.returncode == 2
    assert f"install: {tmp_path} has no third_party/gear_sonic/utils" in refused.stdout


def test_it_needs_simples_interpreter_and_known_tasks(tmp_path):
    for needed in ("src/simple", "third_party/gear_sonic/utils", "third_party/decoupled_wbc/control"):
        (tmp_path / needed).mkdir(parents=True)
    without_python = run(tmp_path)
    assert without_python.returncode == 2 and "--python names the interpreter" in without_python.stdout
    unknown = run(tmp_path, "--python", sys.executable, "--tasks", "G1NoSuchTask-v0")
    assert unknown.returncode == 2 and "unknown SIMPLE tasks: G1NoSuchTask-v0" in unknown.stdout


def test_a_stand_in_imports_and_refuses_every_use_while_other_imports_fail_as_ever():
    probe = """
from curobo.types.math import Pose
from unitree_sdk2py.idl.unitree_hg.msg.dds_ import HandCmd_
class Subclassed(HandCmd_):
    pass
for stand_in in (Pose, Subclassed):
    try:
        stand_in()
    except RuntimeError as exc:
        print(exc)
try:
    import not_a_stand_in_module
except ModuleNotFoundError:
    print("not_a_stand_in_module: not found")
"""
    env = {**os.environ, "PYTHONPATH": str(STANDINS)}
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        "curobo.types.math.Pose is a stand-in on this host (environment/simple)",
        "__main__.Subclassed is a stand-in on this host (environment/simple)",  # a subclass is one too
        "not_a_stand_in_module: not found",
    ]


def test_a_checkout_whose_weights_are_not_the_pinned_ones_stops_at_the_inventory_with_a_typed_error(
    simple_double, tmp_path
):
    # The double's controller weights are placeholders: as the real checkout's AMO weights are LFS pointers
    for empty in ("third_party/gear_sonic/utils", "third_party/decoupled_wbc/control"):
        (simple_double / empty).mkdir(parents=True, exist_ok=True)
    revision = (simple_double / ".git" / "HEAD").read_text().strip()
    ran = run(simple_double, "--python", sys.executable, "--accept-revision", revision, "--tasks", FAUCET,
              "--out", tmp_path / "logs")  # fmt: skip
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "  describe: " in ran.stdout
    assert "  reset stopped: install: reset failed: inventory mismatch: third_party/decoupled_wbc/" in ran.stdout
    assert "Traceback" not in ran.stdout + ran.stderr
    assert (tmp_path / "logs" / f"{FAUCET}.native.log").is_file()
