"""Whether the executor can run a benchmark, asked before a cell is created or started.

The verdicts are `doctor`'s (evaluator/native/probes.py): real probes in subprocesses, so they take
seconds. They are kept for RSI_READINESS_TTL_S (default 300 s) per benchmark and per worker
setting, so that a changed environment (a built SAPIEN venv, another interpreter) is seen
at the latest after that long, and at once after a restart. A verdict older than that is still answered
while a background thread asks again: no page waits on doctor. Only the very first verdict of a benchmark
is waited for, by an action that needs it (Create, Start); a page asks with `wait=False` and says it is
still being checked. With the embedded default the executor is this host.

With RSI_EXECUTOR=celery the executor is the workers: each checks the benchmarks of its queues as
it starts (evaluator/execution/tasks.py) and answers the `rsi_readiness` inspect command. A benchmark is
ready when a worker of its queue says so, refused with each worker's reason when all that serve it
say no, and allowed with a note when no worker serves it now (its cells wait in the broker's queue
until one starts). Those answers are kept RSI_WORKER_READINESS_TTL_S (default 30 s).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from evaluator.native.backends import benchmark_verdict
from evaluator.protocol.errors import LaunchRefused
from evaluator.records.runners import queue_name

log = logging.getLogger(__name__)
DEFAULT_TTL_S = 300.0
# What a verdict depends on, besides the host itself.
SETTINGS = ("RSI_FETCH_PYTHON", "MUJOCO_GL", "RSI_SAPIEN_PYTHON", "RSI_VULKAN_LAYER", "PYTHONPATH")


@dataclass(frozen=True)
class Readiness:
    benchmark: str
    ready: bool
    reason: str
    note: str = ""
    checked_at: float = 0.0  # time.time()
    checking: bool = False  # no verdict yet: the first one is being asked for

    def as_dict(self) -> dict:
        return {"benchmark": self.benchmark, "ready": self.ready, "reason": self.reason, "note": self.note}


_cache: dict[tuple, Readiness] = {}
_refreshing: set[tuple] = set()  # the keys a background thread is asking doctor about now
_lock = threading.Lock()


def _ttl(name: str = "RSI_READINESS_TTL_S", default: float = DEFAULT_TTL_S) -> float:
    try:
        return max(0.0, float(os.environ.get(name, default)))
    except ValueError:
        return default


def readiness(benchmark: str, wait: bool = True) -> Readiness:
    """`wait=False` (pages): never wait for doctor, not even for a benchmark's first verdict."""
    from django.conf import settings

    if settings.RSI_EXECUTOR == "celery":
        return _workers_readiness(benchmark)
    return local_readiness(benchmark, wait)


def local_readiness(benchmark: str, wait: bool = True) -> Readiness:
    """This host's verdict (doctor's checks), kept RSI_READINESS_TTL_S; an older one is answered while a background
    thread asks again. Without any verdict yet: asked here (`wait`), or in the background and answered as being
    checked (not ready, `checking`)."""
    key = (benchmark, *(os.environ.get(name, "") for name in SETTINGS))
    with _lock:
        cached = _cache.get(key)
        if cached is not None and time.time() - cached.checked_at < _ttl():
            return cached
        if cached is not None or not wait:
            if key not in _refreshing:
                _refreshing.add(key)
                threading.Thread(target=_ask, args=(key, benchmark), name="rsi-readiness", daemon=True).start()
            return cached or Readiness(benchmark, False, "still being checked: reload in a few seconds", checking=True)
    return _ask(key, benchmark)


def check_in_background() -> threading.Thread:
    """At the web server's start: ask each benchmark's first verdict in the background, so that the launch page
    has them when someone opens it. Everything, the list of benchmarks included, happens on that thread: the
    server may be starting inside an event loop."""
    thread = threading.Thread(target=_check_every_benchmark, name="rsi-readiness", daemon=True)
    thread.start()
    return thread


