"""Full SimplerEnv campaigns: the native matrix frozen as predeclared cells (issue 14, points 1-3, 5).
SimplerEnv's upstream cannot run on this machine (no assets, no GPU), so launch checks see a host
where it can by standing in for the readiness verdict alone (`simpler_env_host`); every other check
runs as it does for any campaign."""

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.utils import timezone

from evaluator.execution.launching import do_launch_campaign, do_launch_full_campaign, ensure_builtin_policies
from evaluator.native.backends import reset_options
from evaluator.protocol.catalogs import load_catalog
from evaluator.protocol.errors import CatalogError, LaunchRefused
from evaluator.protocol.full_matrix import load_matrix
from evaluator.protocol.identity import configure
from evaluator.records.models import Attempt, Campaign
from tests.records import finish_cell, launch_full

# The subject here is the records, the API and the pages: Fetch renders small (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("small_fetch_render")

ROOT = Path(__file__).resolve().parents[1]


def test_a_full_campaign_freezes_every_cell_of_the_matrix_in_order(simpler_env_host):
    campaign = launch_full()
    matrix = load_matrix("visual_matching")
    attempts = list(campaign.attempts.select_related("task").order_by("cell_index"))
    assert len(attempts) == 960 and {a.status for a in attempts} == {"pending"}
    assert [a.full_cell for a in attempts] == [cell.as_dict() for cell in matrix.cells]
    assert [a.task.name for a in attempts] == [cell.task for cell in matrix.cells]
    assert {a.seed for a in attempts} == {40194941}
    assert campaign.mode == Campaign.Mode.FULL
    assert campaign.protocol.protocol_id == f"simpler-full-visual-matching/matrix-{matrix.sha256[:12]}/rgb/v1"
    assert campaign.provenance["full_matrix"] == {
        "protocol": "visual_matching",
        "file": "simpler_env_full.json",
        "sha256": matrix.sha256,
        "families": ["pick_coke_can", "move_near", "drawer", "put_apple_closed_top_drawer", "bridge"],
        "cells": 960,
    }
    # Budgets are each task's: the drawer cells' native horizon is 113.
    drawer = next(a for a in attempts if a.full_cell["family"] == "drawer")
    assert drawer.budget["native_horizon"] == 113


def test_a_subset_of_families_and_the_variant_aggregation_matrix(simpler_env_host):
    campaign = launch_full("variant_aggregation", families=["drawer", "put_apple_closed_top_drawer"])
    assert campaign.attempts.count() == 378 + 189
    assert campaign.provenance["full_matrix"]["families"] == ["drawer", "put_apple_closed_top_drawer"]
    with pytest.raises(CatalogError, match="no family bridge in variant_aggregation"):
        launch_full("variant_aggregation", families=["bridge"])


def test_it_is_never_pooled_with_the_prepackaged_track(simpler_env_host):
    full = launch_full(families=["bridge"])
    fast = do_launch_campaign(
        name="fast",
        benchmark="simpler_env",
        task_names=["widowx_spoon_on_towel"],
        seeds=[0],
        policy="noop",
        config=configure("simpler_env"),
    )
    assert full.protocol_id != fast.protocol_id


def test_a_configuration_of_other_matrix_data_is_refused_and_nothing_is_stored(simpler_env_host):
    stale = configure("simpler_env", full_protocol="visual_matching", matrix_sha="0123456789ab")
    with pytest.raises(LaunchRefused, match="not visual_matching over this matrix data"):
        do_launch_full_campaign(name="x", protocol="visual_matching", policy="noop", config=stale)
    assert not Campaign.objects.exists()


def test_launch_refuses_where_simpler_env_cannot_run(catalogs):
    # No stand-in: this machine has no SimplerEnv upstream, and says so before any cell exists.
    ensure_builtin_policies()
    with pytest.raises(LaunchRefused, match="cannot run simpler_env"):
        launch_full(families=["bridge"])
    assert not Attempt.objects.exists()


