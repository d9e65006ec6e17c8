"""A named double of a SIMPLE checkout (physical-superintelligence-lab/SIMPLE), for the real SIMPLE worker
(environment/workers/simple_worker.py) to run against on a machine without SIMPLE: SIMPLE needs cuRobo,
CUDA-bound AMO weights and assets this machine cannot have (upstream_simple_facts.md §4-5).

What it keeps of SIMPLE at 6a5efa5, with gear_sonic 5b71b42 and decoupled_wbc 33317fa, as strictly as they
take it (facts §2-4, and §7-8 from running the real source):
- the `simple/<Task>-v0` gym ids and gym.make's keyword arguments (BendPickMP asserts render_hz 50; a SONIC
  env steps int((1 / 0.005) / render_hz) physics steps a control); `ActionCmd(type, **parameters)`;
- AMO's loader inside gym.make, which prints a hint and exits when its TorchScript weights are not zip files
  (Git LFS pointers; AMO_Policy.py:207-212);
- `_success` a class annotation only, assigned by reset: reading it before the first reset raises
  AttributeError; reset itself takes one physics step (robot.command is None then);
- `StandStabilizationWrapper` (60 "stand" loco commands inside reset, then `_success` cleared) in its own
  module, which a checkout older than 8e5fe20 lacks (delete the file to get one);
- the task's `robot.joint_names` (43, WHOLE_BODY_JOINTS order) and `robot.command` (None until an AMO command,
  then the last one, torso pitch forced to -0.15 by a stand); `eval_move_actuators` with targets by joint name;
- released resets as LeRobot v2.1 keeps them: episodes.jsonl lines not in episode_index order, each with
  `environment_config` a JSON string of a state dict whose `uid` must be the task's and whose
  `dr_state_dict.scene` must name a known HSSD scene by uid (102344280 is scene3's name, so an unrepaired uid
  is unknown) with its other fields, which hold those digits too, as released, and whose folder under
  data/scenes/hssd must exist, as SIMPLE fetches it even in MuJoCo-only mode; meta/info.json with the fps;
- observations `joint_qpos` (43, float32) and `head_stereo_left`/`_right` (360x640x3 uint8); a stateful
  success counter that, like the faucet predicate, gains two increments per control while its condition holds
  and falls to zero when it does not (AMO tasks: a forward velocity command above 0.5; SONIC tasks: the right
  thumb commanded past 0.7, with the faucet's criterion 0.2); `terminated` = success;
- for SONIC: `sonic_config` at gym.make (gear_sonic's SimLoopConfig, enable_waist True); the robot's
  `stabilized`, which counts every read and checks the floating base's velocity from the 100th read on; a
  base that comes to rest only after 271 controls (what the real decoupled WBC took, §8); `update_reward`;
  `decoupled_wbc` commands (29 + 7 + 7); `SonicDecoupledWbcAgent`, reading `time.monotonic()` where upstream's
  does, over a decoupled_wbc whose robot model orders its 43 joints as pinocchio does (each arm followed by
  its hand, index/middle/thumb: read from the real model, 2026-12-04), whose upper body is 31 joints from
  waist_yaw_joint with the default pose's shoulder rolls at +-0.2, and whose upper-body
  interpolation runs on the times it is given (InterpolationPolicy's waypoints; its 1000 rad/s cap never
  binds), with its lower body passing the legs' zero and the waist's target through;
- the env's `mujoco` simulator with its timestep and simulated time.
What it is not: a humanoid simulation. Modes by environment variable: SIMPLE_DOUBLE_CRASH_AT=k aborts the
process at control k; SIMPLE_DOUBLE_SUCCESS_WHILE_STANDING=1 makes the condition hold during the stand;
SIMPLE_DOUBLE_SETTLE_AT=k brings a SONIC base to rest after k controls instead of 271;
SIMPLE_DOUBLE_SUBSTEPS=n makes each control (after control SIMPLE_DOUBLE_SUBSTEPS_AFTER=k, if given) advance the
physics n timesteps instead of the backend's own
(AMO 10 x 2 ms, SONIC 4 x 5 ms); SIMPLE_DOUBLE_STALL_AT=k,m,... makes controls k, m, ... take 0.3 s of wall
time more, as a slow host would.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.doubles.simple_sonic_sources import AGENT, ROBOT_MODEL, SONIC_CONFIG, WHOLE_BODY_POLICY

ENV_DOUBLE = '''"""Double of SIMPLE's envs (tests/doubles/simple_checkout.py)."""
import os
import time
import types

