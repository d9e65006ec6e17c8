"""Which process queued or runs an attempt, and whether that process still lives.

A runner is "host:pid:start-ticks"; the start time (from /proc, in clock ticks since boot) tells a
process from a later one that reuses its pid. Only runners on this host can be judged here. An attempt
queued on the Celery broker is held by "broker:<its benchmark's queue>".
"""

from __future__ import annotations

import functools
import os
import socket
from pathlib import Path


def _start_ticks(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]  # field 22, counted after the command name


@functools.cache
def _this_process(pid: int) -> str:
    return f"{socket.gethostname()}:{pid}:{_start_ticks(pid)}"


def this_process() -> str:
    return _this_process(os.getpid())  # keyed by pid: a forked child is another runner


def runner_host(runner: str) -> str:
    """The host of a process runner, or the broker queue of a queued one ("" when there is none)."""
    if runner.startswith("broker:"):
        return runner.removeprefix("broker:")
    return runner.rsplit(":", 2)[0] if runner.count(":") >= 2 else ""


def on_this_host(runner: str) -> bool:
    return runner_host(runner) == socket.gethostname()


def is_dead(runner: str) -> bool:
    """True when `runner` ran on this host and is gone; an empty runner (RSI before 0003) counts as gone."""
    if not runner:
        return True
    if runner.startswith("broker:"):
        return False  # queued on a Celery broker, which outlives any process of this host
    if not on_this_host(runner):
        return False  # another host's process: its own host (or a heartbeat) must judge it
    _, pid, ticks = runner.rsplit(":", 2)
    return _start_ticks(int(pid)) != ticks


def queue_name(benchmark: str) -> str:
    """The Celery queue of a benchmark's attempts; a queued attempt's runner is "broker:<queue>"."""
    return f"rsi.{benchmark}"