def test_the_worker_is_asked_to_build_the_cell_with_its_assets_checked(simpler_env_host):
    attempt = launch_full(families=["move_near"]).attempts.select_related("task").order_by("cell_index")[24]
    options = reset_options("simpler_env", attempt.task, 80, load_catalog("simpler_env"), attempt.full_cell)
    cell = attempt.full_cell
    # The build (env id, kwargs, assets) apart from what each reset applies (issue 54: a warm worker keeps the build).
    assert options["full_cell"] == {k: cell[k] for k in ("env_id", "build_kwargs")}
    assert options["cell_reset"] == {k: cell[k] for k in ("key", "reset_options")}
    assert options["env_id"] == cell["env_id"] and cell["key"] == "vm/move_near/urdf_version=None/episode_id=24"
    assert "data/custom/models/baked_opened_redbull_can/textured.dae" in options["required_assets"]
    assert options["required_assets"] == cell["assets"]  # checked by the worker before any policy call


def test_the_campaign_command_previews_a_full_plan_and_stores_nothing(tmp_path):
    env = {
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "RSI_MEDIA_ROOT": str(tmp_path / "media"),
        "RSI_SECRET_KEY": "test",
        "PATH": "/usr/bin:/bin",
    }
    manage = [sys.executable, "manage.py"]
    for step in (["migrate", "-v0"], ["load_catalogs"]):
        subprocess.run(manage + step, cwd=ROOT, env=env, check=True, capture_output=True)
    args = ["campaign", "simpler_env", "--full", "variant_aggregation", "--policy", "noop"]
    preview = subprocess.run(manage + args + ["--preview", "--json"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert preview.returncode == 0, preview.stderr
    plan = json.loads(preview.stdout)
    assert plan["cells"] == 1992 and plan["scored"] == 1722
    assert plan["families"]["move_near"] == {"cells": 600, "scored": 480}
    assert plan["asset_check"] != "ok" and plan["missing_assets"] == {}  # no upstream here to ask
    created = subprocess.run(manage + args, cwd=ROOT, env=env, capture_output=True, text=True)
    assert created.returncode == 2 and "cannot run simpler_env" in created.stderr
    both = subprocess.run(manage + args + ["--tasks", "all"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert both.returncode == 2 and "either --tasks or --full" in both.stderr


@pytest.fixture
def reviewer(client, simpler_env_host):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    user = get_user_model().objects.create_user("rita", password="pw")
    user.groups.add(Group.objects.get(name="reviewer"))
    client.force_login(user)
    return client


def test_the_campaign_page_shows_the_matrix_by_family_variant_and_heat_map(reviewer):
    campaign = launch_full(families=["bridge"])
    cells = list(campaign.attempts.order_by("cell_index"))
    spoon = [a for a in cells if a.full_cell["dimensions"]["task"] == "spoon_on_towel"]
    for cell in spoon[:12]:
        finish_cell(cell, "success")
    for cell in spoon[12:14]:
        finish_cell(cell, "infrastructure_error")  # could not run: stays in the denominator
    page = reviewer.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert 'id="matrix-families"' in page and "never topped up" in page
    # success / attempted, errors included: 12 / 14 for the family, 14 attempted of 96
    errors = 'title="protocol term: infrastructure_error">infrastructure error</span> 2'
    assert "12/14 = 0.857" in page and errors in page
    assert page.count('class="heat-map"') == 1 and "bridge: task x episode_id" in page
    assert page.count('title="1/1"') == 12 and page.count('title="0/1"') == 2
    assert f"?campaign={campaign.pk}&amp;sort=id" in page and "all 96 cells" in page
    assert page.count('class="cell ') == 0  # none runs now: no cards, the heat map holds them


def test_the_page_estimates_the_time_left_at_the_pace_so_far(reviewer):
    # "progress and ETA": mean duration of the finished cells, over the cells running now
    campaign = launch_full(families=["bridge"])
    first, second, third, fourth = campaign.attempts.order_by("cell_index")[:4]
    finish_cell(first, "task_failure", duration_s=30)
    finish_cell(second, "task_failure", duration_s=50)
    page = reviewer.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "About 3760 s left at the pace so far." in page  # 40 s x 94 cells, one at a time
    Attempt.objects.filter(pk__in=[third.pk, fourth.pk]).update(status="running", started_at=timezone.now())
    page = reviewer.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "About 1880 s left at the pace so far." in page  # two running at once


def test_a_campaign_planned_from_other_matrix_data_is_shown_from_its_own_records(reviewer, monkeypatch):
    campaign = launch_full(families=["bridge"])
    for cell in campaign.attempts.order_by("cell_index")[:3]:
        finish_cell(cell, "success")
    planned = reviewer.get(f"/campaigns/{campaign.pk}/").content.decode()
    changed = dataclasses.replace(load_matrix("visual_matching"), sha256="0" * 64, cells=())
    monkeypatch.setattr("evaluator.records.queries.load_matrix", lambda protocol: changed)
    recorded = reviewer.get(f"/campaigns/{campaign.pk}/").content.decode()
    assert "3/3 = 1.000" in recorded and recorded.count('title="1/1"') == 3
    assert _section(recorded, "matrix-section") == _section(planned, "matrix-section")


def _section(page: str, section_id: str) -> str:
    start = page.index(f'<section id="{section_id}">')
    return page[start : page.index("</section>", start)]


def test_a_1992_cell_matrix_page_runs_a_fixed_number_of_queries(reviewer, django_assert_max_num_queries):
    campaign = launch_full("variant_aggregation")
    with django_assert_max_num_queries(20):
        response = reviewer.get(f"/campaigns/{campaign.pk}/")
    page = response.content.decode()
    assert response.status_code == 200 and "1992 predeclared cells" in page
    assert page.count('class="heat-map"') == 3 + 1 + 1 + 1  # coke per orientation, move near, drawer, apple
    assert "Run, not scored" in page and "1722" in page


@pytest.fixture
def operator(client, simpler_env_host):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    user = get_user_model().objects.create_user("olga", password="pw")
    user.groups.add(Group.objects.get(name="operator"))
    client.force_login(user)
    return client


FORM = {"benchmark": "simpler_env", "seed": "0", "policy": "noop", "full": "visual_matching", "families": ["bridge"]}


def test_the_launch_form_previews_and_creates_a_full_campaign(operator):
    # "full campaigns in the launch form ...: the preview shows the cell count per family and the assets the host lacks"
    page = operator.post("/campaigns/new/", {**FORM, "preview": "1"}).content.decode()
    assert 'id="preview-full"' in page and "<b>96</b> cells of Visual Matching (96 scored)" in page
    assert '<tr data-family="bridge"><td>bridge</td><td>96</td><td>96</td></tr>' in page
    assert 'id="asset-check"' in page  # this host has no upstream to ask which files it has
    assert "simpler-full-visual-matching/matrix-" in page
    response = operator.post("/campaigns/new/", {**FORM, "create": "1"})
    campaign = Campaign.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/campaigns/{campaign.pk}/"
    assert campaign.mode == "full" and campaign.attempts.count() == 96


def test_the_launch_form_refuses_a_full_matrix_of_another_benchmark_and_unknown_families(operator):
    page = operator.post("/campaigns/new/", {**FORM, "benchmark": "fetch", "preview": "1"}).content.decode()
    assert "full matrices exist for simpler_env only" in page
    page = operator.post(
        "/campaigns/new/", {**FORM, "full": "variant_aggregation", "families": ["bridge"], "preview": "1"}
    ).content.decode()
    assert "no family bridge in variant_aggregation" in page
    assert not Campaign.objects.exists()
