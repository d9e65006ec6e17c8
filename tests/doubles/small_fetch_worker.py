"""A named double of RSI's Fetch worker (environment/workers/fetch_worker.py) for tests whose subject is the
records, the API, a page or the statistics, not the pixels: the real worker (real MuJoCo physics, rewards and
success) rendering 160 x 120 frames instead of 640 x 480, which makes its episodes cheaper to render and
encode (docs/testing.md). Run with the evaluator's interpreter: it imports the real worker beside it."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "environment" / "workers"))

import fetch_worker
from wire import serve_worker

if __name__ == "__main__":
    fetch_worker.WIDTH, fetch_worker.HEIGHT = 160, 120
    serve_worker(fetch_worker.FetchWorker())
