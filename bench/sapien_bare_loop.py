"""Run inside .venv-sapien by bench/sapien_worker.py: a bare ManiSkill2 loop, no RSI in between.
Prints JSON: seconds per step without rendering (obs_mode=state) and with the 480x640 camera."""

import json
import sys
import time

import gymnasium as gym
import mani_skill2.envs  # noqa: F401
import numpy as np

steps = int(sys.argv[1])
out = {}
for mode in ("state", "rgbd"):
    kwargs = {"camera_cfgs": {"base_camera": {"width": 640, "height": 480}}} if mode == "rgbd" else {}
    env = gym.make("PickCube-v0", obs_mode=mode, control_mode="pd_ee_delta_pose", max_episode_steps=10**6, **kwargs)
    env.reset(seed=0)
    action = np.zeros(7)
    for _ in range(5):
        env.step(action)
    start = time.perf_counter()
    for _ in range(steps):
        obs, *_ = env.step(action)
        if mode == "rgbd":
            obs["image"]["base_camera"]["rgb"].copy()  # the pixels the worker would send
    out[mode] = (time.perf_counter() - start) / steps
    env.close()
print(json.dumps(out))
