"""The local executor of the embedded default: a small thread pool in the web server's process.

Each job runs one attempt (its native worker is a subprocess, so a simulator crash cannot take
the server down). RSI_EXECUTOR_WORKERS sets the pool size (default 1: one episode at a time).
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor

from django.db import close_old_connections

log = logging.getLogger(__name__)
_pool = ThreadPoolExecutor(max_workers=int(os.environ.get("RSI_EXECUTOR_WORKERS", "1")), thread_name_prefix="rsi-run")


def _run(attempt_id: int) -> None:
    from evaluator.models import Attempt
    from evaluator.services import do_run_attempt

    close_old_connections()
    try:
        do_run_attempt(Attempt.objects.get(pk=attempt_id))
    except Exception:
        log.exception("attempt %s ended with an evaluator fault", attempt_id)
        raise
    finally:
        close_old_connections()


def submit(attempt_id: int) -> Future:
    return _pool.submit(_run, attempt_id)
