"""SAPIEN on this CPU: step time, render time, and the native worker's overhead over a bare loop.

    .venv/bin/python bench/sapien_worker.py [--steps 100]

PickCube-v0 (ManiSkill2 0.5.3, pd_ee_delta_pose, a 480x640 camera) on Mesa lavapipe with RSI's
Vulkan layer. The bare loops run in .venv-sapien with nothing of RSI in between; the worker loop
sends the same zero actions through the native worker protocol (pipes, frames, the 921,600-byte
RGB image back each step). All in one run, side by side.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluator.native.backends import worker_spec  # noqa: E402
from evaluator.native.client import NativeWorker  # noqa: E402
from evaluator.native.environment import vulkan_layer_env  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    spec = worker_spec("maniskill2")
    bare = json.loads(
        subprocess.run(
            [spec.python, str(ROOT / "bench" / "sapien_bare_loop.py"), str(args.steps)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, **vulkan_layer_env()},
        )
        .stdout.strip()
        .splitlines()[-1]
    )

    worker = NativeWorker(spec)
    try:
        worker.reset(
            0,
            family="maniskill2",
            env_id="PickCube-v0",
            camera="base_camera",
            control_mode="pd_ee_delta_pose",
            instruction="",
            max_episode_steps=10**6,
        )
        action = (0.0,) * 7
        for _ in range(5):
            worker.step(action)
        start = time.perf_counter()
        for _ in range(args.steps):
            worker.step(action)
        through_worker = (time.perf_counter() - start) / args.steps
    finally:
        worker.close()

    physics, rendered = bare["state"], bare["rgbd"]
    print(f"PickCube-v0, {args.steps} steps each, lavapipe + RSI layer, 480x640 camera")
    print(f"step without rendering (bare)    {physics * 1000:7.1f} ms")
    print(f"step with the camera (bare)      {rendered * 1000:7.1f} ms   render = {(rendered - physics) * 1000:.1f} ms")
    print(f"step through the native worker   {through_worker * 1000:7.1f} ms")
    print(f"worker overhead per step         {(through_worker - rendered) * 1000:7.1f} ms")
    print(f"ratio worker / bare loop         {through_worker / rendered:7.2f}")


if __name__ == "__main__":
    main()
