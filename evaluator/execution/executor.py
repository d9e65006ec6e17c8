"""Where started attempts run: one seam, two executors, the same `do_run_attempt` in both.

RSI_EXECUTOR=embedded (default): a small thread pool in the web server's process. Each job runs
one attempt (its native worker is a subprocess, so a simulator crash cannot take the server down).
RSI_EXECUTOR_WORKERS sets the pool size (default 1: one episode at a time).

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
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import close_old_connections

from evaluator.exports.replay import run_replay
from evaluator.records.models import Attempt, Replay
from evaluator.records.runners import queue_name, this_process
from evaluator.running.recorder import do_run_attempt
from rsi_site.celery import app

log = logging.getLogger(__name__)
_pool = ThreadPoolExecutor(max_workers=int(os.environ.get("RSI_EXECUTOR_WORKERS", "1")), thread_name_prefix="rsi-run")


def queued_runner(benchmark: str) -> str:
    """Who holds a queued attempt: this process's pool, or the broker's queue (which outlives this process)."""
    return f"broker:{queue_name(benchmark)}" if settings.RSI_EXECUTOR == "celery" else this_process()


def run(attempt_id: int) -> None:
    """Run one started attempt in this process, as either executor does."""
    close_old_connections()
    try:
        do_run_attempt(Attempt.objects.get(pk=attempt_id))
    except Exception:
        log.exception("attempt %s ended with an evaluator fault", attempt_id)
        raise
    finally:
        close_old_connections()


def submit(attempt_id: int, benchmark: str) -> None:
    if settings.RSI_EXECUTOR == "celery":
        app.send_task("rsi.run_attempt", args=[attempt_id], queue=queue_name(benchmark))  # execution/tasks.py
    else:
        _pool.submit(run, attempt_id)


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
        _pool.submit(run_replay_job, replay_id)
