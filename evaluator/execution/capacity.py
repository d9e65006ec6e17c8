"""How many episodes this host runs at once: RSI_EXECUTOR_WORKERS, or by default one per core as long as each has
EPISODE_MEMORY (native/memory.py) of the memory available when the process starts (a model host is shared, not
counted per episode). The embedded executor's pool and a Celery worker's concurrency both take it."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from evaluator.native.memory import EPISODE_MEMORY, available_memory
from evaluator.protocol.numbers import whole_number

MAX_WORKERS = 256


def default_workers(cores: int | None, memory: int | None) -> int:
    by_cores = cores or 1
    by_memory = memory // EPISODE_MEMORY if memory is not None else by_cores
    return max(1, min(by_cores, by_memory, MAX_WORKERS))


def executor_workers(environ=os.environ) -> int:
    raw = environ.get("RSI_EXECUTOR_WORKERS", "").strip()
    if not raw:
        return default_workers(len(os.sched_getaffinity(0)), available_memory())
    workers = whole_number(raw, most_digits=9)
    if workers is None or not 1 <= workers <= MAX_WORKERS:
        raise ImproperlyConfigured(f"RSI_EXECUTOR_WORKERS must be a whole number from 1 to {MAX_WORKERS}, not {raw!r}")
    return workers
