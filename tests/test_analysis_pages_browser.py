"""Issue 46's analyses on their pages, in chromium against a real daphne, at 390 and 1440 px: a full campaign's
"which variation hurts" (on the full campaign's report page), the launch preview against a baseline with the pairs
each difference needs, the leaderboard's groups beside Rank (UB), and the sim-to-real intervals. Each page fits the
screen and is pictured (test-artifacts/screenshots/issue46-*)."""

import pytest

from rsi_client import Client
from tests.servers.browser import DESKTOP, PHONE, logged_in, shot
from tests.servers.site import daphne_site, make_token, manage

pytestmark = pytest.mark.usefixtures("no_csp_violations")
PLAN = {"benchmark": "fetch", "tasks": ["reach"], "seeds": list(range(6)), "budget_mode": "decisions"}
PLAN |= {"max_policy_calls": 3, "replan_interval": 1}

# A full campaign in the site's own database: this host cannot run SimplerEnv, so the readiness verdict alone is
# stood in for (as tests/conftest.py's simpler_env_host does) and the cells are finished as stored records.
SEED_FULL = """
import evaluator.execution.launching as launching
launching.check_ready = lambda benchmark: None
launching.ensure_builtin_policies()
from tests.records import finish_cell, launch_full
campaign = launch_full("variant_aggregation", families=["move_near"])
for cell in campaign.attempts.order_by("cell_index"):
    dims = cell.full_cell["dimensions"]
    success = int(dims["episode_id"]) % 2 == 0 and dims["variant"] not in ("darker", "brighter")
    finish_cell(cell, "success" if success else "task_failure")
print(campaign.pk)
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with daphne_site(tmp_path_factory.mktemp("analysis-pages"), users={"olga": ["operator"]}) as (base, env):
        client = Client(base, token=make_token(base))
        first = client.evaluate(policy="noop", poll_s=0.5, **PLAN)
        second = client.evaluate(policy="stop", poll_s=0.5, **PLAN)
        full = int(manage(env, "shell", "-c", SEED_FULL).stdout.split()[-1])
        yield base, first, second, full


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["390", "1440"])
def test_the_analysis_pages_fit_the_screen_and_are_pictured(site, browser, viewport):
    base, first, second, full = site
    page = logged_in(browser, base, "olga", viewport=viewport)

    def visit(name: str, path: str) -> None:
        response = page.goto(base + path)
        assert response.status == 200, path
        page.wait_for_load_state("networkidle")
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"], path
        shot(page, f"issue46-{name}-{viewport['width']}")

    visit("variation", f"/campaigns/{full}/")
    factors = page.locator("#variation-factors tr.factor")
    assert factors.first.get_attribute("data-factor") == "lighting"
    assert "hurts" in factors.first.inner_text()
    page.locator("#variation-section").scroll_into_view_if_needed()
    shot(page, f"issue46-variation-table-{viewport['width']}")

    visit("leaderboard", f"/leaderboards/{first['protocol_id']}/")
    groups = page.locator("#leaderboard td.group").all_inner_texts()
    assert len(groups) == 2 and all(groups)

    page.goto(f"{base}/campaigns/new/?from={first['id']}&against={first['id']}")
    page.fill("#id_policy", "stop")
    page.click("#preview")
    page.wait_for_load_state("networkidle")
    assert page.locator("#preview-power tbody tr").count() == 3
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    page.locator("#preview-power").scroll_into_view_if_needed()
    shot(page, f"issue46-launch-preview-{viewport['width']}")

    visit("sim-to-real", "/sim-to-real/")
    assert page.locator(".metric-intervals").count() >= 1
