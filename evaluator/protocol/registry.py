"""Each benchmark's protocol in one entry: its family (identity prefix, sensor tracks, interface
versions, scopes, budget defaults), the native arrays each sensor track shows a policy, its action
contract per interface version and the schema its catalog file is checked against.

Adding a benchmark adds an entry here, its catalog file (and schema, in catalogs.py, if no existing
one fits) and its host side in evaluator/native/backends.py: environment/README.md has the checklist.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .actions import FETCH_ACTION, MANISKILL2_ACTION, SIMPLE_V2_ACTION, SIMPLER_ENV_ACTION, ActionContract
from .errors import UnknownBenchmark

HORIZON = "horizon"
DECISIONS = "decisions"
DEFAULT_SCOPE = "default"


@dataclass(frozen=True)
class Family:
    """What one benchmark's protocol allows, and its defaults."""

    benchmark: str
    prefix: str
    sensors: tuple[str, ...]  # the first one is the default track
    versions: tuple[int, ...]  # the last one is the current interface
    scopes: tuple[str, ...] = (DEFAULT_SCOPE,)
    default_budget_mode: str = HORIZON
    # Horizon mode: call budget, action prefix and runner cap when none is given.
    horizon_calls: int = 40
    horizon_replan: int = 5
    horizon_step_cap: int = 1000
    # Decision mode: D and K when none is given.
    decisions: int = 200
    decision_replan: int = 5
    fixed_decision_track: bool = False  # SIMPLE implements only decision-200/prefix-5
    extended_horizon: bool = True
    agent_method: bool = True
    # SIMPLE's service always returns bounded validation feedback; SimplerEnv makes it a choice.
    feedback_always_on: bool = False
    # Scopes other than the default allow only the default sensors and decision mode.
    restricted_scopes: tuple[str, ...] = ()
    # Whether native `terminated` ends an episode. SimplerEnv's upstream loop ignores it.
    native_termination_ends: bool = False

    @property
    def current_version(self) -> int:
        return self.versions[-1]


@dataclass(frozen=True)
class BenchmarkProtocol:
    family: Family
    # Interface version -> the contract new runs validate against. SIMPLE's frozen v1 needs the run's
    # joint ranges (actions.simple_v1_contract) and is not offered to new runs.
    action_contracts: Mapping[int, ActionContract]
    sensor_arrays: Mapping[str, tuple[str, ...]]  # sensor track -> native arrays besides the RGB frame
    catalog_schema: str  # a key of catalogs.SCHEMAS
    # Native array -> {task name, robot name or "*": (shape, dtype)}: what a policy check's synthetic observation
    # holds (evaluator/running/policy_check.py), as the worker sends it.
    array_shapes: Mapping[str, Mapping[str, tuple[tuple[int, ...], str]]] = field(default_factory=dict)
    # Sensor track -> the native array that is the robot's state, where a policy asks for one (a LeRobot
    # checkpoint's observation.state): the tracks without one show a policy the frame alone.
    state_arrays: Mapping[str, str] = field(default_factory=dict)

    def array_shape(self, array: str, task: str, robot: str) -> tuple[tuple[int, ...], str]:
        """The (shape, dtype) of a native array on a task: its task's entry, else its robot's, else "*"."""
        shapes = self.array_shapes[array]
        return shapes.get(task) or shapes.get(robot) or shapes["*"]


PROTOCOLS: dict[str, BenchmarkProtocol] = {
    entry.family.benchmark: entry
    for entry in (
        BenchmarkProtocol(
            family=Family(
                benchmark="simpler_env",
                prefix="simpler-prepackaged-development",
                sensors=("rgb", "rgb-qpos"),
                versions=(1,),
            ),
            action_contracts={1: SIMPLER_ENV_ACTION},
            sensor_arrays={"rgb-qpos": ("qpos",)},
            catalog_schema="simpler_env",
            # upstream_simplerenv_facts.md: obs["agent"]["qpos"] has 11 joints on Google static, 8 on WidowX.
            array_shapes={"qpos": {"google_robot_static": ((11,), "float32"), "*": ((8,), "float32")}},
            state_arrays={"rgb-qpos": "qpos"},
        ),
        BenchmarkProtocol(
            family=Family(
                benchmark="simple_humanoid",
                prefix="simple-humanoid-development",
                sensors=("rgb-qpos31", "rgb"),
                versions=(1, 2),
                scopes=(DEFAULT_SCOPE, "released-12"),
                default_budget_mode=DECISIONS,
                # Enough full five-action calls and controls for the longest reference horizon (1200).
                horizon_calls=240,
                horizon_replan=5,
                horizon_step_cap=1200,
                fixed_decision_track=True,
                extended_horizon=False,
                agent_method=False,
                feedback_always_on=True,
                restricted_scopes=("released-12",),
                native_termination_ends=True,  # "Native success/termination ... remain authoritative"
            ),
            action_contracts={2: SIMPLE_V2_ACTION},
            sensor_arrays={"rgb-qpos31": ("qpos31",)},
            catalog_schema="simple_humanoid",
            array_shapes={"qpos31": {"*": ((31,), "float64")}},  # environment/workers/simple_commands.py qpos31
            state_arrays={"rgb-qpos31": "qpos31"},
        ),
        # The CPU development benchmark: never pooled with SimplerEnv. Its oracle reads
        # privileged simulator state and therefore runs only under its own sensor track.
        BenchmarkProtocol(
            family=Family(
                benchmark="fetch",
                prefix="fetch-development",
                sensors=("rgb", "privileged-state"),
                versions=(1,),
                horizon_calls=50,
                horizon_replan=5,
                horizon_step_cap=1000,
                decisions=10,
                decision_replan=5,
            ),
            action_contracts={1: FETCH_ACTION},
            sensor_arrays={"privileged-state": ("observation", "achieved_goal", "desired_goal")},
            catalog_schema="single_robot",
            # gymnasium-robotics' Fetch: reach observes the gripper alone (10), the object tasks add the object (25).
            array_shapes={
                "observation": {"reach": ((10,), "float64"), "*": ((25,), "float64")},
                "achieved_goal": {"*": ((3,), "float64")},
                "desired_goal": {"*": ((3,), "float64")},
            },
            state_arrays={"privileged-state": "observation"},
        ),
        # ManiSkill2 0.5.3 on SAPIEN: how CI exercises the SAPIEN path without SimplerEnv's assets.
        BenchmarkProtocol(
            family=Family(benchmark="maniskill2", prefix="maniskill2-development", sensors=("rgb",), versions=(1,)),
            action_contracts={1: MANISKILL2_ACTION},
            sensor_arrays={},
            catalog_schema="single_robot",
        ),
    )
}


def benchmark_protocol(benchmark: str) -> BenchmarkProtocol:
    try:
        return PROTOCOLS[benchmark]
    except KeyError:
        raise UnknownBenchmark(f"unknown benchmark {benchmark!r}; known: {', '.join(sorted(PROTOCOLS))}") from None


def action_contract(benchmark: str, interface_version: int) -> ActionContract:
    """The contract new runs validate against (SIMPLE v1 needs the run's joint ranges: simple_v1_contract)."""
    try:
        return benchmark_protocol(benchmark).action_contracts[interface_version]
    except KeyError:
        raise ValueError(f"no action contract for {benchmark} v{interface_version}") from None
