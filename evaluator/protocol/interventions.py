"""What a watcher may do to a running episode, and which of it withdraws the episode's autonomy.

The spec reports an episode a watcher intervened in apart from the autonomous ones: pausing, taking over and
stopping change the policy under evaluation; a note alone does not.
"""

from __future__ import annotations

from dataclasses import dataclass

INTERVENTIONS = ("pause", "pause_at", "resume", "take_over", "release", "stop", "annotate", "action")
# A pause set for a later step withdraws autonomy when it is asked for: the episode is no longer left to the policy.
WITHDRAWS_AUTONOMY = ("pause", "pause_at", "take_over", "stop")
MOST_STEPS = 100_000  # a pause set further than any run's step cap


@dataclass(frozen=True)
class Directive:
    """What a human asks for at a decision boundary."""

    stop: bool = False
    actions: list | None = None  # a human decision's chunk (take-over)
