"""The decision loop of one episode: the only place where a policy reply meets a native step.

current observation -> one policy call -> chunk or stop -> validation -> execute the
permitted prefix (at most K actions, never past the maximum executable steps) -> next
scheduled observation. Stops, failed calls and short chunks each consume a decision; on
the feedback track a rejected response consumes a call and the next call gets the bounded
message with the same last acknowledged observation. Nothing is ever retried.
(simpler_env_protocol.md, "Interaction modes", "Optional rejected-action feedback",
"Budgets and instruction transitions", "Native scoring and error accounting".)
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from environment.workers.wire import jsonable
from evaluator.native.client import NativeObservation, NativeStep, WorkerFailure
from evaluator.native.png import png_ahead
from evaluator.policies.base import (
    EpisodeStart,
    MailboxMessage,
    Policy,
    PolicyFailure,
    PolicyReply,
    SentRequest,
    Usage,
)
from evaluator.policies.replies import reported_version
from evaluator.protocol.actions import ActionContract, validate_response
from evaluator.protocol.budgets import Budget
from evaluator.protocol.identity import DECISIONS, ProtocolConfig
from evaluator.protocol.interventions import Directive
from evaluator.protocol.scoring import (
    EpisodeScore,
    ErrorType,
    StepResult,
    TerminationReason,
    error_type_for,
    score_episode,
)
from evaluator.running.interrupts import stop_requested


class NativeEnv(Protocol):
    def reset(self, seed: int, **options) -> NativeObservation: ...
    def steps(self, actions: list[tuple[float, ...]], stop_on_termination: bool) -> Iterator[NativeStep]: ...


class Control(Protocol):
    """Human intervention, checked between decisions; may block while the episode is paused."""

    def reached(self, step: int) -> None: ...  # before each checkpoint: the steps executed so far
    def checkpoint(self, give_up: Callable[[], bool]) -> Directive | None: ...
    def rejected(self, message: str) -> None: ...
    def finish(self) -> None: ...  # the last control has executed: no intervention is taken any more


@dataclass(frozen=True)
class EpisodeSpec:
    config: ProtocolConfig
    budget: Budget
    contract: ActionContract
    seed: int
    reset_options: dict
    sensors: tuple[str, ...]  # worker arrays the declared sensor track lets the policy see
    native_termination_ends: bool = False
    control: Control | None = None


@dataclass(frozen=True)
class StepRecord:
    index: int  # 1-based native step
    decision: int
    action: tuple[float, ...]
    success: bool
    terminated: bool
    truncated: bool
    instruction: str  # what the native env reports after this step
    info: dict


@dataclass
class DecisionRecord:  # filled in while its chunk executes, then handed to the sink
    index: int  # 1-based decision (policy calls and human decisions share the sequence)
    kind: str  # actions | stop | rejected | failed
    observation_step: int
    instruction: str
    response: Any  # JSON-ready copy of what the policy returned (None when it returned nothing)
    accepted: list
    executed: int
    latency_ms: float | None
    violation: dict | None = None
    usage: dict | None = None  # provider requests, tokens, cost of this call where known
    actor: str = "policy"
    call: int | None = None  # the policy call number (None for a human decision)
    steps: list[StepRecord] = field(default_factory=list)


class EpisodeSink(Protocol):
    """Where the evidence goes, as it happens."""

    def frame(self, step: int, observation: NativeObservation) -> None: ...
    def start(self, start: EpisodeStart) -> None: ...  # what the policy is told once, before its first call
    def message(self, call: int, message: MailboxMessage) -> None: ...
    def sent(self, call: int, requests: list[SentRequest]) -> None: ...  # the call's request bodies
    def decided(self, record: DecisionRecord) -> None: ...  # before its chunk executes
    def decision(self, record: DecisionRecord) -> None: ...  # after, with its steps


@dataclass(frozen=True)
class EpisodeResult:
    score: EpisodeScore
    termination: TerminationReason
    policy_calls: int
    action_decisions: int
    rejected_calls: int
    error_detail: str = ""
    accounting: dict = field(default_factory=dict)


class _Episode:
    def __init__(self, env: NativeEnv, policy: Policy, spec: EpisodeSpec, sink: EpisodeSink, token: str):
        self.env, self.policy, self.spec, self.sink, self.token = env, policy, spec, sink, token
        self.calls = self.decisions = self.rejected = self.human_decisions = self.decision_count = 0
        self.steps: list[StepRecord] = []
        self.feedback: str | None = None
        self.error: ErrorType | None = None
        self.error_detail = ""
        self.native_ended = False
        self.latencies: list[float] = []
        self.usages: list[Usage] = []
        self.versions: list[str] = []  # what the policy server said it runs, in the order first seen
        self.frame_png: Future | None = None  # the current observation's PNG, encoding since it arrived

    @property
    def budget(self) -> Budget:
        return self.spec.budget

    def counters(self) -> dict:
        return {
            "policy_calls": self.calls,
            "max_policy_calls": self.budget.max_policy_calls,
            "environment_steps": len(self.steps),
            "max_executable_steps": self.budget.max_executable_steps,
            "action_decisions": self.decisions,
            "rejected_calls": self.rejected,
            "replan_interval": self.budget.replan_interval,
        }

    def budget_stop(self) -> TerminationReason | None:
        steps = len(self.steps)
        decision_mode = self.spec.config.budget_mode == DECISIONS
        if steps >= self.budget.evaluation_horizon and not decision_mode:
            return TerminationReason.EVALUATION_HORIZON
        if self.calls >= self.budget.max_policy_calls:
            return TerminationReason.CALL_BUDGET
        if steps >= self.budget.runner_step_cap:
            return TerminationReason.STEP_CAP
        if steps >= self.budget.max_executable_steps:
            return TerminationReason.CALL_BUDGET if decision_mode else TerminationReason.EVALUATION_HORIZON
        return None

    def fail(self, error: ErrorType, detail: str) -> TerminationReason:
        self.error, self.error_detail = error, detail
        return TerminationReason.ERROR

    def run(self) -> EpisodeResult:
        try:
            observation = self.env.reset(self.spec.seed, **self.spec.reset_options)
        except WorkerFailure as failure:
            return self.result(self.fail(failure.error_type, _with_tail(str(failure), failure.stderr_tail)))
        self.frame_png = png_ahead(observation.rgb)
        self.sink.frame(0, observation)
        start = EpisodeStart(
            token=self.token,
            instruction=observation.instruction,
            action_contract=self.spec.contract.describe(),
            budgets={
                "max_policy_calls": self.budget.max_policy_calls,
                "replan_interval": self.budget.replan_interval,
                "max_executable_steps": self.budget.max_executable_steps,
            },
            sensors=self.spec.sensors,
        )
        self.sink.start(start)
        self.policy.start_episode(start)
        try:
            termination = self.loop(observation)
        finally:
            if self.spec.control is not None:
                self.spec.control.finish()
            self.policy.end_episode()
        return self.result(termination)

    def loop(self, observation: NativeObservation) -> TerminationReason:
        while True:
            if self.native_ended:
                return TerminationReason.NATIVE_TERMINATION
            if stop := self.budget_stop():
                return stop
            if self.spec.control:
                self.spec.control.reached(len(self.steps))
            # The process asked to stop ends the episode here, also while a pause holds it in the checkpoint.
            directive = self.spec.control.checkpoint(_interrupted) if self.spec.control and not _interrupted() else None
            if (request := stop_requested()) is not None:
                return self.fail(ErrorType.INTERRUPTED, f"interrupted: {request.reason}")
            if directive is not None and directive.stop:
                return TerminationReason.HUMAN_STOP
            if directive is not None and directive.actions is not None:
                observation, failure = self.human(directive.actions, observation)
                if failure is not None:
                    return self.fail(failure.error_type, _with_tail(str(failure), failure.stderr_tail))
                continue
            message = MailboxMessage(
                token=self.token,
                instruction=observation.instruction,
                rgb=observation.rgb,
                counters=self.counters(),
                sensors={name: observation.arrays[name] for name in self.spec.sensors},
                feedback=self.feedback,
                png_ahead=self.frame_png,
            )
            self.calls += 1
            self.decision_count += 1
            self.sink.message(self.calls, message)
            record = dict(
                index=self.decision_count,
                call=self.calls,
                observation_step=len(self.steps),
                instruction=observation.instruction,
            )
            started = time.perf_counter()
            feedback_track = self.spec.config.action_rejection_feedback
            try:
                (reply, version), failure = call_policy(self.policy, message), None
            except PolicyFailure as caught:
                reply, failure = None, caught
            self.latencies.append((time.perf_counter() - started) * 1000)
            self.sink.sent(self.calls, self.policy.take_sent())
            if failure is not None:
                self.usages.append(failure.usage)
                violation = {"kind": failure.error_type.value, "message": failure.public, "detail": failure.detail}
                self.sink.decision(
                    DecisionRecord(
                        kind="rejected" if feedback_track else "failed",
                        response=None,
                        accepted=[],
                        executed=0,
                        latency_ms=self.latencies[-1],
                        violation=violation,
                        usage=asdict(failure.usage),
                        **record,
                    )
                )
                if not feedback_track:
                    return self.fail(failure.error_type, failure.detail)
                self.reject(failure.public)
                continue
            self.usages.append(reply.usage)
            if version is not None and version not in self.versions:
                self.versions.append(version)
            raw = reply.response
            common = dict(
                response=recorded_response(raw), latency_ms=self.latencies[-1], usage=asdict(reply.usage), **record
            )
            permitted = min(self.budget.replan_interval, self.budget.max_executable_steps - len(self.steps))
            response = validate_response(raw, self.spec.contract, permitted)
            if response.stop:
                self.sink.decision(DecisionRecord(kind="stop", accepted=[], executed=0, **common))
                return TerminationReason.POLICY_STOP
            violation = response.violation
            if violation is not None and not feedback_track:
                # Fail fast: an invalid response executes nothing and ends the attempt.
                self.sink.decision(
                    DecisionRecord(kind="rejected", accepted=[], executed=0, violation=_violation(violation), **common)
                )
                return self.fail(error_type_for(violation), violation.message)
            decision = DecisionRecord(
                kind="rejected" if violation else "actions",
                accepted=[list(a) for a in response.actions],
                executed=0,
                violation=_violation(violation) if violation else None,
                **common,
            )
            self.sink.decided(decision)
            observation, failure = self.execute(response.actions, observation, decision)
            self.sink.decision(decision)
            if decision.executed:
                self.decisions += 1
            if failure is not None:
                return self.fail(failure.error_type, _with_tail(str(failure), failure.stderr_tail))
            if violation is not None:
                self.reject(violation.message)
            else:
                self.feedback = None

    def human(self, actions: list, observation: NativeObservation):
        """A human decision during a take-over: the same validation, recorded as the human's."""
        self.decision_count += 1
        permitted = min(self.budget.replan_interval, self.budget.max_executable_steps - len(self.steps))
        response = validate_response({"actions": actions}, self.spec.contract, permitted)
        decision = DecisionRecord(
            index=self.decision_count,
            actor="human",
            kind="rejected" if response.violation else "actions",
            observation_step=len(self.steps),
            instruction=observation.instruction,
            response=jsonable(actions),
            accepted=[list(a) for a in response.actions],
            executed=0,
            latency_ms=None,
            violation=_violation(response.violation) if response.violation else None,
        )
        if response.violation:
            self.spec.control.rejected(response.violation.message)
            self.sink.decision(decision)
            return observation, None
        self.human_decisions += 1
        self.sink.decided(decision)
        observation, failure = self.execute(response.actions, observation, decision)
        self.sink.decision(decision)
        return observation, failure

    def reject(self, public_message: str) -> None:
        """Feedback track: the call is spent; the next call sees the bounded message and the
        last acknowledged observation."""
        self.rejected += 1
        self.feedback = public_message

    def execute(self, actions, observation, decision: DecisionRecord):
        # The worker runs the chunk's next step while this one is recorded.
        results = self.env.steps(actions, stop_on_termination=self.spec.native_termination_ends)
        for action in actions:
            try:
                result = next(results)
            except WorkerFailure as failure:
                return observation, failure
            observation = result.observation
            step = StepRecord(
                index=len(self.steps) + 1,
                decision=decision.index,
                action=action,
                success=result.success,
                terminated=result.terminated,
                truncated=result.truncated,
                instruction=observation.instruction,
                info=jsonable(dict(result.info)),
            )
            self.steps.append(step)
            decision.steps.append(step)
            decision.executed += 1
            self.sink.frame(step.index, observation)
            if result.terminated and self.spec.native_termination_ends:
                self.native_ended = True
                break
        if actions:
            # The next call is made on this new frame: its PNG (for the evidence, and for a PNG transport)
            # is encoded while the decision is recorded (one spare encoding when the episode ends here).
            self.frame_png = png_ahead(observation.rgb)
        return observation, None

    def result(self, termination: TerminationReason) -> EpisodeResult:
        score = score_episode(
            [StepResult(success=s.success, decision=s.decision) for s in self.steps],
            native_horizon=self.budget.native_horizon,
            error=self.error,
        )
        return EpisodeResult(
            score=score,
            termination=termination,
            policy_calls=self.calls,
            action_decisions=self.decisions,
            rejected_calls=self.rejected,
            error_detail=self.error_detail,
            accounting={
                **account(self.usages, self.latencies),
                "human_decisions": self.human_decisions,
                "policy_versions": self.versions,
            },
        )


