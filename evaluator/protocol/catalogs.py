"""Task catalogs: the benchmark tasks as data under environment/catalogs, validated on load.

A catalog is read once per process, checked against its schema, and carries the
sha256 of its file so that every attempt can record exactly which catalog it used.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .errors import CatalogError, InvalidCombination, UnknownBenchmark, UnknownTask
from .identity import DEFAULT_SCOPE, ProtocolConfig
from .registry import PROTOCOLS
from .seeds import InvalidSeeds

CATALOG_DIR = Path(__file__).resolve().parents[2] / "environment" / "catalogs"


@dataclass(frozen=True)
class TaskSpec:
    benchmark: str
    name: str
    env_id: str
    native_horizon: int
    instruction: str
    robot: str
    camera: str
    rgb_shape: tuple[int, int, int]
    control_hz: float
    controller: str
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Alias:
    name: str
    env_id: str
    kwargs: Mapping[str, Any]
    category: str
    family: str | None


@dataclass(frozen=True)
class Catalog:
    benchmark: str
    title: str
    filename: str
    sha256: str
    upstream: Mapping[str, Any]
    tasks: Mapping[str, TaskSpec]
    aliases: Mapping[str, Alias]
    # Named groups of task names: "category", "family" (SimplerEnv), "scope" (SIMPLE).
    groups: Mapping[str, Mapping[str, tuple[str, ...]]]
    settings: Mapping[str, Any]

    def task(self, name: str) -> TaskSpec:
        try:
            return self.tasks[name]
        except KeyError:
            raise UnknownTask(f"{self.benchmark} has no task {name!r}") from None

    def task_in_scope(self, config: ProtocolConfig, name: str) -> TaskSpec:
        """The task, if the configuration's task scope admits it."""
        task = self.task(name)
        scopes = self.groups.get("scope")
        if scopes is not None and name not in scopes.get(config.task_scope, ()):
            hint = "" if config.task_scope != DEFAULT_SCOPE else "; select task scope released-12"
            raise InvalidCombination(f"task {name!r} is not in the {config.task_scope} task scope{hint}")
        return task

    def check_seeds(self, seeds: Sequence[int]) -> None:
        """A catalog whose fast mode fixes the reset (SIMPLE: "Fast mode selects each task once with seed
        20260907") refuses any other seeds."""
        fast = self.settings.get("fast_mode")
        if fast is not None and list(seeds) != [fast["seed"]]:
            raise InvalidSeeds(
                f"{self.benchmark}'s fast mode runs each task once with seed {fast['seed']}, not seeds {list(seeds)}"
            )

    @property
    def provenance(self) -> dict:
        return {
            "catalog": self.filename,
            "catalog_sha256": self.sha256,
            "upstream": plain(self.upstream),
        }


