"""Heartbeats of running attempts, and when one is stale.

RSI_HEARTBEAT_S        seconds between two heartbeats of a running attempt (default 5)
RSI_HEARTBEAT_LIMIT_S  a running attempt whose last heartbeat is older is lost (default 60): the
                       reaper (evaluator/running/recovery.py) closes it as worker_lost
"""

from __future__ import annotations

import os
import threading

from django.db import connection
from django.utils import timezone

from evaluator.records.models import Attempt


def heartbeat_interval() -> float:
    return float(os.environ.get("RSI_HEARTBEAT_S", "5"))


def heartbeat_limit() -> float:
    return float(os.environ.get("RSI_HEARTBEAT_LIMIT_S", "60"))


class Heartbeat:
    """Writes the running attempt's heartbeat every `interval` seconds from a thread of its own, so a
    slow policy call or simulator step never looks like a dead worker; a dead process stops writing."""

    def __init__(self, attempt_id: int, interval: float | None = None):
        self.attempt_id = attempt_id
        self.interval = heartbeat_interval() if interval is None else interval
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._beat, name=f"rsi-heartbeat-{attempt_id}", daemon=True)
        self.thread.start()

    def _beat(self) -> None:
        try:
            while not self.stopped.wait(self.interval):
                Attempt.objects.filter(pk=self.attempt_id, status=Attempt.Status.RUNNING).update(
                    heartbeat_at=timezone.now()
                )
        finally:
            connection.close()

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=30)
