"""Warm native workers: a built simulator serves its executor slot's next cell with the same build.

A slot (one executor thread, or a Celery worker process) holds at most one idle worker. The next cell whose build
key is the same (the worker process: interpreter, script, environment; and the build: every reset option but those
the worker applies at each reset, which its describe reply lists) is reset on it with its own seed and options; any
other cell closes it and starts a fresh one. Only backends whose reused env is proven equal to a fresh build at every
step are reused (Backend.reuse; tests/test_warm_workers.py). A worker whose attempt ended in any error, was
interrupted or intervened in is closed, never kept (the recorder decides, `give_back`).

RSI_WARM_WORKERS   on (default); 0 or off: every cell starts a fresh worker; or a comma-separated list of the
                   benchmarks to keep warm (e.g. "fetch,maniskill2")
RSI_WARM_IDLE_S    how long an idle worker waits for a next cell before it is closed (default 300 s); it is also
                   closed when less than one episode's memory is available (native/memory.py)

A backend that is never reused has its slot's next worker started ahead instead (native/ahead.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import weakref
from dataclasses import dataclass
from pathlib import Path

from environment.workers.wire import build_of
from evaluator.native.ahead import Ahead, start_ahead_wanted
from evaluator.native.backends import backend
from evaluator.native.client import NativeWorker, WorkerSpec
from evaluator.native.environment import BadWorkerSetting, positive_seconds
from evaluator.native.memory import memory_short
from evaluator.protocol.errors import ProtocolError

IDLE_S = 300.0


def warm_benchmarks(environ=os.environ) -> frozenset[str] | None:
    """The benchmarks kept warm here: None for every reusable one, an empty set for none."""
    raw = environ.get("RSI_WARM_WORKERS", "on").strip().lower()
    if raw in ("", "on", "1"):
        return None
    if raw in ("0", "off"):
        return frozenset()
    names = frozenset(name.strip() for name in raw.split(",") if name.strip())
    unknown = sorted(name for name in names if not _known(name))
    if unknown:
        raise BadWorkerSetting(f"RSI_WARM_WORKERS names no benchmark backend: {', '.join(unknown)}")
    return names


def _known(name: str) -> bool:
    try:
        backend(name)
    except ProtocolError:
        return False
    return True


def idle_seconds(environ=os.environ) -> float:
    raw = environ.get("RSI_WARM_IDLE_S", "").strip()
    return positive_seconds("RSI_WARM_IDLE_S", raw) if raw else IDLE_S


def reusable(benchmark: str) -> bool:
    """Whether a worker of this benchmark may serve a next cell here."""
    chosen = warm_benchmarks()
    return backend(benchmark).reuse and (chosen is None or benchmark in chosen)


def build_key(spec: WorkerSpec, options: dict, reset_fields) -> str:
    """The sha256 of what a worker was started and built with: equal keys, equal envs."""
    build = build_of(options, frozenset(reset_fields))
    text = json.dumps({"process": spec.process(), "build": build}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class _Held:
    worker: NativeWorker
    key: str
    cells_served: int  # cells it finished (the next one's reuse is its cells_served + 1st)
    idle_since: float


@dataclass(frozen=True)
class Taken:
    worker: NativeWorker
    key: str | None  # None: its backend is never reused
    cells_served: int  # before this one; 0: a fresh worker
    started_ahead: bool = False  # a fresh process, started while the cell before it ran

    def provenance(self) -> dict:
        return {
            "reused": self.cells_served > 0,
            "cells_served_before": self.cells_served,
            "build_key": self.key,
            "started_ahead": self.started_ahead,
        }


def described(worker: NativeWorker, spec: WorkerSpec, options: dict, started_ahead: bool = False) -> Taken:
    """A fresh worker for a cell, described (its imports done), not yet reset."""
    fields = worker.describe().get("reset_fields")
    key = build_key(spec, options, fields) if fields is not None and reusable(spec.benchmark) else None
    return Taken(worker, key, 0, started_ahead)


def fresh_worker(spec: WorkerSpec, options: dict, log: Path | None) -> Taken:
    """A newly started worker for a cell."""
    return described(NativeWorker(spec, log=log), spec, options)


class WarmSlot:
    """One executor slot's worker: taken for a cell, given back after it, kept idle while it may serve the next."""

    def __init__(self) -> None:
        self._held: _Held | None = None
        self._ahead: Ahead | None = None
        self._lock = threading.Lock()
        _slots.add(self)

    def take(self, spec: WorkerSpec, options: dict, log: Path | None) -> Taken:
        """A worker for a cell: the held one when it has this build, else a fresh one (described, not yet reset)."""
        with self._lock:
            held, self._held = self._held, None
        if held is not None:
            fields = held.worker.description.get("reset_fields", ())
            if held.worker.alive and build_key(spec, options, fields) == held.key and reusable(spec.benchmark):
                held.worker.spec = spec  # the same process; this cell's request timeouts
                held.worker.attach_log(log)
                return Taken(held.worker, held.key, held.cells_served)
            held.worker.close()
        taken = self._started_ahead(spec, options, log) or fresh_worker(spec, options, log)
        if taken.key is None and start_ahead_wanted():  # never reused: the next cell's worker starts now
            with self._lock:
                self._ahead = Ahead(spec)
        return taken

    def _started_ahead(self, spec: WorkerSpec, options: dict, log: Path | None) -> Taken | None:
        with self._lock:
            ahead, self._ahead = self._ahead, None
        worker = ahead.worker_for(spec) if ahead is not None else None
        if worker is None:
            return None
        worker.attach_log(log, keep_tail=True)
        return described(worker, spec, options, started_ahead=True)

    def give_back(self, taken: Taken, keep: bool) -> dict:
        """After its cell: keep the worker for the next (what its provenance then says), or close it (its reply)."""
        worker = taken.worker
        if keep and taken.key is not None and worker.alive and not memory_short():
            worker.detach_log()
            with self._lock:
                previous, self._held = self._held, _Held(worker, taken.key, taken.cells_served + 1, time.monotonic())
            if previous is not None:  # never: a slot runs one cell at a time
                previous.worker.close()
            return {"kept_warm": True}
        return worker.close()

    def close_idle(self, idle_s: float, short_of_memory: bool) -> bool:
        """Close the held worker (or the one started ahead) when it has waited idle_s, or at once when memory is
        short. True: one was closed."""
        now, closed = time.monotonic(), False
        with self._lock:
            held, ahead = self._held, self._ahead
            if held is not None and (short_of_memory or now - held.idle_since >= idle_s):
                self._held, closed = None, True
            else:
                held = None
            if ahead is not None and (short_of_memory or now - ahead.started >= idle_s):
                self._ahead, closed = None, True
            else:
                ahead = None
        if held is not None:
            held.worker.close()
        if ahead is not None:
            ahead.close()
        return closed

    def close(self) -> None:
        with self._lock:
            held, ahead, self._held, self._ahead = self._held, self._ahead, None, None
        if held is not None:
            held.worker.close()
        if ahead is not None:
            ahead.close()

    @property
    def holding(self) -> NativeWorker | None:
        held = self._held
        return held.worker if held else None

    @property
    def ahead(self) -> Ahead | None:
        return self._ahead


_slots: weakref.WeakSet[WarmSlot] = weakref.WeakSet()
_reaper_started = threading.Event()


def close_all() -> None:
    """Every slot's idle worker closed (a server's shutdown)."""
    for slot in list(_slots):
        slot.close()


def reap_idle_once(idle_s: float | None = None) -> int:
    """Close the idle workers that waited long enough, or all of them when memory is short; how many were closed."""
    idle_s = idle_seconds() if idle_s is None else idle_s
    short = memory_short()
    return sum(slot.close_idle(idle_s, short) for slot in list(_slots))


def start_reaper(period_s: float = 5.0) -> None:
    """Once per process: a daemon thread that closes idle workers (RSI_WARM_IDLE_S, or memory short)."""
    if _reaper_started.is_set():
        return
    _reaper_started.set()

    def reap() -> None:
        while True:
            time.sleep(period_s)
            reap_idle_once()

    threading.Thread(target=reap, name="rsi-warm-reaper", daemon=True).start()
