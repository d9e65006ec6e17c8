"""SimplerEnv's native full matrices, cell by cell: Visual Matching (960 episodes per checkpoint)
and Variant Aggregation (1,992, of which the 270 camera-pose episodes are run but not scored).

The matrices are data (environment/catalogs/matrices/simpler_env_full.json, derived from the
upstream evaluation scripts; upstream_simplerenv_full_matrices.md). A family has a base cell and
axes, outermost first; each axis is either a list of values written to one field or a list of
named options that each set several fields (a zipped overlay and robot pose, a scene variant).
A cell is one choice on every axis, merged onto the base, in a fixed order.

Each cell carries what the native worker needs to build it as upstream does (gym.make kwargs,
reset options with the robot and object poses or the episode id, the upstream episode seed), its
native horizon, whether upstream's metric scores it, and the large files it needs.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from .catalogs import CATALOG_DIR, deep_frozen, plain
from .errors import CatalogError
from .identity import FULL_PROTOCOLS, ProtocolConfig, configure

MATRIX_FILE = CATALOG_DIR / "matrices" / "simpler_env_full.json"
VISUAL_MATCHING, VARIANT_AGGREGATION = FULL_PROTOCOLS
SHORT = {VISUAL_MATCHING: "vm", VARIANT_AGGREGATION: "va"}
# Fields a cell's options may set; "build.<kwarg>" sets one gym.make keyword.
FIELDS = ("env_id", "robot", "scene_name", "rgb_overlay", "horizon", "scored")
POSE_FIELDS = ("robot_x", "robot_y", "robot_yaw", "obj_x", "obj_y", "episode_id")


@dataclass(frozen=True)
class FullCell:
    protocol: str
    index: int  # position in the matrix, the same on every run
    key: str  # e.g. "vm/pick_coke_can/urdf_version=None/orientation=horizontal/obj_x=-0.35/obj_y=-0.02"
    family: str
    task: str  # the catalog task it belongs to (simpler_env.json), e.g. google_robot_open_top_drawer
    dimensions: tuple[tuple[str, str], ...]  # (axis, label), outermost first
    group: str  # the variant's kind (base, lighting, camera, ...); "" where the family has no variants
    env_id: str
    robot: str
    build_kwargs: Mapping[str, Any]
    reset_options: Mapping[str, Any]
    seed: int
    horizon: int
    scored: bool
    assets: tuple[str, ...]  # files under ManiSkill2_real2sim/ the cell cannot run without

    def dimension(self, axis: str) -> str | None:
        return dict(self.dimensions).get(axis)

    def as_dict(self) -> dict:
        return {
            "protocol": self.protocol,
            "index": self.index,
            "key": self.key,
            "family": self.family,
            "task": self.task,
            "dimensions": dict(self.dimensions),
            "group": self.group,
            "env_id": self.env_id,
            "robot": self.robot,
            "build_kwargs": plain(self.build_kwargs),
            "reset_options": plain(self.reset_options),
            "seed": self.seed,
            "horizon": self.horizon,
            "scored": self.scored,
            "assets": list(self.assets),
        }


@dataclass(frozen=True)
class FullMatrix:
    protocol: str
    title: str
    sha256: str  # of the data file: part of a full campaign's protocol identity
    cells: tuple[FullCell, ...]
    families: Mapping[str, Mapping[str, Any]]  # family -> its title and heat map (rows, columns, split)

    def family_counts(self) -> dict[str, int]:
        return dict(Counter(cell.family for cell in self.cells))

    def scored(self) -> tuple[FullCell, ...]:
        return tuple(cell for cell in self.cells if cell.scored)

    def subset(self, families: list[str]) -> tuple[FullCell, ...]:
        known = self.family_counts()
        unknown = [name for name in families if name not in known]
        if unknown:
            raise CatalogError(f"no family {', '.join(unknown)} in {self.protocol}; one of {', '.join(known)}")
        return tuple(cell for cell in self.cells if cell.family in families)


def robot_quat(yaw: float) -> list[float]:
    """Upstream's initial robot rotation, wxyz: Pose(q=euler2quat(0, 0, yaw)) * Pose(q=[0, 0, 0, 1])."""
    half = yaw / 2
    return [-math.sin(half) + 0.0, 0.0, 0.0, math.cos(half)]  # + 0.0: no negative zero


@cache
def load_matrix(protocol: str) -> FullMatrix:
    raw = MATRIX_FILE.read_bytes()
    doc = json.loads(raw)
    if protocol not in doc["protocols"]:
        raise CatalogError(f"no full matrix {protocol!r}; one of {', '.join(doc['protocols'])}")
    spec = doc["protocols"][protocol]
    cells = tuple(enumerate_cells(doc, protocol))
    keys = [cell.key for cell in cells]
    if len(set(keys)) != len(keys):
        raise CatalogError(f"{MATRIX_FILE.name}: {protocol} has cells with the same dimensions")
    families = {f["family"]: {"title": f["title"], "heat_map": f["heat_map"]} for f in spec["families"]}
    return FullMatrix(protocol, spec["title"], hashlib.sha256(raw).hexdigest(), cells, deep_frozen(families))


