"""Issue 45, item 3: "Tags and notes on stored episodes. A reviewer marks an episode, optionally at a step: a
failure-mode tag from a per-benchmark vocabulary that operators can extend (e.g. missed grasp, wrong object, dropped,
collision, timeout) and a free note. Who and when recorded; tags never change a result or its evidence; they are
their own history (removal recorded). The attempts table and the API filter by tag; the campaign page shows the
campaign's failure modes with counts; the CSV export and the API carry them. Reviewers may tag; readers may read."
Done when: "a test tags episodes as a reviewer, filters the attempts table and the API by tag, checks the campaign's
failure-mode counts, and shows a reader cannot tag and a tag changes no result." In chromium at 1440 px against a real
daphne, with real episodes."""

import csv
import hashlib
import io
import urllib.error
from pathlib import Path

import pytest

from rsi_client import Client
from tests.servers.browser import logged_in, query, shot
from tests.servers.site import Session, daphne_site, make_token

pytestmark = pytest.mark.usefixtures("no_csp_violations")
FAST = {"policy": "noop", "budget_mode": "decisions", "max_policy_calls": 2, "replan_interval": 1}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("episode-tags")
    users = {"olga": ["operator"], "rita": ["reviewer"], "walt": ["watcher"]}
    with daphne_site(tmp, users=users) as (base, env):
        client = Client(base, token=make_token(base))
        campaign = client.evaluate(benchmark="fetch", tasks=["reach"], seeds=[0, 1, 2], poll_s=0.5, **FAST)
        db = Path(env["DATABASE_URL"].removeprefix("sqlite:///"))
        yield base, db, Path(env["RSI_MEDIA_ROOT"]), campaign["id"]


def evidence(db: Path, media: Path, attempt: int) -> tuple:
    """The attempt's row and the bytes of its evidence files: what a tag must not change."""
    row = query(db, "select * from evaluator_attempt where id = ?", attempt)
    files = query(db, "select path from evaluator_artifact where attempt_id = ? order by path", attempt)
    return row, [hashlib.sha256((media / path).read_bytes()).hexdigest() for (path,) in files]


def tag(page, base: str, attempt: int, mode: str = "", note: str = "", step: str = "") -> None:
    page.goto(f"{base}/attempts/{attempt}/")
    if mode:
        page.select_option("#tag-mode", mode)
    page.fill("#tag-note", note)
    page.fill("#tag-step", step)
    page.click("#tag-add")
    page.wait_for_selector("#tags-now")


def test_a_reviewer_tags_episodes_and_the_table_the_api_the_exports_and_the_campaign_follow(site, browser):
    base, db, media, campaign = site
    first, second, third = (pk for (pk,) in query(db, "select id from evaluator_attempt order by cell_index"))
    before = {pk: evidence(db, media, pk) for pk in (first, second, third)}
    page = logged_in(browser, base, "rita")
    tag(page, base, first, "missed_grasp", "closed a step early", "1")
    assert page.inner_text("#tags-now").startswith("missed grasp at step 1 closed a step early")
    tag(page, base, second, "missed_grasp")
    tag(page, base, third, "collision")
    tag(page, base, third, note="the arm hits the table first")
    shot(page, "review-tags-1440")
    # Removed, and recorded: the history keeps it.
    page.click('#tags-now li:has-text("collision") button.remove-tag')
    page.wait_for_selector("#tag-history")
    page.click("#tag-history summary")
    assert "removed by rita" in page.inner_text("#tag-history")
    assert query(db, "select count(*) from evaluator_episodetag") == [(4,)]

    # The campaign's failure modes, with counts of episodes.
    page.goto(f"{base}/campaigns/{campaign}/")
    modes = {
        li.get_attribute("data-mode"): li.locator("b").inner_text() for li in page.locator("#failure-modes li").all()
    }
    assert modes == {"missed_grasp": "2"}  # the collision was removed
    # The attempts table filtered by tag, from the campaign's link; the tag a field of its form.
    page.click('#failure-modes li[data-mode="missed_grasp"] a')
    page.wait_for_url("**tag=missed_grasp*")
    rows = page.evaluate(
        "Array.from(document.querySelectorAll('#attempts-table tbody tr')).map(r => r.dataset.attempt)"
    )
    assert sorted(map(int, rows)) == sorted([first, second]) and page.input_value("#filter-tag") == "missed_grasp"
    shot(page, "attempts-by-tag-1440")
    # The API and the CSV export carry them.
    client = Client(base, token=make_token(base, "rita"))
    found = client.attempts(tag="missed_grasp", campaign=campaign)
    assert sorted(row["attempt"] for row in found["attempts"]) == sorted([first, second])
    assert {row["tags"] for row in found["attempts"]} == {"missed_grasp"}
    history = client.attempt(third)["tags"]
    assert [(t["mode"], t["by"], t["removed_by"]) for t in history] == [
        ("collision", "rita", "rita"),
        (None, "rita", None),
    ]
    exported = Session(base, "rita", "ritarita").opener.open(f"{base}/campaigns/{campaign}/export.csv").read()
    tags = {int(r["attempt"]): r["tags"] for r in csv.DictReader(io.StringIO(exported.decode()))}
    assert tags == {first: "missed_grasp", second: "missed_grasp", third: ""}
    # "tags never change a result or its evidence"
    assert {pk: evidence(db, media, pk) for pk in (first, second, third)} == before


def test_a_reader_cannot_tag_and_an_operator_extends_the_vocabulary(site, browser):
    base, db, _, _ = site
    (attempt,) = query(db, "select id from evaluator_attempt order by cell_index limit 1")[0]
    watcher = logged_in(browser, base, "walt")
    watcher.goto(f"{base}/attempts/{attempt}/")
    assert watcher.locator("#tag-form").count() == 0
    assert watcher.inner_text("#tag-role") == "Tagging needs the reviewer or operator role."
    with pytest.raises(urllib.error.HTTPError) as refused:
        Session(base, "walt", "waltwalt").post(f"/attempts/{attempt}/tags/", {"mode": "dropped"})
    assert refused.value.code == 403
    assert query(db, "select count(*) from evaluator_episodetag where username = 'walt'") == [(0,)]

    operator = logged_in(browser, base, "olga")
    operator.goto(f"{base}/failure-modes/")
    operator.select_option("#mode-benchmark", "fetch")
    operator.fill("#mode-name", "gripper_slip")
    operator.fill("#mode-label", "gripper slipped")
    operator.click("#mode-add")
    operator.wait_for_selector('#modes-fetch li[data-mode="gripper_slip"]')
    shot(operator, "failure-modes-1440")
    reviewer = logged_in(browser, base, "rita")
    tag(reviewer, base, attempt, "gripper_slip")
    assert "gripper slipped" in reviewer.inner_text("#tags-now")
    reviewer.goto(f"{base}/failure-modes/")
    assert reviewer.locator("#add-mode").count() == 0  # a reviewer tags; an operator extends
    # Readers may read: the watcher sees the tags through the API.
    read = Client(base, token=make_token(base, "walt")).attempt(attempt)["tags"]
    assert [t["mode"] for t in read if t["removed_at"] is None][-1] == "gripper_slip"
