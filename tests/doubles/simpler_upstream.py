"""A test double of the pinned SimplerEnv upstream surface that the adapter touches: the alias map
(SE/simpler_env/__init__.py:33-71, with its mutating `make`), gymnasium's make with its TimeLimit,
and the env's reset/step/instruction behaviour, following upstream_simplerenv_facts.md. The real
upstream needs SAPIEN assets this machine lacks; this double lets CI check the adapter's logic."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation

CATALOG = json.loads((Path(__file__).resolve().parents[2] / "environment/catalogs/simpler_env.json").read_text())

# The upstream map: alias -> (env id, kwargs dict). The kwargs dicts are shared module state there.
ENVIRONMENT_MAP = {a["alias"]: (a["env_id"], dict(a["kwargs"])) for a in CATALOG["aliases"]}

REGISTERED_STEPS = {  # registered max_episode_steps (facts §2)
    "GraspSingleOpenedCokeCanInScene-v0": 80,
    "GraspSingleRandomObjectInScene-v0": 80,
    "MoveNearGoogleBakedTexInScene-v0": 80,
    "MoveNearGoogleBakedTexInScene-v1": 80,
    "PutSpoonOnTableClothInScene-v0": 60,
    "PutCarrotOnPlateInScene-v0": 60,
    "StackGreenCubeOnYellowCubeBakedTexInScene-v0": 60,
    "PutEggplantInBasketScene-v0": 120,
}
GOOGLE = ("Grasp", "MoveNear", "Open", "Close", "PlaceInto")
# The flat 7-D action space of both robots: [dxyz, rotvec, gripper] (facts §7).
ACTION_LOW = np.array([-1, -1, -1, -np.pi / 2, -np.pi / 2, -np.pi / 2, -1])
ACTION_HIGH = -ACTION_LOW


def make(task_name, **kwargs):
    """Upstream's own make (init:74-88): writes into the shared map. The adapter must never call it."""
    raise AssertionError("the adapter called simpler_env.make, which mutates the global alias map")


class EnvDouble:
    """The unwrapped env: place tasks switch subtask inside step 101 (pre-step count >= 100)."""

    def __init__(self, env_id: str, **kwargs):
        self.env_id, self.kwargs = env_id, kwargs
        self.place = env_id.startswith("PlaceInto")
        self.camera = "overhead_camera" if env_id.startswith(GOOGLE) else "3rd_view_camera"
        self.shape = (512, 640, 3) if self.camera == "overhead_camera" else (480, 640, 3)
        self.outside_calls = {"evaluate": 0, "get_info": 0, "advance_to_next_subtask": 0}
        self._in_step = False

    def reset(self, seed=None, options=None):
        self.resets = getattr(self, "resets", []) + [(seed, options)]  # what the env was given, as given
        if options is not None:  # upstream's move near writes into (a shallow copy of) the options
            options = options.copy()
            options["model_ids"] = ["double"]
        self._elapsed_steps = 0
        self.cur_subtask_id = 0
        self.rng = np.random.RandomState(seed)
        # What a frame shows is drawn from the seed and the reset options and moved by every action, as upstream's
        # scene is: a reset that kept anything of a previous episode shows in the pixels.
        self.scene = self.rng.randint(256) + _options_shade(options)
        self.arm = np.zeros(3)
        self.episode_stats = {"n_lift_significant": 0, "consec_grasp": False}
        self.has_contact = 0
        return self._obs(), {"scene_name": "double", "urdf_version": "", "rgb_overlay_path": "a0.png"}

    def _obs(self):
        shade = self._elapsed_steps * 7 + self.scene + int(100 * self.arm.sum())
        pixel = np.full(self.shape, shade % 256, dtype=np.uint8)
        return {
            "image": {self.camera: {"rgb": pixel, "depth": np.zeros(self.shape[:2] + (1,), np.float32)}},
            "agent": {"qpos": np.zeros(11)},
        }

    def get_language_instruction(self):
        if self.place:
            return "place apple into top drawer" if self.cur_subtask_id == 1 else "open top drawer"
        return "do the task"

    def is_final_subtask(self):
        return not self.place or self.cur_subtask_id == 1

    def advance_to_next_subtask(self):
        self.outside_calls["advance_to_next_subtask"] += 1
        if not self.place:
            raise NotImplementedError
        self.cur_subtask_id = 1

    def evaluate(self):
        if not self._in_step:
            self.outside_calls["evaluate"] += 1
        self.has_contact += 1  # stateful, like place:233: a second call double-counts
        self.episode_stats["n_lift_significant"] += 1  # mutated in place, the same dict each step
        success = self.place and self.cur_subtask_id == 1 and self.has_contact >= 105
        return {"success": success, "episode_stats": self.episode_stats}

    def get_info(self):
        if not self._in_step:
            self.outside_calls["get_info"] += 1
        return {"elapsed_steps": self._elapsed_steps, **self.evaluate()}

    def step(self, action):
        if not isinstance(action, np.ndarray):
            raise TypeError("actions must be np.ndarray")  # sap:560-567
        assert action.shape == (7,)
        if np.isnan(action).any():
            raise ValueError("NaN action")
        # What the pd_ee_pose controllers do with it: work on the array in place and hand the rotation
        # slice to scipy, which refuses read-only memory ("buffer source array is read-only").
        np.clip(action, ACTION_LOW, ACTION_HIGH, out=action)
        self.last_rotation = Rotation.from_rotvec(action[3:6])
        self.arm += action[:3]
        if self.place and self._elapsed_steps >= 100:  # checked before the base step (place:242-246)
            self.cur_subtask_id = 1
        self._elapsed_steps += 1
        self._in_step = True
        try:
            info = self.get_info()
        finally:
            self._in_step = False
        return self._obs(), float(info["success"]), bool(info["success"]), False, info


def _options_shade(options) -> int:
    """A number from a reset's robot and object options (poses, episode id): another cell, another picture."""
    if not options:
        return 0
    robot = options.get("robot_init_options", {})
    objects = options.get("obj_init_options", {})
    values = [*np.ravel(robot.get("init_xy", ())), *np.ravel(objects.get("init_xy", ())), objects.get("episode_id", 0)]
    return int(sum(float(value) * 97 * place for place, value in enumerate(values, start=1)))


class TimeLimitDouble:
    def __init__(self, env: EnvDouble, max_episode_steps: int):
        self.env, self.max_episode_steps, self._count = env, max_episode_steps, 0

    @property
    def unwrapped(self):
        return self.env

    def reset(self, seed=None, options=None):
        self._count = 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._count += 1
        return obs, reward, terminated, truncated or self._count >= self.max_episode_steps, info


def gym_make(env_id: str, max_episode_steps: int | None = None, **kwargs):
    """gymnasium.make: consumes max_episode_steps for the TimeLimit, passes the rest to the env."""
    if isinstance(kwargs.get("obs_mode"), tuple):
        raise AssertionError("obs_mode must be the string 'rgbd', not upstream make()'s tuple")
    default = 200 if env_id.startswith("PlaceInto") else 113 if env_id.startswith(("Open", "Close")) else None
    steps = max_episode_steps or REGISTERED_STEPS.get(env_id) or default
    return TimeLimitDouble(EnvDouble(env_id, **kwargs), steps)
