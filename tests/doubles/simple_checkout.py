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
(AMO tasks: a forward velocity command above 0.5; SONIC tasks: the right thumb closed past 0.7, with the
faucet's criterion 0.2); `terminated` = success; for SONIC, `sonic_config` at gym.make, the robot's
`stabilized` after 100 checks, `update_reward`, `decoupled_wbc` commands (29 + 7 + 7), and
`SonicDecoupledWbcAgent` with a pass-through WBC (gear_sonic's SimLoopConfig beside it); the env's
`mujoco` simulator with its timestep and simulated time. What it is
not: a humanoid simulation. Modes by environment variable: SIMPLE_DOUBLE_CRASH_AT=k aborts the process at
control k; SIMPLE_DOUBLE_SUCCESS_WHILE_STANDING=1 makes the condition hold during the stand;
SIMPLE_DOUBLE_UNSTABLE=1 keeps a SONIC robot from ever reporting itself stable; SIMPLE_DOUBLE_SUBSTEPS=n
makes each control advance the physics n timesteps instead of the backend's own (AMO 10 x 2 ms, SONIC
4 x 5 ms).
"""

from __future__ import annotations

import json
from pathlib import Path

ENV_DOUBLE = '''"""Double of SIMPLE's envs (tests/doubles/simple_checkout.py)."""
import os
import types

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
        self.checks = 0


class SonicRobot(Robot):
    """G1Sonic's start: stable once the floating base is still after at least 100 checks."""

    def __init__(self):
        super().__init__()
        self.checks = 0

    @property
    def stabilized(self):
        return self.checks >= 100 and os.environ.get("SIMPLE_DOUBLE_UNSTABLE") != "1"

    def prepare_obs(self):
        return {
            "body_q": np.zeros(29), "body_dq": np.zeros(29),
            "floating_base_pose": np.array([0, 0, 0.74, 1, 0, 0, 0.0]), "floating_base_vel": np.zeros(6),
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


class LocoManipulationEnvDouble(gymnasium.Env):
    metadata = {"render_modes": []}

    def __init__(self, uid, sim_mode="mujoco_isaac", render_hz=50, headless=False, **kwargs):
        if sim_mode not in SIM_MODES:
            raise ValueError(f"sim_mode must be one of {SIM_MODES}")
        instruction, backend = TASKS[uid]
        if backend == "sonic":  # SonicLocoManipEnv takes the WBC's settings; 0.2 is the faucet's own criterion
            (config,) = kwargs.values()
            assert set(kwargs) == {"sonic_config"} and config["SIMULATE_DT"] == 0.005, kwargs
            criteria = 0.2
        else:
            (criteria,) = kwargs.values()
            assert set(kwargs) == {"success_criteria"}, kwargs
        self.task = Task(uid, instruction, criteria, backend)
        # 20 ms per control: AMO's 10 mj_steps of 2 ms, SONIC's control_decimal 4 of 5 ms
        self.mujoco = MujocoSimulator(0.002 if backend == "amo" else 0.005)
        self._substeps = int(os.environ.get("SIMPLE_DOUBLE_SUBSTEPS") or (10 if backend == "amo" else 4))
        print(f"building {uid} in {sim_mode}")  # native code prints on stdout: it must not break the protocol
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
        self.mujoco.mjData.time = 0.0
        self.task.robot.checks = 0
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

    def update_reward(self):  # eval_decoupled_wbc calls it after each stabilization step
        pass

    def _increment(self, holds):
        self._counter = self._counter + 0.03 if holds else 0.0  # compute_reward: consecutive steps only

    def step(self, action):
        if not isinstance(action, ActionCmd):
            raise TypeError(f"SIMPLE steps with an ActionCmd, got {type(action).__name__}")
        self._controls += 1
        if int(os.environ.get("SIMPLE_DOUBLE_CRASH_AT", "0") or 0) == self._controls:
            os.abort()
        self.mujoco.advance(self._substeps)
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
        elif action.type == "decoupled_wbc":
            target_q, left, right = action["target_q"], action["left_hand_q"], action["right_hand_q"]
            if (np.shape(target_q), np.shape(left), np.shape(right)) != ((29,), (7,), (7,)):
                raise ValueError("decoupled_wbc takes target_q (29), left_hand_q (7) and right_hand_q (7)")
            self._qpos[:29] += np.float32(0.5) * (np.asarray(target_q, np.float32) - self._qpos[:29])
            robot.checks += 1
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
        self.unwrapped.step_count = 0
        self.unwrapped._success = False
        return observation, info
'''

AGENT = '''"""Double of simple.agents.sonic_decoupled_wbc_agent (tests/doubles/simple_checkout.py): the decoupled
WBC as a pass-through of its goal (upper body by the WBC's own joint names, hands included)."""
import numpy as np

from simple.core.action import ActionCmd
from simple.double_env import WHOLE_BODY_JOINTS

UPPER = WHOLE_BODY_JOINTS[15:]  # arms and hands: the waist stays with the lower body (enable_waist False)


class RobotModel:
    joint_to_dof_index = {name: index for index, name in enumerate(WHOLE_BODY_JOINTS)}

    def get_joint_group_indices(self, group):
        assert group == "upper_body"
        return [self.joint_to_dof_index[name] for name in UPPER]

    def get_initial_upper_body_pose(self):
        return np.zeros(len(UPPER), np.float32)

    def get_body_actuated_joints(self, q):
        return q[:29].copy()

    def get_hand_actuated_joints(self, q, side):
        return q[29:36].copy() if side == "left" else q[36:43].copy()


class LowerBody:
    use_policy_action = False
    gait_indices = None


class WbcPolicy:
    def __init__(self):
        self.lower_body_policy = LowerBody()
        self.goal = self.observation = None

    def reset(self, init_time):
        self.goal = None

    def set_observation(self, observation):
        assert {"q", "dq", "floating_base_pose", "floating_base_vel"} <= set(observation)
        self.observation = observation

    def set_goal(self, goal):
        pose = goal["target_upper_body_pose"]
        assert pose.dtype == np.float32 and pose.shape == (len(UPPER),), (pose.dtype, pose.shape)
        assert np.shape(goal["navigate_cmd"]) == (4,) and np.shape(goal["base_height_command"]) == (1,)
        assert goal["target_time"] > goal["timestamp"] > goal["interpolation_garbage_collection_time"]
        self.goal = goal

    def get_action(self, time):
        q = np.zeros(43)
        q[15:] = self.goal["target_upper_body_pose"]
        return {"q": q}


class SonicDecoupledWbcAgent:
    def __init__(self, robot, sonic_config):
        self.robot, self.sim_dt = robot, sonic_config["SIMULATE_DT"]
        self._dwbc_robot_model = RobotModel()
        self._wbc_policy = WbcPolicy()
        self._control_frequency = 50

    def reset(self, **kwargs):
        self._wbc_policy.reset(init_time=0.0)

    def _build_wbc_observation(self, sim_obs):
        return {"q": np.zeros(43), "dq": np.zeros(43), "floating_base_pose": sim_obs["floating_base_pose"],
                "floating_base_vel": sim_obs["floating_base_vel"]}

    def get_stabilize_action(self, observation):
        q = np.zeros(43)
        return ActionCmd("decoupled_wbc", target_q=q[:29], left_hand_q=q[29:36], right_hand_q=q[36:43])
'''

SONIC_CONFIG = '''"""Double of gear_sonic.utils.mujoco_sim.configs (tests/doubles/simple_checkout.py)."""


class SimLoopConfig:
    def load_wbc_yaml(self):
        return {"SIMULATE_DT": 0.005}
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
    package = root / "src" / "simple"
    for sub in ("core", "envs/wrappers", "robots/policy"):
        (package / sub).mkdir(parents=True, exist_ok=True)
    for init in ("", "core", "envs/wrappers", "robots", "robots/policy", "agents"):
        (package / init).mkdir(parents=True, exist_ok=True)
        (package / init / "__init__.py").touch()
    (package / "agents" / "sonic_decoupled_wbc_agent.py").write_text(AGENT)
    configs = root / "src" / "gear_sonic" / "utils" / "mujoco_sim"  # a submodule installed into SIMPLE's venv
    configs.mkdir(parents=True)
    for level in (configs.parents[1], configs.parent, configs):
        (level / "__init__.py").touch()
    (configs / "configs.py").write_text(SONIC_CONFIG)
    (package / "double_env.py").write_text(ENV_DOUBLE.replace("__TASKS__", repr(tasks)))
    (package / "core" / "action.py").write_text(ACTION_CMD)
    (package / "envs" / "__init__.py").write_text(REGISTER)
    (package / "envs" / "wrappers" / "stand_stabilization.py").write_text(WRAPPER)
    inventory = {backend: {} for backend in files}
    for backend, paths in files.items():
        for relative, digest in paths.items():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(f"double of {path.name}".encode())
            inventory[backend][relative] = hashlib.sha256(path.read_bytes()).hexdigest() if digest else ""
    for uid, (instruction, _) in tasks.items():
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
