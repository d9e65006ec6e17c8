"""Issue 45, item 6: "Live intervention a person can do. Episodes of 50 steps run in 2-9 s: 'start paused' and 'pause
at step N' for a watcher who wants to intervene." In chromium at 1440 px against a real daphne, as an intervener;
each episode driven by a policy server that answers in 0.2 s, one step a call."""

from pathlib import Path

import pytest

from rsi_client import Client
from tests.servers.browser import logged_in, query, shot, wait_until
from tests.servers.policies import HttpPolicyServer, Sleep
from tests.servers.site import daphne_site, make_token

pytestmark = pytest.mark.usefixtures("no_csp_violations")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    server = HttpPolicyServer(lambda request, call: Sleep(0.2))
    users = {"olga": ["operator"], "ivan": ["intervener"]}
    try:
        with daphne_site(tmp_path_factory.mktemp("pause-at"), users=users) as (base, env):
            client = Client(base, token=make_token(base))
            plan = {"benchmark": "fetch", "tasks": ["reach"], "policy": server.url, "budget_mode": "decisions"}
            yield base, Path(env["DATABASE_URL"].removeprefix("sqlite:///")), client, {**plan, "max_policy_calls": 30}
    finally:
        server.stop()


def accept_dialogs(page) -> None:
    page.on("dialog", lambda dialog: dialog.accept())


def test_a_pause_set_for_step_n_holds_the_episode_there(site, browser):
    base, db, client, plan = site
    campaign = client.launch(seeds=[0], replan_interval=1, **plan)
    attempt = client.cells(campaign["id"])["cells"][0]["attempt"]
    page = logged_in(browser, base, "ivan")
    accept_dialogs(page)
    page.goto(f"{base}/attempts/{attempt}/live/")
    wait_until(page, "document.getElementById('live-status').textContent === 'running'", timeout=60)
    page.fill("#pause-at", "12")
    page.click("#btn-pause-at")
    wait_until(page, "document.getElementById('live-status').textContent === 'paused'", timeout=60)
    held = int(page.inner_text("#live-step"))
    assert held == 12  # one step a call: the pause holds once step 12 has executed
    page.wait_for_timeout(1500)
    assert int(page.inner_text("#live-step")) == 12  # and it holds
    assert "paused at step 12, as set" in page.inner_text("#live-log")
    shot(page, "live-paused-at-step-1440")
    # Issue "... fifth round", item 1: the request is recorded as one, and autonomy goes when the pause holds.
    assert query(
        db, "select kind, step_index, note from evaluator_intervention where attempt_id = ? order by id", attempt
    )[1:] == [("pause", 12, "paused at step 12, as set for step 12")]
    assert query(db, "select kind, note from evaluator_intervention where attempt_id = ? order by id", attempt)[0] == (
        "pause_at",
        "pause set for step 12",
    )
    assert query(db, "select autonomous from evaluator_attempt where id = ?", attempt) == [(0,)]
    page.click("#btn-resume")
    wait_until(page, "document.getElementById('live').dataset.finished === '1'", timeout=60)


def test_a_cell_not_yet_started_can_start_paused(site, browser):
    base, db, client, plan = site
    campaign = client.launch(start=False, seeds=[1], replan_interval=1, **plan)
    attempt = client.cells(campaign["id"])["cells"][0]["attempt"]
    page = logged_in(browser, base, "ivan")
    accept_dialogs(page)
    page.goto(f"{base}/attempts/{attempt}/live/")
    page.click("#btn-start-paused")
    page.wait_for_selector("#starts-paused")
    client.start(campaign["id"])
    wait_until(page, "document.getElementById('live-status').textContent === 'paused'", timeout=60)
    wait_until(page, "!document.getElementById('live-frame').hidden", timeout=60)
    page.wait_for_timeout(1000)
    assert page.inner_text("#live-step") == "0"  # it holds before its first decision
    assert query(db, "select count(*) from evaluator_decision where attempt_id = ?", attempt) == [(0,)]
    assert query(
        db, "select kind, step_index, note, username from evaluator_intervention where attempt_id = ?", attempt
    ) == [("pause", 0, "started paused", "ivan")]
    page.click("#btn-resume")
    wait_until(page, "document.getElementById('live').dataset.finished === '1'", timeout=60)
    assert query(db, "select autonomous from evaluator_attempt where id = ?", attempt) == [(0,)]
