"""Stopping the attempts of a process that is asked to stop (Ctrl-C, SIGTERM, a server's shutdown): each running
episode ends at its next decision boundary as an `interrupted` infrastructure error, naming the signal, and is
closed with its evidence like any other ending. Nothing is retried; a cell that never started stays queued.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class StopRequest:
    signal: int
    reason: str  # e.g. "SIGTERM: the server is stopping"

    @property
    def exit_status(self) -> int:
        return 128 + self.signal  # what a shell reports for a process ended by the signal: 130, 143


_lock = threading.Lock()
_request: StopRequest | None = None


def request_stop(signum: int, reason: str) -> None:
    """Ask every episode of this process to end at its next decision boundary (the first request stands)."""
    global _request
    with _lock:
        if _request is None:
            _request = StopRequest(signum, reason)


def stop_requested() -> StopRequest | None:
    return _request


@contextmanager
def stopping_on_signals(announce: Callable[[StopRequest], None]) -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM request the stop, and `announce` says so; a second one of the same kind
    does what it does by default (Ctrl-C twice: KeyboardInterrupt at once, the attempt left to `manage.py recover`)."""
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}

    def handle(signum, frame) -> None:
        request_stop(signum, signal.Signals(signum).name)
        signal.signal(signum, previous[signum])
        announce(_request)

    for signum in previous:
        signal.signal(signum, handle)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
