"""A named double of a SIMPLE checkout (physical-superintelligence-lab/SIMPLE), for the real SIMPLE worker
(environment/workers/simple_worker.py) to run against on a machine without SIMPLE: SIMPLE needs cuRobo,
CUDA-bound AMO weights and assets this machine cannot have (upstream_simple_facts.md §4-5).

What it keeps of SIMPLE at 6a5efa5, as strictly as SIMPLE takes it: the `simple/<Task>-v0` gym ids and
gym.make's keyword arguments; `ActionCmd(type, **parameters)`; `StandStabilizationWrapper` (60 "stand"
loco commands inside reset, then `_success` cleared); the task's `robot.joint_names` (43, in
WHOLE_BODY_JOINTS order) and `robot.command` (the last AMO command, torso pitch forced to -0.15 by a
stand); `eval_move_actuators` with targets by joint name; reset from a released `state_dict` whose `uid`
must be the task's and whose scene uid must have been repaired; observations `joint_qpos` (43, float32)
and `head_stereo_left`/`_right` (360x640x3 uint8); a stateful success counter that, like the faucet
predicate, gains two increments per control while its condition holds and falls to zero when it does not
(here the condition is a forward velocity command above 0.5); `terminated` = success. What it is not: a
humanoid simulation. Modes by environment variable: SIMPLE_DOUBLE_CRASH_AT=k aborts the process at
control k; SIMPLE_DOUBLE_SUCCESS_WHILE_STANDING=1 makes the condition hold during the stand.
"""

from __future__ import annotations

import json
from pathlib import Path

ENV_DOUBLE = '''"""Double of SIMPLE's envs (tests/doubles/simple_checkout.py)."""
import os

import gymnasium
import numpy as np

from simple.core.action import ActionCmd

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


class Robot:
    joint_names = WHOLE_BODY_JOINTS

    def __init__(self):
        self.command = [0.0] * 8


class Task:
    def __init__(self, uid, instruction, criteria):
        self.uid, self.instruction, self.success_criteria = uid, instruction, criteria
        self.robot = Robot()
        self.metadata = {"success_criteria": criteria}


class LocoManipulationEnvDouble(gymnasium.Env):
    metadata = {"render_modes": []}

    def __init__(self, uid, sim_mode="mujoco_isaac", render_hz=50, headless=False, success_criteria=0.9):
        if sim_mode not in SIM_MODES:
            raise ValueError(f"sim_mode must be one of {SIM_MODES}")
        self.task = Task(uid, TASKS[uid], success_criteria)
        self.observation_space = gymnasium.spaces.Dict({})
        self.action_space = gymnasium.spaces.Dict({})
        self._success = False
        self.step_count = 0
        self._counter = 0.0
        self._qpos = np.zeros(43, dtype=np.float32)
        self._controls = 0

    def reset(self, seed=None, options=None):
        state = (options or {})["state_dict"]
        assert state["uid"] == self.task.uid, (state["uid"], self.task.uid)  # Task.reset asserts the uid
        if "102344280" in state["scene"]:
            raise FileNotFoundError(f"no scene {state['scene']}: the released metadata needs its scene repair")
        self._success, self._counter, self.step_count = False, 0.0, 0
        self._qpos = np.asarray(state["joint_qpos"], dtype=np.float32).copy()
        return self._obs(), {}

    def _obs(self):
        image = np.zeros((360, 640, 3), dtype=np.uint8)
        image[:, :, 0] = np.linspace(0, 255, 640, dtype=np.uint8)
        image[:, :, 1] = int(self._counter * 255) % 256
        column = int(np.clip(320 + 100 * self._qpos[15], 0, 639))
        image[:, column, 2] = 255
        right = image[:, ::-1].copy()
        return {"joint_qpos": self._qpos.copy(), "head_stereo_left": image, "head_stereo_right": right}

    def _increment(self, holds):
        self._counter = self._counter + 0.03 if holds else 0.0  # compute_reward: consecutive steps only

    def step(self, action):
        if not isinstance(action, ActionCmd):
            raise TypeError(f"SIMPLE steps with an ActionCmd, got {type(action).__name__}")
        self._controls += 1
        if int(os.environ.get("SIMPLE_DOUBLE_CRASH_AT", "0") or 0) == self._controls:
            os.abort()
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
                index = WHOLE_BODY_JOINTS.index(name)
                self._qpos[index] += np.float32(0.5 * (value - self._qpos[index]))
            holds = command[0] > 0.5
        else:
            raise ValueError(f"unknown ActionCmd type {action.type!r}")
        self._increment(holds)  # step() calls compute_reward, then check_success calls it again
        self._increment(holds)
        self._success = self._counter >= 0.2
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
        self.unwrapped.step_count = 0
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


def build_checkout(root: Path, revision: str, tasks: dict[str, str], episodes: int = 10) -> dict[str, dict]:
    """Write the double under `root`: a checkout at `revision` with `tasks` ({uid: native instruction}) and
    their released resets. Returns its inventory ({backend: {path: sha256}}): its weights are placeholders,
    so the catalog's hashes of the real ones cannot match them."""
    import hashlib

    (root / ".git").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text(revision + "\n")  # a detached checkout
    package = root / "src" / "simple"
    for sub in ("core", "envs/wrappers", "robots/policy"):
        (package / sub).mkdir(parents=True, exist_ok=True)
    for init in ("", "core", "envs/wrappers", "robots", "robots/policy"):
        (package / init / "__init__.py").touch()
    (package / "double_env.py").write_text(ENV_DOUBLE.replace("__TASKS__", repr(tasks)))
    (package / "core" / "action.py").write_text(ACTION_CMD)
    (package / "envs" / "__init__.py").write_text(REGISTER)
    (package / "envs" / "wrappers" / "stand_stabilization.py").write_text(WRAPPER)
    inventory = {"amo": {}, "sonic": {}}
    for name in ("amo_jit.pt", "adapter_jit.pt", "adapter_norm_stats.pt"):
        path = package / "robots" / "policy" / name
        path.write_bytes(f"double of {name}".encode())
        inventory["amo"][str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    for uid, instruction in tasks.items():
        meta = root / "data" / "simple-eval" / uid / "level-0" / "meta"
        meta.mkdir(parents=True)
        lines = []
        for index in range(episodes):
            state = {
                "uid": uid,
                "scene": "hssd/102344280" if index == 0 else "hssd/scene0",
                "joint_qpos": [0.01 * index] * 43,
            }
            # LeRobot's episode metadata keeps the task language with its outer whitespace trimmed
            lines.append(
                json.dumps({"episode_index": index, "tasks": [instruction.strip()], "environment_config": state})
            )
        (meta / "episodes.jsonl").write_text("\n".join(lines) + "\n")
    return inventory
