"""The dashboard in a real browser (Debian's chromium driven by Playwright) against a real daphne:
launch, start, watch it finish, review frame by frame; roles; the login wall (issue "The dashboard":
Done when). Screenshots of each page go to test-artifacts/screenshots/."""

import io
import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.servers.browser import choose_tasks, launch_noop_campaign, logged_in, query, shot, wait_until, watch_csp
from tests.servers.site import daphne_site

pytestmark = pytest.mark.usefixtures("no_csp_violations")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("site")
    with daphne_site(tmp, users={"olga": ["operator"], "rita": ["reviewer"]}) as (base, env):
        yield base, Path(env["DATABASE_URL"].removeprefix("sqlite:///"))


def test_an_anonymous_visitor_is_sent_to_the_login_page(site, browser):
    base, _ = site
    page = watch_csp(browser.new_page())
    for path in ("/", "/campaigns/new/", "/attempts/"):
        page.goto(base + path)
        assert page.url.startswith(base + "/accounts/login/?next=")
    shot(page, "login")


def test_an_operator_launches_starts_and_reviews_a_campaign_frame_by_frame(site, browser):
    base, db = site
    page = logged_in(browser, base, "olga")
    page.click("#nav-launch")
    page.select_option("#id_benchmark", "fetch")
    choose_tasks(page, ["pick_and_place", "reach"])
    page.fill("#id_seed", "3")
    page.fill("#id_policy", "fetch-oracle")
    page.select_option("#id_sensors", "privileged-state")
    page.click("#preview")
    # The resolved identity and budgets are shown before anything is created.
    assert page.inner_text("#resolved-identity") == "fetch-development/privileged-state/v1"
    assert "50" in page.inner_text("#preview-panel")
    assert query(db, "select count(*) from evaluator_campaign") == [(0,)]
    shot(page, "launch-preview")
    page.click("#create")
    page.wait_for_selector("#start-all")
    assert page.locator(".cell[data-status=pending]").count() == 2
    shot(page, "campaign-pending")
    # Issue 35, point 4: a review page opened before the attempt ends is no dead end: it says what is happening,
    # links to the live view, and shows the evidence once the attempt has ended.
    (first_cell,) = query(db, "select min(id) from evaluator_attempt")[0]
    early = page.context.new_page()
    early.goto(f"{base}/attempts/{first_cell}/")
    assert "pending" in early.inner_text("#unfinished") and early.locator("#verify-hashes").count() == 0

    # "no 404 in the console during a campaign run" (issue 35, point 2): no picture is asked before it exists.
    missing = []
    page.on("response", lambda response: missing.append(response.url) if response.status == 404 else None)
    page.click("#start-all")
    wait_until(page, "document.querySelectorAll('.cell[data-status=finished]').length === 2", timeout=180)
    assert missing == []
    assert page.inner_text("#progress") == "2/2 cells finished"
    early.wait_for_selector("#review[data-ready='1']", timeout=30_000)  # followed it to its end, by itself
    assert early.locator("#verify-hashes").count() == 1
    early.close()
    assert page.locator(".cell[data-outcome=success]").count() >= 1
    assert "2/2" in page.inner_text("#aggregates")
    shot(page, "campaign-finished")

    (attempt_id,) = query(
        db,
        "select a.id from evaluator_attempt a join evaluator_task t on t.id = a.task_id "
        "where t.name = 'pick_and_place'",
    )[0]
    page.click(f"#cell-{attempt_id} .review-link")
    page.wait_for_selector("#review[data-ready='1']")
    for _ in range(10):
        page.keyboard.press("ArrowRight")
    assert page.inner_text("#step-number") == "10"
    # The action values shown are the stored record's.
    stored = json.loads(
        query(db, 'select action from evaluator_step where attempt_id = ? and "index" = 10', attempt_id)[0][0]
    )
    values = page.locator("#action-values .action-value")
    assert [float(values.nth(i).get_attribute("data-value")) for i in range(values.count())] == stored
    # "action values rounded sensibly with full precision on hover"
    assert [float(values.nth(i).get_attribute("title")) for i in range(values.count())] == stored
    assert all(len(text.split(".")[-1]) <= 3 or "e" in text for text in values.all_inner_texts())
    # The frame shown is step 10's: it matches the lossless observation the policy got after step 10.
    exact = "document.getElementById('exact-frame')"
    wait_until(page, f"{exact}.complete && {exact}.naturalWidth === 640")
    assert page.get_attribute("#exact-frame", "src").endswith(f"/attempts/{attempt_id}/frame/10.png")
    shown_frame = _image(page.request.get(base + page.get_attribute("#exact-frame", "src")).body())
    after_10 = _message_png(page, base, attempt_id, call=11)  # one action per call: call 11 saw step 10
    after_0 = _message_png(page, base, attempt_id, call=1)
    assert np.abs(shown_frame - after_10).mean() < 2.0
    assert np.abs(shown_frame - after_0).mean() > np.abs(shown_frame - after_10).mean() * 2
    shot(page, "review-step-10")

    page.keyboard.press("ArrowLeft")
    assert page.inner_text("#step-number") == "9"
    page.goto(f"{base}/attempts/{attempt_id}/#step=25")  # a deep link to attempt@step
    page.wait_for_selector("#review[data-ready='1']")
    assert page.inner_text("#step-number") == "25"
    assert page.locator("#timeline .decision").count() == 50
    _review_controls(page, base, attempt_id)

    for name, path in (
        ("attempts", "/attempts/?benchmark=fetch"),
        ("benchmarks", "/benchmarks/"),
        ("compare", "/campaigns/compare/"),  # one campaign: the picker (a campaign with itself is refused)
        ("campaigns", "/"),
    ):
        assert page.goto(base + path).status == 200
        shot(page, name)


