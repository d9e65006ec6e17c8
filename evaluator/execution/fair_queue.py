"""The embedded executor's queue: slots are shared across running campaigns, so a campaign started while another
runs gets its first cell in within about one cell's time, not after the other's last.

Jobs are grouped (a campaign's cells, one group per campaign; a replay or an export is a group of its own). The next
job is the oldest of the group served least recently (one never served first, in arrival order) among the groups of
the highest priority that have jobs: the groups take turns, and a group's own jobs keep their order (a sequential
campaign's pairs start in its predeclared order). A campaign's priority (PRIORITIES, 0 unless its start says) is given
when its cells are started: the campaign page's start form, the API's `POST /campaigns/{id}/start?priority=N`, the
client's `start(campaign, priority=N)`. Celery workers take tasks in their queue's order. A group that ran out of jobs
and gets more keeps its place: its jobs arriving one at a time do not put it ahead of a group that waits.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from collections.abc import Hashable
from typing import Any

from evaluator.protocol.errors import ProtocolError
from evaluator.protocol.numbers import whole_number

NEVER = -1
REMEMBERED = 4096  # groups whose last turn is kept after they run out of jobs (a long-running server's campaigns)
PRIORITIES = range(-9, 10)  # higher first; equals share the slots


class InvalidPriority(ProtocolError):
    """A start's priority that is not a whole number in PRIORITIES."""


def check_priority(raw: str | int) -> int:
    text = str(raw).strip()
    number = whole_number(text.removeprefix("-"), most_digits=2)
    priority = None if number is None else -number if text.startswith("-") else number
    if priority not in PRIORITIES:
        most, least = PRIORITIES[-1], PRIORITIES[0]
        raise InvalidPriority(f"priority must be a whole number from {least} to {most}, not {text[:20]!r}")
    return priority


class FairQueue:
    def __init__(self) -> None:
        self._jobs: dict[Hashable, deque] = {}  # groups with jobs, in arrival order
        self._priority: dict[Hashable, int] = {}
        self._served: dict[Hashable, int] = {}  # the turn at which a group was last served
        self._turns = itertools.count()
        self._lock = threading.Lock()

    def put(self, group: Hashable, job: Any, priority: int = 0) -> None:
        with self._lock:
            self._jobs.setdefault(group, deque()).append(job)
            self._priority[group] = priority

    def take(self) -> Any | None:
        """The next job in turn, None when there is none."""
        with self._lock:
            if not self._jobs:
                return None
            top = max(self._priority.values())
            waiting = [group for group in self._jobs if self._priority[group] == top]
            group = min(waiting, key=lambda g: self._served.get(g, NEVER))  # min keeps arrival order among equals
            self._served[group] = next(self._turns)
            jobs = self._jobs[group]
            job = jobs.popleft()
            if not jobs:
                del self._jobs[group], self._priority[group]
                self._forget_idle()
            return job

    def _forget_idle(self) -> None:
        """The turns of the groups without jobs served longest ago, past REMEMBERED groups, are forgotten."""
        if len(self._served) <= REMEMBERED:
            return
        idle = sorted((turn, group) for group, turn in self._served.items() if group not in self._jobs)
        for _, group in idle[: len(self._served) - REMEMBERED]:
            del self._served[group]

    def __len__(self) -> int:
        with self._lock:
            return sum(len(jobs) for jobs in self._jobs.values())
