"""Action contracts: strict checks, never clipped (simpler_env_protocol.md "Native action contract";
simple_humanoid_protocol.md "Physical 36-dimensional action")."""

import math

import numpy as np
import pytest

from evaluator.protocol.actions import (
    PUBLIC_MESSAGE_LIMIT,
    SIMPLE_V2_ACTION,
    SIMPLER_ENV_ACTION,
    ActionRejected,
    ViolationKind,
    simple_v1_contract,
    validate_action,
    validate_response,
)

HALF_PI = math.pi / 2
ZERO = [0.0] * 7


def _with(index, value):
    action = list(ZERO)
    action[index] = value
    return action


def _kind(contract, action):
    with pytest.raises(ActionRejected) as caught:
        validate_action(contract, action)
    return caught.value.violation.kind


@pytest.mark.parametrize("index", [0, 1, 2, 6])
@pytest.mark.parametrize("edge", [1.0, -1.0])
def test_translation_and_gripper_accept_their_exact_edges(index, edge):
    # "each translation component in `[-1, 1]` ... and gripper in `[-1, 1]`"
    assert validate_action(SIMPLER_ENV_ACTION, _with(index, edge))[index] == edge


@pytest.mark.parametrize("index", [0, 1, 2, 6])
@pytest.mark.parametrize("edge", [1.0, -1.0])
def test_the_next_float_past_a_unit_edge_is_rejected(index, edge):
    outside = math.nextafter(edge, math.copysign(math.inf, edge))
    assert _kind(SIMPLER_ENV_ACTION, _with(index, outside)) is ViolationKind.OUT_OF_BOUNDS


@pytest.mark.parametrize("index", [3, 4, 5])
@pytest.mark.parametrize("edge", [HALF_PI, -HALF_PI])
def test_rotation_vector_accepts_plus_minus_half_pi(index, edge):
    # "each rotation-vector component in `[-pi/2, pi/2]`"
    assert validate_action(SIMPLER_ENV_ACTION, _with(index, edge))[index] == edge


@pytest.mark.parametrize("index", [3, 4, 5])
@pytest.mark.parametrize("edge", [HALF_PI, -HALF_PI])
def test_the_next_float_past_half_pi_is_rejected(index, edge):
    outside = math.nextafter(edge, math.copysign(math.inf, edge))
    assert _kind(SIMPLER_ENV_ACTION, _with(index, outside)) is ViolationKind.OUT_OF_BOUNDS


def test_a_rotation_of_one_radian_is_not_a_translation_bound():
    # Rotation is axis-angle in radians: 1.5 rad is inside [-pi/2, pi/2] though outside [-1, 1].
    assert validate_action(SIMPLER_ENV_ACTION, _with(3, 1.5))[3] == 1.5


def test_it_never_clips_an_accepted_action():
    # "Invalid actions are errors and are not silently clipped."
    action = [0.999999, -0.25, 1e-12, 1.5707963, -0.1, 0.0, -1.0]
    assert validate_action(SIMPLER_ENV_ACTION, action) == tuple(action)


def test_it_accepts_numpy_vectors_and_scalars_unchanged():
    action = np.array([0.1, 0.2, -0.3, 0.4, 0.5, -0.6, 1.0], dtype=np.float32)
    assert validate_action(SIMPLER_ENV_ACTION, action) == tuple(float(x) for x in action)
    assert validate_action(SIMPLER_ENV_ACTION, [np.float64(0.5), np.int64(1), 0, 0, 0, 0, -1]) == (
        0.5,
        1.0,
        0.0,
        0.0,
        0.0,
        0.0,
        -1.0,
    )


@pytest.mark.parametrize(
    "value, kind",
    [
        (math.nan, ViolationKind.NON_FINITE),
        (math.inf, ViolationKind.NON_FINITE),
        (-math.inf, ViolationKind.NON_FINITE),
        (np.float32("nan"), ViolationKind.NON_FINITE),
        (10**400, ViolationKind.NON_FINITE),
        (None, ViolationKind.NOT_A_NUMBER),
        ("0.1", ViolationKind.NOT_A_NUMBER),
        (1j, ViolationKind.NOT_A_NUMBER),
        ([0.1], ViolationKind.NOT_A_NUMBER),
        (True, ViolationKind.BOOLEAN),
        (False, ViolationKind.BOOLEAN),
        (np.bool_(True), ViolationKind.BOOLEAN),
    ],
)
def test_it_rejects_non_numbers_and_non_finite_values_with_typed_errors(value, kind):
    # "Each action is seven finite numbers"
    assert _kind(SIMPLER_ENV_ACTION, _with(6, value)) is kind


@pytest.mark.parametrize("length", [0, 6, 8])
def test_it_rejects_wrong_lengths(length):
    assert _kind(SIMPLER_ENV_ACTION, [0.0] * length) is ViolationKind.WRONG_LENGTH


@pytest.mark.parametrize("action", ["0000000", 0.5, {"dx": 0}, np.zeros((7, 1)), None])
def test_it_rejects_what_is_not_a_vector(action):
    assert _kind(SIMPLER_ENV_ACTION, action) is ViolationKind.NOT_A_VECTOR


def test_the_violation_names_the_component_and_is_bounded():
    with pytest.raises(ActionRejected) as caught:
        validate_action(SIMPLER_ENV_ACTION, _with(6, 1.5), index=2)
    violation = caught.value.violation
    assert (violation.action_index, violation.component) == (2, 6)
    assert violation.message == "action 2: component 6 (gripper) = 1.5 is outside [-1.0, 1.0]"
    with pytest.raises(ActionRejected) as caught:
        validate_action(SIMPLER_ENV_ACTION, _with(0, "x" * 10_000))
    assert len(caught.value.violation.message) <= PUBLIC_MESSAGE_LIMIT


