"""Issue 45, item 6, in part: "the page says a pause takes effect after the chunk in flight ... and the log reads
oldest first; a watcher without the intervener role is told which role gives the controls; on a phone the controls
sit next to the picture (today 1,150 px below it) with touch buttons for the actions (the A/D, W/S keys cannot be
typed on a phone)." In chromium at 390 px against a real daphne, the episode held by a start-paused hold."""

import pytest

from rsi_client import Client
from tests.servers.browser import PHONE, logged_in, shot, wait_until
from tests.servers.site import Session, daphne_site, make_token

pytestmark = pytest.mark.usefixtures("no_csp_violations")


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    """A running Fetch episode, held before its first decision for as long as the module needs it: started paused
    (a control checkpoint, not a slow policy)."""
    users = {"olga": ["operator"], "ivan": ["intervener"], "walt": ["watcher"]}
    with daphne_site(tmp_path_factory.mktemp("live-controls"), users=users) as (base, _):
        client = Client(base, token=make_token(base))
        plan = {"benchmark": "fetch", "tasks": ["reach"], "seeds": [0], "policy": "noop"}
        campaign = client.launch(start=False, budget_mode="decisions", max_policy_calls=40, replan_interval=1, **plan)
        attempt = client.cells(campaign["id"])["cells"][0]["attempt"]
        Session(base, "ivan", "ivanivan").post(f"/attempts/{attempt}/start-paused/")
        client.start(campaign["id"])
        yield base, attempt


def test_on_a_phone_the_controls_sit_under_the_picture_with_a_touch_pad_and_the_log_reads_oldest_first(
    running, browser
):
    base, attempt = running
    page = logged_in(browser, base, "ivan", viewport=PHONE)
    page.goto(f"{base}/attempts/{attempt}/live/")
    wait_until(page, "!document.getElementById('live-frame').hidden", timeout=60)
    picture = page.locator("#live-frame").bounding_box()
    controls = page.locator("#controls").bounding_box()
    assert 0 <= controls["y"] - (picture["y"] + picture["height"]) < 40  # right under it, not 1,150 px below
    assert page.locator("#touch-pad button").count() == 7
    assert "A pause takes effect after the chunk in flight" in page.inner_text("#controls")
    for note in ("first note", "second note"):
        page.fill("#note", note)
        page.click("#btn-annotate")
        wait_until(page, f"document.getElementById('live-log').textContent.includes('{note}')")
    lines = page.locator("#live-log li").all_inner_texts()
    notes = [line for line in lines if "note" in line]
    assert notes[0].endswith("first note") and notes[1].endswith("second note")
    shot(page, "live-controls-390")


def test_a_watcher_is_told_which_role_gives_the_controls(running, browser):
    base, attempt = running
    page = logged_in(browser, base, "walt", viewport=PHONE)
    page.goto(f"{base}/attempts/{attempt}/live/")
    assert page.locator("#btn-pause").count() == 0
    assert page.inner_text("#intervene-role").startswith(
        "Pausing, taking over, stopping and notes need the intervener role"
    )
