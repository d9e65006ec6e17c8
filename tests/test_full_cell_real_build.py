"""A full-matrix cell built by the adapter on the real ManiSkill2 0.5.3 (issue 14: "The worker's
construction of full cells is checked ... by one real ManiSkill2 0.5.3 build in CI where a comparable
option exists"). 0.5.3 has none of real2sim's env ids or scene kwargs; it shares the BaseEnv options
real2sim's fork kept (observation mode, frequencies, shader, camera configs, the time limit), so the
cell's kwargs are built there as PickCube-v0 (tests/sapien_scripts/build_full_cell.py) and read back
from the env that took them. A drawer cell, for its ray-tracing shader."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from evaluator.native.backends import worker_spec
from evaluator.native.environment import vulkan_layer_env
from evaluator.protocol.full_matrix import load_matrix

ROOT = Path(__file__).resolve().parents[1]
SAPIEN_PYTHON = worker_spec("maniskill2").python

pytestmark = pytest.mark.needs("sapien")


def test_a_drawer_cell_builds_on_the_real_maniskill2_with_the_options_it_shares():
    cell = next(c for c in load_matrix("visual_matching").cells if c.family == "drawer")
    assert cell.build_kwargs["shader_dir"] == "rt"  # upstream's drawer scripts ray-trace
    built = subprocess.run(
        [SAPIEN_PYTHON, str(ROOT / "tests" / "sapien_scripts" / "build_full_cell.py")],
        input=json.dumps(cell.as_dict()),
        env={**os.environ, **vulkan_layer_env()},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    report = json.loads(built.stdout)
    # "prepackaged_config=False", the cell's env id, the overlay found in the installed upstream's data
    assert report["asked_env_id"] == "OpenTopDrawerCustomInScene-v0" and report["prepackaged_config"] is False
    assert report["rgb_overlay_path"] == "/upstream/data/real_inpainting/open_drawer_a0.png"
    shared = ["camera_cfgs", "control_freq", "max_episode_steps", "obs_mode", "shader_dir", "sim_freq"]
    assert report["passed"] == shared
    assert report["not_in_maniskill2"] == [
        "control_mode",  # a Google Robot controller: 0.5.3's robots have other ones
        "disable_bad_material",
        "light_mode",
        "prepackaged_config",
        "rgb_overlay_cameras",
        "rgb_overlay_path",
        "robot",
        "scene_name",
        "station_name",
        "urdf_version",
    ]
    # The real env took each shared option as the cell gives it.
    took, kwargs = report["took"], cell.build_kwargs
    assert (took["sim_freq"], took["control_freq"]) == (kwargs["sim_freq"], kwargs["control_freq"]) == (513, 3)
    assert took["shader_dir"].endswith("vulkan_shader/rt")
    assert took["obs_mode"] == "image" and took["camera_observation"] == ["Segmentation", "depth", "rgb"]
    assert all("Segmentation" in textures for textures in took["textures"].values())  # add_segmentation
    assert took["max_episode_steps"] == cell.horizon == 113
    # Reset through the adapter, with the cell's seed and its pose options (0.5.3 takes and ignores them).
    reset = report["reset"]
    assert reset["episode_seed"] == cell.seed == 40194941
    assert reset["rgb"][:2] == ["uint8", [128, 128, 3]] and reset["rgb"][2] > 5  # a ray-traced picture, not blank
    assert reset["info"] == {}
