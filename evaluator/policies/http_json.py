"""Policies behind a plain HTTP JSON endpoint: one POST per act (docs/policies.md)."""

from __future__ import annotations

import http.client
import json
import socket
import urllib.parse

from evaluator.policies.base import EpisodeStart, MailboxMessage, Policy, PolicyFailure, PolicyReply, Usage
from evaluator.policies.payload import http_request
from evaluator.protocol.scoring import ErrorType


def reported_usage(reply: dict) -> Usage:
    """Usage a server reports about itself; unknown unless it says."""
    usage = reply.get("usage") if isinstance(reply, dict) else None
    if not isinstance(usage, dict):
        return Usage()
    known = {k: usage.get(k) for k in ("provider_requests", "input_tokens", "output_tokens", "cost_usd")}
    return Usage(**{k: v for k, v in known.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})


class HttpJsonPolicy(Policy):
    def __init__(self, url: str, timeout_s: float = 30.0):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.url, self.parsed, self.timeout_s = url, parsed, timeout_s
        self.connection = None
        self.start = None

    def start_episode(self, start: EpisodeStart) -> None:
        self.start = start

    def _connect(self) -> http.client.HTTPConnection:
        if self.connection is None:
            factory = http.client.HTTPSConnection if self.parsed.scheme == "https" else http.client.HTTPConnection
            self.connection = factory(self.parsed.hostname, self.parsed.port, timeout=self.timeout_s)
            self.connection.connect()
            # Headers and a large body go out in two writes: without this, Nagle's algorithm and
            # delayed ACKs can hold the body back for tens of milliseconds.
            self.connection.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return self.connection

    def _drop_connection(self) -> None:
        # After a failure the connection's state is unknown: the next call opens a new one.
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def act(self, message: MailboxMessage) -> PolicyReply:
        body = json.dumps(http_request(message, self.start)).encode()
        self.record_sent(body, "application/json")
        path = self.parsed.path or "/"
        try:
            connection = self._connect()
            connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            data = response.read()
        except TimeoutError:
            self._drop_connection()
            raise PolicyFailure(ErrorType.POLICY_TIMEOUT, f"no reply within {self.timeout_s:g} s") from None
        except (OSError, http.client.HTTPException) as exc:
            self._drop_connection()
            raise PolicyFailure(
                ErrorType.POLICY_TRANSPORT, "the connection to the policy failed", f"{type(exc).__name__}: {exc}"
            ) from None
        if response.status >= 400:
            raise PolicyFailure(
                ErrorType.POLICY_SERVER_ERROR,
                f"the policy server answered HTTP {response.status}",
                data[:2000].decode(errors="replace"),
            )
        try:
            reply = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise PolicyFailure(
                ErrorType.MALFORMED_OUTPUT, "the reply is not JSON", data[:2000].decode(errors="replace")
            ) from None
        return PolicyReply(reply, reported_usage(reply))

    def end_episode(self) -> None:
        self._drop_connection()
