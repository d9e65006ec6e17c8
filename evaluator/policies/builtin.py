"""Built-in programs: harness checks (noop, stop) and the scripted Fetch oracle."""

from __future__ import annotations

import numpy as np

from evaluator.policies.base import NO_PROVIDER, EpisodeStart, MailboxMessage, Policy, PolicyReply


class NoopPolicy(Policy):
    """A scripted harness check: full chunks of zero actions. Not a capability score."""

    def start_episode(self, start: EpisodeStart) -> None:
        self.chunk = [[0.0] * start.action_contract["dimension"]] * start.budgets["replan_interval"]

    def act(self, message: MailboxMessage) -> PolicyReply:
        return PolicyReply({"actions": self.chunk}, NO_PROVIDER)


class StopPolicy(Policy):
    """A scripted harness check: stops at its first call."""

    def act(self, message: MailboxMessage) -> PolicyReply:
        return PolicyReply({"stop": True}, NO_PROVIDER)


class FetchOracle(Policy):
    """A fixed program for Fetch (pick and place, reach) that reads privileged state (gripper, object
    and goal positions).

    It needs the privileged-state sensor track, so its results can never pass for RGB-only ones.
    It answers one action per call so that it closes the loop on every observation.
    """

    REQUIRED_SENSORS = ("observation", "desired_goal")
    GAIN = 10.0  # a 0.1 m error asks for a full 0.05 m step

    def start_episode(self, start: EpisodeStart) -> None:
        missing = [s for s in self.REQUIRED_SENSORS if s not in start.sensors]
        if missing:
            raise ValueError(f"the Fetch oracle needs the privileged-state sensor track (missing {missing})")
        self.grasped_for = 0

    def _toward(self, current: np.ndarray, target: np.ndarray, gripper: float) -> list:
        delta = np.clip(self.GAIN * (target - current), -1.0, 1.0)
        return [*map(float, delta), gripper]

    def act(self, message: MailboxMessage) -> PolicyReply:
        return PolicyReply({"actions": [self._next_action(message)]}, NO_PROVIDER)

    def _next_action(self, message: MailboxMessage) -> list:
        state = message.sensors["observation"]
        goal = message.sensors["desired_goal"]
        grip = state[0:3]
        if len(state) == 10:  # Reach: no object in the observation, only the gripper
            return self._toward(grip, goal, 1.0)
        cube = state[3:6]
        above = cube + np.array([0.0, 0.0, 0.06])
        if self.grasped_for == 0 and np.linalg.norm((grip - cube)[:2]) > 0.01:
            return self._toward(grip, above, 1.0)  # open, hover above the cube
        if self.grasped_for == 0 and abs(grip[2] - cube[2]) > 0.008:
            return self._toward(grip, cube, 1.0)  # descend around it
        if self.grasped_for < 4:
            self.grasped_for += 1
            return [0.0, 0.0, 0.0, -1.0]  # close and hold still while closing
        return self._toward(grip, goal, -1.0)  # carry it to the goal


BUILTIN_POLICIES = {
    "noop": ("scripted_harness_check", NoopPolicy),
    "stop": ("scripted_harness_check", StopPolicy),
    "fetch-oracle": ("fixed_program", FetchOracle),
}
