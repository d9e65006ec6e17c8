"""Task catalogs (simpler_env_protocol.md "Tasks and scope", "Policy input and isolation";
simple_humanoid_protocol.md "Scope and reset"; upstream facts sheets)."""

import hashlib
import json

import pytest

from evaluator.protocol.catalogs import CATALOG_DIR, load_catalog, load_catalog_file
from evaluator.protocol.errors import CatalogError, InvalidCombination, UnknownBenchmark, UnknownTask
from evaluator.protocol.identity import configure

SIMPLER = load_catalog("simpler_env")
SIMPLE = load_catalog("simple_humanoid")

GOOGLE_CONTROLLER = (
    "arm_pd_ee_delta_pose_align_interpolate_by_planner_gripper_pd_joint_target_delta_pos_interpolate_by_planner"
)
WIDOWX_CONTROLLER = "arm_pd_ee_target_delta_pose_align2_gripper_pd_joint_pos"


def test_simpler_env_has_25_aliases_10_categories_9_families_and_15_subtasks():
    # "The pinned upstream exposes **25 prepackaged aliases**, representing **10 broad README task
    # categories**. Its paper reproduction scripts cover **9 task families**. ... **15 canonical subtasks**"
    assert len(SIMPLER.aliases) == 25
    assert len(SIMPLER.groups["category"]) == 10
    assert len(SIMPLER.groups["family"]) == 9
    assert len(SIMPLER.tasks) == 15


@pytest.mark.parametrize(
    "family, count, horizon",
    [
        ("pick_coke_can", 3, 80),
        ("move_near", 1, 80),
        ("open_drawer", 3, 113),
        ("close_drawer", 3, 113),
        ("put_apple_in_closed_top_drawer", 1, 200),
        ("spoon_on_towel", 1, 60),
        ("carrot_on_plate", 1, 60),
        ("stack_cube", 1, 60),
        ("eggplant_in_basket", 1, 120),
    ],
)
def test_each_development_task_group_has_its_subtasks_and_native_horizon(family, count, horizon):
    members = SIMPLER.groups["family"][family]
    assert len(members) == count
    assert {SIMPLER.task(name).native_horizon for name in members} == {horizon}


def test_every_alias_belongs_to_a_readme_category():
    members = [a for names in SIMPLER.groups["category"].values() for a in names]
    assert sorted(members) == sorted(SIMPLER.aliases)


def test_aliases_carry_the_pinned_env_ids_and_kwargs():
    aliases = SIMPLER.aliases
    assert aliases["google_robot_move_near"].env_id == "MoveNearGoogleBakedTexInScene-v1"
    assert aliases["google_robot_move_near_v0"].env_id == "MoveNearGoogleBakedTexInScene-v0"
    assert dict(aliases["google_robot_pick_horizontal_coke_can"].kwargs) == {"lr_switch": True}
    assert dict(aliases["google_robot_pick_vertical_coke_can"].kwargs) == {"laid_vertically": True}
    assert dict(aliases["google_robot_pick_standing_coke_can"].kwargs) == {"upright": True}
    assert dict(aliases["google_robot_place_apple_in_closed_top_drawer"].kwargs) == {"model_ids": "baked_apple_v2"}
    assert sum(1 for a in aliases.values() if a.kwargs) == 4


def test_catalog_kwargs_cannot_be_mutated():
    # "Do not mutate the global upstream alias dictionary"; our copy is read-only too.
    with pytest.raises(TypeError):
        SIMPLER.aliases["google_robot_pick_horizontal_coke_can"].kwargs["lr_switch"] = False


@pytest.mark.parametrize(
    "robot, camera, shape, control, sim, controller",
    [
        ("google_robot_static", "overhead_camera", (512, 640, 3), 3, 513, GOOGLE_CONTROLLER),
        ("widowx", "3rd_view_camera", (480, 640, 3), 5, 500, WIDOWX_CONTROLLER),
        ("widowx_sink_camera_setup", "3rd_view_camera", (480, 640, 3), 5, 500, WIDOWX_CONTROLLER),
    ],
)
def test_each_robot_has_its_policy_camera_shape_frequencies_and_controller(
    robot, camera, shape, control, sim, controller
):
    # "| Google Robot | `overhead_camera` | 512 × 640 × 3 | 3 / 513 Hz |"
    # "| WidowX ... | 480 × 640 × 3 | 5 / 500 Hz |"
    tasks = [t for t in SIMPLER.tasks.values() if t.robot == robot]
    assert tasks
    for task in tasks:
        assert (task.camera, task.rgb_shape, task.control_hz, task.details["sim_hz"], task.controller) == (
            camera,
            shape,
            control,
            sim,
            controller,
        )


def test_the_apple_task_changes_instruction_on_action_101():
    # "native timed advancement changes instruction on **action 101**"
    apple = SIMPLER.task("google_robot_place_apple_in_closed_top_drawer")
    assert apple.instruction == "open top drawer"
    assert apple.details["instruction_transition"]["action"] == 101
    assert apple.details["instruction_transition"]["instruction"] == "place apple into top drawer"


