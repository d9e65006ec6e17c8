"""Native worker for the SIMPLE humanoid tasks: run by the evaluator as `PYTHON simple_worker.py` with
PYTHON the pinned SIMPLE checkout's own `.venv/bin/python` and RSI_SIMPLE_CHECKOUT that checkout; one
episode and one backend (AMO or SONIC) per process, speaking wire.py's protocol on stdin/stdout.
It imports only SIMPLE, its dependencies, numpy and the standard library.

`python simple_worker.py --check CHECKOUT` runs the checks that need no SIMPLE import (the checkout,
its revision, the files of the inventory given as JSON on stdin) and prints them as JSON: doctor uses it.

The pinned revision 5e3d6f84 could not be read (upstream_simple_facts.md §0): the names this worker
uses are those of 6a5efa5 (gym ids, ActionCmd, StandStabilizationWrapper, task.robot.joint_names and
.command, _success after reset) and are checked before any policy call; a missing one is an install
error, never a guess. SONIC runs the decoupled WBC through SIMPLE's own agent (SonicDecoupledWbcAgent),
as its psi0_decoupled_wbc baseline does, on MuJoCo's simulated clock where upstream reads the wall clock
(environment/README.md, "Wall time"), so that an episode does not depend on how fast the host is.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import random
import sys
import time
from importlib import metadata
from pathlib import Path

import numpy as np
from simple_commands import ACTION_DIMS, HEIGHT, TARGET_YAW, VX, amo_command, qpos31, upper_body_targets
from simple_release import check_inventory, checkout_revision, released_reset
from wire import NativeError, jsonable, serve_worker

FOLLOWS = "this worker follows SIMPLE 6a5efa5"  # the newest readable revision (upstream_simple_facts.md §0)
CAMERA = "head_stereo_left"
RGB_SHAPE = (360, 640, 3)
# gym.make as SIMPLE's eval CLI calls it for the MP (AMO) tasks (cli/eval.py:233-239), in MuJoCo only, with
# render_hz the released dataset's fps (BendPickMP asserts it is 0.1 / physics_dt = 50, :258-260) and
# success_criteria the CLI default.
MAKE_KWARGS = {"sim_mode": "mujoco", "headless": True, "success_criteria": 0.9}
AMO_STAND_CONTROLS = 60  # StandStabilizationWrapper(n_stand_steps=60), inside reset
# The wrapper's module came with SIMPLE 8e5fe20 (2026-06-13); an older checkout has none.
STAND_WRAPPER = "simple.envs.wrappers.stand_stabilization"
# The Teleop (SONIC) tasks as eval_decoupled_wbc builds them (:270-276): no success_criteria override.
SONIC_MAKE_KWARGS = {"sim_mode": "mujoco", "headless": True}
# Where SONIC's decoupled WBC reads the wall clock (upstream_simple_facts.md §2, "VLA waist targets"): the
# agent's `time` (get_stabilize_action's t_now, reset's init_time; sonic_decoupled_wbc_agent.py:11,130,189)
# and the whole-body policy's `time_module` (its goal time, g1_decoupled_whole_body_policy.py:1,66,111).
WBC_CLOCKS = (
    ("simple.agents.sonic_decoupled_wbc_agent", "time"),
    ("decoupled_wbc.control.policy.g1_decoupled_whole_body_policy", "time_module"),
)
WAIST = slice(12, 15)  # waist yaw, roll, pitch in the robot's joint order
# 20 ms of physics per public control: AMO's 10 mj_steps of 2 ms (g1_wholebody.step), SONIC's
# control_decimal 4 of 5 ms (SonicLocoManipEnv.step): (substeps, timestep) per backend
PHYSICS = {"amo": (10, 0.002), "sonic": (4, 0.005)}


def seed_global_generators(seed: int) -> None:
    """SIMPLE ignores seeds; its randomizers draw from the global generators (dr/manager.py:123-125)."""
    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch
    except ImportError:
        return
    torch.manual_seed(seed)


class SimpleWorker:
    def __init__(self) -> None:
        self.env = self.native = None
        self.backend = self.key = None
        self.instruction = ""
        self.controls = 0

    def describe(self, request: dict, arrays: dict) -> tuple[dict, dict]:
        root = _checkout()
        packages = {}
        for name in ("mujoco", "numpy", "gymnasium", "torch", "onnxruntime"):
            try:
                packages[name] = metadata.version(name)
            except metadata.PackageNotFoundError:
                packages[name] = None
        return {
            "benchmark": "simple_humanoid",
            "python": sys.version.split()[0],
            "checkout": str(root),
            "revision": checkout_revision(root),
            "packages": packages,
            "mujoco_gl": os.environ.get("MUJOCO_GL"),
        }, {}

    def reset(self, request: dict, arrays: dict) -> tuple[dict, dict]:
        if self.env is not None:
            raise NativeError("reset", "one episode per worker: this one has been reset already")
        seed = request["seed"]
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
            raise NativeError("reset", f"seed must be in [0, 2**32), got {seed!r}")
        root = _checkout()
        backend = request["backend"]
        if backend not in ("amo", "sonic"):
            raise NativeError("install", f"unknown SIMPLE backend {backend!r}")
        inventory = check_inventory(root, request["pinned_revision"], request["expected_files"][backend])
        if inventory["problems"]:
            raise NativeError("install", "inventory mismatch: " + "; ".join(inventory["problems"]))
        state_dict, released = released_reset(root, request["task"], request["dr_level"], request["episode_index"])
        seed_global_generators(seed)
        revision = inventory["revision"]
        try:
            import gymnasium as gym
            import simple.envs  # noqa: F401  (registers the simple/... env ids)
            from simple.core.action import ActionCmd
        except ImportError as exc:
            raise NativeError("install", f"cannot import SIMPLE from {root}: {exc}") from None
        self.action_cmd = ActionCmd
        if backend == "amo":
            wrapper = _simple_module(STAND_WRAPPER, revision, "StandStabilizationWrapper came with SIMPLE 8e5fe20")
            make_kwargs = {**MAKE_KWARGS, "render_hz": released["fps"]}
        else:
            self.sonic_config = _sonic_config()
            make_kwargs = {**SONIC_MAKE_KWARGS, "render_hz": released["fps"], "sonic_config": self.sonic_config}
        with _installation_faults():
            raw = gym.make(request["env_id"], **make_kwargs)
        self.native = raw.unwrapped
        robot = getattr(getattr(self.native, "task", None), "robot", None)
        self.joint_names = list(getattr(robot, "joint_names", []))
        if len(self.joint_names) != 43:
            raise NativeError("install", f"SIMPLE at {revision} lacks task.robot.joint_names (43): {FOLLOWS}")
        self.robot, self.backend, self.key = robot, backend, request["env_id"]
        counted = _count_controls(self.native)
        scene_uid = state_dict["dr_state_dict"]["scene"]["uid"]
        if backend == "amo":
            self.env = wrapper.StandStabilizationWrapper(raw, n_stand_steps=AMO_STAND_CONTROLS)
            with _installation_faults(), _release_faults(scene_uid, revision):
                obs, _ = self.env.reset(options={"state_dict": state_dict})
        else:
            self.env = raw
            with _installation_faults(), _release_faults(scene_uid, revision):
                obs, _ = self.env.reset(options={"state_dict": state_dict})
            obs = self._stabilize_sonic(obs, request["max_initialization_controls"], counted, revision)
        # _success: a class annotation only, assigned in reset (loco_manipulation.py:27,81; sonic_loco_manip.py:22,152)
        if not hasattr(self.native, "_success"):
            raise NativeError("install", f"SIMPLE at {revision} has no _success after reset: {FOLLOWS}")
        initialization = {"backend": backend, "controls": counted.calls, "success_seen": counted.success_seen}
        if backend == "sonic":  # the WBC's own joint order: the policy's targets reach it by name
            initialization["wbc_upper_body_joints"] = self.sonic_upper_joints
        if counted.success_seen or bool(self.native._success):
            # the AMO wrapper clears _success after its stand steps: the counted steps saw it
            raise NativeError("reset", "native success is already true at reset: an error, never resampled")
        self.instruction = self.native.task.instruction  # exact, outer whitespace kept
        timestep, self.physics_time = self._physics_clock()
        substeps, expected = PHYSICS[backend]
        if not math.isclose(timestep, expected, rel_tol=1e-9):
            raise NativeError("install", f"SIMPLE's {backend} physics timestep is {timestep} s, not {expected} s")
        if counted.calls:  # 20 ms a control from the start: a release at another fps fails here, not at a policy step
            seen = round(self.physics_time / (counted.calls * timestep))  # reset's own step or two round away
            if seen != substeps:
                raise NativeError(
                    "install",
                    f"the env made at the release's {released['fps']} fps advances the physics {seen} x {timestep} s "
                    f"a control ({counted.calls} initialization controls in {self.physics_time:.6f} s), not "
                    f"{substeps} x {timestep} s: the release does not match the protocol's 20 ms control",
                )
        physics = {
            "timestep_s": timestep,
            "substeps_per_control": substeps,
            "initialization_s": self.physics_time,
            # SONIC's WBC interpolates by the time it is given: MuJoCo's here, never the wall clock (README)
            "wbc_clock": "mujoco" if backend == "sonic" else None,
            "render_hz": released["fps"],
        }
        reset_info = {
            "inventory": inventory,
            "released_reset": released,
            "initialization": initialization,
            "physics": physics,
        }
        return {"instruction": self.instruction, "reset_info": jsonable(reset_info), "native_steps": 0}, _public(obs)

    def step(self, request: dict, arrays: dict) -> tuple[dict, dict]:
        action = arrays.get("action")
        if action is None or action.shape != (ACTION_DIMS,) or not np.all(np.isfinite(action)):
            raise NativeError("native_runtime", f"refusing malformed action {action!r}")
        command = self._amo_command(action) if self.backend == "amo" else self._sonic_command(action)
        obs, reward, terminated, truncated, info = self.env.step(command)
        self.controls += 1
        timestep, now = self._physics_clock()
        substeps = round((now - self.physics_time) / timestep)
        if substeps != PHYSICS[self.backend][0]:
            raise NativeError(
                "native_runtime",
                f"control {self.controls} advanced the physics {now - self.physics_time:.6f} s ({substeps} x "
                f"{timestep} s), not {PHYSICS[self.backend][0]} x {timestep} s",
            )
        self.physics_time = now
        return {
            # the native step's own flag: no second scorer query (the faucet predicate is stateful)
            "success": bool(self.native._success),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "reward": float(reward),
            "instruction": self.instruction,
            "native_steps": self.controls,
            "info": {"reward": float(reward), "physics_time_s": now, "physics_substeps": substeps},
        }, _public(obs)

    def _physics_clock(self) -> tuple[float, float]:
        """MuJoCo's timestep and simulated time, read from SIMPLE's MujocoSimulator."""
        simulator = self.native.mujoco
        return float(simulator.mjModel.opt.timestep), float(simulator.mjData.time)

    def _amo_command(self, action: np.ndarray):
        targets = upper_body_targets(action)
        yaw, pitch, roll = self.robot.command[4:7]  # AMO's own torso state, not the policy's waist targets
        return self.action_cmd(
            "eval_move_actuators",
            target_qpos={self.joint_names[j]: v for j, v in targets.items() if j >= WAIST.stop},
            action_command=amo_command(action, (yaw, pitch, roll)).tolist(),
            waist_qpos={self.joint_names[j]: v for j, v in targets.items() if WAIST.start <= j < WAIST.stop},
        )

    def _stabilize_sonic(self, obs: dict, limit: int, counted, revision: str) -> dict:
        """eval_decoupled_wbc's start (:336-390): the WBC agent reset, its RL lower body engaged, then at most
        `limit` controls ramping to the WBC default pose until the robot reports itself stable; an unstable
        start is an error here (upstream goes on regardless). The WBC runs on MuJoCo's clock, so nothing
        paces it to the wall clock (upstream sleeps to 20 ms a control, :357-369)."""
        import torch

        _drive_by_simulated_time(self.native, revision)
        agent_module = _simple_module(WBC_CLOCKS[0][0], revision, "SONIC's agent")
        self.agent = agent_module.SonicDecoupledWbcAgent(self.robot, self.sonic_config)
        self.agent.reset()
        self.agent._wbc_policy.lower_body_policy.use_policy_action = True
        # Each read of `stabilized` counts towards its 100-check minimum (g1_sonic.py:164-177): read once per
        # control, and once before the first, as upstream's loop condition reads it.
        stable = self.robot.stabilized
        while not stable and counted.calls < limit:
            obs, *_ = self.native.step(self.agent.get_stabilize_action(obs))
            self.native.update_reward()
            stable = self.robot.stabilized
        if not stable:
            raise NativeError("reset", f"SONIC did not stabilize within {limit} controls: an unstable start")
        self.agent._wbc_policy.lower_body_policy.gait_indices = torch.zeros((1), dtype=torch.float32)
        model = self.agent._dwbc_robot_model
        upper = model.get_joint_group_indices("upper_body")
        self.sonic_upper_joints = [name for name, index in model.joint_to_dof_index.items() if index in upper]
        unknown = [name for name in self.sonic_upper_joints if name not in self.joint_names]
        if unknown:  # checked once, before the first policy call
            raise NativeError("install", f"the WBC's upper body names joints SIMPLE's robot does not: {unknown}")
        return obs

    def _sonic_command(self, action: np.ndarray):
        """The upper-body targets, [vx, vy, turn, target_yaw] and the height as the decoupled WBC's goal, as
        psi0_decoupled_wbc builds it (:109-144); its output is SONIC's native `decoupled_wbc` command."""
        targets = {self.joint_names[j]: v for j, v in upper_body_targets(action).items()}
        agent, model = self.agent, self.agent._dwbc_robot_model
        agent._wbc_policy.set_observation(agent._build_wbc_observation(self.robot.prepare_obs()))
        now, period = self._physics_clock()[1], 1 / agent._control_frequency  # as the agent's clock reads it
        agent._wbc_policy.set_goal(
            {
                "target_upper_body_pose": np.array([targets[name] for name in self.sonic_upper_joints], np.float32),
                "navigate_cmd": np.array(action[VX : TARGET_YAW + 1], np.float64),
                "base_height_command": np.array(action[HEIGHT : HEIGHT + 1], np.float64),
                "target_time": now + period,
                "interpolation_garbage_collection_time": now - 2 * period,
                "timestamp": now,
            }
        )
        q = agent._wbc_policy.get_action(time=now)["q"]
        return self.action_cmd(
            "decoupled_wbc",
            target_q=model.get_body_actuated_joints(q),
            left_hand_q=model.get_hand_actuated_joints(q, side="left"),
            right_hand_q=model.get_hand_actuated_joints(q, side="right"),
        )

    def close(self, request: dict, arrays: dict) -> tuple[dict, dict]:
        if self.env is not None:
            self.env.close()
        return {"native_steps": self.controls}, {}