def _review_controls(page, base: str, attempt_id: int) -> None:
    """Issue 12, point 4: one picture, the timeline above the fold at 1440x900, step buttons for touch
    screens, playback speeds, a legend, axis ticks, a readout; JSON Lines evidence shown, not downloaded."""
    page.evaluate("window.scrollTo(0, 0)")
    assert page.viewport_size == {"width": 1440, "height": 900}
    assert page.evaluate("document.getElementById('timeline').getBoundingClientRect().bottom") <= 900
    assert page.is_visible("#exact-frame") and page.is_hidden("#video")  # paused: the exact frame only
    page.click("#btn-next")
    page.click("#btn-next")
    assert page.inner_text("#step-number") == "27"
    page.click("#btn-prev")
    assert page.inner_text("#step-number") == "26"
    page.click("#btn-start")
    assert page.inner_text("#step-number") == "0" and page.is_disabled("#btn-prev")
    legend = page.inner_text("#legend")
    for label in ("x", "y", "z", "native success", "policy decision", "intervention"):
        assert label in legend
    assert page.locator("#timeline .tick-label").count() >= 5
    box = page.locator("#timeline").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + 60)
    assert page.inner_text("#readout").startswith("step ")
    page.select_option("#speed", "0.25")  # 50 steps at 25 fps x 0.25: 8 s, time to pause in between
    page.click("#btn-play")
    assert page.is_visible("#video") and page.is_hidden("#exact-frame")  # playing: the video only
    assert page.evaluate("document.getElementById('video').playbackRate") == 0.25
    wait_until(page, "Number(document.getElementById('step-number').textContent) >= 3")
    page.click("#btn-play")
    assert page.is_visible("#exact-frame") and page.is_hidden("#video")
    paused_at = int(page.inner_text("#step-number"))
    assert 3 <= paused_at < 50
    page.select_option("#speed", "4")
    page.click("#btn-play")
    assert page.evaluate("document.getElementById('video').playbackRate") == 4
    # At its end the video gives way to the exact frame of the last step.
    wait_until(page, "document.getElementById('video').hidden", timeout=20)
    assert page.inner_text("#step-number") == "50" and page.is_visible("#exact-frame")
    shot(page, "review-controls")
    response = page.request.get(f"{base}/attempts/{attempt_id}/files/steps.jsonl")
    assert response.headers["content-type"].startswith("text/plain")
    assert "attachment" not in response.headers.get("content-disposition", "")


