"""Policies behind a plain HTTP JSON endpoint: one POST per act (docs/policies.md)."""

from __future__ import annotations

import http.client
import json
import urllib.parse

from evaluator.policies.base import EpisodeStart, MailboxMessage, Policy, PolicyFailure, PolicyReply, Usage
from evaluator.policies.calls import CallDeadline, check_reachable, open_connection, post
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
        self.connection: http.client.HTTPConnection | None = None
        self.start = None

    def start_episode(self, start: EpisodeStart) -> None:
        self.start = start
        check_reachable(self.parsed, self.timeout_s, "policy server")

    def _drop_connection(self) -> None:
        # After a failure the connection's state is unknown: the next call opens a new one.
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def act(self, message: MailboxMessage) -> PolicyReply:
        deadline = CallDeadline(self.timeout_s)
        body = json.dumps(http_request(message, self.start)).encode()
        self.record_sent(body, "application/json")
        try:
            if self.connection is None:
                self.connection = open_connection(self.parsed, deadline, "policy")
            status, data = post(self.connection, self.parsed.path or "/", body, deadline, "policy")
        except PolicyFailure:
            self._drop_connection()
            raise
        if status >= 400:
            raise PolicyFailure(
                ErrorType.POLICY_SERVER_ERROR,
                f"the policy server answered HTTP {status}",
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