class _SimulatedClock:
    """The `time` module as SONIC's WBC sees it in this worker: monotonic() is MuJoCo's simulated time, which
    a control advances by 20 ms however long it takes; everything else is the real module's."""

    def __init__(self, native) -> None:
        self.native = native

    def monotonic(self) -> float:
        return float(self.native.mujoco.mjData.time)

    def __getattr__(self, name: str):
        return getattr(time, name)


def _drive_by_simulated_time(native, revision: str) -> None:
    """Hand SONIC's WBC the simulated clock wherever it reads the wall clock (WBC_CLOCKS), so that a slow host
    runs the episode a host keeping real time runs. One episode per process: nothing to restore."""
    clock = _SimulatedClock(native)
    for module_name, attribute in WBC_CLOCKS:
        module = _simple_module(module_name, revision, "SONIC's decoupled WBC")
        if getattr(module, attribute, None) is not time:
            raise NativeError("install", f"{module_name} reads no `{attribute}` module: {FOLLOWS}")
        setattr(module, attribute, clock)


@contextlib.contextmanager
def _release_faults(scene_uid: str, revision: str):
    """SIMPLE looks the released episode's scene up by its uid as it resets: a uid it does not know is the release
    not matching the checkout (an install error naming it), never a failed reset."""
    try:
        yield
    except KeyError as exc:
        raise NativeError(
            "install",
            f"the released episode's scene {scene_uid!r} is unknown to SIMPLE at {revision} ({exc}): "
            "the release does not match the checkout",
        ) from None


