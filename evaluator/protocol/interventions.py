"""What a watcher may do to a running episode, and which of it withdraws the episode's autonomy.

The spec reports an episode a watcher intervened in apart from the autonomous ones: pausing, taking over and
stopping change the policy under evaluation; a note alone does not.
"""

from __future__ import annotations

from dataclasses import dataclass

INTERVENTIONS = ("pause", "resume", "take_over", "release", "stop", "annotate", "action")
WITHDRAWS_AUTONOMY = ("pause", "take_over", "stop")


@dataclass(frozen=True)
class Directive:
    """What a human asks for at a decision boundary."""

    stop: bool = False
    actions: list | None = None  # a human decision's chunk (take-over)
