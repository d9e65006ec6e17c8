"""What a watcher may do to a running episode, and which of it withdraws the episode's autonomy.

The spec reports an episode a watcher intervened in apart from the autonomous ones: pausing, taking over and
stopping change the policy under evaluation; a note alone does not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

INTERVENTIONS = ("pause", "pause_at", "resume", "take_over", "release", "stop", "annotate", "action")
# A pause set for a later step withdraws autonomy when it holds (recorded then as a pause at the step it held), never
# when it is asked for: a pause the episode never reaches changed nothing the policy did.
WITHDRAWS_AUTONOMY = ("pause", "take_over", "stop")


def last_pausable_step(budget: Mapping[str, int]) -> int:
    """The last step a pause set for a step can hold at: it holds at a decision once that step has executed, and an
    episode makes no decision once it has executed its last step (min(evaluation horizon, C * K))."""
    return min(budget["evaluation_horizon"], budget["max_executable_steps"]) - 1


@dataclass(frozen=True)
class Directive:
    """What a human asks for at a decision boundary."""

    stop: bool = False
    actions: list | None = None  # a human decision's chunk (take-over)
