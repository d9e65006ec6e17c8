"""Execution budgets of one episode (simpler_env_protocol.md, "Budgets and instruction transitions").

An action vector advances one native control step and a decision may carry several,
so an episode cannot exceed min(evaluation_horizon, runner_step_cap, C * K) steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import InvalidBudget
from .identity import ProtocolConfig


@dataclass(frozen=True)
class Budget:
    native_horizon: int  # H: the upstream registered horizon, never redefined
    horizon_multiplier: int
    evaluation_horizon: int  # H * multiplier in horizon mode, D * K in decision mode
    max_policy_calls: int  # C
    replan_interval: int  # K: the longest action prefix executed from one decision
    runner_step_cap: int
    max_executable_steps: int
    # max_executable_steps - H: what the evaluator's caps add to the native horizon (negative where they cut
    # it short, e.g. SIMPLE's 1000-control track on a 1200-control task), recorded beside both
    steps_beyond_native_horizon: int

    def reaches(self, step: int) -> bool:
        """Whether full chunks can carry an episode to native step `step`."""
        return self.max_executable_steps >= step

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def resolve_budget(config: ProtocolConfig, native_horizon: int) -> Budget:
    if isinstance(native_horizon, bool) or not isinstance(native_horizon, int) or native_horizon < 1:
        raise InvalidBudget(f"native_horizon must be a positive integer, got {native_horizon!r}")
    return Budget(
        native_horizon=native_horizon,
        horizon_multiplier=config.horizon_multiplier,
        evaluation_horizon=config.evaluation_horizon(native_horizon),
        max_policy_calls=config.max_policy_calls,
        replan_interval=config.replan_interval,
        runner_step_cap=config.runner_step_cap,
        max_executable_steps=config.max_executable_steps(native_horizon),
        steps_beyond_native_horizon=config.max_executable_steps(native_horizon) - native_horizon,
    )


def full_chunk_calls(steps: int, replan_interval: int) -> int:
    """Policy calls needed to execute `steps` controls when every chunk is full."""
    if steps < 0 or replan_interval < 1:
        raise InvalidBudget("steps must be >= 0 and replan_interval >= 1")
    return math.ceil(steps / replan_interval)
