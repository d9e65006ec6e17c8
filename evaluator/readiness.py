"""Whether the executor can run a benchmark, asked before a cell is created or started.

The verdicts are `doctor`'s (evaluator/doctor.py): real probes in subprocesses, so they take
seconds. They are kept for RSI_READINESS_TTL_S (default 300 s) per benchmark and per worker
setting, so that a changed environment (a built SAPIEN venv, another interpreter) is seen
at the latest after that long, and at once after a restart. With the embedded default the
executor is this host.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from evaluator.doctor import benchmark_verdict

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

    def as_dict(self) -> dict:
        return {"benchmark": self.benchmark, "ready": self.ready, "reason": self.reason, "note": self.note}


_cache: dict[tuple, Readiness] = {}
_lock = threading.Lock()


def _ttl() -> float:
    try:
        return max(0.0, float(os.environ.get("RSI_READINESS_TTL_S", DEFAULT_TTL_S)))
    except ValueError:
        return DEFAULT_TTL_S


def readiness(benchmark: str) -> Readiness:
    key = (benchmark, *(os.environ.get(name, "") for name in SETTINGS))
    with _lock:
        cached = _cache.get(key)
        if cached is not None and time.time() - cached.checked_at < _ttl():
            return cached
    verdict = benchmark_verdict(benchmark)
    result = Readiness(benchmark, verdict["ready"], verdict["reason"], verdict.get("note", ""), time.time())
    with _lock:
        _cache[key] = result
    return result
