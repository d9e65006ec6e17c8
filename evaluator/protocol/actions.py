"""Action contracts and the validation of policy responses.

Actions are checked strictly and never clipped or repaired (simpler_env_protocol.md,
"Native action contract"; simple_humanoid_protocol.md, "Physical 36-dimensional action").
A response is either a stop or a chunk of actions; only the permitted prefix (at most
K actions, and never past the step budget) is validated and may be executed.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

PUBLIC_MESSAGE_LIMIT = 200

Bounds = tuple[float, float] | None


@dataclass(frozen=True)
class ActionContract:
    name: str
    component_names: tuple[str, ...]
    bounds: tuple[Bounds, ...]  # one per component; None = any finite number
    # How pages draw an action, never part of what a policy is told: named groups of component indices
    # (one trace band each) and the component drawn as a gripper row, if there is one.
    display_groups: tuple[tuple[str, tuple[int, ...]], ...] = ()
    gripper: int | None = None

    @property
    def dimension(self) -> int:
        return len(self.component_names)

    def describe(self) -> dict:
        """The public action contract a policy is given."""
        return {
            "name": self.name,
            "dimension": self.dimension,
            "components": [
                {"name": n, "low": b[0] if b else None, "high": b[1] if b else None}
                for n, b in zip(self.component_names, self.bounds, strict=True)
            ],
        }


_HALF_PI = math.pi / 2

SIMPLER_ENV_ACTION = ActionContract(
    name="simpler_env/ee-delta-rotvec-gripper/v1",
    component_names=("dx", "dy", "dz", "rotation_vector_x", "rotation_vector_y", "rotation_vector_z", "gripper"),
    bounds=((-1.0, 1.0),) * 3 + ((-_HALF_PI, _HALF_PI),) * 3 + ((-1.0, 1.0),),
    display_groups=(("end effector", tuple(range(6))),),
    gripper=6,
)

FETCH_ACTION = ActionContract(
    name="fetch/ee-delta-position-gripper/v1",
    component_names=("dx", "dy", "dz", "gripper"),
    bounds=((-1.0, 1.0),) * 4,
    display_groups=(("end effector", (0, 1, 2)),),
    gripper=3,
)

# ManiSkill2's pd_ee_delta_pose: normalized translation and axis-angle rotation, then the gripper.
MANISKILL2_ACTION = ActionContract(
    name="maniskill2/pd-ee-delta-pose-normalized/v1",
    component_names=("dx", "dy", "dz", "rotation_x", "rotation_y", "rotation_z", "gripper"),
    bounds=((-1.0, 1.0),) * 7,
    display_groups=(("end effector", tuple(range(6))),),
    gripper=6,
)

SIMPLE_JOINT_SLOTS = (
    tuple(f"left_hand_{j}" for j in ("thumb_0", "thumb_1", "thumb_2", "middle_0", "middle_1", "index_0", "index_1"))
    + tuple(f"right_hand_{j}" for j in ("thumb_0", "thumb_1", "thumb_2", "index_0", "index_1", "middle_0", "middle_1"))
    + tuple(
        f"{side}_{j}"
        for side in ("left_arm", "right_arm")
        for j in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll", "wrist_pitch", "wrist_yaw")
    )
    + ("waist_roll", "waist_pitch", "waist_yaw")
)
SIMPLE_COMMAND_SLOTS = ("base_height", "forward_velocity", "lateral_velocity", "turning", "target_heading")

# The legs take no joint targets: the locomotion command (height, velocities, turning, heading) drives them.
SIMPLE_BODY_PARTS = (
    ("legs: locomotion command", tuple(range(31, 36))),
    ("torso", (28, 29, 30)),
    ("arms", tuple(range(14, 28))),
    ("hands", tuple(range(14))),
)

SIMPLE_V2_ACTION = ActionContract(
    name="simple_humanoid/physical-36/v2",
    component_names=SIMPLE_JOINT_SLOTS + SIMPLE_COMMAND_SLOTS,
    bounds=(None,) * 36,
    display_groups=SIMPLE_BODY_PARTS,
)


def simple_v1_contract(joint_ranges: Sequence[tuple[float, float]]) -> ActionContract:
    """The frozen v1 validator: v2's checks plus the MuJoCo joint ranges of slots 0-30.

    v1 results stay reportable; the ranges come from the native model the run used.
    """
    if len(joint_ranges) != len(SIMPLE_JOINT_SLOTS):
        raise ValueError(f"v1 needs {len(SIMPLE_JOINT_SLOTS)} joint ranges, got {len(joint_ranges)}")
    return ActionContract(
        name="simple_humanoid/physical-36/v1",
        component_names=SIMPLE_V2_ACTION.component_names,
        bounds=tuple((float(lo), float(hi)) for lo, hi in joint_ranges) + (None,) * len(SIMPLE_COMMAND_SLOTS),
        display_groups=SIMPLE_BODY_PARTS,
    )


# Longer chunks are accepted (openpi servers return their whole action horizon) and only the
# permitted prefix executes; past this many actions a reply is malformed output.
MAX_CHUNK_ACTIONS = 1024
# A response (or a human's action) nests a few levels ({"actions": [[...]]}; a chat completion about six). Deeper
# ones are refused before anything walks them recursively (recording, validation, the JSON of the records).
MAX_NESTING = 32


def nests_deeper(value: Any, limit: int = MAX_NESTING) -> bool:
    """Whether decoded JSON or msgpack holds a list or mapping more than `limit` levels deep; no recursion."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, Mapping):
            children = list(item.values())
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