def enumerate_cells(doc: dict, protocol: str) -> list[FullCell]:
    cells = []
    for family in doc["protocols"][protocol]["families"]:
        choices = [_options(axis) for axis in family["axes"]]
        for combination in itertools.product(*choices):
            cells.append(_cell(doc, protocol, family, combination, len(cells)))
    return cells


def _options(axis: dict) -> list[tuple[str, str, str, dict]]:
    """(axis, label, group, fields set) per choice of one axis."""
    if "options" in axis:
        return [(axis["axis"], o["label"], o.get("group", ""), o["set"]) for o in axis["options"]]
    return [(axis["axis"], _label(value), "", {axis["set"]: value}) for value in axis["values"]]


def _label(value: Any) -> str:
    return repr(value) if isinstance(value, float) else str(value)


def _cell(doc: dict, protocol: str, family: dict, combination, index: int) -> FullCell:
    base = family["base"]
    fields = {"robot": family["robot"], "horizon": family["horizon"], "scored": True}
    fields.update({k: v for k, v in base.items() if k != "build"})
    build = dict(base.get("build", {}))
    for _, _, _, sets in combination:
        for name, value in sets.items():
            if name.startswith("build."):
                build[name.removeprefix("build.")] = value
            elif name in FIELDS or name in POSE_FIELDS:
                fields[name] = value
            else:
                raise CatalogError(f"{MATRIX_FILE.name}: unknown field {name!r} in {family['family']}")
    robot = doc["robots"][fields["robot"]]
    overlay = fields.get("rgb_overlay")
    build_kwargs = {
        **build,
        "obs_mode": "rgbd",
        "robot": fields["robot"],
        "sim_freq": robot["sim_freq"],
        "control_mode": robot["control_mode"],
        "control_freq": robot["control_freq"],
        "max_episode_steps": fields["horizon"],
        "scene_name": fields["scene_name"],
        "camera_cfgs": {"add_segmentation": True},
        "rgb_overlay_path": f"data/{overlay}" if overlay else None,
    }
    if overlay:  # what upstream's env builder adds (simpler_env/utils/env/env_builder.py:7-16)
        build_kwargs["rgb_overlay_cameras"] = [robot["camera"]]
    objects = (
        {"episode_id": fields["episode_id"]}
        if "episode_id" in fields
        else {"init_xy": [fields["obj_x"], fields["obj_y"]]}
    )
    reset_options = {
        "robot_init_options": {
            "init_xy": [fields["robot_x"], fields["robot_y"]],
            "init_rot_quat": robot_quat(fields["robot_yaw"]),
        },
        "obj_init_options": objects,
    }
    dimensions = tuple((axis, label) for axis, label, _, _ in combination)
    return FullCell(
        protocol=protocol,
        index=index,
        key="/".join([SHORT[protocol], family["family"], *(f"{axis}={label}" for axis, label in dimensions)]),
        family=family["family"],
        task=family["task"].format(**dict(dimensions)),
        dimensions=dimensions,
        group=next((group for _, _, group, _ in combination if group), ""),
        env_id=fields["env_id"],
        robot=fields["robot"],
        build_kwargs=deep_frozen(build_kwargs),
        reset_options=deep_frozen(reset_options),
        seed=doc["episode_seed"],
        horizon=fields["horizon"],
        scored=fields["scored"],
        assets=_assets(doc, fields, build, overlay),
    )


def _assets(doc: dict, fields: dict, build: dict, overlay: str | None) -> tuple[str, ...]:
    large = doc["large_assets"]
    needed = [f"data/{overlay}"] if overlay else []
    if fields["scene_name"] in large["scenes"]:
        needed.append(f"{large['stage_dir']}/{fields['scene_name']}.glb")
    objects = list(large["env_objects"].get(fields["env_id"], []))
    triplets = doc["move_near_triplets"].get(fields["env_id"])
    if isinstance(triplets, str):  # another env's triplets (the camera variants)
        triplets = doc["move_near_triplets"][triplets]
    if triplets is not None:
        # upstream's decoding: the triplet is id // 12, the (source, target) pair id % 6.
        triplet = triplets[fields["episode_id"] // 12]
        source, target = doc["move_near_triplets"]["pairs"][fields["episode_id"] % 6]
        objects += [triplet[source], triplet[target]] if build.get("no_distractor") else list(triplet)
    needed += [large["objects"][name] for name in dict.fromkeys(objects) if name in large["objects"]]
    return tuple(needed)


def missing_assets(cells: tuple[FullCell, ...] | list[FullCell], present: set[str]) -> dict[str, int]:
    """{asset: number of cells that need it} for the assets not in `present`."""
    counts: Counter = Counter()
    for cell in cells:
        counts.update(asset for asset in cell.assets if asset not in present)
    return dict(counts)


def asset_paths(cells) -> list[str]:
    return sorted({asset for cell in cells for asset in cell.assets})


def files_present(root: Path, assets: list[str]) -> set[str]:
    return {asset for asset in assets if (root / asset).is_file()}


def full_configuration(protocol: str, **options) -> ProtocolConfig:
    """The protocol configuration of a full campaign over this matrix data (its checksum in the identity)."""
    return configure("simpler_env", full_protocol=protocol, matrix_sha=load_matrix(protocol).sha256[:12], **options)
