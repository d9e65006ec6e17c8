"""A policy check before a launch (as AutoEval's test_policy_server does for its users): one call of a policy with
a synthetic observation of a benchmark's contract (its task's frame size, the sensor track's arrays, the task's
instruction, the first call's counters), the reply validated as a run validates it. The policy is built as a
run builds it, so its caps and its one deadline per call are a run's. Nothing is recorded.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

import numpy as np

from evaluator.policies.base import (
    EpisodeStart,
    MailboxMessage,
    PolicyFailure,
    PolicySetupFailure,
    new_episode_token,
)
from evaluator.policies.replies import excerpt
from evaluator.policies.specs import build_policy
from evaluator.protocol.actions import validate_response
from evaluator.protocol.budgets import resolve_budget
from evaluator.protocol.catalogs import TaskSpec
from evaluator.protocol.identity import ProtocolConfig
from evaluator.protocol.registry import action_contract, benchmark_protocol
from evaluator.protocol.scoring import error_type_for
from evaluator.running.episode import call_policy, recorded_response


@dataclass(frozen=True)
class PolicyCheck:
    valid: bool
    error_type: str | None  # the typed error a run would have recorded; None when the reply is valid
    message: str
    latency_ms: float | None  # the call's wall time; None when no call was made
    chunk_length: int | None  # actions in the reply; 0 for {"stop": true}
    reply_excerpt: str
    observation: dict  # what the synthetic observation held

    def as_dict(self) -> dict:
        return asdict(self)


def synthetic_frame(shape: tuple[int, int, int]) -> np.ndarray:
    """A frame of the task's size: red rises left to right, green top to bottom (a transposed or flipped frame
    is told apart from the real one), blue constant. Read-only, as a worker's frames are."""
    height, width, _ = shape
    frame = np.empty(shape, dtype=np.uint8)
    frame[..., 0] = np.linspace(0, 255, width, dtype=np.uint8)[None, :]
    frame[..., 1] = np.linspace(0, 255, height, dtype=np.uint8)[:, None]
    frame[..., 2] = 128
    frame.flags.writeable = False
    return frame


def synthetic_sensors(config: ProtocolConfig, task: TaskSpec) -> dict[str, np.ndarray]:
    """The sensor track's arrays at the shapes and dtypes the worker sends them, all zeros, read-only."""
    protocol = benchmark_protocol(config.benchmark)
    arrays = {}
    for name in config.sensor_arrays:
        shape, dtype = protocol.array_shape(name, task.name, task.robot)
        array = np.zeros(shape, dtype=dtype)
        array.flags.writeable = False
        arrays[name] = array
    return arrays


def check_policy(spec: str, settings: dict, config: ProtocolConfig, task: TaskSpec) -> PolicyCheck:
    """One call of the policy `spec` on a synthetic first observation of `task` under `config`."""
    budget = resolve_budget(config, task.native_horizon)
    contract = action_contract(config.benchmark, config.interface_version)
    token = new_episode_token()
    rgb, sensors = synthetic_frame(task.rgb_shape), synthetic_sensors(config, task)
    observation = {
        "rgb_shape": list(rgb.shape),
        "sensors": {name: {"shape": list(a.shape), "dtype": str(a.dtype)} for name, a in sensors.items()},
        "instruction": task.instruction,
        "task": task.name,
        "protocol_id": config.protocol_id,
        "replan_interval": budget.replan_interval,
    }
    start = EpisodeStart(
        token=token,
        instruction=task.instruction,
        action_contract=contract.describe(),
        budgets={
            "max_policy_calls": budget.max_policy_calls,
            "replan_interval": budget.replan_interval,
            "max_executable_steps": budget.max_executable_steps,
        },
        sensors=config.sensor_arrays,
    )
    message = MailboxMessage(
        token=token,
        instruction=task.instruction,
        rgb=rgb,
        counters={
            "policy_calls": 0,
            "max_policy_calls": budget.max_policy_calls,
            "environment_steps": 0,
            "max_executable_steps": budget.max_executable_steps,
            "action_decisions": 0,
            "rejected_calls": 0,
            "replan_interval": budget.replan_interval,
        },
        sensors=sensors,
    )

    def refused(error_type: str, text: str, latency_ms: float | None = None, reply: str = "") -> PolicyCheck:
        return PolicyCheck(False, error_type, text, latency_ms, None, reply, observation)

    policy = build_policy(spec, settings, config)
    try:
        policy.start_episode(start)  # a local model: the executor's host for it, which loads it if none runs
    except PolicySetupFailure as failure:
        return refused(failure.error_type.value, str(failure))
    started = time.perf_counter()
    try:
        reply, version = call_policy(policy, message)
    except PolicyFailure as failure:
        latency = (time.perf_counter() - started) * 1000
        return refused(failure.error_type.value, failure.detail, latency)
    finally:
        policy.end_episode()
    latency = (time.perf_counter() - started) * 1000
    shown = excerpt(json.dumps(recorded_response(reply.response)))
    response = validate_response(reply.response, contract, budget.replan_interval)
    if response.violation is not None:
        return refused(error_type_for(response.violation).value, response.violation.message, latency, shown)
    said = "" if version is None else f" (policy_version {version})"
    if response.stop:
        return PolicyCheck(True, None, '{"stop": true} at the first call' + said, latency, 0, shown, observation)
    length = len(reply.response["actions"])
    note = "" if length <= budget.replan_interval else f"; the first {budget.replan_interval} would execute"
    text = f"{length} action(s) within the contract{note}{said}"
    return PolicyCheck(True, None, text, latency, length, shown, observation)
