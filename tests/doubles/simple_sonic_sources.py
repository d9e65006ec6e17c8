"""The SONIC half of the SIMPLE checkout double (tests/doubles/simple_checkout.py writes them into it): SIMPLE's
decoupled-WBC agent and the gear_sonic and decoupled_wbc modules it drives, each as the source of a module of the
double, as strict as the real ones on what the worker reads (simple_checkout.py's docstring lists each fact)."""

AGENT = '''"""Double of simple.agents.sonic_decoupled_wbc_agent (tests/doubles/simple_sonic_sources.py): SIMPLE's
agent over the decoupled WBC, reading the wall clock where upstream's does (:11,130,189)."""
import time

import numpy as np

from decoupled_wbc.control.policy.g1_decoupled_whole_body_policy import G1DecoupledWholeBodyPolicy
from decoupled_wbc.control.robot_model.instantiation.g1 import instantiate_g1_robot_model
from simple.core.action import ActionCmd


class SonicDecoupledWbcAgent:
    def __init__(self, robot, sonic_config):
        self.robot, self.sim_dt = robot, sonic_config["SIMULATE_DT"]
        waist = "lower_and_upper_body" if sonic_config.get("enable_waist", False) else "lower_body"
        self._dwbc_robot_model = instantiate_g1_robot_model(waist_location=waist)
        self._wbc_policy = G1DecoupledWholeBodyPolicy(self._dwbc_robot_model)
        self._control_frequency = 50
        self._cached_target_q = None

    def reset(self, **kwargs):
        self._cached_target_q = None
        self._wbc_policy.reset(init_time=time.monotonic())

    def _build_wbc_observation(self, sim_obs):
        return {"q": np.zeros(43), "dq": np.zeros(43), "floating_base_pose": sim_obs["floating_base_pose"],
                "floating_base_vel": sim_obs["floating_base_vel"]}

    def get_stabilize_action(self, observation):
        t_now = time.monotonic()
        self._wbc_policy.set_observation(self._build_wbc_observation(self.robot.prepare_obs()))
        first = self._cached_target_q is None  # a 2 s ramp window on the first step
        self._wbc_policy.set_goal({
            "target_upper_body_pose": self._dwbc_robot_model.get_initial_upper_body_pose(),
            "navigate_cmd": np.zeros(4), "base_height_command": np.array([0.74]),
            "target_time": t_now + (2.0 if first else 1 / self._control_frequency),
            "interpolation_garbage_collection_time": t_now - 2 / self._control_frequency,
            "timestamp": t_now,
        })
        q = self._wbc_policy.get_action(time=t_now)["q"]
        model = self._dwbc_robot_model
        self._cached_target_q = model.get_body_actuated_joints(q)
        return ActionCmd(
            "decoupled_wbc", target_q=self._cached_target_q, left_hand_q=model.get_hand_actuated_joints(q, side="left"),
            right_hand_q=model.get_hand_actuated_joints(q, side="right"),
        )
'''

ROBOT_MODEL = '''"""Double of decoupled_wbc.control.robot_model.instantiation.g1
(tests/doubles/simple_sonic_sources.py): the 43 joints in pinocchio's order (each arm followed by its hand: index,
middle, thumb), the actuated joints in its supplemental order (SIMPLE's), groups as sorted indices (robot_model.py)."""
import numpy as np

from simple.double_env import ARM, LEG, WHOLE_BODY_JOINTS

WAIST = ["waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint"]
MODEL_HAND = ["index_0", "index_1", "middle_0", "middle_1", "thumb_0", "thumb_1", "thumb_2"]
MODEL_JOINTS = [f"left_{j}_joint" for j in LEG] + [f"right_{j}_joint" for j in LEG] + WAIST + [
    f"{side}_{j}_joint" for side in ("left", "right") for j in ARM + [f"hand_{h}" for h in MODEL_HAND]
]


class RobotModel:
    def __init__(self, waist_location):
        self.joint_to_dof_index = {name: index for index, name in enumerate(MODEL_JOINTS)}
        upper = WHOLE_BODY_JOINTS[15:] + (WAIST if waist_location != "lower_body" else [])
        lower = WHOLE_BODY_JOINTS[:12] + WAIST
        self._groups = {
            "upper_body": sorted(self.joint_to_dof_index[name] for name in upper),
            "lower_body": sorted(self.joint_to_dof_index[name] for name in lower),
        }
        self.num_dofs = len(MODEL_JOINTS)

    def get_joint_group_indices(self, group):
        return self._groups[group]

    def get_initial_upper_body_pose(self):
        pose = np.zeros(self.num_dofs)
        pose[self.joint_to_dof_index["left_shoulder_roll_joint"]] = 0.2  # the WBC's default upper-body pose
        pose[self.joint_to_dof_index["right_shoulder_roll_joint"]] = -0.2
        return pose[self._groups["upper_body"]]

    def get_body_actuated_joints(self, q):
        return q[[self.joint_to_dof_index[name] for name in WHOLE_BODY_JOINTS[:29]]].copy()

    def get_hand_actuated_joints(self, q, side):
        names = WHOLE_BODY_JOINTS[29:36] if side == "left" else WHOLE_BODY_JOINTS[36:43]
        return q[[self.joint_to_dof_index[name] for name in names]].copy()


def instantiate_g1_robot_model(waist_location="lower_body", high_elbow_pose=False):
    return RobotModel(waist_location)
'''

