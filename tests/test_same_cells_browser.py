"""Issue 45, item 1: "Launch the same cells again. An operator retyped tasks, seeds and sensors for each new campaign.
'Run another policy on these cells' from a campaign page ...: the launch form filled from that campaign's plan, only
the policy to choose, and *against baseline* offered. 'Against baseline campaign' is a bare number field today: a
picker that fills the baseline's cells. Every campaign page links to compare it with another of its identity."
In chromium at 1440 px against a real daphne, as an operator."""

import json
from pathlib import Path

import pytest

from rsi_client import Client
from tests.servers.browser import VISIBLE_TASKS, logged_in, query, shot, wait_until
from tests.servers.site import daphne_site, make_token

pytestmark = pytest.mark.usefixtures("no_csp_violations")
PLAN = {
    "benchmark": "fetch",
    "tasks": ["reach", "push"],
    "seeds": [4, 9],
    "policy": "noop",
    "budget_mode": "decisions",
    "max_policy_calls": 3,
    "replan_interval": 1,
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("same-cells")
    with daphne_site(tmp, users={"olga": ["operator"]}) as (base, env):
        client = Client(base, token=make_token(base))
        baseline = client.evaluate(poll_s=0.5, **PLAN)
        yield base, Path(env["DATABASE_URL"].removeprefix("sqlite:///")), baseline


def checked_tasks(page) -> list[str]:
    return page.evaluate("Array.from(document.querySelectorAll('#id_tasks input:checked')).map(b => b.value)")


def test_another_policy_runs_on_a_campaigns_cells_against_it_with_only_the_policy_chosen(site, browser):
    base, db, baseline = site
    page = logged_in(browser, base, "olga")
    page.goto(f"{base}/campaigns/{baseline['id']}/")
    page.click("#run-again")
    page.wait_for_selector("#from-campaign")
    assert page.input_value("#id_benchmark") == "fetch" and sorted(checked_tasks(page)) == ["push", "reach"]
    assert page.input_value("#id_seed_list") == "4, 9" and page.input_value("#id_policy") == ""
    assert page.input_value("#id_budget_mode") == "decisions" and page.input_value("#id_max_policy_calls") == "3"
    shot(page, "launch-from-campaign-1440")
    page.click("#against-from")  # against baseline, offered
    page.wait_for_selector("#from-campaign >> text=It runs against campaign")
    assert page.input_value("#id_against") == str(baseline["id"])
    page.fill("#id_policy", "stop")
    page.click("#preview")
    page.click("#create")
    page.wait_for_selector("#sequential-section")
    rows = query(db, "select task_names, seeds, protocol_id, sequential from evaluator_campaign order by id")
    (tasks, seeds, protocol, sequential), (new_tasks, new_seeds, new_protocol, new_sequential) = rows
    # The same cells (the form sends tasks in catalog order; cells pair by task and seed) under the same identity.
    assert (sorted(json.loads(new_tasks)), new_seeds, new_protocol) == (sorted(json.loads(tasks)), seeds, protocol)
    assert json.loads(new_sequential)["baseline"] == baseline["id"] and sequential in ("{}", "")


def test_the_baseline_picker_fills_the_baselines_cells(site, browser):
    base, _, baseline = site
    page = logged_in(browser, base, "olga")
    page.goto(f"{base}/campaigns/new/")
    page.select_option("#id_benchmark", "maniskill2")
    choices = page.evaluate("Array.from(document.querySelectorAll('#baseline-choices option')).map(o => o.value)")
    assert str(baseline["id"]) in choices
    page.click("#id_against")
    page.keyboard.type(str(baseline["id"]))
    wait_until(page, "!document.getElementById('baseline-filled').hidden")
    assert page.input_value("#id_benchmark") == "fetch"
    assert page.evaluate(VISIBLE_TASKS) == ["pick_and_place", "push", "reach", "slide"]
    assert sorted(checked_tasks(page)) == ["push", "reach"] and page.input_value("#id_seed_list") == "4, 9"
    assert page.input_value("#id_max_policy_calls") == "3" and page.input_value("#id_replan_interval") == "1"
    shot(page, "launch-baseline-picker-1440")


def test_a_campaign_page_links_to_comparing_it_with_another_of_its_identity(site, browser):
    base, db, baseline = site
    client = Client(base, token=make_token(base))
    same = client.launch(start=False, **{**PLAN, "policy": "stop"})["id"]
    other = client.launch(start=False, **{**PLAN, "max_policy_calls": 2})["id"]  # another identity
    page = logged_in(browser, base, "olga")
    page.goto(f"{base}/campaigns/{baseline['id']}/")
    page.click("#compare-with")
    page.wait_for_selector("#compare-picker")
    assert page.input_value("#pick-a") == str(baseline["id"])
    offered = page.evaluate("Array.from(document.querySelectorAll('#pick-b option')).map(o => o.value).filter(Boolean)")
    identity = baseline["protocol_id"]
    rows = query(
        db,
        "select c.id, p.protocol_id from evaluator_campaign c join evaluator_protocolidentity p "
        "on p.id = c.protocol_id order by c.created_at desc, c.id desc",
    )
    assert offered == [str(pk) for pk, found in rows if found == identity and pk != baseline["id"]]
    assert str(same) in offered and str(other) not in offered
    shot(page, "compare-from-campaign-1440")
