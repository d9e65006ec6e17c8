"""RSI's SIMPLE worker against a real SIMPLE checkout on a CPU-only host: the procedure of
environment/README.md ("SIMPLE on a CPU host"). Not run by CI; it installs nothing.

    .venv/bin/python environment/simple/cpu_run.py CHECKOUT --python SIMPLE_PYTHON [--placeholders]
        [--accept-revision REV] [--tasks TASK ...] [--controls 20] [--out DIR]

CHECKOUT is a SIMPLE checkout with its submodules third_party/gear_sonic and third_party/decoupled_wbc;
SIMPLE_PYTHON an interpreter with SIMPLE's dependencies from PyPI. The worker runs as the evaluator runs it
(evaluator.native.backends' host entry, evaluator.native.client's client), with three things a CPU host needs on its
PYTHONPATH and environment: the stand-ins for cuRobo and unitree_sdk2py (environment/simple/standins), the
checkout's src/ and third_party/, and HF_HUB_OFFLINE=1 (SIMPLE downloads a missing asset from Hugging Face
at run time; offline, that is an immediate error naming the file).

--placeholders writes, inside CHECKOUT/data and only where nothing is, what only Hugging Face serves: the
G1 SONIC robot MJCF (gear_sonic's, its motors named as SIMPLE looks them up and a `groundplane` material
added), cuRobo's robot config, one folder per HSSD scene, GraspNet objects as 4 cm cubes, and for each task
without released resets one synthetic episode (the state dict of SIMPLE's own task after a DR reset seeded
20260907, at 50 fps). Each file is named as it is written; none is the benchmark's, so an episode on them
is a check of the machinery, never a result.

Each task (default: one SONIC task and one AMO task) gets a worker: describe, reset, then --controls
controls of the zero-motion action (every joint target 0, no walking, the backend's standing height), each
checked by the worker to advance the physics by 20 ms, then close. Every failure prints its typed error
and the worker's log; the exit status is 1 when any task stopped short.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import re
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
DEFAULT_TASKS = ("G1WholebodyXMovePickTeleop-v0", "G1WholebodyBendPickMP-v0")
PLACEHOLDER_SEED = 20260907
STANDING_HEIGHT = {"sonic": 0.74, "amo": 0.75}  # decoupled_wbc DEFAULT_BASE_HEIGHT; AMO's 0.75 (psi0.py:62)
CUBE_OBJ = "".join(f"v {x} {y} {z}\n" for x in (-0.02, 0.02) for y in (-0.02, 0.02) for z in (-0.02, 0.02)) + "".join(
    f"f {a} {b} {c}\n"
    for a, b, c in [(1, 2, 4), (1, 4, 3), (5, 7, 8), (5, 8, 6), (1, 5, 6), (1, 6, 2)]
    + [(3, 4, 8), (3, 8, 7), (1, 3, 7), (1, 7, 5), (2, 6, 8), (2, 8, 4)]
)


def worker_environment(checkout: Path) -> dict[str, str]:
    """What the worker's environment adds on a CPU host (see the module docstring)."""
    path = [str(HERE / "standins"), str(checkout / "src"), str(checkout / "third_party")]
    return {"PYTHONPATH": os.pathsep.join(path), "HF_HUB_OFFLINE": "1"}


# --- in SIMPLE's interpreter: the placeholders -------------------------------------------------------------