MAX_RECORDED_RESPONSE = 64 * 1024  # characters of JSON kept of one reply


def call_policy(policy: Policy, message: MailboxMessage) -> tuple[PolicyReply, str | None]:
    """One call, and the rules a reply meets before its actions are looked at (the policy_version it may report):
    a run and a policy check alike. A reply that breaks one is a PolicyFailure."""
    reply = policy.act(message)
    return reply, reported_version(reply.response)


def recorded_response(raw: Any) -> Any:
    """A JSON-ready copy of a reply for the records: whole when small, else a bounded excerpt and its size."""
    value = jsonable(raw)
    text = json.dumps(value)
    if len(text) <= MAX_RECORDED_RESPONSE:
        return value
    return {"rsi_excerpt": text[:MAX_RECORDED_RESPONSE], "rsi_size": len(text)}


def _total(values: list) -> float | int | None:
    """A sum that stays unknown (None) when any part of it is unknown."""
    return None if any(v is None for v in values) else sum(values)


def account(usages: list[Usage], latencies: list[float]) -> dict:
    ordered = sorted(latencies)

    def percentile(p: float) -> float | None:
        return ordered[min(len(ordered) - 1, math.ceil(p * len(ordered)) - 1)] if ordered else None

    return {
        "provider_requests": _total([u.provider_requests for u in usages]),
        "input_tokens": _total([u.input_tokens for u in usages]),
        "output_tokens": _total([u.output_tokens for u in usages]),
        "cost_usd": _total([u.cost_usd for u in usages]),
        "latency_p50_ms": percentile(0.5),
        "latency_p95_ms": percentile(0.95),
        "latency_max_ms": ordered[-1] if ordered else None,
    }


def _violation(violation) -> dict:
    return {
        "kind": violation.kind.value,
        "message": violation.message,
        "action_index": violation.action_index,
        "component": violation.component,
    }


def _interrupted() -> bool:
    return stop_requested() is not None


def _with_tail(message: str, tail: str) -> str:
    return f"{message}\n--- worker stderr (tail) ---\n{tail}" if tail else message


def run_episode(env: NativeEnv, policy: Policy, spec: EpisodeSpec, sink: EpisodeSink, token: str) -> EpisodeResult:
    return _Episode(env, policy, spec, sink, token).run()
