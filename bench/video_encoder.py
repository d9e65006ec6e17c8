"""The evidence video's encoder: CPU per frame and file size of RSI's VideoWriter against plain x264
"veryfast" (x264's own threads), on the same rendered Fetch frames, in one run.

    .venv/bin/python bench/video_encoder.py [--frames 100] [--rounds 3]

The frames are rendered first (FetchPickAndPlace-v4, seed 3, 480x640, MUJOCO_GL=egl), once with the
noop policy's zero actions and once with random actions, so the encoders' CPU is all that is timed:
process CPU time (every thread of this process), the best of ROUNDS. The encoder shares the machine's
cores with the simulator's renderer while an episode runs, so CPU, not latency, is what it costs.
"""

import argparse
import os
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["MUJOCO_GL"] = "egl"

import av  # noqa: E402
import gymnasium as gym  # noqa: E402
import gymnasium_robotics  # noqa: E402
import numpy as np  # noqa: E402

from evaluator.running.evidence import GOP, RAW_VIDEO, VideoWriter  # noqa: E402

FPS = 10


def rendered(frames: int, moving: bool) -> list[np.ndarray]:
    gym.register_envs(gymnasium_robotics)
    env = gym.make("FetchPickAndPlace-v4", render_mode="rgb_array", width=640, height=480)
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    shots = []
    for _ in range(frames):
        env.step(rng.uniform(-1, 1, 4) if moving else np.zeros(4))
        shots.append(env.render().copy())
    env.close()
    return shots


def rsi_writer(shots: list[np.ndarray]) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        started = time.process_time()
        writer = VideoWriter(Path(tmp), FPS)
        for step, rgb in enumerate(shots):
            writer.add(rgb, step)
        writer.close()
        return time.process_time() - started, (Path(tmp) / RAW_VIDEO).stat().st_size


def plain_veryfast(shots: list[np.ndarray]) -> tuple[float, int]:
    """x264 "veryfast" at CRF 18 with its own threads, the same GOP and no B-frames (the earlier setting)."""
    started = time.process_time()
    codec = av.CodecContext.create("libx264", "w")
    codec.height, codec.width = shots[0].shape[:2]
    codec.pix_fmt = "yuv420p"
    codec.time_base = Fraction(1, FPS)
    codec.framerate = FPS
    codec.options = {
        "x264-params": f"keyint={GOP}:min-keyint={GOP}:scenecut=0:bframes=0:rc-lookahead=1:sync-lookahead=0:"
        "sliced-threads=1",
        "crf": "18",
        "preset": "veryfast",
    }
    size = 0
    for number, rgb in enumerate(shots):
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
        frame.pts = number
        size += sum(packet.size for packet in codec.encode(frame))
    size += sum(packet.size for packet in codec.encode(None))
    return time.process_time() - started, size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"{args.frames} frames of 480x640, CPU per frame (best of {args.rounds}) and stream size")
    print(f"{'frames':<16}{'encoder':<28}{'CPU/frame':>10}{'size':>10}{'CPU ratio':>11}{'size ratio':>12}")
    for moving in (False, True):
        shots = rendered(args.frames, moving)
        results = {}
        for _ in range(args.rounds):  # alternated, so both see the same machine
            for name, encode in (("plain veryfast", plain_veryfast), ("RSI's VideoWriter", rsi_writer)):
                seconds, size = encode(shots)
                best = results.get(name, (float("inf"), size))[0]
                results[name] = (min(best, seconds), size)
        base_cpu, base_size = results["plain veryfast"]
        for name, (seconds, size) in results.items():
            print(
                f"{'random actions' if moving else 'noop (static)':<16}{name:<28}"
                f"{seconds / args.frames * 1000:>7.2f} ms{size / 1000:>7.0f} KB"
                f"{seconds / base_cpu:>11.2f}{size / base_size:>12.2f}"
            )


if __name__ == "__main__":
    main()
