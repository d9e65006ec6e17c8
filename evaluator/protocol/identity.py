"""Protocol identities: which configurations exist, their names, and the way back.

An identity names everything that makes two results comparable. Its grammar is

    PREFIX[/SCOPE]/SENSORS[/BUDGET][/action-feedback][/agent-method]/vN

with BUDGET either `decision-D-prefix-K` (decision mode) or `extended-horizon-2h`
(horizon mode with horizon_multiplier=2); the native-horizon track has no budget
segment. Horizon-mode call and step budgets are run settings recorded with each
attempt, not part of the identity (simpler_env_protocol.md, "Protocol").

A full SimplerEnv campaign (the native Visual Matching or Variant Aggregation matrix, cell by cell)
has its own prefix and, as SCOPE, the first 12 hex digits of the matrix data's sha256:
`simpler-full-visual-matching/matrix-<sha12>/rgb/v1`. It is never pooled with the prepackaged track,
nor with a run of different matrix data.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import (
    InvalidBudget,
    InvalidCombination,
    MalformedIdentity,
    UnknownOption,
)
from .numbers import whole_number
from .registry import DECISIONS, DEFAULT_SCOPE, HORIZON, PROTOCOLS, Family, benchmark_protocol

SINGLE_RESPONSE = "single_response"
AGENT_METHOD = "agent_method"
INTERACTION_MODES = (SINGLE_RESPONSE, AGENT_METHOD)

BUDGET_MODES = (HORIZON, DECISIONS)

EXTENDED_SEGMENT = "extended-horizon-2h"
FEEDBACK_SEGMENT = "action-feedback"
AGENT_METHOD_SEGMENT = "agent-method"
FULL_PREFIX = "simpler-full-"
FULL_PROTOCOLS = ("visual_matching", "variant_aggregation")
FULL_MATRIX_BENCHMARK = "simpler_env"  # the one benchmark with native full matrices
MATRIX_SEGMENT = "matrix-"


def family(benchmark: str) -> Family:
    """What the benchmark's protocol allows: its registry entry's family (registry.py)."""
    return benchmark_protocol(benchmark).family


@dataclass(frozen=True)
class ProtocolConfig:
    benchmark: str
    sensors: str
    interaction_mode: str
    action_rejection_feedback: bool
    budget_mode: str
    horizon_multiplier: int
    max_policy_calls: int
    replan_interval: int
    runner_step_cap: int
    task_scope: str = DEFAULT_SCOPE
    interface_version: int = 1
    full_protocol: str = ""  # SimplerEnv's full matrix (visual_matching, variant_aggregation), or none
    matrix_sha: str = ""  # the first 12 hex digits of that matrix data's sha256

    @property
    def protocol_id(self) -> str:
        fam = family(self.benchmark)
        if self.full_protocol:
            segments = [FULL_PREFIX + self.full_protocol.replace("_", "-"), MATRIX_SEGMENT + self.matrix_sha]
        else:
            segments = [fam.prefix]
        if self.task_scope != DEFAULT_SCOPE:
            segments.append(self.task_scope)
        segments.append(self.sensors)
        if self.budget_mode == DECISIONS:
            segments.append(f"decision-{self.max_policy_calls}-prefix-{self.replan_interval}")
        elif self.horizon_multiplier == 2:
            segments.append(EXTENDED_SEGMENT)
        if self.action_rejection_feedback and not fam.feedback_always_on:
            segments.append(FEEDBACK_SEGMENT)
        if self.interaction_mode == AGENT_METHOD:
            segments.append(AGENT_METHOD_SEGMENT)
        segments.append(f"v{self.interface_version}")
        return "/".join(segments)

    def evaluation_horizon(self, native_horizon: int | None) -> int | None:
        """D * K in decision mode, H * multiplier in horizon mode (None while H is unknown)."""
        if self.budget_mode == DECISIONS:
            return self.max_policy_calls * self.replan_interval
        return None if native_horizon is None else native_horizon * self.horizon_multiplier

    def max_executable_steps(self, native_horizon: int | None) -> int | None:
        """min(evaluation_horizon, runner_step_cap, C * K): no episode executes more controls."""
        horizon = self.evaluation_horizon(native_horizon)
        if horizon is None:
            return None
        return min(horizon, self.runner_step_cap, self.max_policy_calls * self.replan_interval)

    @property
    def sensor_arrays(self) -> tuple[str, ...]:
        return benchmark_protocol(self.benchmark).sensor_arrays.get(self.sensors, ())

    @property
    def is_current_interface(self) -> bool:
        return self.interface_version == family(self.benchmark).current_version

    def as_dict(self) -> dict:
        full = {"full_protocol": self.full_protocol, "matrix_sha": self.matrix_sha} if self.full_protocol else {}
        return {
            **full,
            "benchmark": self.benchmark,
            "protocol_id": self.protocol_id,
            "sensors": self.sensors,
            "interaction_mode": self.interaction_mode,
            "action_rejection_feedback": self.action_rejection_feedback,
            "budget_mode": self.budget_mode,
            "horizon_multiplier": self.horizon_multiplier,
            "max_policy_calls": self.max_policy_calls,
            "replan_interval": self.replan_interval,
            "runner_step_cap": self.runner_step_cap,
            "task_scope": self.task_scope,
            "interface_version": self.interface_version,
        }


# Upper bounds of the run budgets: far above any native horizon (SIMPLE's longest is 1200 controls),
# low enough that a typo cannot plan a billion policy calls.
BUDGET_LIMITS = {"max_policy_calls": 10_000, "replan_interval": 1_000, "runner_step_cap": 100_000}


def _positive(name: str, value: int | None) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidBudget(f"{name} must be a whole number, got {value!r}")
    if value < 1:
        raise InvalidBudget(f"{name} must be at least 1, got {value}")
    if value > BUDGET_LIMITS[name]:
        raise InvalidBudget(f"{name} must be at most {BUDGET_LIMITS[name]}, got {value}")
    return value


def _choice(name: str, value: str | None, allowed: tuple[str, ...], default: str) -> str:
    if value is None:
        return default
    if value not in allowed:
        raise UnknownOption(f"unknown {name} {value!r}; allowed: {', '.join(allowed)}")
    return value


def configure(
    benchmark: str,
    *,
    sensors: str | None = None,
    interaction_mode: str | None = None,
    action_rejection_feedback: bool = False,
    budget_mode: str | None = None,
    horizon_multiplier: int | None = None,
    max_policy_calls: int | None = None,
    replan_interval: int | None = None,
    runner_step_cap: int | None = None,
    task_scope: str | None = None,
    interface_version: int | None = None,
    full_protocol: str | None = None,
    matrix_sha: str | None = None,
) -> ProtocolConfig:
    """Resolve explicit options (None = not given) into a configuration, or refuse them."""
    fam = family(benchmark)
    full_protocol, matrix_sha = _full_matrix(benchmark, full_protocol, matrix_sha, task_scope)
    sensors = _choice("sensor track", sensors, fam.sensors, fam.sensors[0])
    interaction_mode = _choice("interaction mode", interaction_mode, INTERACTION_MODES, SINGLE_RESPONSE)
    budget_mode = _choice("budget mode", budget_mode, BUDGET_MODES, fam.default_budget_mode)
    task_scope = _choice("task scope", task_scope, fam.scopes, DEFAULT_SCOPE)
    if interface_version is None:
        interface_version = fam.current_version
    if interface_version not in fam.versions:
        raise UnknownOption(
            f"{benchmark} has no interface v{interface_version}; versions: " + ", ".join(f"v{v}" for v in fam.versions)
        )
    calls = _positive("max_policy_calls", max_policy_calls)
    replan = _positive("replan_interval", replan_interval)
    cap = _positive("runner_step_cap", runner_step_cap)

    if horizon_multiplier is not None:
        if isinstance(horizon_multiplier, bool) or horizon_multiplier not in (1, 2):
            raise InvalidBudget(f"horizon_multiplier must be 1 or 2, got {horizon_multiplier!r}")
        if budget_mode == DECISIONS and horizon_multiplier != 1:
            raise InvalidCombination("a horizon multiplier cannot be combined with budget_mode=decisions")
    multiplier = horizon_multiplier or 1
    if multiplier == 2 and not fam.extended_horizon:
        raise InvalidCombination(f"{benchmark} defines no extended-horizon track")
    if interaction_mode == AGENT_METHOD and not fam.agent_method:
        raise InvalidCombination(f"{benchmark} defines no agent_method interaction mode")
    if task_scope in fam.restricted_scopes:
        if sensors != fam.sensors[0]:
            raise InvalidCombination(
                f"sensors {sensors!r} exist only in the default task scope; {task_scope} uses {fam.sensors[0]}"
            )
        if budget_mode != DECISIONS:
            raise InvalidCombination(f"task scope {task_scope} runs only the decision track")

    if budget_mode == DECISIONS:
        calls = calls if calls is not None else fam.decisions
        replan = replan if replan is not None else fam.decision_replan
        if fam.fixed_decision_track and (calls, replan) != (fam.decisions, fam.decision_replan):
            raise InvalidCombination(
                f"{benchmark} implements only the decision-{fam.decisions}/prefix-{fam.decision_replan} track"
            )
        if cap is not None and cap != calls * replan:
            raise InvalidCombination(f"in decision mode the runner step cap is D x K = {calls * replan}, got {cap}")
        cap = calls * replan
    else:
        calls = calls if calls is not None else fam.horizon_calls
        replan = replan if replan is not None else fam.horizon_replan
        cap = cap if cap is not None else fam.horizon_step_cap

    return ProtocolConfig(
        benchmark=benchmark,
        sensors=sensors,
        interaction_mode=interaction_mode,
        action_rejection_feedback=bool(action_rejection_feedback) or fam.feedback_always_on,
        budget_mode=budget_mode,
        horizon_multiplier=multiplier,
        max_policy_calls=calls,
        replan_interval=replan,
        runner_step_cap=cap,
        task_scope=task_scope,
        interface_version=interface_version,
        full_protocol=full_protocol,
        matrix_sha=matrix_sha,
    )


def _full_matrix(
    benchmark: str, full_protocol: str | None, matrix_sha: str | None, task_scope: str | None
) -> tuple[str, str]:
    if full_protocol is None and matrix_sha is None:
        return "", ""
    if benchmark != FULL_MATRIX_BENCHMARK:
        raise InvalidCombination(f"full matrices exist for {FULL_MATRIX_BENCHMARK} only, not {benchmark}")
    if full_protocol not in FULL_PROTOCOLS:
        raise UnknownOption(f"unknown full matrix {full_protocol!r}; allowed: {', '.join(FULL_PROTOCOLS)}")
    if not (isinstance(matrix_sha, str) and len(matrix_sha) == 12 and all(c in "0123456789abcdef" for c in matrix_sha)):
        raise MalformedIdentity(f"a full matrix is named by 12 lowercase hex digits of its sha256, got {matrix_sha!r}")
    if task_scope not in (None, DEFAULT_SCOPE):
        raise InvalidCombination("a full matrix is its own task scope")
    return full_protocol, matrix_sha


def _decision_segment(segment: str) -> tuple[int, int] | None:
    parts = segment.split("-")
    if len(parts) == 4 and parts[0] == "decision" and parts[2] == "prefix":
        d, k = whole_number(parts[1], most_digits=9), whole_number(parts[3], most_digits=9)
        if d is not None and k is not None and not parts[1].startswith("0") and not parts[3].startswith("0"):
            return d, k
        raise MalformedIdentity(f"bad decision segment {segment!r}: D and K are whole numbers from 1")
    return None


def parse_protocol_id(protocol_id: str) -> ProtocolConfig:
    """The configuration an identity names (horizon-mode run budgets at their defaults)."""
    parts = protocol_id.split("/")
    options: dict = {}
    if parts[0].startswith(FULL_PREFIX) and len(parts) > 1 and parts[1].startswith(MATRIX_SEGMENT):
        options["full_protocol"] = parts[0].removeprefix(FULL_PREFIX).replace("-", "_")
        options["matrix_sha"] = parts.pop(1).removeprefix(MATRIX_SEGMENT)
        parts[0] = family("simpler_env").prefix
    fam = next((p.family for p in PROTOCOLS.values() if p.family.prefix == parts[0]), None)
    if fam is None or len(parts) < 3:
        raise MalformedIdentity(f"not a protocol identity: {protocol_id!r}")
    version = parts[-1]
    interface_version = whole_number(version[1:], most_digits=9) if version.startswith("v") else None
    if interface_version is None:
        raise MalformedIdentity(f"identity {protocol_id!r} does not end in a version such as /v1")
    middle = parts[1:-1]
    options["interface_version"] = interface_version
    if middle and middle[0] in fam.scopes and middle[0] != DEFAULT_SCOPE:
        options["task_scope"] = middle.pop(0)
    if not middle or middle[0] not in fam.sensors:
        raise MalformedIdentity(f"identity {protocol_id!r} names no sensor track of {fam.benchmark}")
    options["sensors"] = middle.pop(0)
    if middle and middle[0] == EXTENDED_SEGMENT:
        middle.pop(0)
        options["horizon_multiplier"] = 2
        options["budget_mode"] = HORIZON
    elif middle and (decision := _decision_segment(middle[0])):
        middle.pop(0)
        options["budget_mode"] = DECISIONS
        options["max_policy_calls"], options["replan_interval"] = decision
    else:
        options["budget_mode"] = HORIZON
    if middle and middle[0] == FEEDBACK_SEGMENT and not fam.feedback_always_on:
        middle.pop(0)
        options["action_rejection_feedback"] = True
    if middle and middle[0] == AGENT_METHOD_SEGMENT:
        middle.pop(0)
        options["interaction_mode"] = AGENT_METHOD
    if middle:
        raise MalformedIdentity(f"identity {protocol_id!r} has unexpected segment(s): {'/'.join(middle)}")
    config = configure(fam.benchmark, **options)
    if config.protocol_id != protocol_id:  # e.g. a segment out of its place
        raise MalformedIdentity(f"identity {protocol_id!r} is not canonical; expected {config.protocol_id!r}")
    return config
