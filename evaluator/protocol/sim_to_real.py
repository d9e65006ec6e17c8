"""Does simulation rank policies as the real robot does? SimplerEnv's two sim-to-real metrics
(Li et al., "Evaluating Real-World Robot Manipulation Policies in Simulation", CoRL 2024, §5), per
task, over the policies evaluated both in simulation (S) and on the real robot (R):

- Pearson correlation r of the success rates: sum((S - mean S)(R - mean R)) divided by
  sqrt(sum((S - mean S)^2) sum((R - mean R)^2)); undefined (None here) when either side has no
  spread, rather than a number that means nothing.
- Mean Maximum Rank Violation: MMRV = 1/N sum_i max_j RankViolation(i, j), where
  RankViolation(i, j) = |R_i - R_j| when simulation orders i and j differently from the real robot,
  i.e. when (S_i < S_j) != (R_i < R_j), and 0 otherwise. 0 is a perfect ranking; lower is better.

The real-robot rates of the reference policies are data with their source
(environment/catalogs/reference/simpler_real_robot.json).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache

from .catalogs import CATALOG_DIR
from .errors import ProtocolError

REFERENCE_FILE = CATALOG_DIR / "reference" / "simpler_real_robot.json"


class NotComparable(ProtocolError):
    """Fewer than two policies with both a simulated and a real success rate, or a rate outside [0, 1]."""


@dataclass(frozen=True)
class SimRealComparison:
    task: str
    policies: tuple[str, ...]
    simulated: tuple[float, ...]
    real: tuple[float, ...]
    pearson: float | None
    mmrv: float

    def as_dict(self) -> dict:
        return {
            "task": self.task,
            "policies": list(self.policies),
            "simulated": list(self.simulated),
            "real": list(self.real),
            "pearson": self.pearson,
            "mmrv": self.mmrv,
        }


def pearson(simulated: Sequence[float], real: Sequence[float]) -> float | None:
    mean_s, mean_r = sum(simulated) / len(simulated), sum(real) / len(real)
    ds, dr = [s - mean_s for s in simulated], [r - mean_r for r in real]
    spread = math.sqrt(sum(d * d for d in ds) * sum(d * d for d in dr))
    if spread == 0:
        return None
    return sum(a * b for a, b in zip(ds, dr, strict=True)) / spread


def mmrv(simulated: Sequence[float], real: Sequence[float]) -> float:
    n = len(simulated)
    worst = [
        max(
            (abs(real[i] - real[j]) for j in range(n) if (simulated[i] < simulated[j]) != (real[i] < real[j])),
            default=0.0,
        )
        for i in range(n)
    ]
    return sum(worst) / n


def compare(task: str, simulated: Mapping[str, float], real: Mapping[str, float]) -> SimRealComparison:
    """Both metrics over the policies that have both rates, in name order."""
    policies = tuple(sorted(set(simulated) & set(real)))
    if len(policies) < 2:
        raise NotComparable(
            f"{task}: {len(policies)} policies have both a simulated and a real success rate; the metrics need 2"
        )
    for name in policies:
        for side, rate in (("simulated", simulated[name]), ("real", real[name])):
            if not (isinstance(rate, int | float) and not isinstance(rate, bool) and 0 <= rate <= 1):
                raise NotComparable(f"{task}: the {side} success rate of {name} is {rate!r}, not a number in [0, 1]")
    s = tuple(float(simulated[name]) for name in policies)
    r = tuple(float(real[name]) for name in policies)
    return SimRealComparison(task, policies, s, r, pearson(s, r), mmrv(s, r))


@cache
def reference() -> dict:
    """The published real-robot (and the paper's simulated) rates of the reference policies, with the source."""
    return json.loads(REFERENCE_FILE.read_text())


def reference_task(family: str, task: str) -> str:
    """The sim-to-real task a full-matrix cell counts towards, as the paper groups them: the coke can over
    its orientations, open and close drawer over the three drawers, each WidowX task on its own."""
    if family == "pick_coke_can":
        return "google_robot_pick_coke_can"
    if family == "move_near":
        return "google_robot_move_near"
    if family == "drawer":
        return "google_robot_open_drawer" if task.startswith("google_robot_open") else "google_robot_close_drawer"
    if family == "put_apple_closed_top_drawer":
        return "google_robot_place_apple_in_closed_top_drawer"
    return task


def tasks() -> list[str]:
    return list(reference()["real"])
