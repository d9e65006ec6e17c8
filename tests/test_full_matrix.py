"""The native full matrices of SimplerEnv, enumerated cell by cell (issue 14: "the enumerator yields
exactly 960 and 1,992 cells with the per-family counts above, 1,722 scored, no duplicates, the same
order on every run, and the documented grids"). Expected values come from the upstream scripts'
arguments (allenai/SimplerEnv@c701ea2 scripts/, cited per test) and upstream_simplerenv_full_matrices.md."""

import hashlib
import json
from collections import Counter

import numpy as np
import pytest

from evaluator.protocol.full_matrix import MATRIX_FILE, enumerate_cells, load_matrix, robot_quat

VM, VA = load_matrix("visual_matching"), load_matrix("variant_aggregation")


def _cells(matrix, family):
    return [cell for cell in matrix.cells if cell.family == family]


def test_visual_matching_is_960_episodes_with_the_documented_families():
    # "VM = 864 + 96 = 960": coke 300, move near 240, drawers 216, apple 108, WidowX 96.
    assert len(VM.cells) == 960
    assert VM.family_counts() == {
        "pick_coke_can": 300,
        "move_near": 240,
        "drawer": 216,
        "put_apple_closed_top_drawer": 108,
        "bridge": 96,
    }
    assert len(VM.scored()) == 960


def test_variant_aggregation_is_1992_episodes_of_which_1722_are_scored():
    # "Google VA = 1,992 (coke 825, move near 600, drawers 378, apple 189) ... the scored VA set is 1,722"
    assert len(VA.cells) == 1992
    assert VA.family_counts() == {
        "pick_coke_can": 825,
        "move_near": 600,
        "drawer": 378,
        "put_apple_closed_top_drawer": 189,
    }
    assert len(VA.scored()) == 1722
    # "270 are camera-pose variants (coke 3x2x25 = 150, move near 2x60 = 120)"
    unscored = [cell for cell in VA.cells if not cell.scored]
    assert Counter(cell.family for cell in unscored) == {"pick_coke_can": 150, "move_near": 120}
    assert {cell.group for cell in unscored} == {"camera"}
    assert all("AltGoogleCamera" in cell.env_id for cell in unscored)


@pytest.mark.parametrize("matrix", [VM, VA], ids=["vm", "va"])
def test_no_two_cells_are_the_same_episode(matrix):
    keys = [cell.key for cell in matrix.cells]
    assert len(set(keys)) == len(keys)
    episodes = {
        json.dumps([cell.env_id, cell.as_dict()["build_kwargs"], cell.as_dict()["reset_options"]], sort_keys=True)
        for cell in matrix.cells
    }
    assert len(episodes) == len(matrix.cells)
    assert [cell.index for cell in matrix.cells] == list(range(len(matrix.cells)))


def test_the_order_is_the_same_on_every_run():
    doc = json.loads(MATRIX_FILE.read_text())
    for protocol, matrix in (("visual_matching", VM), ("variant_aggregation", VA)):
        again = enumerate_cells(json.loads(json.dumps(doc)), protocol)
        assert [cell.key for cell in again] == [cell.key for cell in matrix.cells]
    assert VM.cells[0].key == "vm/pick_coke_can/urdf_version=None/orientation=horizontal/obj_x=-0.35/obj_y=-0.02"
    assert VA.cells[-1].key == "va/put_apple_closed_top_drawer/variant=mk_station3/robot_y=0.2/obj_x=-0.02/obj_y=0.08"


def test_the_matrix_checksum_is_the_data_files():
    assert VM.sha256 == VA.sha256 == hashlib.sha256(MATRIX_FILE.read_bytes()).hexdigest()


def test_the_coke_can_object_grid_is_5_by_5_per_orientation_and_urdf():
    # rt1_pick_coke_can_visual_matching.sh: --obj-init-x -0.35 -0.12 5 --obj-init-y -0.02 0.42 5, robot (0.35, 0.20)
    grid = [[float(x), float(y)] for x in np.linspace(-0.35, -0.12, 5) for y in np.linspace(-0.02, 0.42, 5)]
    for matrix, outer in ((VM, "urdf_version"), (VA, "variant")):
        by_setting = {}
        for cell in _cells(matrix, "pick_coke_can"):
            setting = (cell.dimension(outer), cell.dimension("orientation"))
            by_setting.setdefault(setting, []).append(list(cell.reset_options["obj_init_options"]["init_xy"]))
            assert list(cell.reset_options["robot_init_options"]["init_xy"]) == [0.35, 0.2]
        assert all(points == grid for points in by_setting.values())
        assert len(by_setting) == (12 if matrix is VM else 33)
    # the orientation is a build kwarg: lr_switch / upright / laid_vertically = True
    flags = Counter(
        next(k for k in ("lr_switch", "upright", "laid_vertically") if cell.build_kwargs.get(k))
        for cell in _cells(VM, "pick_coke_can")
    )
    assert flags == {"lr_switch": 100, "upright": 100, "laid_vertically": 100}