from pathlib import Path

import gymnasium
import numpy as np

from simple.core.action import ActionCmd

DATA = Path(__file__).resolve().parents[2] / "data"  # SIMPLE's data dir: the checkout's data/ (utils.py:39-40)

LEG = ["hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll"]
ARM = ["shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll", "wrist_pitch", "wrist_yaw"]
HAND = ["thumb_0", "thumb_1", "thumb_2", "index_0", "index_1", "middle_0", "middle_1"]
WHOLE_BODY_JOINTS = (
    [f"left_{j}_joint" for j in LEG] + [f"right_{j}_joint" for j in LEG]
    + ["waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint"]
    + [f"left_{j}_joint" for j in ARM] + [f"right_{j}_joint" for j in ARM]
    + [f"left_hand_{j}_joint" for j in HAND] + [f"right_hand_{j}_joint" for j in HAND]
)
TASKS = __TASKS__
SIM_MODES = ("mujoco", "isaac", "mujoco_isaac")
HSSD_SCENES = {"scene0": "double-scene0", "scene3": "102344280"}  # uid -> name (hssd-scenes/config.yaml)
STABILIZE_VEL_THRESHOLD, MIN_STABILIZE_STEPS = 1e-4, 100  # g1_sonic.py:43-44
AMO_WEIGHTS = "src/simple/robots/policy/amo_jit.pt"


class Robot:
    joint_names = WHOLE_BODY_JOINTS

    def reset(self):
        self.command = None  # assigned by the first AMO command (g1_wholebody.py:152)


class SonicRobot(Robot):
    """G1Sonic's start: every read of `stabilized` counts; from the 100th on, it latches once the floating
    base is still (g1_sonic.py:164-177)."""

    def reset(self):
        super().reset()
        self._stabilized, self._stabilize_step_count = False, 0
        self.base_velocity = 1e-3

    @property
    def stabilized(self):
        self._stabilize_step_count += 1
        if not self._stabilized and self._stabilize_step_count >= MIN_STABILIZE_STEPS:
            self._stabilized = self.base_velocity < STABILIZE_VEL_THRESHOLD
        return self._stabilized

    def prepare_obs(self):
        return {
            "body_q": np.zeros(29), "body_dq": np.zeros(29),
            "floating_base_pose": np.array([0, 0, 0.74, 1, 0, 0, 0.0]),
            "floating_base_vel": np.full(6, self.base_velocity),
        }


class MujocoSimulator:
    """What the worker reads of SIMPLE's MujocoSimulator: mjModel.opt.timestep and mjData.time."""

    def __init__(self, timestep):
        self.mjModel = types.SimpleNamespace(opt=types.SimpleNamespace(timestep=timestep))
        self.mjData = types.SimpleNamespace(time=0.0)

    def advance(self, substeps):
        for _ in range(substeps):  # mj_step, one timestep at a time
            self.mjData.time += self.mjModel.opt.timestep


class Task:
    def __init__(self, uid, instruction, criteria, backend):
        self.uid, self.instruction, self.success_criteria = uid, instruction, criteria
        self.robot = Robot() if backend == "amo" else SonicRobot()
        self.metadata = {"success_criteria": criteria}


def load_scene(scene):
    """The scene DR's load: by the uid's id (dr/scene.py:48, scenes/hssd.py:72-77); the scene's other released
    fields name its folder, so they must come through as released."""
    uid = scene["uid"].split(":")[1]
    if uid not in HSSD_SCENES:
        raise KeyError(f"no HSSD scene {uid!r}: the released uid needs its repair (datasets/lerobot.py:21)")
    name = HSSD_SCENES[uid]
    if not (DATA / "scenes/hssd" / name).is_dir():  # fetched even in MuJoCo-only mode (scenes/hssd.py:81)
        raise FileNotFoundError(f"Download did not materialize {DATA}/scenes_hssd_{name}.zip for scenes/hssd/{name}")
    fields = (scene["name"], scene["conf"]["name"], scene["data_dir"])
    if fields != (name, name, f"scenes/hssd/{name}"):
        raise FileNotFoundError(f"scene {uid} is scenes/hssd/{name}; the state dict says {fields}")