def write_placeholders(checkout: Path, tasks: list[str]) -> None:
    """Write the placeholders --placeholders promises, each only where nothing is, naming each."""
    import numpy as np
    import yaml

    data = checkout / "data"

    def new(relative: str) -> Path | None:
        path = data / relative
        if path.exists():
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        print(f"placeholder: data/{relative}", flush=True)
        return path

    if path := new("robots/g1/curobo/g1_29dof_with_dex3.yml"):  # read by robots/mixin.py:46-54 only
        kinematics = {"external_asset_path": "robots/g1", "external_robot_configs_path": "robots/g1/curobo"}
        path.write_text(yaml.safe_dump({"robot_cfg": {"kinematics": kinematics}}))
    if path := new("robots/g1_sonic/g1_29dof_with_hand.xml"):
        path.write_text(sonic_robot_mjcf(checkout))
    for scene in yaml.safe_load((checkout / "src/simple/resources/hssd-scenes/config.yaml").read_text()):
        if path := new(f"{scene['data_dir']}/{scene['name']}/.placeholder"):  # the folder is what SIMPLE asks for
            path.write_text("")
    for k in graspnet_ids(checkout):
        base = f"assets/graspnet/{{}}/{k:03d}"
        for relative in (f"{base.format('collision_models_mujoco')}/{k:03d}_32x8.obj",
                         f"{base.format('models')}/coacd_0.05/convex_piece_0.obj"):  # fmt: skip
            if path := new(relative):
                path.write_text(CUBE_OBJ)
        if path := new(f"assets/graspnet/stable/{k}_stable.npy"):  # [x, y, z, qw, qx, qy, qz]
            np.save(path, np.array([[0.5, 0.0, 0.02, 1.0, 0.0, 0.0, 0.0]]))
        if path := new(f"assets/graspnet/stable/grasps/{k}_stable_0_grasps.npy"):
            np.save(path, np.zeros((0, 17)))
        if path := new(f"assets/graspnet/ruled_models/{k:03d}_ruled.usd"):  # Isaac's; MuJoCo only asks it exists
            path.write_bytes(b"")
    for task in tasks:
        meta = f"simple-eval/{task}/level-0/meta"
        if (data / meta / "episodes.jsonl").exists():
            continue
        try:
            state = synthetic_state(task)
        except SystemExit as exc:  # AMO's loader exits when torch cannot load its weights (AMO_Policy.py:207-212)
            print(f"install: SIMPLE exited (status {exc.code}) making {task}: no released reset written for it")
            continue
        if path := new(f"{meta}/info.json"):  # a release's own info.json is kept
            path.write_text(json.dumps({"codebase_version": "v2.1", "fps": 50, "rsi_placeholder": True}))
        line = {"episode_index": 0, "tasks": [state["instruction"].strip()], "environment_config": state["json"]}
        new(f"{meta}/episodes.jsonl").write_text(json.dumps(line) + "\n")


def sonic_robot_mjcf(checkout: Path) -> str:
    """gear_sonic's G1 MJCF made into what SIMPLE's g1_sonic loads (upstream_simple_facts.md §8): actuators
    named as their joints (g1_sonic.py:258), a `groundplane` material (engines/mujoco.py:186-192), meshes
    where gear_sonic keeps them."""
    import xml.etree.ElementTree as ET

    source = checkout / "third_party/gear_sonic/data/robot_model/model_data/g1/g1_29dof_with_hand.xml"
    tree = ET.parse(source)
    mjcf = tree.getroot()
    mjcf.find("compiler").set("meshdir", str(source.parent / "meshes"))
    for motor in mjcf.find("actuator"):
        motor.set("name", motor.get("joint"))
    asset = mjcf.find("asset")
    if asset is None:
        asset = ET.SubElement(mjcf, "asset")
    ET.SubElement(asset, "texture", name="groundplane", type="2d", builtin="checker", width="300", height="300")
    ET.SubElement(asset, "material", name="groundplane", texture="groundplane", texrepeat="5 5")
    return ET.tostring(mjcf, encoding="unicode")


def graspnet_ids(checkout: Path) -> list[int]:
    source = (checkout / "src/simple/assets/graspnet.py").read_text()
    names = source[source.index("GraspNet_1B_Object_Names") :]
    return sorted({int(k) for k in re.findall(r"(\d+)\s*:", names[: names.index("}")])})


def synthetic_state(task: str) -> dict:
    """The state dict of SIMPLE's own task after its DR reset, seeded: what a released episode holds."""
    import gymnasium as gym
    import numpy as np
    import simple.envs  # noqa: F401
    from gear_sonic.utils.mujoco_sim.configs import SimLoopConfig

    random.seed(PLACEHOLDER_SEED)
    np.random.seed(PLACEHOLDER_SEED)
    kwargs = {"success_criteria": 0.9}
    if "Teleop" in task:
        kwargs = {"sonic_config": {**SimLoopConfig().load_wbc_yaml(), "ENV_NAME": "simple"}}
    env = gym.make(f"simple/{task}", sim_mode="mujoco", render_hz=50, headless=True, **kwargs)
    native_task = env.unwrapped.task
    native_task.reset(PLACEHOLDER_SEED, None)

    def plain(value):
        if isinstance(value, (np.ndarray, np.generic)):
            return value.tolist()
        raise TypeError(f"{type(value).__name__} in {task}'s state dict")

    return {"json": json.dumps(native_task.state_dict(), default=plain), "instruction": native_task.instruction}


# --- in RSI's interpreter: the worker, driven as the evaluator drives it -----------------------------------