WHOLE_BODY_POLICY = '''"""Double of decoupled_wbc.control.policy.g1_decoupled_whole_body_policy
(tests/doubles/simple_sonic_sources.py): the upper body through InterpolationPolicy's waypoints at the times it is
given (interpolation_policy.py:90-136, 197-283, without the 1000 rad/s cap that never binds), the lower body (the
RL policy) passing the legs' zero and the waist's target through, and the goal time and safety timeout on
`time_module` (:27,66,111-128)."""
import time as time_module

import numpy as np


class Waypoints:
    def __init__(self, time, values):
        self.times, self.values, self.last = [time], [np.asarray(values, float)], time

    def __call__(self, t):
        values = np.array(self.values)
        return np.array([np.interp(t, self.times, values[:, j]) for j in range(values.shape[1])])

    def schedule(self, values, time, garbage_collection_time):
        if time <= garbage_collection_time:  # an insert earlier than now changes nothing
            return
        end = max(self.last, garbage_collection_time) if time > self.last else garbage_collection_time
        end = min(end, time)
        start = min(max(garbage_collection_time, self.times[0]), end)
        kept = sorted({start, end, *(t for t in self.times if start < t < end)})
        self.values = [self(t) for t in kept] + [np.asarray(values, float)]
        self.times, self.last = kept + [time], time


class LowerBody:  # what the worker sets of G1GearWbcPolicy
    use_policy_action = False
    gait_indices = None

    def set_observation(self, observation):
        assert {"q", "dq", "floating_base_pose", "floating_base_vel"} <= set(observation)


class G1DecoupledWholeBodyPolicy:
    def __init__(self, robot_model):
        self.robot_model = robot_model
        self.lower_body_policy = LowerBody()
        self.last_goal_time = time_module.monotonic()

    def reset(self, init_time=None):
        init_time = time_module.monotonic() if init_time is None else init_time
        upper = self.robot_model.get_initial_upper_body_pose()
        self.upper_body = Waypoints(init_time, np.concatenate([[0.74], np.zeros(4), upper]))
        self.last_goal_time = init_time

    def set_observation(self, observation):
        self.lower_body_policy.set_observation(observation)

    def set_goal(self, goal):
        self.last_goal_time = time_module.monotonic()
        pose, navigate, height = goal["target_upper_body_pose"], goal["navigate_cmd"], goal["base_height_command"]
        assert np.shape(pose) == (len(self.robot_model.get_joint_group_indices("upper_body")),), np.shape(pose)
        assert np.shape(navigate) == (4,) and np.shape(height) == (1,)
        assert goal["target_time"] > goal["timestamp"] > goal["interpolation_garbage_collection_time"]
        values = np.concatenate([height, navigate, pose])
        self.upper_body.schedule(values, goal["target_time"], goal["interpolation_garbage_collection_time"])

    def get_action(self, time=None):
        current = time if time is not None else time_module.monotonic()
        if current - self.last_goal_time > 1.0:  # the safety timeout: hold still
            print(f"SAFETY: Teleop mode timeout after {current - self.last_goal_time:.1f}s, injecting safe goal")
            held = np.concatenate([[0.74], np.zeros(4), self.upper_body(current)[5:]])
            self.upper_body.schedule(held, current + 0.1, current - 1.0)
        q = np.zeros(self.robot_model.num_dofs)
        upper = self.robot_model.get_joint_group_indices("upper_body")
        q[upper] = self.upper_body(current)[5:]
        waist = q[upper[:3]].copy() if len(upper) == 31 else np.zeros(3)  # the RL's torso target, passed through
        q[self.robot_model.get_joint_group_indices("lower_body")] = np.concatenate([np.zeros(12), waist])
        return {"q": q}
'''

SONIC_CONFIG = '''"""Double of gear_sonic.utils.mujoco_sim.configs (tests/doubles/simple_sonic_sources.py)."""


class SimLoopConfig:
    def load_wbc_yaml(self):
        return {"SIMULATE_DT": 0.005, "enable_waist": True}  # enable_waist's default (configs.py:143)
'''
