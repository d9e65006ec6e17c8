"""What the per-step observation fingerprints cost (issue 16: goal < 2% of a Fetch step with rendering).

    .venv/bin/python bench/fingerprint_overhead.py [--steps 400]

One Fetch worker (FetchPickAndPlace, 480x640 frames rendered with MUJOCO_GL=egl) steps zero actions in
rounds of three, interleaved so that the machine's noise falls on all of them alike:
  bare     the worker's step alone (what the evaluator waits for anyway);
  inline   the step, then what steps.jsonl keeps of the observation (both fingerprints, the numeric
           arrays) computed on the spot;
  evidence the step, then the fingerprints as the evidence writer takes them: handed to its hashing
           thread, which works while the worker computes the next step (evaluator/running/evidence.py).
"""

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluator.native.backends import worker_spec
from evaluator.native.client import NativeWorker
from evaluator.running.evidence import observation_record

ZERO = (0.0, 0.0, 0.0, 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400, help="steps per way (default 400)")
    args = parser.parse_args()

    worker = NativeWorker(worker_spec("fetch"))
    hashing = ThreadPoolExecutor(max_workers=1)
    times = {"bare": [], "inline": [], "evidence": []}
    hash_only = []
    pending = None
    try:
        worker.reset(3, env_id="FetchPickAndPlace-v4", instruction="", max_episode_steps=10 * args.steps)
        for _ in range(args.steps):
            start = time.perf_counter()
            worker.step(ZERO)
            times["bare"].append(time.perf_counter() - start)

            start = time.perf_counter()
            observation = worker.step(ZERO).observation
            hashed = time.perf_counter()
            observation_record(observation)
            hash_only.append(time.perf_counter() - hashed)
            times["inline"].append(time.perf_counter() - start)

            start = time.perf_counter()
            observation = worker.step(ZERO).observation
            if pending is not None:
                pending.result()  # the previous step's: written when its decision is
            pending = hashing.submit(observation_record, observation)
            times["evidence"].append(time.perf_counter() - start)
        pending.result()
    finally:
        worker.close()
        hashing.shutdown()

    bare = statistics.median(times["bare"])
    print(f"{args.steps} steps per way, FetchPickAndPlace 480x640 with rendering, medians")
    print(f"{'bare worker step':<34} {bare * 1e3:7.2f} ms")
    print(f"{'fingerprints + arrays alone':<34} {statistics.median(hash_only) * 1e3:7.2f} ms")
    for way in ("inline", "evidence"):
        median = statistics.median(times[way])
        print(f"{'step + fingerprints, ' + way:<34} {median * 1e3:7.2f} ms   ratio {median / bare:.3f}")


if __name__ == "__main__":
    main()