def test_the_drawer_overlays_and_robot_poses_are_zipped_nine_ways():
    # rt1_drawer_visual_matching.sh A0..C2: each overlay image goes with its own robot pose
    poses = {
        "a0": (0.644, -0.179, -0.03), "a1": (0.765, -0.182, -0.02), "a2": (0.889, -0.203, -0.06),
        "b0": (0.652, 0.009, 0.0), "b1": (0.752, 0.009, 0.0), "b2": (0.851, 0.035, 0.0),
        "c0": (0.665, 0.224, 0.0), "c1": (0.765, 0.222, -0.025), "c2": (0.865, 0.222, -0.025),
    }  # fmt: skip
    drawers = _cells(VM, "drawer")
    assert Counter(cell.dimension("overlay_pose") for cell in drawers) == {name: 24 for name in poses}
    for cell in drawers:
        name = cell.dimension("overlay_pose")
        x, y, yaw = poses[name]
        assert cell.build_kwargs["rgb_overlay_path"] == f"data/real_inpainting/open_drawer_{name}.png"
        assert list(cell.reset_options["robot_init_options"]["init_xy"]) == [x, y]
        assert list(cell.reset_options["robot_init_options"]["init_rot_quat"]) == robot_quat(yaw)
        # --enable-raytracing puts shader_dir=rt before the other kwargs
        assert list(cell.build_kwargs)[:4] == ["shader_dir", "station_name", "light_mode", "disable_bad_material"]
        assert cell.build_kwargs["station_name"] == "mk_station_recolor" and cell.horizon == 113
    assert len({cell.env_id for cell in drawers}) == 6
    assert len({cell.build_kwargs["urdf_version"] for cell in drawers}) == 4


def test_move_near_runs_episode_ids_0_to_59_per_urdf_and_per_variant():
    for matrix, outer, count in ((VM, "urdf_version", 4), (VA, "variant", 10)):
        ids = {}
        for cell in _cells(matrix, "move_near"):
            ids.setdefault(cell.dimension(outer), []).append(cell.reset_options["obj_init_options"]["episode_id"])
            assert cell.horizon == 80
        assert len(ids) == count and all(found == list(range(60)) for found in ids.values())
    # rt1_move_near_visual_matching.sh: the BakedTex -v0 env, robot (0.35, 0.21) yaw -0.09
    cell = _cells(VM, "move_near")[0]
    assert cell.env_id == "MoveNearGoogleBakedTexInScene-v0"
    assert cell.reset_options["robot_init_options"]["init_rot_quat"] == pytest.approx([0.0449848, 0, 0, 0.9989877])


def test_put_apple_cells_use_the_3_by_3_object_grid():
    # rt1_put_in_drawer_*.sh: --obj-init-x-range -0.08 -0.02 3 --obj-init-y-range -0.02 0.08 3
    grid = [[float(x), float(y)] for x in np.linspace(-0.08, -0.02, 3) for y in np.linspace(-0.02, 0.08, 3)]
    vm = _cells(VM, "put_apple_closed_top_drawer")
    assert [list(c.reset_options["obj_init_options"]["init_xy"]) for c in vm[:9]] == grid
    assert {c.dimension("overlay_pose") for c in vm} == {"a0", "b0", "c0"}
    assert {c.build_kwargs["model_ids"] for c in vm} == {"baked_apple_v2"} and {c.horizon for c in vm} == {200}
    va = _cells(VA, "put_apple_closed_top_drawer")
    assert {c.build_kwargs["model_ids"] for c in va} == {"apple"}
    assert {tuple(c.reset_options["robot_init_options"]["init_xy"]) for c in va} == {
        (0.65, -0.2),
        (0.65, 0.0),
        (0.65, 0.2),
    }