@contextlib.contextmanager
def _installation_faults():
    """What SIMPLE does, while it builds or resets an env, when part of its installation is missing: a file it
    cannot find is an asset it lacks (it would download it from Hugging Face, utils.py:109-145); an exit is
    AMO's loader, which exits when torch cannot load its weights (AMO_Policy.py:207-212; Git LFS pointers, or
    no CUDA device). Both are install errors, never a failed reset or a lost worker."""
    try:
        yield
    except FileNotFoundError as exc:
        raise NativeError("install", f"SIMPLE is missing a data file: {exc}") from None
    except SystemExit as exc:
        raise NativeError("install", f"SIMPLE exited (status {exc.code}) while building the env: see its log") from None


def _simple_module(name: str, revision: str, what: str):
    """A module of the checkout, or an install error naming the revision: never an ImportError traceback."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        missing = getattr(exc, "name", None)
        if missing and missing != name and not name.startswith(missing + "."):  # the module is there, not a need
            raise NativeError(
                "install", f"SIMPLE at {revision}: {name} cannot be imported, {missing} is missing ({exc})"
            ) from None
        raise NativeError("install", f"SIMPLE at {revision} has no {name} ({what}): {exc}") from None


class _Counter:
    calls = 0
    success_seen = False


def _count_controls(native) -> _Counter:
    """Counts the native env's own control steps (the wrappers' initialization ones included) and whether
    any of them reported success (terminated is the native success flag)."""
    counter, step = _Counter(), native.step

    def counted(*args, **kwargs):
        counter.calls += 1
        result = step(*args, **kwargs)
        counter.success_seen = counter.success_seen or bool(result[2])
        return result

    native.step = counted
    return counter


def _public(obs: dict) -> dict:
    """The observation allowlist: head_stereo_left as given and the 31 encoders. Nothing else leaves."""
    rgb = obs[CAMERA]
    if rgb.dtype != np.uint8 or rgb.shape != RGB_SHAPE:
        raise NativeError("render", f"{CAMERA} is {rgb.dtype} {rgb.shape}, not uint8 {RGB_SHAPE}")
    return {"rgb": rgb, "qpos31": qpos31(obs["joint_qpos"])}


def _sonic_config() -> dict:
    """The decoupled WBC's settings as eval_decoupled_wbc makes them (:114-122): SimLoopConfig's defaults."""
    try:
        from gear_sonic.utils.mujoco_sim.configs import SimLoopConfig
    except ImportError as exc:
        raise NativeError("install", f"cannot import gear_sonic for the SONIC backend: {exc}") from None
    config = SimLoopConfig().load_wbc_yaml()
    config["ENV_NAME"] = "simple"
    return config


def _checkout() -> Path:
    raw = os.environ.get("RSI_SIMPLE_CHECKOUT", "")
    if not raw:
        raise NativeError("install", "RSI_SIMPLE_CHECKOUT is not set: the pinned SIMPLE checkout")
    root = Path(raw)
    if not (root / "src" / "simple").is_dir():
        raise NativeError("install", f"RSI_SIMPLE_CHECKOUT={raw} is not a SIMPLE checkout (no src/simple)")
    return root


def main(argv: list[str]) -> None:
    if argv[1:2] == ["--check"]:
        if len(argv) != 3:
            sys.exit("usage: simple_worker.py --check CHECKOUT  (the inventory as JSON on stdin)")
        request = json.loads(sys.stdin.read())
        report = check_inventory(Path(argv[2]), request["pinned_revision"], request["files"])
        print(json.dumps(report))
        return
    if len(argv) != 1:
        sys.exit("usage: simple_worker.py  (the evaluator speaks wire.py on stdin/stdout), or --check CHECKOUT")
    serve_worker(SimpleWorker())


if __name__ == "__main__":
    main(sys.argv)
