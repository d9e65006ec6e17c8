"""Issue 45, item 8: "Phone width: the success rate is off screen on the campaigns list, the campaign aggregates, the
comparison's per-task rows (where 'side by side' is hidden too) and the executor's 'why' column; the pair page stacks A
above B so both are never in view at one step: put them side by side, smaller." In chromium at 390 px against a real
daphne: each named thing lies within the screen's 390 px without scrolling."""

import pytest

from rsi_client import Client
from tests.servers.browser import PHONE, logged_in, shot, wait_until
from tests.servers.site import daphne_site, make_token

pytestmark = pytest.mark.usefixtures("no_csp_violations")
PLAN = {"benchmark": "fetch", "tasks": ["reach", "push"], "seeds": [0], "budget_mode": "decisions"}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with daphne_site(tmp_path_factory.mktemp("phone"), users={"olga": ["operator"]}) as (base, _):
        client = Client(base, token=make_token(base))
        a = client.evaluate(policy="noop", max_policy_calls=2, replan_interval=1, poll_s=0.5, **PLAN)
        b = client.evaluate(policy="stop", max_policy_calls=2, replan_interval=1, poll_s=0.5, **PLAN)
        yield base, a, b


def right_edge(page, selector: str) -> float:
    box = page.locator(selector).first.bounding_box()
    return box["x"] + box["width"]


def test_success_rates_and_the_why_column_are_in_view_at_390(site, browser):
    base, a, b = site
    page = logged_in(browser, base, "olga", viewport=PHONE)
    page.goto(base + "/")
    assert right_edge(page, "td.rate") <= 390
    page.goto(f"{base}/campaigns/{a['id']}/")
    assert right_edge(page, "#aggregates tbody tr.overall td") <= 390
    shot(page, "campaign-aggregates-390")
    page.goto(f"{base}/campaigns/compare/?a={a['id']}&b={b['id']}")
    assert right_edge(page, '#paired-rows tr[data-task="reach"] td:nth-child(3)') <= 390  # B's success
    assert right_edge(page, '#paired-rows tr[data-task="reach"] a[href^="#pairs-"]') <= 390  # to the pairs
    shot(page, "compare-per-task-390")
    page.goto(f"{base}/campaigns/new/")
    assert right_edge(page, "#readiness tbody tr td:last-child") <= 390
    assert page.evaluate("document.documentElement.scrollWidth") <= 390


def test_the_pair_page_puts_a_beside_b(site, browser):
    base, a, b = site
    client = Client(base, token=make_token(base))
    first_a, first_b = (client.cells(c["id"])["cells"][0]["attempt"] for c in (a, b))
    page = logged_in(browser, base, "olga", viewport=PHONE)
    page.goto(f"{base}/campaigns/compare/pair/?a={first_a}&b={first_b}")
    wait_until(page, "document.querySelectorAll('.pair-grid .screen').length === 2")
    left, right = (s.bounding_box() for s in page.locator(".pair-grid .screen").all())
    assert left["y"] == right["y"] and left["x"] + left["width"] <= right["x"]  # side by side, at one height
    assert right["x"] + right["width"] <= 390
    shot(page, "pair-side-by-side-390")
