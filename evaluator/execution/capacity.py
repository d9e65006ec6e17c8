"""How many episodes this host runs at once: RSI_EXECUTOR_WORKERS, or by default one per core as long as each has
EPISODE_MEMORY of the memory available when the process starts (a simulator, its renderer and the evidence encoder
of one episode take about 1-2 GB with SAPIEN; a model host is shared, not counted per episode). The embedded executor's
pool and a Celery worker's concurrency both take it."""

from __future__ import annotations

import os

from django.core.exceptions import ImproperlyConfigured

from evaluator.protocol.numbers import whole_number

EPISODE_MEMORY = 2 << 30
MAX_WORKERS = 256


def available_memory() -> int | None:
    """MemAvailable of /proc/meminfo, in bytes (None where there is no such file)."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


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
