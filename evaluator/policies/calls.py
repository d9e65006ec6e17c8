"""What every network transport shares: one wall-clock deadline per policy call, and a cap on the
size of a reply.

A socket timeout bounds each read, so a server that trickles one byte every few seconds would never
time out; here a watchdog shuts the call's socket down when the call's deadline passes, whatever the
call is doing (connecting, sending, waiting, reading). One watchdog thread serves every call of the
process: a thread started per call cost each call more (bench/policy_overhead.py measures the calls). A reply
larger than MAX_REPLY_BYTES is malformed output: it is not read past the cap (docs/policies.md, "Limits").
"""

from __future__ import annotations

import contextlib
import heapq
import http.client
import itertools
import json
import os
import socket
import threading
import time
import urllib.parse

from evaluator.policies.base import PolicyFailure, PolicySetupFailure
from evaluator.protocol.numbers import whole_number
from evaluator.protocol.scoring import ErrorType

MAX_REPLY_BYTES = 1 << 20  # 1 MiB: a chunk of a thousand 7-D actions is about 100 KiB of JSON


class _Watchdog:
    """Calls to expire at their deadlines, in a heap, watched by one daemon thread started on first use."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self._condition = threading.Condition()
        self._heap: list[tuple[float, int, CallDeadline, socket.socket]] = []
        self._active: set[int] = set()
        self._numbers = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, deadline: CallDeadline, sock: socket.socket) -> int:
        with self._condition:
            number = next(self._numbers)
            earliest = self._heap[0][0] if self._heap else None
            heapq.heappush(self._heap, (deadline.end, number, deadline, sock))
            self._active.add(number)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="rsi-call-deadlines", daemon=True)
                self._thread.start()
            elif earliest is None or deadline.end < earliest:
                self._condition.notify()  # it sleeps until a later time, or until told
            return number

    def release(self, number: int) -> None:
        with self._condition:
            self._active.discard(number)  # its heap entry is dropped when it comes up

    def _run(self) -> None:
        with self._condition:
            while True:
                while self._heap and self._heap[0][1] not in self._active:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._condition.wait()
                    continue
                end, number, deadline, sock = self._heap[0]
                if (left := end - time.monotonic()) > 0:
                    self._condition.wait(left)
                    continue
                heapq.heappop(self._heap)
                self._active.discard(number)
                deadline.expired = True
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


class CallDeadline:
    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.expired = False

    def remaining(self) -> float:
        left = self.end - time.monotonic()
        if left <= 0:
            self.expired = True
            raise self.failure()
        return left

    def failure(self) -> PolicyFailure:
        return PolicyFailure(ErrorType.POLICY_TIMEOUT, f"no reply within {self.seconds:g} s")

    @contextlib.contextmanager
    def guarding(self, sock: socket.socket):
        """Shut `sock` down if the deadline passes while the block runs."""
        self.remaining()  # already past: the call fails before it starts
        number = WATCHDOG.watch(self, sock)
        try:
            yield
        finally:
            WATCHDOG.release(number)


WATCHDOG = _Watchdog()
os.register_at_fork(after_in_child=WATCHDOG.reset)  # a forked child has no watchdog thread: it starts its own


def too_large(size: int | str) -> PolicyFailure:
    return PolicyFailure(
        ErrorType.MALFORMED_OUTPUT,
        f"the reply is larger than {MAX_REPLY_BYTES} bytes",
        f"reply of {size} bytes refused at the {MAX_REPLY_BYTES}-byte cap",
    )


def declared_length(response: http.client.HTTPResponse) -> int | None:
    """The reply's Content-Length, None where it sends none; framing that cannot be read is malformed output."""
    raw = response.getheader("Content-Length")
    if raw is None:
        return None
    length = whole_number(raw.strip())
    if length is None:
        raise PolicyFailure(
            ErrorType.MALFORMED_OUTPUT,
            "the reply's Content-Length is not a whole number",
            f"Content-Length: {raw[:40]!r}",
        )
    return length


def read_capped(response: http.client.HTTPResponse) -> bytes:
    length = declared_length(response)
    if length is not None and length > MAX_REPLY_BYTES:
        raise too_large(length)
    data = response.read(MAX_REPLY_BYTES + 1)
    if len(data) > MAX_REPLY_BYTES:
        raise too_large(f"more than {MAX_REPLY_BYTES}")
    return data


def _transport_failure(exc: Exception, deadline: CallDeadline, what: str) -> PolicyFailure:
    if deadline.expired or isinstance(exc, TimeoutError):
        return deadline.failure()
    return PolicyFailure(
        ErrorType.POLICY_TRANSPORT, f"the connection to the {what} failed", f"{type(exc).__name__}: {exc}"
    )


