"""The policy interface the orchestrator calls, and the messages a policy may see.

A policy is given, at the start of an episode, an opaque random token, the instruction,
the public action contract and its public budgets; at each call, the mailbox message:
the current RGB frame, the declared sensors, the instruction, public counters and, on
the feedback track, the bounded message about its last rejected response. Nothing else.
"""

from __future__ import annotations

import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

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


class PolicyFailure(Exception):
    """A policy call that produced no response: timeout, transport or server failure."""

    def __init__(self, error_type: ErrorType, message: str):
        super().__init__(message)
        self.error_type = error_type


class Policy(ABC):
    def start_episode(self, start: EpisodeStart) -> None:
        """Reset all memory: nothing carries over between episodes."""

    @abstractmethod
    def act(self, message: MailboxMessage) -> Any:
        """One policy call: {"actions": [...]} or {"stop": true}, or raise PolicyFailure."""

    def end_episode(self) -> None:
        pass
