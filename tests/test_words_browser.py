"""Issue 45, item 9: "Words that mislead: a finished sequential campaign that ran out of cells says 'Not decided yet'
(say it ended undecided, with the pairs that would decide it and a link to run more); the campaigns list does not mark
sequential campaigns; sim-to-real tells a reviewer 'real as entered below' with nothing below and does not say why a
policy is absent; 'hover for full precision' on a touch screen; dates in two formats; the LeRobot export's refusal of
a multi-task campaign ... should say what would work; a re-run queues with no confirmation." (The export's refusal is
tests/test_lerobot_export.py's.) In chromium at 390 px against a real daphne."""

from pathlib import Path

import pytest

from rsi_client import Client
from tests.servers.browser import PHONE, logged_in, query, shot
from tests.servers.site import daphne_site, make_token

pytestmark = pytest.mark.usefixtures("no_csp_violations")
PLAN = {
    "benchmark": "fetch",
    "tasks": ["reach"],
    "seeds": [0, 1],
    "policy": "noop",
    "budget_mode": "decisions",
    "max_policy_calls": 2,
    "replan_interval": 1,
}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("words")
    with daphne_site(tmp, users={"olga": ["operator"], "rita": ["reviewer"]}) as (base, env):
        client = Client(base, token=make_token(base))
        baseline = client.evaluate(poll_s=0.5, **PLAN)
        candidate = client.launch(**client.plan_against(baseline["id"], "noop"))
        candidate = client.wait(candidate["id"], poll_s=0.5)
        yield base, Path(env["DATABASE_URL"].removeprefix("sqlite:///")), baseline, candidate


def test_a_sequential_campaign_out_of_cells_says_it_ended_undecided_and_the_list_marks_it(site, browser):
    base, _, baseline, candidate = site
    assert candidate["done"] and not candidate["sequential"]["decided_at"]
    page = logged_in(browser, base, "olga", viewport=PHONE)
    page.goto(f"{base}/campaigns/{candidate['id']}/")
    verdict = page.inner_text("#sequential-verdict")
    assert verdict.startswith("Ended undecided: every cell ran, 2 pairs, and the test could not tell")
    assert "Not decided yet" not in verdict
    assert "pairs would decide it if the proportions seen so far held" in verdict
    assert page.get_attribute("#run-more", "href") == f"/campaigns/new/?from={baseline['id']}"
    shot(page, "sequential-ended-undecided-390")
    page.goto(f"{base}/")
    assert page.inner_text(f'a[href="/campaigns/{candidate["id"]}/"] + .sequential-mark') == (
        f"sequential vs #{baseline['id']}"
    )


def test_a_re_run_asks_before_it_queues(site, browser):
    base, db, baseline, _ = site
    page = logged_in(browser, base, "olga", viewport=PHONE)
    page.goto(f"{base}/campaigns/{baseline['id']}/")
    before = query(db, "select count(*) from evaluator_attempt")[0][0]
    page.locator("details.rerun summary").first.click()  # the first click only asks
    assert query(db, "select count(*) from evaluator_attempt")[0][0] == before
    page.locator("details.rerun[open] .rerun-confirm").click()
    page.wait_for_selector(".flash.success")
    assert query(db, "select count(*) from evaluator_attempt where rerun_of_id is not null")[0][0] == 1


def test_words_for_touch_screens_one_date_format_and_sim_to_real_say_what_is_there(site, browser):
    base, db, baseline, _ = site
    page = logged_in(browser, base, "rita", viewport=PHONE)
    attempt = query(db, "select id from evaluator_attempt where campaign_id = ? order by id", baseline["id"])[0][0]
    page.goto(f"{base}/attempts/{attempt}/")
    content = page.content()
    assert "hover for full precision" not in content
    assert page.get_attribute("#full-precision", "href") == f"/attempts/{attempt}/timeline.json"
    # Every date on the pages is one <time>, shown in the reader's local time in one format.
    for path in (f"/attempts/{attempt}/", "/account/tokens/", f"/campaigns/{baseline['id']}/", "/attempts/"):
        page.goto(base + path)
        raw = page.evaluate(
            "Array.from(document.querySelectorAll('main *')).filter(n => n.children.length === 0 &&"
            " /\\b\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}\\b/.test(n.textContent) && !n.closest('time')).length"
        )
        assert raw == 0, path
    page.goto(base + "/sim-to-real/")
    intro = page.inner_text("main > p")
    assert "as entered below" not in intro and "an operator's form on this page" in intro
    assert "a policy with only one of them is in no plot" in intro
    shot(page, "sim-to-real-words-390")
