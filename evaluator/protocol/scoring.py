"""Outcomes, the error taxonomy and the score of one episode.

Success is read from the last executed native step (simpler_env_protocol.md, "Native
scoring and error accounting"); intermediate success is a diagnostic; checkpoints at H
and 2H are read along the one trajectory and are null when not reached.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from .actions import Violation


class Outcome(enum.Enum):
    SUCCESS = "success"
    TASK_FAILURE = "task_failure"  # a completed attempt whose final step is unsuccessful, budget stops included
    POLICY_ERROR = "policy_error"
    CONTRACT_VIOLATION = "contract_violation"
    INFRASTRUCTURE_ERROR = "infrastructure_error"

    @property
    def protocol_completed(self) -> bool:
        return self in (Outcome.SUCCESS, Outcome.TASK_FAILURE)


class ErrorType(enum.Enum):
    # Policy errors
    MALFORMED_OUTPUT = "malformed_output"
    POLICY_TIMEOUT = "policy_timeout"
    POLICY_TRANSPORT = "policy_transport"  # the connection failed or closed
    POLICY_SERVER_ERROR = "policy_server_error"  # the server answered with an error
    # Contract violations keep their typed category
    NOT_A_VECTOR = "not_a_vector"
    WRONG_LENGTH = "wrong_length"
    NOT_A_NUMBER = "not_a_number"
    BOOLEAN = "boolean"
    NON_FINITE = "non_finite"
    OUT_OF_BOUNDS = "out_of_bounds"
    # Infrastructure errors, never converted into model failures
    INSTALL = "install"
    RESET = "reset"
    RENDER = "render"
    RENDER_DEVICE_UNAVAILABLE = "render_device_unavailable"  # no Vulkan device the renderer can use
    NATIVE_RUNTIME = "native_runtime"
    WORKER_LOST = "worker_lost"
    POLICY_SETUP = "policy_setup"  # the policy could not be reached or loaded before its first call
    EVIDENCE_WRITE = "evidence_write"  # an evidence file could not be written (a full disk): closed with the rest
    INTERRUPTED = "interrupted"  # the process running it was asked to stop (Ctrl-C, SIGTERM)
    EVALUATOR = "evaluator"  # a fault of RSI itself: never the policy's

    @property
    def outcome(self) -> Outcome:
        if self in _POLICY:
            return Outcome.POLICY_ERROR
        if self in _INFRASTRUCTURE:
            return Outcome.INFRASTRUCTURE_ERROR
        return Outcome.CONTRACT_VIOLATION


_POLICY = frozenset(
    {ErrorType.MALFORMED_OUTPUT, ErrorType.POLICY_TIMEOUT, ErrorType.POLICY_TRANSPORT, ErrorType.POLICY_SERVER_ERROR}
)
_INFRASTRUCTURE = frozenset(
    {
        ErrorType.INSTALL,
        ErrorType.RESET,
        ErrorType.RENDER,
        ErrorType.RENDER_DEVICE_UNAVAILABLE,
        ErrorType.NATIVE_RUNTIME,
        ErrorType.WORKER_LOST,
        ErrorType.POLICY_SETUP,
        ErrorType.EVIDENCE_WRITE,
        ErrorType.INTERRUPTED,
        ErrorType.EVALUATOR,
    }
)


def error_type_for(violation: Violation) -> ErrorType:
    if violation.kind.is_malformed_output:
        return ErrorType.MALFORMED_OUTPUT
    return ErrorType(violation.kind.value)


class TerminationReason(enum.Enum):
    EVALUATION_HORIZON = "evaluation_horizon"
    CALL_BUDGET = "call_budget"
    STEP_CAP = "runner_step_cap"
    NATIVE_TERMINATION = "native_termination"
    POLICY_STOP = "policy_stop"
    HUMAN_STOP = "human_stop"  # an intervener stopped it: the attempt is non-autonomous
    ERROR = "error"


@dataclass(frozen=True)
class StepResult:
    success: bool  # the native step's own success flag, as returned by that step
    decision: int  # 1-based index of the policy call whose chunk held this action


@dataclass(frozen=True)
class EpisodeScore:
    outcome: Outcome
    error_type: ErrorType | None
    success: bool
    success_ever: bool
    first_success_step: int | None  # 1-based native step
    first_success_decision: int | None
    success_at_h: bool | None
    success_at_2h: bool | None
    environment_steps: int


def _checkpoint(steps: Sequence[StepResult], step: int) -> bool | None:
    return steps[step - 1].success if len(steps) >= step else None


def score_episode(steps: Sequence[StepResult], native_horizon: int, error: ErrorType | None = None) -> EpisodeScore:
    """Score one episode from the step results already returned; never query the scorer again."""
    first = next((i for i, s in enumerate(steps, start=1) if s.success), None)
    final_success = bool(steps) and steps[-1].success
    if error is not None:
        outcome = error.outcome
    else:
        outcome = Outcome.SUCCESS if final_success else Outcome.TASK_FAILURE
    return EpisodeScore(
        outcome=outcome,
        error_type=error,
        success=outcome is Outcome.SUCCESS,
        success_ever=first is not None,
        first_success_step=first,
        first_success_decision=steps[first - 1].decision if first is not None else None,
        success_at_h=_checkpoint(steps, native_horizon),
        success_at_2h=_checkpoint(steps, 2 * native_horizon),
        environment_steps=len(steps),
    )