class LocoManipulationEnvDouble(gymnasium.Env):
    metadata = {"render_modes": []}
    _success: bool  # assigned by reset, as SIMPLE's envs do

    def __init__(self, uid, sim_mode="mujoco_isaac", render_hz=None, headless=False, **kwargs):
        if sim_mode not in SIM_MODES:
            raise ValueError(f"sim_mode must be one of {SIM_MODES}")
        instruction, backend = TASKS[uid]
        if backend == "sonic":  # SonicLocoManipEnv takes the WBC's settings; 0.2 is the faucet's own criterion
            (config,) = kwargs.values()
            assert set(kwargs) == {"sonic_config"} and config["SIMULATE_DT"] == 0.005, kwargs
            criteria = 0.2
            substeps = int((1 / 0.005) / render_hz)  # control_decimal (sonic_loco_manip.py:147)
        else:
            (criteria,) = kwargs.values()
            assert set(kwargs) == {"success_criteria"}, kwargs
            assert render_hz == 0.1 / 0.002, render_hz  # g1_wholebody_bend_pick_mp.py:258-260
            substeps = 10
            if (DATA.parent / AMO_WEIGHTS).read_bytes()[:4] != b"PK\x03\x04":  # not a TorchScript (zip) file
                print("Error loading JIT models, likely need to run `git lfs pull`.")
                exit(0)  # AMO_Policy.py:207-212, inside gym.make; site's exit() closes stdin before it raises
        self.task = Task(uid, instruction, criteria, backend)
        # 20 ms per control: AMO's 10 mj_steps of 2 ms, SONIC's control_decimal 4 of 5 ms
        self.mujoco = MujocoSimulator(0.002 if backend == "amo" else 0.005)
        self._native_substeps = substeps
        self._substeps = int(os.environ.get("SIMPLE_DOUBLE_SUBSTEPS") or substeps)
        self._substeps_after = int(os.environ.get("SIMPLE_DOUBLE_SUBSTEPS_AFTER") or 0)
        self._settle_at = int(os.environ.get("SIMPLE_DOUBLE_SETTLE_AT") or 271)
        self._stalls = {int(k) for k in os.environ.get("SIMPLE_DOUBLE_STALL_AT", "").split(",") if k}
        print(f"building {uid} in {sim_mode}")  # native code prints on stdout: it must not break the protocol
        self.observation_space = gymnasium.spaces.Dict({})
        self.action_space = gymnasium.spaces.Dict({})
        self.step_count = 0
        self._counter = 0.0
        self._qpos = np.zeros(43, dtype=np.float32)
        self._controls = 0

    def reset(self, seed=None, options=None):
        state = (options or {})["state_dict"]
        assert state["uid"] == self.task.uid, (state["uid"], self.task.uid)  # Task.reset asserts the uid
        load_scene(state["dr_state_dict"]["scene"])
        self._success, self._counter, self.step_count, self._controls = False, 0.0, 0, 0
        self.task.robot.reset()
        self.mujoco.mjData.time = 0.0
        self.mujoco.advance(1)  # reset's own mujoco.step: one mj_step while robot.command is None
        self._qpos = np.asarray(state["joint_qpos"], dtype=np.float32).copy()  # the double's own field
        return self._obs(), {}

    def _obs(self):
        image = np.zeros((360, 640, 3), dtype=np.uint8)
        image[:, :, 0] = np.linspace(0, 255, 640, dtype=np.uint8)
        image[:, :, 1] = int(self._counter * 255) % 256
        column = int(np.clip(320 + 100 * self._qpos[15], 0, 639))
        image[:, column, 2] = 255
        right = image[:, ::-1].copy()
        return {"joint_qpos": self._qpos.copy(), "head_stereo_left": image, "head_stereo_right": right}

    def update_reward(self):  # eval_decoupled_wbc calls it after each stabilization step
        pass

    def _increment(self, holds):
        self._counter = self._counter + 0.03 if holds else 0.0  # compute_reward: consecutive steps only

    def _track(self, joints, targets):
        self._qpos[joints] += np.float32(0.5) * (np.asarray(targets, np.float32) - self._qpos[joints])

    def step(self, action):
        if not isinstance(action, ActionCmd):
            raise TypeError(f"SIMPLE steps with an ActionCmd, got {type(action).__name__}")
        self._controls += 1
        if int(os.environ.get("SIMPLE_DOUBLE_CRASH_AT", "0") or 0) == self._controls:
            os.abort()
        if self._controls in self._stalls:
            time.sleep(0.3)
        self.mujoco.advance(self._substeps if self._controls > self._substeps_after else self._native_substeps)
        robot = self.task.robot
        if action.type == "loco_command":
            robot.command = list(action["command"])
            robot.command[5] = -0.15  # HACK of g1_wholebody.apply_action: AMO's initial waist pitch
            holds = os.environ.get("SIMPLE_DOUBLE_SUCCESS_WHILE_STANDING") == "1"
        elif action.type == "eval_move_actuators":
            command = action["action_command"]
            if len(command) != 8 or not all(isinstance(v, float) and np.isfinite(v) for v in command):
                raise ValueError(f"action_command must be 8 finite floats, got {command!r}")
            if sorted(action["target_qpos"]) != sorted(WHOLE_BODY_JOINTS[15:]):
                raise KeyError("target_qpos must name every arm and hand joint")
            if sorted(action["waist_qpos"]) != sorted(WHOLE_BODY_JOINTS[12:15]):
                raise KeyError("waist_qpos must name the three waist joints")
            robot.command = list(command)
            for name, value in {**action["target_qpos"], **action["waist_qpos"]}.items():
                self._track([WHOLE_BODY_JOINTS.index(name)], [value])
            holds = command[0] > 0.5
        elif action.type == "decoupled_wbc":
            target_q, left, right = action["target_q"], action["left_hand_q"], action["right_hand_q"]
            if (np.shape(target_q), np.shape(left), np.shape(right)) != ((29,), (7,), (7,)):
                raise ValueError("decoupled_wbc takes target_q (29), left_hand_q (7) and right_hand_q (7)")
            self._track(slice(0, 29), target_q)  # "29 body joints in actuator order" (g1_sonic.py:411)
            self._track(slice(29, 36), left)
            self._track(slice(36, 43), right)
            robot.base_velocity = 1e-3 if self._controls < self._settle_at else 0.0
            holds = right[0] > 0.7  # the faucet: turned by the right thumb, held
        else:
            raise ValueError(f"unknown ActionCmd type {action.type!r}")
        self._increment(holds)  # step() calls compute_reward, then check_success calls it again
        self._increment(holds)
        self._success = self._counter >= self.task.success_criteria
        self.step_count += 1
        return self._obs(), float(self._success), self._success, False, {}