def credential_headers(parsed: urllib.parse.SplitResult) -> dict[str, str]:
    """The Authorization header the server holds for this policy host (RSI_POLICY_CREDENTIALS: a JSON file of
    {"host" or "host:port": header value}, docs/policies.md "Credentials"); none where it holds none. A URL never
    carries a credential: it is stored and shown to every reader."""
    path = os.environ.get("RSI_POLICY_CREDENTIALS", "")
    if not path:
        return {}
    try:
        with open(path, "rb") as file:
            held = json.loads(file.read(1 << 16))
    except (OSError, ValueError) as exc:
        raise PolicySetupFailure(f"RSI_POLICY_CREDENTIALS cannot be read: {exc}") from None
    host = (parsed.hostname or "").lower()
    value = held.get(f"{host}:{parsed.port}", held.get(host)) if isinstance(held, dict) else None
    return {"Authorization": value} if isinstance(value, str) and value else {}


class KeptConnection:
    """One HTTP(S) connection kept open across the calls of an episode, as a client of a model server
    would keep it. After any failure it is dropped: its state is unknown, and a late reply must never
    answer the next request. Each POST runs under its call's deadline; every failure is typed."""

    def __init__(self, parsed: urllib.parse.SplitResult, what: str):
        self.parsed, self.what = parsed, what
        self.connection: http.client.HTTPConnection | None = None

    def _open(self, deadline: CallDeadline) -> http.client.HTTPConnection:
        factory = http.client.HTTPSConnection if self.parsed.scheme == "https" else http.client.HTTPConnection
        connection = factory(self.parsed.hostname, self.parsed.port, timeout=deadline.remaining())
        try:
            connection.connect()
        except (OSError, http.client.HTTPException) as exc:
            raise _transport_failure(exc, deadline, self.what) from None
        # Headers and a large body go out in two writes: without this, Nagle's algorithm and
        # delayed ACKs can hold the body back for tens of milliseconds.
        connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection

    def post(self, path: str, body: bytes | list, media_type: str, deadline: CallDeadline) -> tuple[int, bytes]:
        """The reply's status and body (capped), or a typed PolicyFailure. A body may be a list of buffers,
        sent in order (with their total Content-Length, never chunked)."""
        try:
            if self.connection is None or self.connection.sock is None:  # none yet, or closed by a reply's framing
                self.connection = self._open(deadline)
            return self._post(path, body, media_type, deadline)
        except PolicyFailure:
            self.close()
            raise

    def _post(self, path: str, body: bytes | list, media_type: str, deadline: CallDeadline) -> tuple[int, bytes]:
        connection = self.connection
        headers = {"Content-Type": media_type, **credential_headers(self.parsed)}
        if isinstance(body, list):
            headers["Content-Length"] = str(sum(memoryview(part).nbytes for part in body))
        try:
            connection.sock.settimeout(deadline.remaining())
            with deadline.guarding(connection.sock):
                connection.request("POST", path, body=body, headers=headers)
                response = connection.getresponse()
                data = read_capped(response)
            if deadline.expired:  # the socket was shut down under a read that then saw an early end
                raise deadline.failure()
            length = declared_length(response)
            if length is not None and len(data) < length:
                raise http.client.IncompleteRead(data, length - len(data))
            if response.will_close:
                self.close()  # the server ends the connection after this reply: the next call opens one
            if 300 <= response.status < 400:  # never followed: the allow-list names the servers RSI may call
                where = (response.getheader("Location") or "")[:200]
                raise PolicyFailure(
                    ErrorType.POLICY_SERVER_ERROR,
                    f"the {self.what} server answered HTTP {response.status}, a redirect to {where!r}: RSI follows no "
                    "redirect",
                )
            return response.status, data
        except PolicyFailure:
            raise
        except (OSError, http.client.HTTPException, ValueError) as exc:  # ValueError: framing http.client cannot read
            raise _transport_failure(exc, deadline, self.what) from None

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def check_reachable(parsed: urllib.parse.SplitResult, seconds: float, what: str) -> None:
    """Before the first call: a server nobody can connect to is a setup error, not a policy score."""
    port = parsed.port or (443 if parsed.scheme in ("https", "wss") else 80)
    try:
        socket.create_connection((parsed.hostname, port), timeout=min(seconds, 10.0)).close()
    except OSError as exc:
        raise PolicySetupFailure(f"the {what} at {parsed.hostname}:{port} cannot be reached: {exc}") from None
