"""Issue 45, item 7: "Plots where people would rather look than read: per-task success with interval bars on the
campaign page and the comparison; the leaderboard draws each row's interval so ties are visible (today two policies at
3/8 and 0/8 are both '1 tied' with nothing showing why)." In chromium at 1440 and 390 px against a real daphne."""

from pathlib import Path

import pytest

from evaluator.protocol.aggregates import wilson_interval
from rsi_client import Client
from tests.servers.browser import DESKTOP, PHONE, logged_in, query, shot
from tests.servers.site import daphne_site, make_token

pytestmark = pytest.mark.usefixtures("no_csp_violations")
PLAN = {"benchmark": "fetch", "tasks": ["reach", "push"], "seeds": [0, 1, 2, 3], "budget_mode": "decisions"}


def finish(db: Path, campaign: int, successes: int) -> None:
    """Store the campaign's cells as finished, the first `successes` of them successes (its evidence manifest too)."""
    for number, (pk,) in enumerate(
        query(db, "select id from evaluator_attempt where campaign_id = ? order by id", campaign)
    ):
        query(
            db,
            "insert into evaluator_artifact (attempt_id, kind, path, sha256, size, created_at) "
            "values (?, 'manifest', ?, '0', 0, datetime('now'))",
            pk,
            f"attempts/{pk}/manifest.json",
        )
        outcome = "success" if number < successes else "task_failure"
        query(db, "update evaluator_attempt set status = 'finished', outcome = ? where id = ?", outcome, pk)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """Two policies' campaigns on the same 8 cells: 3/8 and 0/8, as the issue saw them."""
    with daphne_site(tmp_path_factory.mktemp("plots"), users={"olga": ["operator"]}) as (base, env):
        db = Path(env["DATABASE_URL"].removeprefix("sqlite:///"))
        client = Client(base, token=make_token(base))
        noop = client.launch(start=False, policy="noop", **PLAN)
        stop = client.launch(start=False, policy="stop", **PLAN)
        finish(db, noop["id"], 3)
        finish(db, stop["id"], 0)
        yield base, noop, stop


def bands(page, selector: str) -> list[tuple[float, float]]:
    return [
        (float(svg.get_attribute("data-low")), float(svg.get_attribute("data-high")))
        for svg in page.locator(f"{selector} svg.rate-bar[data-low]").all()
    ]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1440", "390"])
def test_the_leaderboard_draws_each_rows_interval_so_a_tie_shows_why(site, browser, viewport):
    base, noop, _ = site
    page = logged_in(browser, base, "olga", viewport=viewport)
    page.goto(f"{base}/leaderboards/{noop['protocol_id']}/")
    assert page.locator("#leaderboard tbody tr[data-tied='1']").count() == 2
    (high_low, high_high), (low_low, low_high) = bands(page, "#leaderboard tbody")
    assert (high_low, high_high) == pytest.approx(wilson_interval(3, 8), abs=1e-6)
    assert (low_low, low_high) == pytest.approx(wilson_interval(0, 8), abs=1e-6)
    assert high_low < low_high  # the bands overlap: why the two are tied, drawn
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    shot(page, f"leaderboard-bands-{viewport['width']}")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1440", "390"])
def test_the_campaign_page_and_the_comparison_draw_each_tasks_interval(site, browser, viewport):
    base, noop, stop = site
    page = logged_in(browser, base, "olga", viewport=viewport)
    page.goto(f"{base}/campaigns/{noop['id']}/")
    drawn = bands(page, "#aggregates")
    assert len(drawn) == 3  # all tasks, reach, push
    assert drawn[0] == pytest.approx(wilson_interval(3, 8), abs=1e-6)
    shot(page, f"campaign-bands-{viewport['width']}")
    page.goto(f"{base}/campaigns/compare/?a={stop['id']}&b={noop['id']}")
    assert len(bands(page, "main")) >= 6  # A and B, per task and overall
    shot(page, f"compare-bands-{viewport['width']}")