'''

ACTION_CMD = '''"""Double of simple.core.action (tests/doubles/simple_checkout.py)."""
from dataclasses import dataclass


@dataclass
class ActionCmd:
    type: str
    parameters: dict | None = None

    def __init__(self, type: str, **parameters):
        self.type = type
        self.parameters = parameters

    def __getitem__(self, key):
        return None if self.parameters is None else self.parameters.get(key)
'''

WRAPPER = '''"""Double of simple.envs.wrappers.stand_stabilization (tests/doubles/simple_checkout.py)."""
import gymnasium as gym

from simple.core.action import ActionCmd


class StandStabilizationWrapper(gym.Wrapper):
    def __init__(self, env, n_stand_steps=60):
        gym.Wrapper.__init__(self, env)
        self.n_stand_steps = n_stand_steps

    def reset(self, **kwargs):
        observation, info = self.env.reset(**kwargs)
        stand = ActionCmd("loco_command", command=[0, 0, 0, 0, 0, 0, 0, 0], motion_type="stand", keep_waist_pose=False)
        for _ in range(self.n_stand_steps):
            observation, _reward, _term, _trunc, info = self.env.step(stand)
        if hasattr(self.unwrapped, "step_count"):
            self.unwrapped.step_count = 0
        if hasattr(self.unwrapped, "_success"):
            self.unwrapped._success = False
        return observation, info
'''

REGISTER = '''"""Double of simple.envs (tests/doubles/simple_checkout.py): the gym ids."""
import gymnasium

from simple.double_env import TASKS, LocoManipulationEnvDouble

for uid in TASKS:
    gymnasium.register(
        f"simple/{uid}", entry_point=lambda uid=uid, **kwargs: LocoManipulationEnvDouble(uid, **kwargs),
        disable_env_checker=True,
    )
