"""A worker started ahead: where a backend's workers are never reused (SIMPLE: docs/warm_workers.md), the slot's next
worker process is started and described (its imports done) while the cell before it runs, so that the next cell's
start overlaps it. It is a fresh process, never reset before its cell: nothing of the running cell reaches it. The
next cell takes it when its worker process would be the same (interpreter, script, environment); otherwise, or when
it waits longer than RSI_WARM_IDLE_S, it is closed.

RSI_START_AHEAD   auto (default): when the load average leaves a core free and an episode's memory is available;
                  on: always; off: never
"""

from __future__ import annotations

import os
import threading
import time

from evaluator.native.client import NativeWorker, WorkerFailure, WorkerSpec
from evaluator.native.environment import BadWorkerSetting
from evaluator.native.memory import memory_short

CHOICES = ("auto", "on", "off")


def start_ahead_setting(environ=os.environ) -> str:
    raw = environ.get("RSI_START_AHEAD", "auto").strip().lower() or "auto"
    if raw not in CHOICES:
        raise BadWorkerSetting(f"RSI_START_AHEAD must be one of {', '.join(CHOICES)}, not {raw[:20]!r}")
    return raw


def start_ahead_wanted() -> bool:
    setting = start_ahead_setting()
    if setting != "auto":
        return setting == "on"
    cores = len(os.sched_getaffinity(0))
    return not memory_short() and os.getloadavg()[0] <= cores - 1


class Ahead:
    """A worker being started, in a thread of its own, for the next cell of a spec's process."""

    def __init__(self, spec: WorkerSpec):
        self.process, self.started = spec.process(), time.monotonic()
        self.worker: NativeWorker | None = None
        self.thread = threading.Thread(target=self._start, args=(spec,), name="rsi-start-ahead", daemon=True)
        self.thread.start()

    def _start(self, spec: WorkerSpec) -> None:
        try:
            worker = NativeWorker(spec)
            worker.describe()
        except WorkerFailure:  # the cell that would take it starts its own, and says what is wrong there
            return
        self.worker = worker

    def worker_for(self, spec: WorkerSpec) -> NativeWorker | None:
        """The started worker, described, when `spec` would start the same process; else None (it is closed)."""
        self.thread.join()
        if self.worker is not None and self.worker.alive and self.process == spec.process():
            self.worker.spec = spec  # this cell's request timeouts
            return self.worker
        self.close()
        return None

    def close(self) -> None:
        self.thread.join()
        if self.worker is not None:
            self.worker.close()
