"""Partial credit where the benchmark reports it: how far an episode got, read from SimplerEnv's own episode stats.

Upstream's evaluate() keeps `episode_stats` beside `success` (upstream_simplerenv_facts.md, §5, the scoring table),
and the last step's info carries them as the episode ended. Each stage here is one of those values, as upstream
computes and latches it; none is derived from anything else, and a family whose stats hold no such value (the open
and close drawer tasks keep only the joint position, as text) has no stage:

| family (its stats) | stage | upstream's value |
| --- | --- | --- |
| grasp (pick coke can, pick object) | grasped | `grasped`: grasped at any step (latched) |
| | consecutive grasp | `consec_grasp`: grasped five steps in a row at some point (latched) |
| | lifted significantly | `n_lift_significant` >= 1: lifted over 2 cm, touching only the robot, at a step |
| move near | moved the correct object | `moved_correct_obj` at the last step |
| | near the target | `near_tgt_obj` at the last step |
| put-on (WidowX) | grasped | `is_src_obj_grasped`: grasped at any step (latched) |
| | consecutive grasp | `consecutive_grasp`: five steps in a row at some point (latched) |
| | moved the correct object | `moved_correct_obj` at the last step |
| | source on target | `src_on_target` at the last step |
| place in closed drawer | drawer opened | `is_drawer_open`: opened at any step (latched) |
| | touched the drawer's bottom | `has_contact` >= 1: the object touched it at some step (success needs it) |

A stage's rate has the success rate's denominator (autonomous, protocol-completed episodes) and its Wilson interval.
In a paired comparison each stage is compared as success is (Tango's interval, McNemar's exact test), reported
apart from success and never in its place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .aggregates import Rate
from .paired import DEFAULT_LEVEL, DEFAULT_MARGIN, PairCounts, PairedComparison, compare_pairs


@dataclass(frozen=True)
class Stage:
    name: str
    words: str
    key: str  # in upstream's episode_stats
    counted: bool = False  # the value is a count: the stage is reached once it is at least 1


# Per family, told apart by a key only its stats hold, its stages in the order an episode reaches them.
FAMILIES: tuple[tuple[str, tuple[Stage, ...]], ...] = (
    (
        "n_lift_significant",
        (
            Stage("grasped", "grasped", "grasped"),
            Stage("consecutive_grasp", "consecutive grasp", "consec_grasp"),
            Stage("lifted_significantly", "lifted significantly", "n_lift_significant", counted=True),
        ),
    ),
    (
        "near_tgt_obj",
        (
            Stage("moved_correct_object", "moved the correct object", "moved_correct_obj"),
            Stage("near_target", "near the target", "near_tgt_obj"),
        ),
    ),
    (
        "src_on_target",
        (
            Stage("grasped", "grasped", "is_src_obj_grasped"),
            Stage("consecutive_grasp", "consecutive grasp", "consecutive_grasp"),
            Stage("moved_correct_object", "moved the correct object", "moved_correct_obj"),
            Stage("source_on_target", "source on target", "src_on_target"),
        ),
    ),
    (
        "is_drawer_open",
        (
            Stage("drawer_opened", "drawer opened", "is_drawer_open"),
            Stage("touched_drawer_bottom", "touched the drawer's bottom", "has_contact", counted=True),
        ),
    ),
)
WORDS = {stage.name: stage.words for _, stages in FAMILIES for stage in stages}


def stages_of(stats: Mapping | None) -> dict[str, bool] | None:
    """The stages an episode reached, from its last step's episode_stats; None where upstream reports none."""
    if not isinstance(stats, Mapping):
        return None
    for marker, stages in FAMILIES:
        if marker in stats:
            return {s.name: (stats.get(s.key) or 0) >= 1 if s.counted else bool(stats.get(s.key)) for s in stages}
    return None


@dataclass(frozen=True)
class StageReport:
    overall: Mapping[str, Rate]  # stage -> episodes that reached it over the autonomous protocol-completed ones
    per_task: Mapping[str, Mapping[str, Rate]]

    def as_dict(self) -> dict:
        return {
            "source": "SimplerEnv's episode_stats at the episode's last step (docs/statistics.md)",
            "words": {name: WORDS[name] for name in self.overall},
            "overall": {name: rate.as_dict() for name, rate in self.overall.items()},
            "per_task": {task: {n: r.as_dict() for n, r in rates.items()} for task, rates in self.per_task.items()},
        }


def stage_rates(episodes: Iterable[tuple[str, Mapping[str, bool]]]) -> StageReport:
    """(task, stages reached) per autonomous protocol-completed episode: each stage's rate, per task and overall,
    over the episodes whose family reports it."""
    overall: dict[str, list[int]] = {}
    per_task: dict[str, dict[str, list[int]]] = {}
    for task, reached in episodes:
        for name, hit in reached.items():
            for tally in (overall.setdefault(name, [0, 0]), per_task.setdefault(task, {}).setdefault(name, [0, 0])):
                tally[0] += hit
                tally[1] += 1
    return StageReport(
        overall={name: Rate(*tally) for name, tally in overall.items()},
        per_task={task: {name: Rate(*tally) for name, tally in rates.items()} for task, rates in per_task.items()},
    )


def paired_stages(
    pairs: Iterable[tuple[Mapping[str, bool], Mapping[str, bool]]],
    level: float = DEFAULT_LEVEL,
    margin: float = DEFAULT_MARGIN,
) -> dict[str, PairedComparison]:
    """Each stage compared over the pairs (A's stages, B's) both report it: B minus A, as success is compared."""
    tallies: dict[str, list[int]] = {}  # both, only_a, only_b, neither
    for reached_a, reached_b in pairs:
        for name in reached_a.keys() & reached_b.keys():
            tallies.setdefault(name, [0, 0, 0, 0])[2 * (not reached_a[name]) + (not reached_b[name])] += 1
    return {
        name: compare_pairs(PairCounts(both=t[0], only_a=t[1], only_b=t[2], neither=t[3]), level, margin)
        for name, t in tallies.items()
    }