def test_variant_aggregation_drawers_sweep_a_3_by_3_robot_grid_in_seven_variants():
    # rt1_drawer_variant_agg.sh: --robot-init-x 0.65 0.85 3 --robot-init-y -0.2 0.2 3, all ray traced
    grid = {(float(x), float(y)) for x in np.linspace(0.65, 0.85, 3) for y in np.linspace(-0.2, 0.2, 3)}
    drawers = _cells(VA, "drawer")
    assert {tuple(c.reset_options["robot_init_options"]["init_xy"]) for c in drawers} == grid
    assert {c.build_kwargs["shader_dir"] for c in drawers} == {"rt"}
    assert Counter(c.group for c in drawers) == {"base": 54, "background": 108, "lighting": 108, "cabinet_texture": 108}


def test_the_widowx_cells_follow_the_bridge_script():
    # rt1x_bridge.sh: 4 tasks x episode ids 0..23; the eggplant task on the sink setup with 120 steps
    bridge = _cells(VM, "bridge")
    eggplant = [c for c in bridge if c.dimension("task") == "put_eggplant_in_basket"]
    assert len(eggplant) == 24 and {c.robot for c in eggplant} == {"widowx_sink_camera_setup"}
    assert {c.horizon for c in eggplant} == {120} and {c.build_kwargs["scene_name"] for c in eggplant} == {
        "bridge_table_1_v2"
    }
    others = [c for c in bridge if c not in eggplant]
    assert {c.horizon for c in others} == {60} and {c.build_kwargs["control_freq"] for c in bridge} == {5}


def test_each_cell_names_the_large_assets_it_needs():
    # §5: scene stages and four object meshes are large; frl_apartment drawer cells need none of them.
    frl = [c for c in VA.cells if c.build_kwargs["scene_name"] == "frl_apartment_stage_simple"]
    assert len(frl) == 5 * (54 + 27) and not any(c.assets for c in frl)
    bedroom = next(c for c in VA.cells if c.build_kwargs["scene_name"] == "modern_bedroom_no_roof")
    assert bedroom.assets == ("data/hab2_bench_assets/stages/modern_bedroom_no_roof.glb",)
    coke = VM.cells[0]
    assert "data/hab2_bench_assets/stages/google_pick_coke_can_1_v4.glb" in coke.assets
    # move near: triplet = id // 12, (source, target) = pairs[id % 6]; no_distractor keeps only those two
    near = {
        (c.dimension("variant"), c.reset_options["obj_init_options"]["episode_id"]): c for c in _cells(VA, "move_near")
    }
    assert "data/custom/models/opened_redbull_can/textured.dae" in near[("base", 24)].assets
    assert "data/custom/models/blue_plastic_bottle/textured.dae" in near[("no_distractor", 0)].assets  # bottle, pepsi
    assert not any(a.endswith(".dae") for a in near[("no_distractor", 3)].assets)  # pair (1, 2): pepsi, orange
    vm_near = {c.reset_options["obj_init_options"]["episode_id"]: c for c in _cells(VM, "move_near")}
    assert "data/custom/models/baked_opened_redbull_can/textured.dae" in vm_near[24].assets
    eggplant = next(c for c in VM.cells if c.env_id == "PutEggplantInBasketScene-v0")
    assert "data/custom/models/eggplant/textured.dae" in eggplant.assets


def test_every_cell_resets_with_the_upstream_episode_seed():
    # §4: every upstream episode draws RandomState(2022).randint(2**32)
    assert {c.seed for c in VM.cells + VA.cells} == {int(np.random.RandomState(2022).randint(2**32))}


def test_each_cell_belongs_to_a_catalog_task_with_the_same_native_horizon():
    from evaluator.protocol.catalogs import load_catalog

    catalog = load_catalog("simpler_env")
    for cell in VM.cells + VA.cells:
        assert catalog.task(cell.task).native_horizon == cell.horizon, cell.key
    assert Counter(c.task for c in _cells(VM, "drawer")) == {
        f"google_robot_{verb}_{where}_drawer": 36 for verb in ("open", "close") for where in ("top", "middle", "bottom")
    }
    assert {c.task for c in _cells(VA, "pick_coke_can")} == {
        f"google_robot_pick_{o}_coke_can" for o in ("horizontal", "standing", "vertical")
    }