'''

SOURCES = {
    "simple/__init__.py": "",
    "simple/core/__init__.py": "",
    "simple/core/action.py": ACTION_CMD,
    "simple/envs/__init__.py": REGISTER,
    "simple/envs/wrappers/__init__.py": "",
    "simple/envs/wrappers/stand_stabilization.py": WRAPPER,
    "simple/robots/__init__.py": "",
    "simple/robots/policy/__init__.py": "",
    "simple/agents/__init__.py": "",
    "simple/agents/sonic_decoupled_wbc_agent.py": AGENT,
    # the submodules, installed into SIMPLE's venv
    "gear_sonic/__init__.py": "",
    "gear_sonic/utils/__init__.py": "",
    "gear_sonic/utils/mujoco_sim/__init__.py": "",
    "gear_sonic/utils/mujoco_sim/configs.py": SONIC_CONFIG,
    "decoupled_wbc/__init__.py": "",
    "decoupled_wbc/control/__init__.py": "",
    "decoupled_wbc/control/policy/__init__.py": "",
    "decoupled_wbc/control/policy/g1_decoupled_whole_body_policy.py": WHOLE_BODY_POLICY,
    "decoupled_wbc/control/robot_model/__init__.py": "",
    "decoupled_wbc/control/robot_model/instantiation/__init__.py": "",
    "decoupled_wbc/control/robot_model/instantiation/g1.py": ROBOT_MODEL,
}
RELEASED_SCENES = {0: ("hssd:102344280", "102344280")}  # episode 0 is in scene3, whose folder is its name


def released_state(uid: str, index: int) -> dict:
    """The state dict of the double's released episode `index` of task `uid`; `joint_qpos` is the double's own
    field (0.01 x (index + 1) at every joint), so that a test sees which episode was loaded."""
    scene_uid, name = RELEASED_SCENES.get(index, ("hssd:scene0", "double-scene0"))
    scene = {"uid": scene_uid, "name": name, "conf": {"name": name}, "data_dir": f"scenes/hssd/{name}"}
    return {"uid": uid, "dr_state_dict": {"scene": scene}, "joint_qpos": [0.01 * (index + 1)] * 43}


def build_checkout(
    root: Path, revision: str, tasks: dict[str, tuple[str, str]], files: dict[str, dict[str, str]], episodes: int = 10
) -> dict:
    """Write the double under `root`: a checkout at `revision` with `tasks` ({uid: (native instruction,
    backend)}), their released resets and a placeholder at each path of the catalog's inventory `files`
    ({backend: {path: sha256}}). Returns its own inventory in that form: the placeholders cannot match the
    catalog's hashes of the real weights; a path the catalog names without a hash keeps none."""
    import hashlib

    (root / ".git").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text(revision + "\n")  # a detached checkout
    sources = {**SOURCES, "simple/double_env.py": ENV_DOUBLE.replace("__TASKS__", repr(tasks))}
    for relative, text in sources.items():
        path = root / "src" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    inventory = {backend: {} for backend in files}
    for backend, paths in files.items():
        for relative, digest in paths.items():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"PK\x03\x04" + f"double of {path.name}".encode())  # zip magic, as TorchScript
            inventory[backend][relative] = hashlib.sha256(path.read_bytes()).hexdigest() if digest else ""
    for _, name in (*RELEASED_SCENES.values(), (None, "double-scene0")):
        (root / "data" / "scenes" / "hssd" / name).mkdir(parents=True, exist_ok=True)
    for uid, (instruction, _) in tasks.items():
        meta = root / "data" / "simple-eval" / uid / "level-0" / "meta"
        meta.mkdir(parents=True)
        (meta / "info.json").write_text(json.dumps({"codebase_version": "v2.1", "fps": 50}))
        # LeRobot's episode metadata keeps the task language with its outer whitespace trimmed; its lines are
        # not in episode_index order here, so that a reader must find an episode by its index, as LeRobot does
        lines = [
            json.dumps(
                {
                    "episode_index": index,
                    "tasks": [instruction.strip()],
                    "environment_config": json.dumps(released_state(uid, index)),
                }
            )
            for index in reversed(range(episodes))
        ]
        (meta / "episodes.jsonl").write_text("\n".join(lines) + "\n")
    return inventory
