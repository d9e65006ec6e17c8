"""Live view: step-to-browser latency and the rollout's wall time with 0, 1 and 10 viewers.

    .venv/bin/python bench/live_viewers.py [--steps 100] [--rounds 3] [--no-browsers]

Runs a real daphne (the README's server) on loopback and headless Debian chromium pages as
viewers. Latency is the browser's Date.now() at the step event minus the server's time.time()
when the rollout published it (one machine, one clock). Wall time is the attempt's
finished_at - started_at. All in one run, side by side: the goal's comparison (the rollout alone against
10 WebSocket viewers) runs ROUNDS times, alternating, and its medians are compared.
"""

import argparse
import json
import os
import sqlite3
import statistics
import struct
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402
from websockets.sync.client import connect  # noqa: E402

from tests.servers.browser import CHROMIUM, CHROMIUM_ARGS, launch_noop_campaign, login, wait_until  # noqa: E402
from tests.servers.site import daphne_site  # noqa: E402


def socket_viewer(base: str, attempt_id: int, cookie: str, stop: threading.Event) -> None:
    """A viewer without a browser: it reads everything and acknowledges every picture."""
    url = base.replace("http://", "ws://") + f"/ws/attempts/{attempt_id}/live/"
    with connect(url, additional_headers={"Cookie": f"sessionid={cookie}", "Origin": base}) as socket:
        while not stop.is_set():
            try:
                message = socket.recv(timeout=0.5)
            except TimeoutError:
                continue
            except Exception:
                return
            if isinstance(message, bytes):
                socket.send(json.dumps({"type": "ack", "seq": struct.unpack(">I", message[:4])[0]}))


def run(browser, operator, base: str, db: Path, viewers: int, steps: int, sockets: int = 0):
    launch_noop_campaign(operator, base, "pick_and_place", seed=3, decisions=steps)
    with sqlite3.connect(db) as connection:
        attempt_id = connection.execute("select max(id) from evaluator_attempt").fetchone()[0]
    context = operator.context
    pages = []
    for _ in range(viewers):
        page = context.new_page()
        page.goto(f"{base}/attempts/{attempt_id}/live/")
        wait_until(page, "document.getElementById('live').dataset.connected === '1'")
        pages.append(page)
    stop = threading.Event()
    cookie = next(c["value"] for c in context.cookies() if c["name"] == "sessionid")
    threads = [threading.Thread(target=socket_viewer, args=(base, attempt_id, cookie, stop)) for _ in range(sockets)]
    for thread in threads:
        thread.start()
    time.sleep(0.5 if sockets else 0)
    operator.click("#start-all")
    while True:
        with sqlite3.connect(db) as connection:
            row = connection.execute(
                "select status, started_at, finished_at from evaluator_attempt where id = ?", (attempt_id,)
            ).fetchone()
        if row[0] == "finished":
            break
        time.sleep(0.2)
    wall = _parse(row[2]) - _parse(row[1])
    latencies = []
    if pages:
        wait_until(pages[0], "document.getElementById('live').dataset.finished === '1'", timeout=30)
        latencies = pages[0].evaluate("window.rsiLatencies")
    for page in pages:
        page.close()
    stop.set()
    for thread in threads:
        thread.join()
    return wall, latencies


def server_pid(base: str) -> int:
    """The daphne process serving `base` (its command line names the port)."""
    port = base.rsplit(":", 1)[1]
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"daphne") for a in argv) and port.encode() in argv:
            return int(proc.name)
    raise RuntimeError(f"no daphne process on port {port}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process, all its threads (the event loop and the embedded rollouts)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _parse(stamp: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(stamp).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs alone / with 10 socket viewers")
    parser.add_argument("--no-browsers", action="store_true", help="skip the chromium viewers (1 and 10 pages)")
    args = parser.parse_args()
    with (
        tempfile.TemporaryDirectory() as tmp,
        daphne_site(Path(tmp), users={"bench": ["operator", "watcher"]}) as (base, env),
    ):
        db = Path(env["DATABASE_URL"].removeprefix("sqlite:///"))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            operator = browser.new_context().new_page()
            login(operator, base, "bench", "benchbench")
            run(browser, operator, base, db, 0, 10)  # warm up: worker start, imports, caches
            server = server_pid(base)
            alone, sockets = [], []
            cpu = {"server alone": [], "server, 10 sockets": [], "the 10 socket viewers": []}
            for _ in range(args.rounds):
                before = cpu_seconds(server)
                alone.append(run(browser, operator, base, db, 0, args.steps)[0])
                cpu["server alone"].append(cpu_seconds(server) - before)
                before, mine = cpu_seconds(server), time.process_time()
                sockets.append(run(browser, operator, base, db, 0, args.steps, sockets=10)[0])
                cpu["server, 10 sockets"].append(cpu_seconds(server) - before)
                cpu["the 10 socket viewers"].append(time.process_time() - mine)
            results = {0: (statistics.median(alone), [])}
            if not args.no_browsers:
                results.update({n: run(browser, operator, base, db, n, args.steps) for n in (1, 10)})
            sockets_wall = statistics.median(sockets)
            browser.close()
    print(f"rollout: Fetch pick_and_place, noop, {args.steps} one-action decisions; loopback; 2 cores")
    for n, (wall, latencies) in results.items():
        line = f"{n:>2} viewers: wall {wall:6.2f} s"
        if latencies:
            p95 = statistics.quantiles(latencies, n=20)[-1]
            line += (
                f"   step-to-browser latency median {statistics.median(latencies):6.1f} ms  p95 {p95:6.1f} ms"
                f"  ({len(latencies)} events)"
            )
        print(line)
    print(f"10 WebSocket viewers without a browser: wall {sockets_wall:6.2f} s")
    print(
        f"  alone, each round: {', '.join(f'{w:.2f}' for w in alone)} s; with 10 sockets: "
        f"{', '.join(f'{w:.2f}' for w in sockets)} s (medians above)"
    )
    if 10 in results:
        print(
            f"wall time ratio 10 browser viewers / 0 viewers: {results[10][0] / results[0][0]:.2f}"
            "  (the 10 chromium pages render on the same 2 cores)"
        )
    print(f"wall time ratio 10 socket viewers / 0 viewers: {sockets_wall / results[0][0]:.3f}  (goal <= 1.02)")
    print("CPU per step, medians (the server process: its event loop and the rollout's thread; the worker apart):")
    for name, seconds in cpu.items():
        print(f"  {name:<24}{statistics.median(seconds) / args.steps * 1000:6.2f} ms")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
