"""The v2 interface's 36-number physical action as SIMPLE's native controllers take it, and the 31
measured encoders a policy sees (simple_humanoid_protocol.md, "Physical 36-dimensional action",
"Observation allowlist"; upstream_simple_facts.md §2). Only numpy: the SIMPLE worker imports it inside
SIMPLE's own interpreter, and RSI's tests import it without SIMPLE.

Action slots: [0:7] left hand (thumb 0/1/2, middle 0/1, index 0/1), [7:14] right hand (thumb 0/1/2,
index 0/1, middle 0/1), [14:21] left arm, [21:28] right arm, [28:31] waist roll/pitch/yaw, [31] base
height (m), [32] vx, [33] vy, [34] turning flag or gate, [35] target heading (rad).
Robot joint order (WHOLE_BODY_JOINTS, 43): 0-11 legs, 12-14 waist yaw/roll/pitch, 15-21 left arm,
22-28 right arm, 29-35 left hand (thumb 0/1/2, index 0/1, middle 0/1), 36-42 right hand (same).
"""

from __future__ import annotations

import numpy as np

ACTION_DIMS = 36
JOINTS = 43
# Robot joint index of each of action slots 0-30: the measured encoders in action-slot order.
SLOT_JOINTS = (
    (29, 30, 31, 34, 35, 32, 33)  # left hand: thumb, middle, index
    + tuple(range(36, 43))  # right hand, native order
    + tuple(range(15, 22))  # left arm
    + tuple(range(22, 29))  # right arm
    + (13, 14, 12)  # waist roll, pitch, yaw
)
HEIGHT, VX, VY, TURN, TARGET_YAW = 31, 32, 33, 34, 35
AMO_STANDING_HEIGHT = 0.75  # AMO's height command is relative to it


def qpos31(joint_qpos: np.ndarray) -> np.ndarray:
    """The 31 measured encoders (waist, arms, hands) in action-slot order, radians, from joint_qpos (43)."""
    joints = np.asarray(joint_qpos)
    if joints.shape != (JOINTS,):
        raise ValueError(f"joint_qpos must have {JOINTS} values, got shape {joints.shape}")
    return joints[list(SLOT_JOINTS)].astype(np.float64)


def upper_body_targets(action: np.ndarray) -> dict[int, float]:
    """Action slots 0-30 as targets by robot joint index (waist, arms and hands), values unchanged."""
    return {joint: float(action[slot]) for slot, joint in enumerate(SLOT_JOINTS)}


def amo_command(action: np.ndarray, torso_yaw_pitch_roll: tuple[float, float, float]) -> np.ndarray:
    """AMO's 8-number command [vx, target_yaw, vy, height - 0.75, torso_yaw, torso_pitch, torso_roll, turn].
    The torso orientation is AMO's own stabilized state, not the policy's waist targets, which go to the
    native waist path separately (simple_humanoid_protocol.md: "Preserve stabilized torso orientation
    from AMO's controller state")."""
    yaw, pitch, roll = torso_yaw_pitch_roll
    height = action[HEIGHT] - AMO_STANDING_HEIGHT
    return np.array([action[VX], action[TARGET_YAW], action[VY], height, yaw, pitch, roll, action[TURN]], np.float64)
