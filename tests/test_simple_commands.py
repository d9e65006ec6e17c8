"""The SIMPLE worker's command mapping and encoder allowlist (environment/workers/simple_commands.py),
without SIMPLE: simple_humanoid_protocol.md "Physical 36-dimensional action" and "Observation
allowlist", upstream_simple_facts.md §2."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "environment" / "workers"))  # as the worker runs

from simple_commands import SLOT_JOINTS, amo_command, qpos31, upper_body_targets

from evaluator.protocol.actions import SIMPLE_V2_ACTION

# WHOLE_BODY_JOINTS (robots/g1_wholebody.py:29-37), the robot's order.
LEG = ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")
ARM = ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll", "wrist_pitch", "wrist_yaw")
HAND = ("thumb_0", "thumb_1", "thumb_2", "index_0", "index_1", "middle_0", "middle_1")
WHOLE_BODY_JOINTS = (
    [f"left_leg_{j}" for j in LEG]
    + [f"right_leg_{j}" for j in LEG]
    + ["waist_yaw", "waist_roll", "waist_pitch"]
    + [f"left_arm_{j}" for j in ARM]
    + [f"right_arm_{j}" for j in ARM]
    + [f"left_hand_{j}" for j in HAND]
    + [f"right_hand_{j}" for j in HAND]
)


def test_each_action_slot_targets_the_joint_its_contract_names():
    # "[0:7] Left hand: thumb 0/1/2, middle 0/1, index 0/1 · [7:14] Right hand: thumb 0/1/2, index 0/1,
    # middle 0/1 · [14:21] Left arm ... [21:28] Right arm ... [28:31] Waist roll/pitch/yaw"
    named = [WHOLE_BODY_JOINTS[joint] for joint in SLOT_JOINTS]
    assert named == list(SIMPLE_V2_ACTION.component_names[:31])
    assert len(set(SLOT_JOINTS)) == 31 and not set(SLOT_JOINTS) & set(range(12))  # no leg joint


def test_the_encoders_a_policy_sees_are_the_31_in_action_slot_order():
    # "By default, 31 ordinary measured joint encoders in radians, ordered as action slots 0-30"
    action = np.arange(36, dtype=np.float64) / 10
    joint_qpos = np.full(43, np.nan)
    for joint, value in upper_body_targets(action).items():
        joint_qpos[joint] = value  # a robot that reached every target exactly
    joint_qpos[:12] = 99.0  # legs: never shown
    assert np.array_equal(qpos31(joint_qpos.astype(np.float32)), action[:31].astype(np.float32))
    with pytest.raises(ValueError, match="43 values"):
        qpos31(np.zeros(31))


def test_amo_gets_its_eight_numbers_with_its_own_torso_orientation():
    # "AMO receives [vx,target_yaw,vy,height-0.75,torso_yaw,torso_pitch,torso_roll,turn]. Preserve
    # stabilized torso orientation from AMO's controller state"
    action = np.zeros(36)
    action[28:36] = [0.3, 0.2, 0.1, 0.71, 0.5, -0.2, 1.0, 1.57]  # waist r/p/y, height, vx, vy, turn, heading
    command = amo_command(action, torso_yaw_pitch_roll=(0.01, -0.15, 0.02))
    assert command.tolist() == pytest.approx([0.5, 1.57, -0.2, 0.71 - 0.75, 0.01, -0.15, 0.02, 1.0])