def _check_every_benchmark() -> None:
    from django.db import DatabaseError, connection

    from evaluator.records.models import Benchmark

    try:
        for benchmark in Benchmark.objects.order_by("name").values_list("name", flat=True):
            readiness(benchmark, wait=False)
    except DatabaseError as exc:  # a database not set up yet: the pages ask when they are first opened
        log.warning("readiness not checked at start-up: %s", exc)
    finally:
        connection.close()


def _ask(key: tuple, benchmark: str) -> Readiness:
    """Ask doctor's checks and keep the verdict."""
    try:
        verdict = benchmark_verdict(benchmark)
        result = Readiness(benchmark, verdict["ready"], verdict["reason"], verdict.get("note", ""), time.time())
        with _lock:
            _cache[key] = result
        return result
    finally:
        with _lock:
            _refreshing.discard(key)


_workers: tuple[float, dict] | None = None  # (when asked, {worker: {benchmark: verdict}})


def workers_verdicts() -> dict[str, dict[str, dict]]:
    """{worker name: {benchmark: verdict}} of the Celery workers that answer now, kept a short while.
    Raises what the broker raises when it cannot be reached."""
    global _workers
    with _lock:
        if _workers is not None and time.time() - _workers[0] < _ttl("RSI_WORKER_READINESS_TTL_S", 30.0):
            return _workers[1]
    from rsi_site.celery import app

    replies = app.control.broadcast("rsi_readiness", reply=True, timeout=2)
    answers = {name: answer for reply in replies for name, answer in reply.items()}
    with _lock:
        _workers = (time.time(), answers)
    return answers


def _workers_readiness(benchmark: str) -> Readiness:
    try:
        answers = workers_verdicts()
    except Exception as exc:  # whatever the broker's client raises: nothing can be queued
        return Readiness(benchmark, False, f"the Celery broker cannot be reached: {exc}"[:300])
    verdicts = {name: found[benchmark] for name, found in answers.items() if benchmark in found}
    ready = sorted(name for name, verdict in verdicts.items() if verdict["ready"])
    if ready:
        return Readiness(benchmark, True, f"ready on {', '.join(ready)}")
    decided = {name: verdict for name, verdict in verdicts.items() if verdict["ready"] is False}
    if decided:
        reasons = "; ".join(f"{name}: {verdict['reason']}" for name, verdict in sorted(decided.items()))
        return Readiness(benchmark, False, f"no worker of {queue_name(benchmark)} can run it ({reasons})")
    reason = (
        f"the workers of {queue_name(benchmark)} ({', '.join(sorted(verdicts))}) are still checking it"
        if verdicts
        else f"no Celery worker serves {queue_name(benchmark)} now"
    )
    return Readiness(benchmark, True, reason, note="its cells wait in the queue until a worker can take them")


def check_ready(benchmark: str) -> None:
    """Cells that nothing here can run are refused with the reason, before they are created or start; so are
    cells whose evidence the media root has no room for."""
    check_media_space()
    verdict = readiness(benchmark)
    if not verdict.ready:
        raise LaunchRefused(f"this executor cannot run {benchmark}: {verdict.reason}")


DEFAULT_MIN_FREE_MB = 500


def media_space() -> dict:
    """The media root's free space, and the least a cell may start with (RSI_MIN_FREE_MB, default 500)."""
    from django.conf import settings

    root = Path(settings.MEDIA_ROOT)
    try:
        least = max(0, int(os.environ.get("RSI_MIN_FREE_MB", DEFAULT_MIN_FREE_MB)))
    except ValueError:
        least = DEFAULT_MIN_FREE_MB
    existing = next(folder for folder in (root, *root.parents) if folder.exists())  # made with the first evidence
    free_mb = shutil.disk_usage(existing).free // (1 << 20)
    return {"path": str(root), "free_mb": free_mb, "min_free_mb": least, "ok": free_mb >= least}


def check_media_space() -> None:
    space = media_space()
    if not space["ok"]:
        raise LaunchRefused(
            f"the media root {space['path']} has {space['free_mb']} MB free, under RSI_MIN_FREE_MB="
            f"{space['min_free_mb']}: free space there (or lower the setting) before starting cells"
        )
