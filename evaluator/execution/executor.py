"""Where started attempts run: one seam, two executors, the same `do_run_attempt` in both.

RSI_EXECUTOR=embedded (default): a small thread pool in the web server's process. Each job runs
one attempt (its native worker is a subprocess, so a simulator crash cannot take the server down).
RSI_EXECUTOR_WORKERS sets the pool size (default: from the host's cores and memory, capacity.py). The pool's
slots are shared across running campaigns, round robin (fair_queue.py), and each slot keeps its native worker
warm for its next cell of the same build (evaluator/native/warm.py).

RSI_EXECUTOR=celery: each started attempt becomes one Celery task on its benchmark's queue
(`rsi.fetch`, `rsi.maniskill2`, ...), so a host that has only one benchmark's environment serves
only that queue. The web process never runs episodes then. Delivery is at most once: the task is
acknowledged as it starts, never retried, and the attempt is claimed in the database by a
conditional update before it runs (evaluator/running/recorder.py), so a second delivery does nothing.
The tasks are sent by their names; execution/tasks.py defines them, and they call back into this module.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor, wait

from django.conf import settings
from django.db import close_old_connections

from evaluator.execution.capacity import executor_workers
from evaluator.execution.fair_queue import FairQueue
from evaluator.exports.archives import build_archive
from evaluator.exports.replay import run_replay
from evaluator.native.warm import WarmSlot, close_all, start_reaper
from evaluator.records.models import Attempt, Replay
from evaluator.records.runners import queue_name, this_process
from evaluator.running.interrupts import request_stop
from evaluator.running.recorder import do_run_attempt
from rsi_site.celery import app

log = logging.getLogger(__name__)
_pool = ThreadPoolExecutor(max_workers=executor_workers(), thread_name_prefix="rsi-run")
_queue = FairQueue()
_jobs: set[Future] = set()  # the pool's jobs not yet done
_jobs_lock = threading.Lock()
_this_slot = threading.local()  # a pool thread's (or a Celery worker process's) warm worker
SHUTDOWN_GRACE_S = 30.0  # RSI_SHUTDOWN_GRACE_S


def _in_pool(group: Hashable, job: Callable, *args, priority: int = 0) -> None:
    """Queue a job in its group; each pool job takes whichever job is next in turn (so the counts match)."""
    _queue.put(group, (job, args), priority)
    future = _pool.submit(_next_in_turn)
    with _jobs_lock:
        _jobs.add(future)
    future.add_done_callback(lambda done: _jobs.discard(done))


def _next_in_turn() -> None:
    job, args = _queue.take()
    job(*args)


def this_slot() -> WarmSlot:
    slot = getattr(_this_slot, "slot", None)
    if slot is None:
        slot = _this_slot.slot = WarmSlot()
        start_reaper()
    return slot


def run_export_job(campaign_id: int) -> None:
    """Build one campaign's LeRobot archive in this process, as either executor does."""
    close_old_connections()
    try:
        build_archive(campaign_id)
    except Exception:
        log.exception("the LeRobot archive of campaign %s ended with an evaluator fault", campaign_id)
        raise
    finally:
        close_old_connections()


def submit_export(campaign_id: int, benchmark: str) -> None:
    """An export reads the campaign's evidence: it runs where the benchmark's attempts run (their media root)."""
    if settings.RSI_EXECUTOR == "celery":
        app.send_task("rsi.export_lerobot", args=[campaign_id], queue=queue_name(benchmark))
    else:
        _in_pool(("export", campaign_id), run_export_job, campaign_id)


def stop_for_shutdown(reason: str = "the server is stopping") -> list[Future]:
    """The embedded executor's part of a server's shutdown: no queued job starts (its attempt stays queued, and the
    next start-up's recovery puts it back to pending); the running ones end at their next decision as
    `interrupted` and are closed with their evidence, waited for RSI_SHUTDOWN_GRACE_S (default 30). Returns the
    jobs still running after that (their attempts are then left to the next start-up's recovery)."""
    request_stop(signal.SIGTERM, reason)
    _pool.shutdown(wait=False, cancel_futures=True)
    try:
        grace = float(os.environ.get("RSI_SHUTDOWN_GRACE_S", SHUTDOWN_GRACE_S))
    except ValueError:
        grace = SHUTDOWN_GRACE_S
    with _jobs_lock:
        running = [job for job in _jobs if not job.cancelled()]
    still_running = list(wait(running, timeout=grace).not_done)
    close_all()
    return still_running


def queued_runner(benchmark: str) -> str:
    """Who holds a queued attempt: this process's pool, or the broker's queue (which outlives this process)."""
    return f"broker:{queue_name(benchmark)}" if settings.RSI_EXECUTOR == "celery" else this_process()


def run(attempt_id: int) -> None:
    """Run one started attempt in this process, as either executor does, on this slot's warm worker if it fits."""
    close_old_connections()
    try:
        do_run_attempt(Attempt.objects.get(pk=attempt_id), slot=this_slot())
    except Exception:
        log.exception("attempt %s ended with an evaluator fault", attempt_id)
        raise
    finally:
        close_old_connections()


def submit(attempt_id: int, benchmark: str, campaign_id: int, priority: int = 0) -> None:
    """Celery takes tasks in its queue's order (priority is the embedded executor's: fair_queue.py)."""
    if settings.RSI_EXECUTOR == "celery":
        app.send_task("rsi.run_attempt", args=[attempt_id], queue=queue_name(benchmark))  # execution/tasks.py
    else:
        _in_pool(("campaign", campaign_id), run, attempt_id, priority=priority)


def run_replay_job(replay_id: int) -> None:
    """Run one created replay in this process, as either executor does."""
    close_old_connections()
    try:
        run_replay(Replay.objects.select_related("attempt").get(pk=replay_id))
    except Exception:
        log.exception("replay %s ended with an evaluator fault", replay_id)
        raise
    finally:
        close_old_connections()


def submit_replay(replay_id: int, benchmark: str) -> None:
    """A replay needs the benchmark's native worker: it runs where the benchmark's attempts run."""
    if settings.RSI_EXECUTOR == "celery":
        app.send_task("rsi.run_replay", args=[replay_id], queue=queue_name(benchmark))
    else:
        _in_pool(("replay", replay_id), run_replay_job, replay_id)