class ViolationKind(enum.Enum):
    # The response itself does not parse: a policy error (malformed output).
    NOT_A_RESPONSE = "not_a_response"
    EMPTY_CHUNK = "empty_chunk"
    CHUNK_TOO_LONG = "chunk_too_long"
    # An action breaks the action contract: a contract violation.
    NOT_A_VECTOR = "not_a_vector"
    WRONG_LENGTH = "wrong_length"
    NOT_A_NUMBER = "not_a_number"
    BOOLEAN = "boolean"
    NON_FINITE = "non_finite"
    OUT_OF_BOUNDS = "out_of_bounds"

    @property
    def is_malformed_output(self) -> bool:
        return self in (ViolationKind.NOT_A_RESPONSE, ViolationKind.EMPTY_CHUNK, ViolationKind.CHUNK_TOO_LONG)


@dataclass(frozen=True)
class Violation:
    kind: ViolationKind
    message: str  # public, bounded: safe to return to the policy in the feedback track
    action_index: int | None = None
    component: int | None = None


class ActionRejected(ValueError):
    def __init__(self, violation: Violation):
        super().__init__(violation.message)
        self.violation = violation


def _bounded(text: str) -> str:
    return text if len(text) <= PUBLIC_MESSAGE_LIMIT else text[: PUBLIC_MESSAGE_LIMIT - 3] + "..."


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _violation(kind: ViolationKind, text: str, index: int | None, component: int | None = None) -> Violation:
    prefix = f"action {index}: " if index is not None else ""
    return Violation(kind=kind, message=_bounded(prefix + text), action_index=index, component=component)