def test_the_catalog_records_its_checksum_and_upstream_revisions():
    # "Aliases, reset seeds, native environment IDs, source revisions ... belong in evaluator provenance."
    raw = (CATALOG_DIR / "simpler_env.json").read_bytes()
    assert SIMPLER.sha256 == hashlib.sha256(raw).hexdigest()
    provenance = SIMPLER.provenance
    assert provenance["catalog_sha256"] == SIMPLER.sha256
    assert provenance["upstream"]["simpler_env"]["revision"] == "c701ea271b16b80616d6fed9713c4a50a0adea3b"
    assert provenance["upstream"]["maniskill2_real2sim"]["revision"] == "ef7a4d4fdf4b69f2c2154db5b15b9ac8dfe10682"
    json.dumps(provenance)  # JSON-ready


def test_simple_humanoid_has_the_twelve_task_inventory():
    # "The inventory binds 12 task registrations, AMO/SONIC backends"
    assert len(SIMPLE.tasks) == 12
    assert len(SIMPLE.groups["scope"]["released-12"]) == 12
    assert {t.native_horizon for t in SIMPLE.tasks.values()} == {400, 800, 1000, 1200}


def test_simple_backends_are_amo_for_mp_and_sonic_for_teleop():
    for task in SIMPLE.tasks.values():
        expected = "amo" if task.name.endswith("MP-v0") else "sonic"
        assert task.details["backend"] == expected
        assert task.robot == ("g1_wholebody" if expected == "amo" else "g1_sonic")
        assert (task.camera, task.rgb_shape, task.control_hz) == ("head_stereo_left", (360, 640, 3), 50)


@pytest.mark.parametrize(
    "task, horizon",
    [
        ("G1WholebodyBendPickMP-v0", 400),
        ("G1WholebodyTabletopGraspMP-v0", 800),
        ("G1WholebodyLocomotionPickBetweenTablesTeleop-v0", 1200),
        ("G1WholebodyOpenFaucetTeleop-v0", 1000),
        ("G1WholebodyCloseDoorTeleop-v0", 1000),
    ],
)
def test_simple_reference_horizons_follow_the_facts_sheet(task, horizon):
    assert SIMPLE.task(task).native_horizon == horizon


def test_simple_fast_mode_and_default_scope():
    # "Fast mode selects each task once with seed 20260907, DR0 and released episode index 0. The default
    # adapter opens BendPickMP only; the default campaign selects BendPickMP and OpenFaucetTeleop."
    assert dict(SIMPLE.settings["fast_mode"]) == {"seed": 20260907, "dr_level": 0, "released_episode_index": 0}
    assert SIMPLE.settings["default_adapter_task"] == "G1WholebodyBendPickMP-v0"
    assert SIMPLE.groups["scope"]["default"] == ("G1WholebodyBendPickMP-v0", "G1WholebodyOpenFaucetTeleop-v0")
    assert SIMPLE.provenance["upstream"]["simple"]["revision"] == "5e3d6f84e85343e34e9bca8d157f0d7813231185"


def test_the_two_inferred_simple_tasks_are_marked_as_such():
    # Facts sheet: "The last 2 rows are **inferred**".
    assert {t.name for t in SIMPLE.tasks.values() if t.details["inferred"]} == {
        "G1WholebodyOpenTrashCanTeleop-v0",
        "G1WholebodyPushOfficeChairTeleop-v0",
    }


def test_a_task_outside_the_selected_scope_is_refused():
    default = configure("simple_humanoid")
    assert SIMPLE.task_in_scope(default, "G1WholebodyOpenFaucetTeleop-v0").native_horizon == 1000
    with pytest.raises(InvalidCombination, match="released-12"):
        SIMPLE.task_in_scope(default, "G1WholebodyCloseDoorTeleop-v0")
    released = configure("simple_humanoid", task_scope="released-12")
    assert SIMPLE.task_in_scope(released, "G1WholebodyCloseDoorTeleop-v0").native_horizon == 1000


def test_unknown_tasks_and_benchmarks_are_typed_errors():
    with pytest.raises(UnknownTask):
        SIMPLER.task("widowx_fold_towel")
    with pytest.raises(UnknownBenchmark):
        load_catalog("libero")


def _write(tmp_path, doc):
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def _simpler_doc():
    return json.loads((CATALOG_DIR / "simpler_env.json").read_text())


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d["subtasks"][0].update(robot="atlas"), "unknown robot"),
        (lambda d: d["subtasks"][0].update(native_horizon=0), "horizon"),
        (lambda d: d["subtasks"][0].update(native_horizon="80"), "horizon"),
        (lambda d: d["aliases"].append(dict(d["aliases"][0])), "duplicate alias"),
        (lambda d: d["aliases"][0].update(category="nowhere"), "unknown category"),
        (lambda d: d["subtasks"].append(dict(d["subtasks"][0], name="google_robot_pick_object")), "family"),
        (lambda d: d["robots"]["widowx"].update(rgb_shape=[480, 640]), "rgb_shape"),
        (lambda d: d.pop("upstream"), "upstream"),
        (lambda d: d.update(benchmark="libero"), "no catalog schema"),
    ],
)
def test_the_loader_refuses_an_invalid_catalog(tmp_path, mutate, message):
    doc = _simpler_doc()
    mutate(doc)
    with pytest.raises(CatalogError, match=message):
        load_catalog_file(_write(tmp_path, doc))


def test_the_loader_refuses_a_file_that_is_not_json(tmp_path):
    with pytest.raises(CatalogError, match="not valid JSON"):
        load_catalog_file(_write(tmp_path, "{ not json"))