def deep_frozen(value: Any) -> Any:
    """A read-only copy of parsed JSON: dicts as mapping proxies, lists as tuples."""
    if isinstance(value, dict):
        return MappingProxyType({k: deep_frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(deep_frozen(v) for v in value)
    return value


def plain(value: Any) -> Any:
    """A read-only catalog structure as JSON-ready dicts and lists."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    return value


def _require(doc: Mapping, key: str, kind: type | tuple, where: str) -> Any:
    if key not in doc:
        raise CatalogError(f"{where}: missing {key!r}")
    value = doc[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise CatalogError(f"{where}: {key!r} must be {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _shape(value: Any, where: str) -> tuple[int, int, int]:
    if not (isinstance(value, list) and len(value) == 3 and all(isinstance(v, int) and v > 0 for v in value)):
        raise CatalogError(f"{where}: rgb_shape must be three positive integers, got {value!r}")
    return tuple(value)


def _horizon(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise CatalogError(f"{where}: horizon must be a positive integer, got {value!r}")
    return value


def _unique(names: list[str], what: str) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise CatalogError(f"duplicate {what} {name!r}")
        seen.add(name)


def _build_simpler_env(doc: dict) -> dict:
    robots = _require(doc, "robots", dict, "simpler_env")
    categories = [c["name"] for c in _require(doc, "categories", list, "simpler_env")]
    families = [f["name"] for f in _require(doc, "families", list, "simpler_env")]
    _unique(categories, "category")
    _unique(families, "family")
    aliases: dict[str, Alias] = {}
    for entry in _require(doc, "aliases", list, "simpler_env"):
        where = f"alias {entry.get('alias')!r}"
        name = _require(entry, "alias", str, where)
        if name in aliases:
            raise CatalogError(f"duplicate alias {name!r}")
        category = _require(entry, "category", str, where)
        family = entry.get("family")
        if category not in categories:
            raise CatalogError(f"{where}: unknown category {category!r}")
        if family is not None and family not in families:
            raise CatalogError(f"{where}: unknown family {family!r}")
        aliases[name] = Alias(
            name=name,
            env_id=_require(entry, "env_id", str, where),
            kwargs=deep_frozen(_require(entry, "kwargs", dict, where)),
            category=category,
            family=family,
        )
    tasks: dict[str, TaskSpec] = {}
    for entry in _require(doc, "subtasks", list, "simpler_env"):
        where = f"subtask {entry.get('name')!r}"
        name = _require(entry, "name", str, where)
        if name in tasks:
            raise CatalogError(f"duplicate subtask {name!r}")
        alias = aliases.get(name)
        if alias is None or alias.family is None:
            raise CatalogError(f"{where}: a canonical subtask must be an alias of a reproduction family")
        robot_name = _require(entry, "robot", str, where)
        if robot_name not in robots:
            raise CatalogError(f"{where}: unknown robot {robot_name!r}")
        robot = robots[robot_name]
        details = {k: v for k, v in entry.items() if k not in ("name", "robot", "native_horizon", "instruction")}
        details.update(
            kwargs=alias.kwargs,
            category=alias.category,
            family=alias.family,
            sim_hz=_require(robot, "sim_hz", int, robot_name),
        )
        tasks[name] = TaskSpec(
            benchmark="simpler_env",
            name=name,
            env_id=alias.env_id,
            native_horizon=_horizon(entry.get("native_horizon"), where),
            instruction=_require(entry, "instruction", str, where),
            robot=robot_name,
            camera=_require(robot, "policy_camera", str, robot_name),
            rgb_shape=_shape(robot.get("rgb_shape"), robot_name),
            control_hz=_require(robot, "control_hz", (int, float), robot_name),
            controller=_require(robot, "controller", str, robot_name),
            details=deep_frozen(details),
        )
    by_category = {c: tuple(a.name for a in aliases.values() if a.category == c) for c in categories}
    by_family = {f: tuple(t.name for t in tasks.values() if t.details["family"] == f) for f in families}
    for group, members in {**by_category, **by_family}.items():
        if not members:
            raise CatalogError(f"group {group!r} has no members")
    return {
        "tasks": tasks,
        "aliases": aliases,
        "groups": {"category": by_category, "family": by_family},
        "settings": {"construction": doc.get("construction", {}), "robots": robots},
    }


def _build_simple_humanoid(doc: dict) -> dict:
    observation = _require(doc, "observation", dict, "simple_humanoid")
    backends = _require(doc, "backends", dict, "simple_humanoid")
    control_hz = _require(doc, "control_hz", (int, float), "simple_humanoid")
    tasks: dict[str, TaskSpec] = {}
    for entry in _require(doc, "tasks", list, "simple_humanoid"):
        where = f"task {entry.get('name')!r}"
        name = _require(entry, "name", str, where)
        if name in tasks:
            raise CatalogError(f"duplicate task {name!r}")
        backend_name = _require(entry, "backend", str, where)
        if backend_name not in backends:
            raise CatalogError(f"{where}: unknown backend {backend_name!r}")
        backend = backends[backend_name]
        details = {k: v for k, v in entry.items() if k not in ("name", "env_id", "reference_horizon", "instruction")}
        tasks[name] = TaskSpec(
            benchmark="simple_humanoid",
            name=name,
            env_id=_require(entry, "env_id", str, where),
            native_horizon=_horizon(entry.get("reference_horizon"), where),
            instruction=_require(entry, "instruction", str, where),
            robot=_require(backend, "robot", str, backend_name),
            camera=_require(observation, "camera", str, "observation"),
            rgb_shape=_shape(observation.get("rgb_shape"), "observation"),
            control_hz=control_hz,
            controller=_require(backend, "controller", str, backend_name),
            details=deep_frozen(details),
        )
    scopes = {k: tuple(v) for k, v in _require(doc, "scopes", dict, "simple_humanoid").items()}
    for scope, members in scopes.items():
        for name in members:
            if name not in tasks:
                raise CatalogError(f"scope {scope!r} names unknown task {name!r}")
    if _require(doc, "default_adapter_task", str, "simple_humanoid") not in scopes.get("default", ()):
        raise CatalogError("the default adapter task must be in the default scope")
    fast = _require(doc, "fast_mode", dict, "simple_humanoid")
    for key in ("seed", "dr_level", "released_episode_index"):
        _require(fast, key, int, "fast_mode")
    inventory = _require(doc, "inventory", dict, "simple_humanoid")
    for backend_name in backends:
        for path, digest in _require(inventory, backend_name, dict, "inventory").items():
            # empty: no published hash, the file must exist and its sha256 is recorded
            hex_digits = isinstance(digest, str) and set(digest) <= set("0123456789abcdef")
            if not (hex_digits and (digest == "" or 8 <= len(digest) <= 64)):
                raise CatalogError(
                    f"inventory {backend_name} {path}: sha256 must be 8-64 hex digits or empty, got {digest!r}"
                )
    return {
        "tasks": tasks,
        "aliases": {},
        "groups": {"scope": scopes},
        "settings": {
            "fast_mode": fast,
            "default_adapter_task": doc["default_adapter_task"],
            "observation": observation,
            "action": doc.get("action", {}),
            "backends": backends,
            "inventory": {name: inventory[name] for name in backends},
        },
    }


def _build_single_robot(doc: dict) -> dict:
    """A catalog of tasks that share one robot and camera (the Fetch and ManiSkill2 benchmarks)."""
    benchmark = doc["benchmark"]
    robot = _require(doc, "robot", dict, benchmark)
    tasks: dict[str, TaskSpec] = {}
    for entry in _require(doc, "tasks", list, benchmark):
        where = f"task {entry.get('name')!r}"
        name = _require(entry, "name", str, where)
        if name in tasks:
            raise CatalogError(f"duplicate task {name!r}")
        tasks[name] = TaskSpec(
            benchmark=benchmark,
            name=name,
            env_id=_require(entry, "env_id", str, where),
            native_horizon=_horizon(entry.get("native_horizon"), where),
            instruction=_require(entry, "instruction", str, where),
            robot=_require(robot, "name", str, "robot"),
            camera=_require(robot, "camera", str, "robot"),
            rgb_shape=_shape(robot.get("rgb_shape"), "robot"),
            control_hz=_require(robot, "control_hz", (int, float), "robot"),
            controller=_require(robot, "controller", str, "robot"),
        )
    settings = {"success": doc.get("success", ""), "control_mode": robot.get("control_mode")}
    return {"tasks": tasks, "aliases": {}, "groups": {}, "settings": settings}


# Catalog schemas by name; each benchmark's registry entry names the one its file is checked against.
SCHEMAS = {
    "simpler_env": _build_simpler_env,
    "simple_humanoid": _build_simple_humanoid,
    "single_robot": _build_single_robot,
}


def load_catalog_file(path: Path) -> Catalog:
    """Read and validate one catalog file."""
    raw = path.read_bytes()
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise CatalogError(f"{path.name}: not valid JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise CatalogError(f"{path.name}: the top level must be an object")
    benchmark = _require(doc, "benchmark", str, path.name)
    if benchmark not in PROTOCOLS:
        raise CatalogError(f"{path.name}: no catalog schema for benchmark {benchmark!r}")
    builder = SCHEMAS[PROTOCOLS[benchmark].catalog_schema]
    parts = builder(doc)
    return Catalog(
        benchmark=benchmark,
        title=_require(doc, "title", str, path.name),
        filename=path.name,
        sha256=hashlib.sha256(raw).hexdigest(),
        upstream=deep_frozen(_require(doc, "upstream", dict, path.name)),
        tasks=MappingProxyType(parts["tasks"]),
        aliases=MappingProxyType(parts["aliases"]),
        groups=deep_frozen(parts["groups"]),
        settings=deep_frozen(parts["settings"]),
    )


@cache
def load_catalog(benchmark: str) -> Catalog:
    path = CATALOG_DIR / f"{benchmark}.json"
    if not path.exists():
        raise UnknownBenchmark(f"no catalog for benchmark {benchmark!r} in {CATALOG_DIR}")
    return load_catalog_file(path)


def catalog_benchmarks() -> list[str]:
    return sorted(p.stem for p in CATALOG_DIR.glob("*.json"))
