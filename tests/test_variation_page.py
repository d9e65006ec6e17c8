"""Which variation hurts, on the full campaign's report page and in the API (issue 46, point 1): "per factor ... and
per level, the success rate with its interval and the paired difference against the family's base condition on the
cells that pair (same task and episode), with its interval; the factors ordered by effect; each level linked to its
failing episodes. On the full campaign's report page and in the API. The same for any campaign whose cells differ by
a declared dimension."

And the power plan's twins (point 2): "On the launch form's preview (*against baseline*), in the API, and `rsi
plan`." """

from __future__ import annotations

import json

import pytest

from evaluator.execution.launching import do_launch_campaign
from evaluator.protocol.identity import configure
from evaluator.protocol.power import plan_power
from tests.records import finish_cell, launch_full


@pytest.fixture
def move_near(simpler_env_host):
    """Variant Aggregation's move-near family (600 cells), run by a made-up policy: the base succeeds on even
    episodes; the lighting variants fail everywhere; the backgrounds repeat the base except on four episodes, two
    each way; every other variant repeats the base."""
    campaign = launch_full("variant_aggregation", families=["move_near"])
    for cell in campaign.attempts.order_by("cell_index"):
        dimensions = cell.full_cell["dimensions"]
        episode, variant = int(dimensions["episode_id"]), dimensions["variant"]
        success = episode % 2 == 0
        if variant in ("darker", "brighter"):
            success = False
        elif variant.startswith("background") and episode in (0, 2, 1, 3):
            success = not success
        finish_cell(cell, "success" if success else "task_failure")
    return campaign


def test_the_api_ranks_lighting_first_with_an_interval_below_zero_and_a_harmless_background_around_it(
    operator, move_near
):
    found = operator.get(f"/api/v1/campaigns/{move_near.pk}/variation").json()
    assert (found["dimension"], found["base"], found["grouped"]) == ("variant", "base", True)
    assert found["base_success_rate"]["numerator"] == 30 and found["base_success_rate"]["denominator"] == 60
    first = found["factors"][0]
    assert first["factor"] == "lighting"
    assert first["effect"] == -0.5 and first["interval_high"] < 0
    assert first["base_cells_paired"] == 60
    background = next(f for f in found["factors"] if f["factor"] == "background")
    assert background["effect"] == 0 and background["interval_low"] < 0 < background["interval_high"]
    darker = next(level for level in first["levels"] if level["level"] == "darker")
    assert darker["against_base"]["only_a"] == 30 and darker["against_base"]["only_b"] == 0
    assert darker["against_base"]["verdict"] == "regressed"
    assert darker["failure_count"] == 60 and len(darker["failing_attempts"]) == 20
    camera = next(f for f in found["factors"] if f["factor"] == "camera")
    assert camera["scored"] is False  # run, not scored by upstream's metric

    # Each level's link lists exactly its failing episodes in the attempts table (and the API's twin).
    table = operator.get(darker["failing_url"].replace("http://testserver", "")).content.decode()
    assert 'id="filter-cell" value="variant=darker"' in table  # the filter is a field of the table's form
    rows = operator.get(
        f"/api/v1/attempts?campaign={move_near.pk}&outcome=task_failure&cell=variant%3Ddarker&sort=id"
    ).json()
    assert rows["count"] == 60
    assert {row["attempt"] for row in rows["attempts"]} >= set(darker["failing_attempts"])


def test_the_report_page_shows_the_factors_most_harmful_first_with_links_to_failing_episodes(operator, move_near):
    page = operator.get(f"/campaigns/{move_near.pk}/").content.decode()
    section = page[page.index('<section id="variation-section">') :]
    factors = [part.split('"')[0] for part in section.split('data-factor="')[1:]]
    assert factors[0] == "lighting"
    first_row = section[section.index('data-factor="lighting"') :]
    assert "<b>hurts</b>" in first_row[: first_row.index("</tr>")]
    background_row = section[section.index('data-factor="background"') :]
    assert "cannot tell" in background_row[: background_row.index("</tr>")]
    assert f"?campaign={move_near.pk}&amp;outcome=task_failure&amp;cell=variant%3Ddarker" in section


def test_any_dimension_of_the_matrix_against_a_named_base_and_a_dimension_it_lacks_is_refused(operator, move_near):
    by_variant = operator.get(f"/api/v1/campaigns/{move_near.pk}/variation?dimension=variant&base=base").json()
    (variant,) = by_variant["factors"]  # not grouped: one factor, each variant a level
    assert variant["factor"] == "variant" and len(variant["levels"]) == 9
    refused = operator.get(f"/api/v1/campaigns/{move_near.pk}/variation?dimension=orientation")
    assert refused.status_code == 422 and refused.json()["code"] == "invalid_factor"
    assert "one of variant, episode_id" in refused.json()["reasons"][0]
    wrong_base = operator.get(f"/api/v1/campaigns/{move_near.pk}/variation?dimension=variant&base=sunny")
    assert wrong_base.status_code == 422 and "variant has no level 'sunny'" in wrong_base.json()["reasons"][0]


