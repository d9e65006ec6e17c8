"""Issue 45, item 2: "Next and previous. The review page has previous/next episode in its campaign (and in the current
attempts-table filter when it came from there), 'next failure', 'next non-autonomous', and keyboard keys for them;
today its one link goes back to the campaign." In chromium against a real daphne, as a reviewer, with the keys and
the pointer, at 1440 and 390 px."""

from pathlib import Path

import pytest

from rsi_client import Client
from tests.servers.browser import PHONE, logged_in, query, shot
from tests.servers.site import daphne_site, make_token

pytestmark = pytest.mark.usefixtures("no_csp_violations")
# Each cell's stored end (outcome, autonomous), in plan order.
ENDS = [("success", 1), ("task_failure", 1), ("success", 1), ("success", 0), ("task_failure", 1)]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """A campaign of five cells whose ends are stored as ENDS says (as a finished campaign's would be)."""
    tmp = tmp_path_factory.mktemp("review-nav")
    with daphne_site(tmp, users={"olga": ["operator"], "rita": ["reviewer"]}) as (base, env):
        db = Path(env["DATABASE_URL"].removeprefix("sqlite:///"))
        client = Client(base, token=make_token(base))
        campaign = client.launch(start=False, benchmark="fetch", tasks=["reach"], seeds=list(range(5)), policy="noop")[
            "id"
        ]
        cells = [pk for (pk,) in query(db, "select id from evaluator_attempt order by cell_index")]
        for pk, (outcome, autonomous) in zip(cells, ENDS, strict=True):
            manifest = f"attempts/{pk}/manifest.json"  # a finished attempt has its evidence manifest (a trigger)
            query(
                db,
                "insert into evaluator_artifact (attempt_id, kind, path, sha256, size, created_at) "
                "values (?, 'manifest', ?, '0', 0, datetime('now'))",
                pk,
                manifest,
            )
            query(
                db,
                "update evaluator_attempt set status = 'finished', outcome = ?, autonomous = ? where id = ?",
                outcome,
                autonomous,
                pk,
            )
        yield base, campaign, cells


def at(page) -> int:
    return int(page.url.split("/attempts/")[1].split("/")[0])


def test_a_reviewer_walks_a_campaign_by_keys_next_failure_and_next_non_autonomous(site, browser):
    base, _, cells = site
    page = logged_in(browser, base, "rita")
    page.goto(f"{base}/attempts/{cells[0]}/")
    assert page.inner_text("#episode-nav").startswith("Episode 1 of 5 in its campaign")
    assert page.locator("#episode-previous").count() == 0  # the first has none
    shot(page, "review-episode-nav-1440")
    page.keyboard.press("j")
    page.wait_for_url(f"**/attempts/{cells[1]}/")
    assert page.inner_text("#episode-nav").startswith("Episode 2 of 5")
    page.keyboard.press("f")  # the next failure after the second: the fifth
    page.wait_for_url(f"**/attempts/{cells[4]}/")
    assert page.locator("#episode-next").count() == 0 and page.locator("#no-next-failure").count() == 1
    page.keyboard.press("k")
    page.wait_for_url(f"**/attempts/{cells[3]}/")
    page.goto(f"{base}/attempts/{cells[0]}/")
    page.click("#episode-next-human")  # the pointer, too: the next non-autonomous episode
    page.wait_for_url(f"**/attempts/{cells[3]}/")
    assert page.locator("#non-autonomous").count() == 1


def test_from_the_attempts_table_next_and_previous_follow_its_filter_and_order(site, browser):
    base, campaign, cells = site
    page = logged_in(browser, base, "rita", viewport=PHONE)
    page.goto(f"{base}/attempts/?campaign={campaign}&outcome=success&sort=seed")
    rows = [
        int(pk)
        for pk in page.evaluate(
            "Array.from(document.querySelectorAll('#attempts-table tbody tr')).map(r => r.dataset.attempt)"
        )
    ]
    assert rows == [cells[0], cells[2], cells[3]]  # the successes, by seed
    page.click(f'#attempts-table tr[data-attempt="{cells[2]}"] a')
    page.wait_for_url(f"**/attempts/{cells[2]}/?in=attempts*")
    assert page.inner_text("#episode-nav").startswith("Episode 2 of 3 in the attempts table's rows")
    shot(page, "review-episode-nav-390")
    page.keyboard.press("j")
    page.wait_for_url(f"**/attempts/{cells[3]}/?in=attempts*")
    assert "outcome=success" in page.url and page.locator("#episode-next").count() == 0
    page.keyboard.press("k")
    page.wait_for_url(f"**/attempts/{cells[2]}/?in=attempts*")
    page.keyboard.press("k")
    page.wait_for_url(f"**/attempts/{cells[0]}/?in=attempts*")
    assert page.inner_text("#episode-nav").startswith("Episode 1 of 3")
