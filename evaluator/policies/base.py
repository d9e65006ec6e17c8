"""The policy interface the orchestrator calls, and the messages a policy may see.

A policy is given, at the start of an episode, an opaque random token, the instruction,
the public action contract and its public budgets; at each call, the mailbox message:
the current RGB frame, the declared sensors, the instruction, public counters and, on
the feedback track, the bounded message about its last rejected response. Nothing else.
"""

from __future__ import annotations

import functools
import secrets
from abc import ABC, abstractmethod
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from evaluator.native.png import png_rgb
from evaluator.protocol.errors import ProtocolError
from evaluator.protocol.scoring import ErrorType


def new_episode_token() -> str:
    """Random and opaque: it encodes no seed, index, reset value or path."""
    return secrets.token_hex(16)


@dataclass(frozen=True)
class EpisodeStart:
    token: str
    instruction: str
    action_contract: Mapping[str, Any]
    budgets: Mapping[str, int]  # max_policy_calls, replan_interval, max_executable_steps
    sensors: tuple[str, ...]  # names of the declared sensor arrays besides RGB


@dataclass(frozen=True)
class MailboxMessage:
    token: str
    instruction: str
    rgb: np.ndarray
    counters: Mapping[str, int]
    sensors: Mapping[str, np.ndarray] = field(default_factory=dict)
    feedback: str | None = None
    # The PNG of `rgb` if its encoding was started ahead (png_ahead): the same bytes, made earlier.
    png_ahead: Future | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def png(self) -> bytes:
        """The frame as a lossless PNG, encoded once for the evidence and every transport."""
        return self.png_ahead.result() if self.png_ahead is not None else png_rgb(self.rgb)


@dataclass(frozen=True)
class SentRequest:
    """One request exactly as a transport sent it: its body, without the transport's framing, as the
    buffers it was sent from (a frame's pixels travel from the frame's own memory, never copied)."""

    media_type: str  # application/json, application/msgpack, ...
    parts: tuple  # bytes-like, in order

    @property
    def body(self) -> bytes:
        return b"".join(self.parts)


@dataclass(frozen=True)
class Usage:
    """What one policy call cost, where known. None means unknown, never zero."""

    provider_requests: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None


NO_PROVIDER = Usage(provider_requests=0, input_tokens=0, output_tokens=0, cost_usd=0.0)


@dataclass(frozen=True)
class PolicyReply:
    response: Any  # decoded: {"actions": [...]} or {"stop": true}, validated by the loop
    usage: Usage = Usage()


class PolicyFailure(Exception):
    """A policy call that produced no usable reply: timeout, transport failure, server error,
    or output that does not decode. `public` is safe to return to the policy on the feedback
    track; `detail` is evidence for the evaluator only."""

    def __init__(self, error_type: ErrorType, public: str, detail: str = "", usage: Usage = Usage()):
        super().__init__(public)
        self.error_type = error_type
        self.public = public
        self.detail = detail or public
        self.usage = usage


class PolicySetupFailure(ProtocolError):
    """The policy could not be reached or loaded before its first call: an infrastructure error
    (policy_setup), never a policy score."""

    error_type = ErrorType.POLICY_SETUP


class Policy(ABC):
    # The request bodies of the call under way, in order, once a transport has sent one (record_sent). A class
    # default of None, not a list: a list here would be one list shared by every policy.
    sent_requests: list[SentRequest] | None = None

    def check_tasks(self, tasks: list) -> None:
        """At launch, with the plan's tasks (catalog TaskSpecs): what the policy needs of each, or a ProtocolError
        (a LaunchRefused holding each problem). No server is contacted, nothing is loaded."""

    def start_episode(self, start: EpisodeStart) -> None:
        """Reset all memory: nothing carries over between episodes. May raise PolicySetupFailure."""

    @abstractmethod
    def act(self, message: MailboxMessage) -> PolicyReply:
        """One policy call, or PolicyFailure. Never retried by the caller."""

    def end_episode(self) -> None:
        pass

    def describe(self) -> dict:
        """What the transport learned about the policy (e.g. a server's metadata), for provenance."""
        return {}

    def record_sent(self, body: bytes | list, media_type: str) -> None:
        """A transport keeps each request body it sends (bytes, or the buffers it sends in order), for the
        evidence (written after the call)."""
        parts = tuple(body) if isinstance(body, list) else (body,)
        if self.sent_requests is None:
            self.sent_requests = []
        self.sent_requests.append(SentRequest(media_type, parts))

    def take_sent(self) -> list[SentRequest]:
        """What the last call sent, in order; empty for in-process programs, which get the message itself."""
        sent, self.sent_requests = self.sent_requests or [], None
        return sent
