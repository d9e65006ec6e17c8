"""Policies behind a plain HTTP endpoint: one POST per act, a JSON or a msgpack body, and one more at the end of an
episode that made calls, for a stateful server to free the episode's state (docs/policies.md)."""

from __future__ import annotations

import json
import logging
import urllib.parse

import msgpack

from evaluator.policies.base import (
    EpisodeStart,
    MailboxMessage,
    Policy,
    PolicyFailure,
    PolicyReply,
    PolicySetupFailure,
    Usage,
)
from evaluator.policies.calls import CallDeadline, KeptConnection, check_reachable
from evaluator.policies.payload import HTTP_BODIES, HTTP_PROTOCOL, json_request, msgpack_request
from evaluator.policies.replies import checked_usage, decode_json, excerpt
from evaluator.protocol.scoring import ErrorType

log = logging.getLogger(__name__)

END_SIGNAL_S = 5.0  # the most an episode's end waits on the server's answer to its end signal
USAGE_KEYS = {name: name for name in ("provider_requests", "input_tokens", "output_tokens", "cost_usd")}


def reported_usage(reply) -> Usage:
    """Usage a server reports about itself; unknown unless it says, malformed output if it says nonsense."""
    usage = reply.get("usage") if isinstance(reply, dict) else None
    if usage is None:
        return Usage()
    if not isinstance(usage, dict):
        raise PolicyFailure(ErrorType.MALFORMED_OUTPUT, f"the reply's usage is a {type(usage).__name__}, not an object")
    return checked_usage(usage, USAGE_KEYS)


class HttpJsonPolicy(Policy):
    def __init__(self, url: str, timeout_s: float = 30.0, body: str = "json"):
        parsed = urllib.parse.urlsplit(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        if body not in HTTP_BODIES:
            raise ValueError(f"unknown request body {body!r}; one of {', '.join(HTTP_BODIES)}")
        self.body, self.media_type = body, f"application/{body}"
        self.url, self.parsed, self.timeout_s = url, parsed, timeout_s
        self.target = (parsed.path or "/") + (f"?{parsed.query}" if parsed.query else "")  # the server's own query
        self.connection = KeptConnection(parsed, "policy")
        self.start = None
        self.calls = 0

    def start_episode(self, start: EpisodeStart) -> None:
        self.start, self.calls = start, 0
        check_reachable(self.parsed, self.timeout_s, "policy server")

    def act(self, message: MailboxMessage) -> PolicyReply:
        deadline = CallDeadline(self.timeout_s)
        if self.body == "json":
            body = json_request(message, self.start)
        else:
            body = msgpack_request(message, self.start)  # buffers: the frame's pixels are sent from its memory
        self.record_sent(body, self.media_type)
        self.calls += 1
        status, data = self.connection.post(self.target, body, self.media_type, deadline)
        if status >= 400:
            raise PolicyFailure(
                ErrorType.POLICY_SERVER_ERROR,
                f"the policy server answered HTTP {status}",
                excerpt(data),
            )
        reply = decode_json(data, "the reply")
        return PolicyReply(reply, reported_usage(reply))

    def end_episode(self) -> None:
        """After an episode that called the server: one POST of {"protocol", "token", "end_of_episode": true} in the
        episode's body format, for a stateful server to free the token's state. Sent once and never retried; the
        episode's result is decided already, so a server that does not answer it is logged, nothing more."""
        try:
            if self.calls and self.start is not None:
                self._signal_end(self.start.token)
        finally:
            self.connection.close()

    def _signal_end(self, token: str) -> None:
        document = {"protocol": HTTP_PROTOCOL, "token": token, "end_of_episode": True}
        body = json.dumps(document).encode() if self.body == "json" else msgpack.packb(document)
        try:
            status, _ = self.connection.post(
                self.target, body, self.media_type, CallDeadline(min(self.timeout_s, END_SIGNAL_S))
            )
        except PolicyFailure as exc:
            log.warning("the end-of-episode signal to %s was not answered: %s", self.url, exc.detail)
        except PolicySetupFailure as exc:  # its credentials could not be read: nothing was sent
            log.warning("the end-of-episode signal to %s was not sent: %s", self.url, exc)
        except Exception:  # the episode's result is decided: nothing its end signal meets may undo it
            log.exception("the end-of-episode signal to %s failed", self.url)
        else:
            if status >= 400:
                log.warning("the end-of-episode signal to %s was answered HTTP %s", self.url, status)
