"""Scale-out: cells per minute with one and with two Celery workers on the same campaign, and the live
step-to-browser latency through Redis against the embedded default's, in one run.

    .venv/bin/python bench/scale_out.py [--cells 8] [--decisions 100] [--steps 200]

Starts a throwaway PostgreSQL and Redis on loopback (as the scale-out tests do), Celery worker
processes on the Fetch queue, daphne web processes and a headless Debian chromium viewer.
Throughput: a Fetch campaign of --cells cells (noop policy, --decisions one-action decisions each)
started at once; cells per minute from the first cell's start to the last cell's end. Latency: the
viewer page's Date.now() at each step event minus the time.time() at which the rollout published it
(one machine, one clock), for an attempt of --steps decisions: run by a Celery worker and relayed
through Redis, then run in the embedded default's server process.
"""

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from tests.servers.browser import CHROMIUM, CHROMIUM_ARGS, launch_noop_campaign, login, wait_until  # noqa: E402
from tests.servers.cluster import Worker, celery_site, manage, query, start, wait  # noqa: E402
from tests.servers.postgres import postgres_server  # noqa: E402
from tests.servers.redis import redis_server  # noqa: E402
from tests.servers.site import DaphneServer, daphne_site  # noqa: E402


def cells_per_minute(tmp: Path, env: dict, workers: int, cells: int, decisions: int) -> tuple[float, float]:
    """(cells per minute, seconds) of one campaign over `workers` worker processes."""
    processes = [Worker(tmp, env, f"bench-{workers}-{i}", device=str(i)) for i in range(workers)]
    try:
        wait(lambda: len(_doctor_workers(env)) >= workers, 120, "the workers")
        campaign = start(env, "reach", repeats=cells, decisions=decisions)
        rows = f"from evaluator_attempt where campaign_id = {campaign}"
        wait(lambda: query(env, f"select count(*) {rows} and status = 'finished'") == [(cells,)], 3600, "the cells")
    finally:
        for process in processes:
            process.stop()
    (first, last), *_ = query(env, f"select min(started_at), max(finished_at) {rows}")
    seconds = (last - first).total_seconds()
    return cells / seconds * 60, seconds


def _doctor_workers(env: dict) -> dict:
    import json

    return json.loads(manage(env, "doctor", "--json"))["scale_out"]["workers"]


def latencies(base: str, attempt_of, steps: int) -> list[float]:
    """Launch a one-cell campaign from the form, watch it from its live page, start it, and return the
    step events' publish-to-browser latencies (ms)."""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context().new_page()
        login(page, base, "bench", "benchbench")
        launch_noop_campaign(page, base, "pick_and_place", seed=3, decisions=steps)
        attempt = attempt_of()
        viewer = page.context.new_page()
        viewer.goto(f"{base}/attempts/{attempt}/live/")
        wait_until(viewer, "document.getElementById('live').dataset.connected === '1'")
        page.click("#start-all")
        wait_until(viewer, "document.getElementById('live').dataset.finished === '1'", timeout=600)
        found = viewer.evaluate("window.rsiLatencies")
        browser.close()
    return found


def _summary(values: list[float]) -> str:
    p95 = statistics.quantiles(values, n=20)[-1]
    return f"median {statistics.median(values):6.1f} ms  p95 {p95:6.1f} ms  ({len(values)} events)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=8, help="cells of the throughput campaign (default 8)")
    parser.add_argument("--decisions", type=int, default=100, help="one-action decisions per cell (default 100)")
    parser.add_argument("--steps", type=int, default=200, help="decisions of the latency attempt (default 200)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, postgres_server() as database_url, redis_server() as redis:
        tmp = Path(tmp)
        print("setting up PostgreSQL, Redis and the site ...", flush=True)
        env = celery_site(tmp, database_url, redis.url)
        manage(env, "rsi_user", "bench", "--password", "benchbench", "--role", "operator", "--role", "watcher")
        cells_per_minute(tmp, env, 1, 2, 10)  # warm up: imports, the simulator's caches
        throughput = {}
        for workers in (1, 2):
            print(f"throughput: {args.cells} cells over {workers} worker(s) ...", flush=True)
            throughput[workers] = cells_per_minute(tmp, env, workers, args.cells, args.decisions)
        print("latency through Redis (a Celery worker) ...", flush=True)
        web, worker = DaphneServer(tmp, env), Worker(tmp, env, "bench-live")
        web.start()
        try:
            last = "select max(id) from evaluator_attempt"
            redis_latency = latencies(web.base, lambda: query(env, last)[0][0], args.steps)
        finally:
            web.stop()
            worker.stop()
    print("latency in the embedded default's process ...", flush=True)
    with (
        tempfile.TemporaryDirectory() as tmp,
        daphne_site(Path(tmp), users={"bench": ["operator", "watcher"]}) as (base, site_env),
    ):
        db = site_env["DATABASE_URL"].removeprefix("sqlite:///")
        embedded_latency = latencies(
            base, lambda: sqlite3.connect(db).execute("select max(id) from evaluator_attempt").fetchone()[0], args.steps
        )

    one, two = throughput[1][0], throughput[2][0]
    print(f"\nmachine: {os.cpu_count()} cores; Fetch reach, noop, {args.decisions} one-action decisions per cell")
    for workers, (rate, seconds) in throughput.items():
        print(f"{workers} worker(s): {rate:6.2f} cells/min  ({args.cells} cells in {seconds:.1f} s)")
    print(
        f"throughput ratio 2 workers / 1 worker: {two / one:.2f}  (goal >= 1.8 given a core per worker and simulator)"
    )
    print(f"step-to-browser latency through Redis:  {_summary(redis_latency)}")
    print(f"step-to-browser latency embedded:       {_summary(embedded_latency)}")
    print(
        "latency ratio Redis / embedded (medians): "
        f"{statistics.median(redis_latency) / statistics.median(embedded_latency):.2f}"
    )


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
