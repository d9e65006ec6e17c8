"""Run inside .venv-sapien by tests/test_full_cell_real_build.py: one full-matrix cell built and reset
through the adapter (simpler_adapter.SimplerEpisode.full_cell) on the real ManiSkill2 0.5.3.

ManiSkill2 0.5.3 has none of real2sim's env ids or scene kwargs, so the cell's env is built as
PickCube-v0 with the kwargs 0.5.3's BaseEnv shares with real2sim's fork (obs mode, frequencies,
shader, camera configs, the time limit); the others are reported, not passed. PickCube has no
language instruction: the script gives it one, as real2sim's envs have. Prints JSON on stdout."""

import inspect
import json
import sys
from pathlib import Path

import gymnasium as gym
import mani_skill2.envs  # noqa: F401  (registers the tasks)
import numpy as np
import sapien.core as sapien
from mani_skill2.envs.pick_and_place.pick_cube import PickCubeEnv
from mani_skill2.envs.sapien_env import BaseEnv

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "environment" / "workers"))
from simpler_adapter import SimplerEpisode

COMPARABLE_ENV = "PickCube-v0"
SHARED = (set(inspect.signature(BaseEnv.__init__).parameters) | {"max_episode_steps"}) - {"self", "control_mode"}

cell = json.loads(sys.stdin.read())
built = {}


def make_comparable(env_id: str, **kwargs):
    built["env_id"], built["kwargs"] = env_id, kwargs
    return gym.make(COMPARABLE_ENV, **{k: v for k, v in kwargs.items() if k in SHARED})


PickCubeEnv.get_language_instruction = lambda self: "pick up the cube"
episode = SimplerEpisode.full_cell(make_comparable, cell, "/upstream/data", "base_camera", cell["horizon"])
env = episode.env.unwrapped
rgb, instruction, reset_info = episode.reset(cell["seed"])
kwargs = built["kwargs"]
print(
    json.dumps(
        {
            "asked_env_id": built["env_id"],
            "passed": sorted(k for k in kwargs if k in SHARED),
            "not_in_maniskill2": sorted(k for k in kwargs if k not in SHARED),
            "prepackaged_config": kwargs.get("prepackaged_config"),
            "rgb_overlay_path": kwargs.get("rgb_overlay_path"),
            "took": {
                "obs_mode": env._obs_mode,  # 0.5.3 builds "rgbd" as "image" under an RGBD wrapper
                "camera_observation": sorted(episode.env.observation_space["image"]["base_camera"].keys()),
                "sim_freq": env._sim_freq,
                "control_freq": env._control_freq,
                "shader_dir": sapien.render_config.camera_shader_dir,
                "textures": {name: list(cfg.texture_names) for name, cfg in env._camera_cfgs.items()},
                "max_episode_steps": episode.env.spec.max_episode_steps,
            },
            "reset": {
                "episode_seed": int(env._episode_seed),
                "rgb": [str(rgb.dtype), list(rgb.shape), float(np.asarray(rgb).std())],
                "instruction": instruction,
                "info": reset_info,
            },
        }
    )
)