def test_a_campaign_of_tasks_and_seeds_has_no_variations(operator, simpler_env_host):
    campaign = do_launch_campaign(
        name="plain", benchmark="fetch", task_names=["reach"], seeds=[0], policy="noop", config=configure("fetch")
    )
    refused = operator.get(f"/api/v1/campaigns/{campaign.pk}/variation")
    assert refused.status_code == 422 and refused.json()["code"] == "not_a_full_campaign"


def baseline_campaign(successes: int, seeds: int = 40):
    campaign = do_launch_campaign(
        name="baseline",
        benchmark="fetch",
        task_names=["reach"],
        seeds=list(range(seeds)),
        policy="noop",
        config=configure("fetch", budget_mode="decisions"),
    )
    for cell in campaign.attempts.order_by("seed"):
        finish_cell(cell, "success" if cell.seed < successes else "task_failure")
    return campaign


def test_the_plan_api_takes_a_baseline_campaigns_rate_and_cells_or_a_stated_rate(operator, catalogs):
    baseline = baseline_campaign(12)  # 12 of 40: 0.3
    found = operator.get(f"/api/v1/plan?baseline={baseline.pk}&difference=0.3").json()
    expected = plan_power(0.3, 0.3, cells=40).as_dict()
    assert found["fixed_design"] == expected["fixed_design"]
    assert [row["pairs"] for row in found["fixed_design"]] == [50, 64]
    assert [row["fits_baseline"] for row in found["fixed_design"]] == [False, False]  # 40 cells are too few
    assert found["baseline_success_rate"]["numerator"] == 12 and found["baseline_cells"] == 40
    assert found["sequential"]["most_pairs"] == 40
    stated = operator.get("/api/v1/plan?baseline_rate=0.3&difference=0.3").json()
    assert stated["fixed_design"][0]["pairs"] == 50 and stated["baseline_cells"] is None
    both = operator.get(f"/api/v1/plan?baseline={baseline.pk}&baseline_rate=0.3&difference=0.1")
    assert both.status_code == 422 and both.json()["reasons"] == [
        "give a baseline campaign or a baseline rate, not both"
    ]
    impossible = operator.get("/api/v1/plan?baseline_rate=0.95&difference=0.1").json()
    assert impossible["code"] == "invalid_design" and "is 1.05, not a rate" in impossible["reasons"][0]


def test_the_launch_preview_against_a_baseline_shows_the_pairs_each_difference_needs(operator, catalogs):
    baseline = baseline_campaign(12)
    body = {
        "benchmark": "fetch",
        "policy": "noop",
        "tasks": ["reach"],
        "seeds": list(range(40)),
        "against": baseline.pk,
    }
    body["budget_mode"] = "decisions"
    preview = operator.post("/api/v1/campaigns/preview", json.dumps(body), content_type="application/json").json()
    power = preview["sequential"]["power"]
    assert [plan["difference"] for plan in power] == [0.05, 0.1, 0.2]
    assert power[2]["fixed_design"] == plan_power(0.3, 0.2, cells=40).as_dict()["fixed_design"]
    form = {
        "benchmark": "fetch",
        "policy": "noop",
        "tasks": ["reach"],
        "seed": "0",
        "seed_list": ", ".join(map(str, range(40))),
        "against": str(baseline.pk),
        "budget_mode": "decisions",
        "preview": "1",
    }
    page = operator.post("/campaigns/new/", form).content.decode()
    assert 'id="preview-power"' in page and "against the baseline's 40 cells" in page


def test_the_preview_plans_the_difference_asked_for_and_says_why_one_cannot_be(operator, catalogs):
    baseline = baseline_campaign(12)
    body = {"benchmark": "fetch", "policy": "noop", "tasks": ["reach"], "seeds": list(range(40))}
    body |= {"against": baseline.pk, "budget_mode": "decisions", "detect": 0.15}
    preview = operator.post("/api/v1/campaigns/preview", json.dumps(body), content_type="application/json").json()
    assert [plan["difference"] for plan in preview["sequential"]["power"]] == [0.15, 0.05, 0.1, 0.2]
    assert (
        preview["sequential"]["power"][0]["fixed_design"] == plan_power(0.3, 0.15, cells=40).as_dict()["fixed_design"]
    )
    impossible = operator.post(
        "/api/v1/campaigns/preview", json.dumps(body | {"detect": 0.0}), content_type="application/json"
    ).json()
    assert impossible["sequential"]["power_refused"] == ["the difference to detect must not be 0"]
    assert len(impossible["sequential"]["power"]) == 3  # the standard differences still planned
    alone = {key: value for key, value in body.items() if key != "against"}
    refused = operator.post("/api/v1/campaigns/preview", json.dumps(alone), content_type="application/json")
    assert refused.status_code == 422
    assert "a difference to detect is planned against a baseline: give the baseline campaign too" in str(
        refused.json()["reasons"]
    )
