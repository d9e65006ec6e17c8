"""Native worker for the CPU development benchmark: gymnasium-robotics Fetch tasks on MuJoCo.

Run by the evaluator as `PYTHON fetch_worker.py`, one env per process, reset for each episode that
has the same build (a warm worker: RESET_FIELDS are what a reset may change); it speaks the
protocol of wire.py on its stdin/stdout. MUJOCO_GL must be set by the caller (egl, or
osmesa as the fallback) before MuJoCo is imported.
"""

from __future__ import annotations

import os
import sys

import numpy as np
from wire import NativeError, build_of, check_same_build, serve_worker

WIDTH, HEIGHT = 640, 480
# What a reset applies to the built env; the env id and its TimeLimit are the build.
RESET_FIELDS = frozenset({"seed", "instruction"})


class FetchWorker:
    def __init__(self) -> None:
        self.env = None
        self.build: dict | None = None
        self.instruction = ""
        self.native_steps = 0

    def describe(self, request: dict, arrays: dict) -> tuple[dict, dict]:
        try:
            import gymnasium
            import gymnasium_robotics
            import mujoco
        except ImportError as exc:
            raise NativeError("install", f"cannot import the Fetch runtime: {exc}") from None
        return {
            "benchmark": "fetch",
            "python": sys.version.split()[0],
            "mujoco_gl": os.environ.get("MUJOCO_GL"),
            "reset_fields": sorted(RESET_FIELDS),
            "packages": {
                "mujoco": mujoco.__version__,
                "gymnasium": gymnasium.__version__,
                "gymnasium_robotics": gymnasium_robotics.__version__,
                "numpy": np.__version__,
            },
        }, {}

    def _build(self, env_id: str, max_episode_steps: int) -> None:
        try:
            import gymnasium as gym
            import gymnasium_robotics
        except ImportError as exc:
            raise NativeError("install", f"cannot import the Fetch runtime: {exc}") from None
        gym.register_envs(gymnasium_robotics)
        self.env = gym.make(
            env_id, render_mode="rgb_array", width=WIDTH, height=HEIGHT, max_episode_steps=max_episode_steps
        )

    def _frame(self) -> np.ndarray:
        try:
            frame = self.env.render()
        except Exception as exc:
            raise NativeError("render", f"rendering failed: {type(exc).__name__}: {exc}") from None
        if frame is None or frame.shape != (HEIGHT, WIDTH, 3) or frame.dtype != np.uint8:
            raise NativeError("render", f"unexpected frame {getattr(frame, 'shape', None)}")
        return frame

    def _observation(self, obs: dict) -> dict[str, np.ndarray]:
        return {
            "rgb": self._frame(),
            "observation": np.asarray(obs["observation"], dtype=np.float64),
            "achieved_goal": np.asarray(obs["achieved_goal"], dtype=np.float64),
            "desired_goal": np.asarray(obs["desired_goal"], dtype=np.float64),
        }

    def reset(self, request: dict, arrays: dict) -> tuple[dict, dict]:
        if self.env is None:
            self._build(request["env_id"], int(request["max_episode_steps"]))
            self.build = build_of(request, RESET_FIELDS)
        else:
            check_same_build(self.build, request, RESET_FIELDS)
        seed = request["seed"]
        if not (isinstance(seed, int) and 0 <= seed < 2**32):
            raise NativeError("reset", f"seed must be in [0, 2**32), got {seed!r}")
        self.instruction = request["instruction"]  # Fetch has no native language; the catalog's
        self.native_steps = 0
        obs, info = self.env.reset(seed=seed)
        return {"instruction": self.instruction, "native_steps": 0}, self._observation(obs)

    def step(self, request: dict, arrays: dict) -> tuple[dict, dict]:
        if self.env is None:
            raise NativeError("native_runtime", "step before reset")
        action = arrays.get("action")
        if action is None or action.shape != (4,) or not np.all(np.isfinite(action)):
            raise NativeError("native_runtime", f"refusing malformed action {action!r}")
        obs, reward, terminated, truncated, info = self.env.step(np.array(action, dtype=np.float64))
        self.native_steps += 1
        header = {
            "success": bool(info["is_success"]),
            "terminated": bool(terminated),
            "truncated": bool(truncated),
            "reward": float(reward),
            "instruction": self.instruction,
            "native_steps": self.native_steps,
            "info": {"is_success": float(info["is_success"])},
        }
        return header, self._observation(obs)

    def close(self, request: dict, arrays: dict) -> tuple[dict, dict]:
        if self.env is not None:
            self.env.close()
        return {"native_steps": self.native_steps}, {}


if __name__ == "__main__":
    serve_worker(FetchWorker())
