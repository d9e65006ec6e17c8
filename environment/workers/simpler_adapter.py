"""Construction and stepping of the SimplerEnv prepackaged tasks, as the protocol requires, and of
the cells of the native full matrices (evaluator/protocol/full_matrix.py) as upstream's own
evaluator builds each episode.

Runs inside the SAPIEN worker's own interpreter: standard library and numpy only; the upstream
modules (the pinned alias map and gymnasium's `make`) are handed in, never imported here, so the
same code is checked against a double of them where the upstream cannot run.

What it guards against (upstream_simplerenv_facts.md §1, §4-§6, §10):
- `simpler_env.make` mutates the global alias map and sets obs_mode to a tuple: never call it;
  copy the alias's kwargs and call gym's make with obs_mode="rgbd", prepackaged_config=True.
- The extended track sets the TimeLimit (max_episode_steps) at construction; the catalog keeps H.
- Success is the step's own info; evaluate(), get_info() and advance_to_next_subtask() are never
  called; per-step info is deep-copied (episode_stats is one dict, mutated in place).
- The instruction is read from the unwrapped env after each step and delivered with the next
  observation; a change (the apple task's timed switch inside step 101) is recorded at its step.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from wire import jsonable  # this directory is on the worker's path

UINT32 = 2**32


class AdapterError(Exception):
    """A request the adapter refuses before it reaches the upstream env."""


def construction(alias_map: Mapping[str, tuple[str, dict]], alias: str, max_episode_steps: int) -> tuple[str, dict]:
    """The env id and an independent copy of the kwargs to build `alias` with."""
    if alias not in alias_map:
        raise AdapterError(f"{alias!r} is not a prepackaged alias of the pinned upstream")
    env_id, alias_kwargs = alias_map[alias]
    kwargs = copy.deepcopy(dict(alias_kwargs))  # never the map's own dict
    kwargs.update(obs_mode="rgbd", prepackaged_config=True, max_episode_steps=int(max_episode_steps))
    return env_id, kwargs


def full_construction(cell: Mapping, asset_dir: str, max_episode_steps: int) -> tuple[str, dict]:
    """The env id and kwargs of one full-matrix cell: the cell's own kwargs, never the prepackaged
    config (which would override them and redraw the urdf and overlay at every reset), with the
    overlay image found in the installed upstream's data (asset_dir is mani_skill2_real2sim's data)."""
    kwargs = copy.deepcopy(dict(cell["build_kwargs"]))
    if kwargs.get("rgb_overlay_path"):
        kwargs["rgb_overlay_path"] = f"{asset_dir}/{kwargs['rgb_overlay_path'].removeprefix('data/')}"
    kwargs.update(prepackaged_config=False, max_episode_steps=int(max_episode_steps))
    return cell["env_id"], kwargs


def full_reset_options(cell: Mapping) -> dict:
    """The cell's reset options as upstream's evaluator passes them: poses as float arrays
    (simpler_env/evaluation/maniskill2_evaluator.py:67-85)."""
    robot = cell["reset_options"]["robot_init_options"]
    objects = dict(cell["reset_options"]["obj_init_options"])
    if "init_xy" in objects:
        objects["init_xy"] = np.array(objects["init_xy"], dtype=np.float64)
    return {
        "robot_init_options": {
            "init_xy": np.array(robot["init_xy"], dtype=np.float64),
            "init_rot_quat": np.array(robot["init_rot_quat"], dtype=np.float64),
        },
        "obj_init_options": objects,
    }


class SimplerEpisode:
    """One env of one prepackaged alias or one full-matrix cell (one env per worker process)."""

    def __init__(
        self, gym_make: Callable[..., Any], alias_map: Mapping, alias: str, camera: str, max_episode_steps: int
    ):
        self._open(gym_make, *construction(alias_map, alias, max_episode_steps), camera, reset_options=None)

    @classmethod
    def full_cell(
        cls, gym_make: Callable[..., Any], cell: Mapping, asset_dir: str, camera: str, max_episode_steps: int
    ) -> SimplerEpisode:
        episode = cls.__new__(cls)
        env_id, kwargs = full_construction(cell, asset_dir, max_episode_steps)
        episode._open(gym_make, env_id, kwargs, camera, reset_options=full_reset_options(cell))
        return episode

    def take_cell(self, cell: Mapping) -> None:
        """The next full-matrix cell of the same build (a warm worker's): its own reset options from now on."""
        if self.reset_options is None:
            raise AdapterError("a prepackaged alias's env takes no full-matrix cell")
        self.reset_options = full_reset_options(cell)

    def _open(self, gym_make: Callable[..., Any], env_id: str, kwargs: dict, camera: str, reset_options) -> None:
        self.env_id, self.kwargs, self.camera, self.reset_options = env_id, kwargs, camera, reset_options
        self.env = gym_make(self.env_id, **self.kwargs)
        self.instruction = ""
        self.steps = 0

    def _rgb(self, obs: Mapping) -> np.ndarray:
        rgb = obs["image"][self.camera]["rgb"]
        if rgb.dtype != np.uint8 or rgb.ndim != 3 or rgb.shape[2] != 3:
            raise AdapterError(f"camera {self.camera} gave {rgb.dtype} {rgb.shape}, not an RGB frame")
        return rgb  # the documented camera's pixels, unresized

    def reset(self, seed: int) -> tuple[np.ndarray, str, dict]:
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < UINT32:
            raise AdapterError(f"reset seeds are explicit, in [0, 2**32): got {seed!r}")
        if self.reset_options is None:
            obs, info = self.env.reset(seed=seed)
        else:  # a fresh copy each reset: upstream may keep and change what it is given
            obs, info = self.env.reset(seed=seed, options=copy.deepcopy(self.reset_options))
        self.steps = 0
        self.instruction = self.env.unwrapped.get_language_instruction()
        keep = ("scene_name", "urdf_version", "rgb_overlay_path", "episode_id", "model_id", "station_name")
        return self._rgb(obs), self.instruction, {k: jsonable(info[k]) for k in keep if k in info}

    def step(self, action: np.ndarray) -> dict:
        """Execute one validated action; the result as the worker reports it."""
        action = np.asarray(action, dtype=np.float64)
        if action.shape != (7,) or not np.all(np.isfinite(action)):
            raise AdapterError(f"refusing malformed action of shape {action.shape}")
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        info = jsonable(info)  # a copy now: upstream mutates episode_stats in place later
        instruction = self.env.unwrapped.get_language_instruction()
        changed = instruction != self.instruction
        self.instruction = instruction
        return {
            "rgb": self._rgb(obs),
            "success": bool(info["success"]),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "reward": float(reward),
            "instruction": instruction,  # for the next scheduled observation
            "instruction_changed_at_step": self.steps if changed else None,
            "info": info,
        }
