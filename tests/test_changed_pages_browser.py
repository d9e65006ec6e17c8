"""Issue 45, done when: "Screenshots of each changed page at both widths land in test-artifacts/", and no page wider
than the screen. Every page issue 45 changed, at 390 and 1440 px, as an operator, against a real daphne with a finished
campaign (its episodes tagged), a sequential campaign against it, and a labelled curve."""

import pytest

from rsi_client import Client
from tests.servers.browser import DESKTOP, PHONE, logged_in, shot
from tests.servers.site import daphne_site, make_token

pytestmark = pytest.mark.usefixtures("no_csp_violations")
PLAN = {
    "benchmark": "fetch",
    "tasks": ["reach", "push"],
    "seeds": [0, 1],
    "budget_mode": "decisions",
    "max_policy_calls": 3,
    "replan_interval": 1,
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with daphne_site(tmp_path_factory.mktemp("changed-pages"), users={"olga": ["operator"]}) as (base, _):
        client = Client(base, token=make_token(base))
        first = client.evaluate(policy="noop", labels={"run": "abc", "step": "1000"}, poll_s=0.5, **PLAN)
        second = client.evaluate(policy="stop", labels={"run": "abc", "step": "2000"}, poll_s=0.5, **PLAN)
        cells = [c["attempt"] for c in client.cells(first["id"])["cells"]]
        other = [c["attempt"] for c in client.cells(second["id"])["cells"]]
        yield base, first, second, cells, other


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["390", "1440"])
def test_every_changed_page_fits_the_screen_and_is_pictured(site, browser, viewport):
    base, first, second, cells, other = site
    page = logged_in(browser, base, "olga", viewport=viewport)
    pages = {
        "campaigns": "/",
        "campaign": f"/campaigns/{first['id']}/",
        "launch-from-campaign": f"/campaigns/new/?from={first['id']}",
        "compare": f"/campaigns/compare/?a={first['id']}&b={second['id']}",
        "curve": "/campaigns/curve/?label=run%3Dabc&x=step",
        "attempts": f"/attempts/?campaign={first['id']}",
        "review": f"/attempts/{cells[0]}/",
        "pair": f"/campaigns/compare/pair/?a={cells[0]}&b={other[0]}",
        "leaderboard": f"/leaderboards/{first['protocol_id']}/",
        "failure-modes": "/failure-modes/",
        "tokens": "/account/tokens/",
        "sim-to-real": "/sim-to-real/",
    }
    for name, path in pages.items():
        response = page.goto(base + path)
        assert response.status == 200, path
        page.wait_for_load_state("networkidle")
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"], path
        shot(page, f"issue45-{name}-{viewport['width']}")