# SIMPLE v2


def test_simple_v2_accepts_any_36_finite_numbers_without_a_range_check():
    # "Version 2 passes valid finite targets unchanged ... RSI adds neither joint-target range rejection nor clipping."
    action = [1e3] * 36
    assert validate_action(SIMPLE_V2_ACTION, action) == tuple(action)
    assert validate_action(SIMPLE_V2_ACTION, np.full(36, -1e3)) == (-1e3,) * 36


@pytest.mark.parametrize(
    "action, kind",
    [
        ([0.0] * 35, ViolationKind.WRONG_LENGTH),
        ([0.0] * 37, ViolationKind.WRONG_LENGTH),
        ([True] + [0.0] * 35, ViolationKind.BOOLEAN),
        ([np.bool_(False)] + [0.0] * 35, ViolationKind.BOOLEAN),
        ([0.0] * 35 + [math.nan], ViolationKind.NON_FINITE),
        ([0.0] * 35 + [math.inf], ViolationKind.NON_FINITE),
        ([0.0] * 35 + [None], ViolationKind.NOT_A_NUMBER),
    ],
)
def test_simple_v2_rejects_dimensions_booleans_and_non_finite_values(action, kind):
    # "Reject invalid dimensions, booleans and non-finite values."
    assert _kind(SIMPLE_V2_ACTION, action) is kind


def test_simple_v2_slots_follow_the_physical_layout():
    names = SIMPLE_V2_ACTION.component_names
    assert names[0] == "left_hand_thumb_0" and names[7] == "right_hand_thumb_0"
    assert names[14] == "left_arm_shoulder_pitch" and names[21] == "right_arm_shoulder_pitch"
    assert names[28:31] == ("waist_roll", "waist_pitch", "waist_yaw")
    assert names[31:] == ("base_height", "forward_velocity", "lateral_velocity", "turning", "target_heading")


def test_simple_v1_keeps_its_frozen_joint_range_check():
    # "Frozen v1 source and results remain unchanged"; v1 rejected finite targets beyond a joint range.
    v1 = simple_v1_contract([(-1.0, 1.0)] * 31)
    assert validate_action(v1, [1.0] * 31 + [1e3] * 5)[31] == 1e3
    assert _kind(v1, [1.5] + [0.0] * 35) is ViolationKind.OUT_OF_BOUNDS
    assert validate_action(SIMPLE_V2_ACTION, [1.5] + [0.0] * 35)[0] == 1.5


# Responses: a chunk of actions or a stop


def test_a_stop_is_a_response_without_actions():
    response = validate_response({"stop": True}, SIMPLER_ENV_ACTION, permitted=5)
    assert response.stop and response.actions == () and response.violation is None


def test_only_the_permitted_prefix_is_validated_and_kept():
    # "K: Maximum action prefix executed from each decision"
    chunk = [ZERO, _with(0, 0.5), _with(0, 9.0)]
    response = validate_response({"actions": chunk}, SIMPLER_ENV_ACTION, permitted=2)
    assert response.violation is None
    assert response.actions == (tuple(ZERO), tuple(_with(0, 0.5)))
    assert response.chunk_length == 3


def test_a_bad_action_keeps_the_valid_actions_before_it():
    # "Earlier acknowledged controls remain counted if a later control of a chunk is rejected."
    response = validate_response({"actions": [ZERO, _with(2, math.nan), ZERO]}, SIMPLER_ENV_ACTION, permitted=5)
    assert response.actions == (tuple(ZERO),)
    assert response.violation.kind is ViolationKind.NON_FINITE
    assert response.violation.action_index == 1


def test_a_numpy_chunk_is_a_list_of_actions():
    response = validate_response({"actions": np.zeros((4, 7))}, SIMPLER_ENV_ACTION, permitted=5)
    assert len(response.actions) == 4 and response.violation is None


@pytest.mark.parametrize(
    "raw, kind",
    [
        ("move left", ViolationKind.NOT_A_RESPONSE),
        ([ZERO], ViolationKind.NOT_A_RESPONSE),
        ({}, ViolationKind.NOT_A_RESPONSE),
        ({"stop": True, "actions": [ZERO]}, ViolationKind.NOT_A_RESPONSE),
        ({"stop": "yes"}, ViolationKind.NOT_A_RESPONSE),
        ({"stop": False}, ViolationKind.NOT_A_RESPONSE),
        ({"actions": "0,0,0"}, ViolationKind.NOT_A_RESPONSE),
        ({"actions": []}, ViolationKind.EMPTY_CHUNK),
    ],
)
def test_a_response_that_is_neither_a_chunk_nor_a_stop_is_malformed_output(raw, kind):
    response = validate_response(raw, SIMPLER_ENV_ACTION, permitted=5)
    assert response.violation.kind is kind
    assert response.violation.kind.is_malformed_output
    assert response.actions == ()


def test_action_problems_are_contract_violations_not_malformed_output():
    response = validate_response({"actions": [[0.0] * 5]}, SIMPLER_ENV_ACTION, permitted=5)
    assert response.violation.kind is ViolationKind.WRONG_LENGTH
    assert not response.violation.kind.is_malformed_output


def test_the_public_contract_lists_every_component_with_its_bounds():
    described = SIMPLER_ENV_ACTION.describe()
    assert described["dimension"] == 7
    assert described["components"][3] == {"name": "rotation_vector_x", "low": -HALF_PI, "high": HALF_PI}
    assert SIMPLE_V2_ACTION.describe()["components"][0]["low"] is None