def _is_vector(value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return value.ndim == 1
    return isinstance(value, (list, tuple))


def validate_action(contract: ActionContract, action: Any, index: int | None = None) -> tuple[float, ...]:
    """The action as floats, unchanged; ActionRejected with a typed violation otherwise."""
    if not _is_vector(action):
        raise ActionRejected(
            _violation(ViolationKind.NOT_A_VECTOR, f"expected a list of {contract.dimension} numbers", index)
        )
    if len(action) != contract.dimension:
        raise ActionRejected(
            _violation(
                ViolationKind.WRONG_LENGTH,
                f"expected {contract.dimension} numbers, got {len(action)}",
                index,
            )
        )
    values = []
    components = zip(contract.component_names, contract.bounds, action, strict=True)
    for component, (name, bounds, raw) in enumerate(components):
        where = f"component {component} ({name})"
        if isinstance(raw, (bool, np.bool_)):
            raise ActionRejected(
                _violation(ViolationKind.BOOLEAN, f"{where} is a boolean, not a number", index, component)
            )
        if not isinstance(raw, (int, float, np.integer, np.floating)):
            raise ActionRejected(
                _violation(ViolationKind.NOT_A_NUMBER, f"{where} is not a number: {_short_repr(raw)}", index, component)
            )
        try:
            value = float(raw)
        except OverflowError:
            value = math.inf
        if not math.isfinite(value):
            raise ActionRejected(_violation(ViolationKind.NON_FINITE, f"{where} is {value}", index, component))
        if bounds is not None and not bounds[0] <= value <= bounds[1]:
            raise ActionRejected(
                _violation(
                    ViolationKind.OUT_OF_BOUNDS,
                    f"{where} = {value!r} is outside [{bounds[0]!r}, {bounds[1]!r}]",
                    index,
                    component,
                )
            )
        values.append(value)
    return tuple(values)


@dataclass(frozen=True)
class PolicyResponse:
    stop: bool
    # The validated actions of the permitted prefix, up to the first violation.
    actions: tuple[tuple[float, ...], ...] = ()
    chunk_length: int = 0  # actions returned, including those past the permitted prefix
    violation: Violation | None = None


def validate_response(raw: Any, contract: ActionContract, permitted: int) -> PolicyResponse:
    """Check a decoded policy response: {"stop": true} or {"actions": [action, ...]}.

    `permitted` is the prefix that may execute: min(K, steps left). Actions past it are
    never executed and so not validated; the response is recorded whole elsewhere.
    """
    if permitted < 1:
        raise ValueError("permitted must be at least 1")
    if not isinstance(raw, Mapping):
        return PolicyResponse(
            stop=False,
            violation=_violation(ViolationKind.NOT_A_RESPONSE, 'expected {"actions": [...]} or {"stop": true}', None),
        )
    has_stop = raw.get("stop") is True
    has_actions = "actions" in raw and raw["actions"] is not None
    if has_stop == has_actions or ("stop" in raw and not isinstance(raw["stop"], bool)):
        return PolicyResponse(
            stop=False,
            violation=_violation(
                ViolationKind.NOT_A_RESPONSE, 'give exactly one of "actions" (a list) or "stop": true', None
            ),
        )
    if has_stop:
        return PolicyResponse(stop=True)
    chunk = raw["actions"]
    if isinstance(chunk, np.ndarray) and chunk.ndim == 2:
        chunk = list(chunk)
    if not isinstance(chunk, (list, tuple)):
        return PolicyResponse(
            stop=False,
            violation=_violation(ViolationKind.NOT_A_RESPONSE, '"actions" must be a list of actions', None),
        )
    if len(chunk) > MAX_CHUNK_ACTIONS:
        return PolicyResponse(
            stop=False,
            violation=_violation(
                ViolationKind.CHUNK_TOO_LONG,
                f"a chunk holds at most {MAX_CHUNK_ACTIONS} actions, got {len(chunk)}",
                None,
            ),
        )
    if not chunk:
        return PolicyResponse(
            stop=False,
            violation=_violation(
                ViolationKind.EMPTY_CHUNK, '"actions" is empty; send at least one action or stop', None
            ),
        )
    accepted = []
    for index, action in enumerate(chunk[:permitted]):
        try:
            accepted.append(validate_action(contract, action, index))
        except ActionRejected as rejected:
            return PolicyResponse(
                stop=False, actions=tuple(accepted), chunk_length=len(chunk), violation=rejected.violation
            )
    return PolicyResponse(stop=False, actions=tuple(accepted), chunk_length=len(chunk))
