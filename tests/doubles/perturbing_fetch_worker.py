"""A named double of RSI's Fetch worker (environment/workers/fetch_worker.py) for replay tests: the real
worker, except that the frame it returns at step DOUBLE_PERTURB_STEP has a 10 x 10 block of pixels
changed (each channel + 1, modulo 256), so that a replay through it diverges at exactly that step by
exactly 100 pixels. Run with the evaluator's interpreter: it imports the real worker beside it."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "environment" / "workers"))

from fetch_worker import FetchWorker
from wire import serve_worker

PERTURBED_PIXELS = 100


class PerturbingFetchWorker(FetchWorker):
    perturb_at = int(os.environ["DOUBLE_PERTURB_STEP"])
    steps = 0

    def step(self, request, arrays):
        header, out = super().step(request, arrays)
        self.steps += 1
        if self.steps == self.perturb_at:
            rgb = out["rgb"].copy()
            rgb[:10, :10] += 1  # uint8 arithmetic wraps: every channel of 100 pixels differs by 1 (or 255)
            out = {**out, "rgb": rgb}
        return header, out


if __name__ == "__main__":
    serve_worker(PerturbingFetchWorker())
