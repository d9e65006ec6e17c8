"""What every network transport shares: one wall-clock deadline per policy call, and a cap on the
size of a reply.

A socket timeout bounds each read, so a server that trickles one byte every few seconds would never
time out; here a timer shuts the call's socket down when the call's deadline passes, whatever the
call is doing (connecting, sending, waiting, reading). A reply larger than MAX_REPLY_BYTES is
malformed output: it is not read past the cap (docs/policies.md, "Limits").
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
import time
import urllib.parse

from evaluator.policies.base import PolicyFailure, PolicySetupFailure
from evaluator.protocol.scoring import ErrorType

MAX_REPLY_BYTES = 1 << 20  # 1 MiB: a chunk of a thousand 7-D actions is about 100 KiB of JSON


class CallDeadline:
    def __init__(self, seconds: float):
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.expired = False
        self._timer: threading.Timer | None = None

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

        def expire():
            self.expired = True
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

        self._timer = threading.Timer(self.remaining(), expire)
        self._timer.daemon = True
        self._timer.start()
        try:
            yield
        finally:
            self._timer.cancel()


def too_large(size: int | str) -> PolicyFailure:
    return PolicyFailure(
        ErrorType.MALFORMED_OUTPUT,
        f"the reply is larger than {MAX_REPLY_BYTES} bytes",
        f"reply of {size} bytes refused at the {MAX_REPLY_BYTES}-byte cap",
    )


def read_capped(response: http.client.HTTPResponse) -> bytes:
    length = response.getheader("Content-Length")
    if length is not None and length.isdigit() and int(length) > MAX_REPLY_BYTES:
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


def open_connection(parsed: urllib.parse.SplitResult, deadline: CallDeadline, what: str) -> http.client.HTTPConnection:
    """A connection made within the call's deadline, or a typed PolicyFailure."""
    factory = http.client.HTTPSConnection if parsed.scheme == "https" else http.client.HTTPConnection
    connection = factory(parsed.hostname, parsed.port, timeout=deadline.remaining())
    try:
        connection.connect()
    except (OSError, http.client.HTTPException) as exc:
        raise _transport_failure(exc, deadline, what) from None
    # Headers and a large body go out in two writes: without this, Nagle's algorithm and
    # delayed ACKs can hold the body back for tens of milliseconds.
    connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return connection


def post(
    connection: http.client.HTTPConnection, path: str, body: bytes, deadline: CallDeadline, what: str
) -> tuple[int, bytes]:
    """POST under the call's deadline; the reply's status and body (capped), or a typed PolicyFailure."""
    try:
        connection.sock.settimeout(deadline.remaining())
        with deadline.guarding(connection.sock):
            connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            data = read_capped(response)
        if deadline.expired:  # the socket was shut down under a read that then saw an early end
            raise deadline.failure()
        length = response.getheader("Content-Length")
        if length is not None and length.isdigit() and len(data) < int(length):
            raise http.client.IncompleteRead(data, int(length) - len(data))
        return response.status, data
    except PolicyFailure:
        raise
    except (OSError, http.client.HTTPException) as exc:
        raise _transport_failure(exc, deadline, what) from None


def check_reachable(parsed: urllib.parse.SplitResult, seconds: float, what: str) -> None:
    """Before the first call: a server nobody can connect to is a setup error, not a policy score."""
    port = parsed.port or (443 if parsed.scheme in ("https", "wss") else 80)
    try:
        socket.create_connection((parsed.hostname, port), timeout=min(seconds, 10.0)).close()
    except OSError as exc:
        raise PolicySetupFailure(f"the {what} at {parsed.hostname}:{port} cannot be reached: {exc}") from None
