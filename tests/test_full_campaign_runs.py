"""Full-matrix cells run end to end through the real SAPIEN worker, the adapter and the evaluator, with
SimplerEnv's upstream replaced by its named double (tests/doubles/simpler_site.py): the only part that
cannot run here (issue 14: "A full VM campaign against that double runs end to end over two workers
and shows the family and variant aggregates and the grid; a killed cell stays an error in the
denominator")."""

import os
from pathlib import Path

import pytest

from evaluator.native.environment import simpler_pins
from evaluator.protocol.catalogs import load_catalog
from evaluator.protocol.full_matrix import asset_paths, load_matrix
from evaluator.running.recorder import do_run_attempt
from tests.doubles.simpler_site import DOUBLES, build_site
from tests.records import launch_full

ROOT = Path(__file__).resolve().parents[1]


def double_upstream_env(tmp_path: Path) -> dict[str, str]:
    """PYTHONPATH for the SAPIEN interpreter: the double's site, with every matrix env id and asset."""
    cells = load_matrix("visual_matching").cells + load_matrix("variant_aggregation").cells
    site = build_site(
        tmp_path, simpler_pins(load_catalog("simpler_env")), [c.env_id for c in cells], asset_paths(cells)
    )
    return {"PYTHONPATH": os.pathsep.join([str(site), str(DOUBLES)])}


@pytest.fixture
def double_upstream(tmp_path, monkeypatch, media_root):
    for name, value in double_upstream_env(tmp_path).items():
        monkeypatch.setenv(name, value)


@pytest.mark.django_db(transaction=True)
def test_a_full_cell_runs_through_the_real_worker_with_its_kwargs_and_options(simpler_env_host, double_upstream):
    campaign = launch_full(families=["drawer"], budget_mode="decisions", max_policy_calls=3, replan_interval=1)
    cell = campaign.attempts.order_by("cell_index")[5]
    finished = do_run_attempt(cell)
    assert (finished.status, finished.outcome, finished.error_type) == ("finished", "task_failure", "")
    assert finished.environment_steps == 3
    provenance = finished.provenance
    assert provenance["full_cell"] == cell.full_cell and provenance["env_id"] == cell.full_cell["env_id"]
    assert provenance["reset_info"]["scene_name"] == "double"  # what the double's env reported
