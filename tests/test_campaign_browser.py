"""Campaigns in a real browser against a real daphne: repeats over seeds, aggregated; the preview
refusing what Create refuses; an unrunnable benchmark refused at launch with its reason; cells
that follow their attempts in place (issue 12: Done when)."""

from pathlib import Path

import pytest

from tests.servers.browser import VISIBLE_TASKS, choose_tasks, logged_in, query, shot, wait_until
from tests.servers.site import daphne_site

pytestmark = pytest.mark.usefixtures("no_csp_violations")

TASKS = ["pick_and_place", "push", "reach", "slide"]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("campaigns")
    with daphne_site(tmp, users={"olga": ["operator"]}) as (base, env):
        yield base, Path(env["DATABASE_URL"].removeprefix("sqlite:///"))


def _fill(page, base: str, benchmark: str = "fetch") -> None:
    page.goto(base + "/campaigns/new/")
    page.select_option("#id_benchmark", benchmark)


def test_a_three_seed_four_task_campaign_is_created_started_and_aggregated_in_place(site, browser):
    base, db = site
    page = logged_in(browser, base, "olga")
    _fill(page, base)
    # "The task list follows the chosen benchmark, with 'all tasks'."
    # Issue 35, point 6: one checkbox per task of the chosen benchmark, no Ctrl-click.
    assert page.evaluate(VISIBLE_TASKS) == ["pick_and_place", "push", "reach", "slide"]
    page.check("#id_all_tasks")
    assert page.is_disabled('#id_tasks input[value="reach"]')
    page.fill("#id_seed", "20")
    page.fill("#id_repeats", "3")
    page.fill("#id_policy", "noop")
    page.select_option("#id_budget_mode", "decisions")
    page.fill("#id_max_policy_calls", "8")
    page.fill("#id_replan_interval", "1")
    page.click("#preview")
    # "shown in the preview with the cell count"
    assert page.inner_text("#preview-cells").startswith("12 cells: 4 tasks × 3 seeds")
    assert page.inner_text("#preview-seeds") == "20, 21, 22"
    shot(page, "launch-preview-repeats")
    page.click("#create")
    page.wait_for_selector("#start-all")
    assert page.locator(".cell[data-status=pending]").count() == 12
    assert query(db, "select seeds from evaluator_campaign") == [("[20, 21, 22]",)]

    page.click("#start-all")
    page.wait_for_load_state()
    wait_until(page, "document.getElementById('campaign').dataset.connected === '1'")
    navigations = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url))
    wait_until(page, "document.querySelectorAll('.cell[data-status=finished]').length === 12", timeout=300)
    # "Cells update in place over the existing WebSocket ... the page no longer reloads"
    assert navigations == []
    assert page.inner_text("#progress") == "12/12 cells finished"
    assert page.locator("#start-all").count() == 0
    rows = {
        # The success rate comes first (in view on a phone), then the selected cells.
        row.locator("th").inner_text(): row.locator("td").nth(1).inner_text()
        for row in page.locator("#aggregates tbody tr").all()
    }
    assert rows == {"all tasks": "12", **{task: "3" for task in TASKS}}
    # Finished cells show their last frame.
    wait_until(page, "Array.from(document.querySelectorAll('.cell .picture img')).every(i => i.naturalWidth === 640)")
    assert page.locator(".cell .picture img").count() == 12
    shot(page, "campaign-repeats-finished")
    cells = query(
        db,
        "select t.name, a.seed from evaluator_attempt a join evaluator_task t on t.id = a.task_id order by cell_index",
    )
    assert cells == [(task, seed) for task in TASKS for seed in (20, 21, 22)]


def test_the_preview_refuses_what_create_refuses_with_every_problem(site, browser):
    base, db = site
    page = logged_in(browser, base, "olga")
    campaigns = query(db, "select count(*) from evaluator_campaign")
    _fill(page, base)
    choose_tasks(page, ["reach"])
    page.fill("#id_policy", "fetch-oracle")  # reads privileged state: refused under the RGB track
    page.fill("#id_seed_list", "4, 4")
    page.select_option("#id_budget_mode", "decisions")
    page.fill("#id_max_policy_calls", "1000000000")
    page.click("#preview")
    errors = page.inner_text("#form-errors")
    assert "seed 4 is listed twice" in errors and "max policy calls (C or D) must be at most 10000" in errors
    assert page.locator("#create").count() == 0 and page.locator("#resolved-identity").count() == 0
    page.fill("#id_max_policy_calls", "10")
    page.click("#preview")
    errors = page.inner_text("#form-errors")
    assert "seed 4 is listed twice" in errors and "reads privileged state" in errors
    assert page.locator("#create").count() == 0
    shot(page, "launch-refused")
    assert query(db, "select count(*) from evaluator_campaign") == campaigns


def test_an_unrunnable_benchmark_is_refused_at_launch_with_its_reason(site, browser):
    base, db = site
    page = logged_in(browser, base, "olga")
    campaigns = query(db, "select count(*) from evaluator_campaign")
    _fill(page, base, "simple_humanoid")
    row = page.locator('#readiness tr[data-benchmark="simple_humanoid"]')
    assert row.get_attribute("data-ready") == "0" and "RSI_SIMPLE_CHECKOUT is not set" in row.inner_text()
    # Issue 35, point 7: the benchmark list marks it; its fast mode's seed is filled in; its plan previews, and
    # only Create is refused, with the reason.
    assert "(cannot run here)" in page.inner_text('#id_benchmark option[value="simple_humanoid"]')
    assert page.input_value("#id_seed") == "20260907"
    choose_tasks(page, ["G1WholebodyBendPickMP-v0"])
    page.fill("#id_policy", "noop")
    page.click("#preview")
    assert page.locator("#form-errors").count() == 0
    assert page.inner_text("#resolved-identity").startswith("simple-")
    refused = page.inner_text("#create-refused")
    assert "this executor cannot run simple_humanoid: RSI_SIMPLE_CHECKOUT is not set" in refused
    assert page.locator("#create").count() == 0
    assert query(db, "select count(*) from evaluator_campaign") == campaigns
    page.goto(base + "/benchmarks/")
    assert page.get_attribute("#ready-simple_humanoid", "data-ready") == "0"
    assert page.get_attribute("#ready-fetch", "data-ready") == "1"