def run_task(task_name: str, args, catalog, out: Path) -> bool:
    """One worker for one task; True when it got through every step asked of it."""
    from evaluator.native.backends import reset_options, worker_spec
    from evaluator.native.client import NativeWorker, WorkerFailure

    task = catalog.task(task_name)
    backend = task.details["backend"]
    spec = worker_spec("simple_humanoid")
    spec = dataclasses.replace(spec, env={**spec.env, **worker_environment(args.checkout)})
    options = reset_options("simple_humanoid", task, task.native_horizon, catalog)
    if args.accept_revision:
        print(f"  the catalog pins {options['pinned_revision']}; accepting {args.accept_revision} instead")
        options["pinned_revision"] = args.accept_revision
    log = out / f"{task_name}.native.log"
    print(f"{task_name} ({backend}): worker log {log}", flush=True)
    worker = NativeWorker(spec, log=log)
    op = "describe"
    try:
        described = worker.describe()
        print(f"  describe: {json.dumps({k: described[k] for k in ('revision', 'packages', 'mujoco_gl')})}")
        op, started = "reset", time.monotonic()
        observation = worker.reset(PLACEHOLDER_SEED, **options)
        info = worker.reset_info
        print(f"  reset: {time.monotonic() - started:.1f} s of wall time")
        initialization = info["initialization"]
        print(f"  initialization: {initialization['controls']} {backend} controls, success seen: "
              f"{initialization['success_seen']}")  # fmt: skip
        if "wbc_upper_body_joints" in initialization:
            upper = initialization["wbc_upper_body_joints"]
            print(f"  WBC upper body: {len(upper)} joints, {upper[0]} ... {upper[-1]}")
        print(f"  physics: {json.dumps(info['physics'])}")
        print(f"  instruction: {observation.instruction!r}")
        print(f"  observation: rgb {observation.rgb.shape} {observation.rgb.dtype}, "
              f"qpos31 {observation.arrays['qpos31'].shape}")  # fmt: skip
        print(f"  released reset: {json.dumps(info['released_reset'])}")
        action = tuple([0.0] * 31 + [STANDING_HEIGHT[backend], 0.0, 0.0, 0.0, 0.0])
        op = "step"
        for control in range(1, args.controls + 1):
            step = worker.step(action)
            print(f"  control {control}: {step.info['physics_substeps']} substeps to "
                  f"{step.info['physics_time_s']:.3f} s, success {step.success}")  # fmt: skip
        print(f"  close: {worker.close()}")
        return True
    except WorkerFailure as failure:
        print(f"  {op} stopped: {failure.error_type.value}: {failure}".rstrip())
        return False
    finally:
        worker.kill()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", type=Path, help="a SIMPLE checkout with its gear_sonic and decoupled_wbc")
    parser.add_argument("--python", help="the interpreter with SIMPLE's dependencies (required to run tasks)")
    parser.add_argument("--placeholders", action="store_true", help="write what only Hugging Face serves")
    parser.add_argument("--accept-revision", help="run a checkout at this revision, not the catalog's pin")
    parser.add_argument("--tasks", nargs="+", default=list(DEFAULT_TASKS))
    parser.add_argument("--controls", type=int, default=20, help="zero-motion controls after reset")
    parser.add_argument("--out", type=Path, default=Path("cpu-run"), help="where the worker logs go")
    parser.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)  # in SIMPLE's interpreter
    args = parser.parse_args(argv)
    args.checkout = args.checkout.resolve()
    for needed in ("src/simple", "third_party/gear_sonic/utils", "third_party/decoupled_wbc/control"):
        if not (args.checkout / needed).is_dir():
            print(f"install: {args.checkout} has no {needed} (a SIMPLE checkout with its submodules)")
            return 2
    if args.prepare:
        write_placeholders(args.checkout, args.tasks)
        return 0
    if not args.python:
        print("usage: --python names the interpreter with SIMPLE's dependencies")
        return 2
    sys.path.insert(0, str(ROOT))
    from evaluator.protocol.catalogs import load_catalog

    catalog = load_catalog("simple_humanoid")
    unknown = [task for task in args.tasks if task not in catalog.tasks]
    if unknown:
        print(f"unknown SIMPLE tasks: {', '.join(unknown)}")
        return 2
    os.environ["RSI_SIMPLE_CHECKOUT"], os.environ["RSI_SIMPLE_PYTHON"] = str(args.checkout), args.python
    if args.placeholders:
        import subprocess

        command = [args.python, __file__, str(args.checkout), "--prepare", "--tasks", *args.tasks]
        prepared = subprocess.run(command, env={**os.environ, **worker_environment(args.checkout)})
        if prepared.returncode:
            print(f"install: writing the placeholders failed (exit {prepared.returncode}); nothing was run")
            return 1
    args.out.mkdir(parents=True, exist_ok=True)
    completed = [run_task(task, args, catalog, args.out) for task in args.tasks]
    return 0 if all(completed) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