def _image(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(np.int16)


def _message_png(page, base: str, attempt_id: int, call: int) -> np.ndarray:
    response = page.request.get(f"{base}/attempts/{attempt_id}/files/messages/call-{call:04d}.png")
    assert response.ok
    return _image(response.body())


def test_a_reviewer_cannot_launch_or_start(site, browser):
    base, db = site
    page = logged_in(browser, base, "rita")
    assert page.locator("#nav-launch").count() == 0
    response = page.goto(base + "/campaigns/new/")
    assert response.status == 403
    campaigns_before = query(db, "select count(*) from evaluator_campaign")
    pending = query(db, "select id from evaluator_attempt where status = 'pending'")
    page.goto(base + "/")
    shot(page, "reviewer-campaigns")
    if pending:
        token = page.context.cookies()
        csrf = next(c["value"] for c in token if c["name"] == "csrftoken")
        response = page.request.post(f"{base}/attempts/{pending[0][0]}/start/", headers={"X-CSRFToken": csrf})
        assert response.status == 403
    assert query(db, "select count(*) from evaluator_campaign") == campaigns_before
    assert query(db, "select count(*) from evaluator_attempt where status != 'pending' and status != 'finished'") == [
        (0,)
    ]


@pytest.fixture(scope="module")
def live_site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("live")
    with daphne_site(tmp, users={"ivan": ["operator", "intervener"]}) as (base, env):
        yield base, Path(env["DATABASE_URL"].removeprefix("sqlite:///"))


def test_an_intervener_watches_takes_over_and_finds_it_on_the_review_timeline(live_site, browser):
    base, db = live_site
    page = logged_in(browser, base, "ivan")
    launch_noop_campaign(page, base, "push", seed=5, decisions=400)
    page.click("#start-all")
    attempt_id = query(db, "select max(id) from evaluator_attempt")[0][0]
    page.goto(f"{base}/attempts/{attempt_id}/live/")
    wait_until(page, "Number(document.getElementById('live').dataset.step || 0) >= 3", timeout=60)
    assert page.is_hidden("#autonomy")
    wait_until(page, "document.getElementById('live-frame').naturalWidth === 640")
    # Issue 35, point 12: "a 17-digit chunk next to a rounded action": the chunk is rounded like the action.
    wait_until(page, "document.getElementById('live-chunk').textContent.includes('action')")
    chunk = page.locator("#live-chunk")
    assert re.fullmatch(r"1 action: \[(-?\d+\.\d{3}(, )?){4}\]", chunk.inner_text()), chunk.inner_text()
    assert chunk.get_attribute("title").startswith("full precision: [[")
    # "Buttons enabled only when they apply (resume only while paused, release only while taken over)"
    assert page.is_disabled("#btn-resume") and page.is_disabled("#btn-release") and page.is_enabled("#btn-pause")
    shot(page, "live-autonomous")
    # "pause, take-over and stop confirm first, saying the episode becomes non-autonomous for good"
    dialogs = []
    page.once("dialog", lambda dialog: dialogs.append(dialog.message) or dialog.dismiss())
    page.click("#btn-take-over")
    assert "non-autonomous for good" in dialogs[0]
    assert page.is_hidden("#autonomy") and page.is_enabled("#btn-take-over")  # refused: nothing changed
    page.on("dialog", lambda dialog: dialogs.append(dialog.message) or dialog.accept())
    page.click("#btn-take-over")
    page.wait_for_selector("#autonomy", state="visible")  # flagged at once, in the live view
    taken_at = int(page.inner_text("#live-step"))
    wait_until(page, "!document.getElementById('btn-release').disabled")
    assert page.is_disabled("#btn-take-over")
    for key in ("d", "d", "w", "g", "g"):  # G toggles the gripper: closed, then open again
        page.keyboard.press(key)
    wait_until(page, f"Number(document.getElementById('live').dataset.step) >= {taken_at + 5}", timeout=30)
    assert "(human)" in page.inner_text("#live-action")
    # Issue 35, point 5: a rejected action is logged once, and the status never says it was accepted.
    page.fill("#manual input >> nth=0", "2")  # outside the contract's [-1, 1]
    page.click("#btn-send")
    wait_until(page, "document.getElementById('live-log').textContent.includes('your action rejected')")
    assert page.inner_text("#live-message").startswith("action sent: the episode checks it")
    assert sum("rejected" in line for line in page.locator("#live-log li").all_inner_texts()) == 1
    assert "hand control back to the policy" in page.get_attribute("#btn-release", "title")
    assert "Release hands it back to the policy" in page.inner_text("#control-hint")  # what each button does now
    shot(page, "live-taken-over")
    page.click("#btn-stop")
    wait_until(page, "document.getElementById('live').dataset.finished === '1'", timeout=30)
    assert page.inner_text("#live-status") == "finished" and len(dialogs) == 3
    assert page.is_visible("#finished-review-link") and page.is_disabled("#btn-stop")
    # "no duplicated log lines": each intervention is logged once.
    lines = page.locator("#live-log li").all_inner_texts()
    assert [line.split(" by ")[0] for line in lines if " by ivan " in line] == ["take_over", "stop"]  # oldest first

    status, autonomous, reason = query(
        db, "select status, autonomous, termination_reason from evaluator_attempt where id = ?", attempt_id
    )[0]
    assert (status, autonomous, reason) == ("finished", 0, "human_stop")
    human = query(
        db,
        "select count(*) from evaluator_decision where attempt_id = ? and actor = 'human' and executed = 1",
        attempt_id,
    )[0][0]
    assert human == 5
    chunks = query(
        db,
        "select accepted_chunk from evaluator_decision where attempt_id = ? and actor = 'human' and executed = 1 "
        "order by id",
        attempt_id,
    )
    assert [json.loads(chunk)[0][-1] for (chunk,) in chunks] == [1, 1, 1, -1, 1]
    rejected = "select count(*) from evaluator_decision where attempt_id = ? and actor = 'human' and kind = 'rejected'"
    assert query(db, rejected, attempt_id)[0][0] == 1
    kinds = [
        k for (k,) in query(db, "select kind from evaluator_intervention where attempt_id = ? order by id", attempt_id)
    ]
    assert kinds == ["take_over", "stop"]

    page.goto(f"{base}/attempts/{attempt_id}/")
    page.wait_for_selector("#review[data-ready='1']")
    assert page.is_visible("#non-autonomous")
    assert page.locator("#timeline .intervention-mark").count() == 2
    assert page.locator("#timeline .decision.human").count() == 6  # five executed, and the rejected one
    # Issue 35, point 5: the record says whose rejections it counts ("0 rejected" beside a rejected call was wrong).
    record = page.inner_text("#record")
    assert "0 policy replies rejected" in record and "1 human action rejected" in record
    step = query(
        db, "select step_index from evaluator_intervention where attempt_id = ? and kind = 'take_over'", attempt_id
    )[0][0]
    page.goto(f"{base}/attempts/{attempt_id}/#step={step}")
    wait_until(page, f"document.getElementById('step-number').textContent === '{step}'")
    assert "take_over by ivan" in page.inner_text("#step-notes")
    # "a list of interventions and errors that jumps to their step"
    entries = page.locator("#events-list li.intervention")
    assert entries.count() == 2
    page.click("#btn-start")
    entries.first.locator("button.jump").click()
    assert page.inner_text("#step-number") == str(step)
    shot(page, "review-with-intervention")
