"""The dashboard in a real browser (Debian's chromium driven by Playwright) against a real daphne:
launch, start, watch it finish, review frame by frame; roles; the login wall (issue "The dashboard":
Done when). Screenshots of each page go to test-artifacts/screenshots/."""

import io
import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.servers.browser import CHROMIUM, CHROMIUM_ARGS, launch_noop_campaign, login, wait_until
from tests.servers.site import daphne_site

playwright_api = pytest.importorskip("playwright.sync_api")

ROOT = Path(__file__).resolve().parents[1]
SHOTS = ROOT / "test-artifacts" / "screenshots"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("site")
    with daphne_site(tmp, users={"olga": ["operator"], "rita": ["reviewer"]}) as (base, env):
        yield base, Path(env["DATABASE_URL"].removeprefix("sqlite:///"))


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian's chromium is missing: .ci/run installs it (apt-get install chromium)")
    with playwright_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


CSP_VIOLATIONS: list[str] = []


def _watch_csp(page):
    """Chromium reports each Content-Security-Policy violation on the console."""
    page.on("console", lambda m: CSP_VIOLATIONS.append(m.text) if "Content Security Policy" in m.text else None)
    return page


@pytest.fixture(autouse=True)
def no_csp_violations():
    # "A Content-Security-Policy that the pages and their scripts pass."
    CSP_VIOLATIONS.clear()
    yield
    assert CSP_VIOLATIONS == []


def _shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def _login(browser, base: str, user: str):
    page = _watch_csp(browser.new_context(viewport={"width": 1400, "height": 1000}).new_page())
    login(page, base, user, user * 2)
    return page


def _query(db: Path, sql: str, *args):
    with sqlite3.connect(db) as connection:
        return connection.execute(sql, args).fetchall()


def test_an_anonymous_visitor_is_sent_to_the_login_page(site, browser):
    base, _ = site
    page = _watch_csp(browser.new_page())
    for path in ("/", "/campaigns/new/", "/attempts/"):
        page.goto(base + path)
        assert page.url.startswith(base + "/accounts/login/?next=")
    _shot(page, "login")


def test_an_operator_launches_starts_and_reviews_a_campaign_frame_by_frame(site, browser):
    base, db = site
    page = _login(browser, base, "olga")
    page.click("#nav-launch")
    page.select_option("#id_benchmark", "fetch")
    page.select_option("#id_tasks", ["pick_and_place", "reach"])
    page.fill("#id_seed", "3")
    page.fill("#id_policy", "fetch-oracle")
    page.fill("#id_sensors", "privileged-state")
    page.click("#preview")
    # The resolved identity and budgets are shown before anything is created.
    assert page.inner_text("#resolved-identity") == "fetch-development/privileged-state/v1"
    assert "50" in page.inner_text("#preview-panel")
    assert _query(db, "select count(*) from evaluator_campaign") == [(0,)]
    _shot(page, "launch-preview")
    page.click("#create")
    page.wait_for_selector("#start-all")
    assert page.locator(".cell[data-status=pending]").count() == 2
    _shot(page, "campaign-pending")

    page.click("#start-all")
    wait_until(page, "document.querySelectorAll('.cell[data-status=finished]').length === 2", timeout=180)
    assert page.inner_text("#progress") == "2/2 cells finished"
    assert page.locator(".cell[data-outcome=success]").count() >= 1
    assert "2/2" in page.inner_text("#aggregates")
    _shot(page, "campaign-finished")

    (attempt_id,) = _query(
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
        _query(db, 'select action from evaluator_step where attempt_id = ? and "index" = 10', attempt_id)[0][0]
    )
    shown = [float(v) for v in page.locator("#action-values .action-value").all_inner_texts()]
    assert shown == stored
    # The frame shown is step 10's: it matches the lossless observation the policy got after step 10.
    exact = "document.getElementById('exact-frame')"
    wait_until(page, f"{exact}.complete && {exact}.naturalWidth === 640")
    assert page.get_attribute("#exact-frame", "src").endswith(f"/attempts/{attempt_id}/frame/10.png")
    shown_frame = _image(page.request.get(base + page.get_attribute("#exact-frame", "src")).body())
    after_10 = _message_png(page, base, attempt_id, call=11)  # one action per call: call 11 saw step 10
    after_0 = _message_png(page, base, attempt_id, call=1)
    assert np.abs(shown_frame - after_10).mean() < 2.0
    assert np.abs(shown_frame - after_0).mean() > np.abs(shown_frame - after_10).mean() * 2
    _shot(page, "review-step-10")

    page.keyboard.press("ArrowLeft")
    assert page.inner_text("#step-number") == "9"
    page.goto(f"{base}/attempts/{attempt_id}/#step=25")  # a deep link to attempt@step
    page.wait_for_selector("#review[data-ready='1']")
    assert page.inner_text("#step-number") == "25"
    assert page.locator("#timeline .decision").count() == 50

    for name, path in (
        ("attempts", "/attempts/?benchmark=fetch"),
        ("benchmarks", "/benchmarks/"),
        ("compare", "/campaigns/compare/?a=1&b=1"),
        ("campaigns", "/"),
    ):
        assert page.goto(base + path).status == 200
        _shot(page, name)


def _image(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(np.int16)


def _message_png(page, base: str, attempt_id: int, call: int) -> np.ndarray:
    response = page.request.get(f"{base}/attempts/{attempt_id}/files/messages/call-{call:04d}.png")
    assert response.ok
    return _image(response.body())


def test_a_reviewer_cannot_launch_or_start(site, browser):
    base, db = site
    page = _login(browser, base, "rita")
    assert page.locator("#nav-launch").count() == 0
    response = page.goto(base + "/campaigns/new/")
    assert response.status == 403
    campaigns_before = _query(db, "select count(*) from evaluator_campaign")
    pending = _query(db, "select id from evaluator_attempt where status = 'pending'")
    page.goto(base + "/")
    _shot(page, "reviewer-campaigns")
    if pending:
        token = page.context.cookies()
        csrf = next(c["value"] for c in token if c["name"] == "csrftoken")
        response = page.request.post(f"{base}/attempts/{pending[0][0]}/start/", headers={"X-CSRFToken": csrf})
        assert response.status == 403
    assert _query(db, "select count(*) from evaluator_campaign") == campaigns_before
    assert _query(db, "select count(*) from evaluator_attempt where status != 'pending' and status != 'finished'") == [
        (0,)
    ]


@pytest.fixture(scope="module")
def live_site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("live")
    with daphne_site(tmp, users={"ivan": ["operator", "intervener"]}) as (base, env):
        yield base, Path(env["DATABASE_URL"].removeprefix("sqlite:///"))


def test_an_intervener_watches_takes_over_and_finds_it_on_the_review_timeline(live_site, browser):
    base, db = live_site
    page = _login(browser, base, "ivan")
    launch_noop_campaign(page, base, "push", seed=5, decisions=400)
    page.click("#start-all")
    attempt_id = _query(db, "select max(id) from evaluator_attempt")[0][0]
    page.goto(f"{base}/attempts/{attempt_id}/live/")
    wait_until(page, "Number(document.getElementById('live').dataset.step || 0) >= 3", timeout=60)
    assert page.is_hidden("#autonomy")
    wait_until(page, "document.getElementById('live-frame').naturalWidth === 640")
    _shot(page, "live-autonomous")
    page.click("#btn-take-over")
    page.wait_for_selector("#autonomy", state="visible")  # flagged at once, in the live view
    taken_at = int(page.inner_text("#live-step"))
    for key in ("d", "d", "w", "g", "g"):  # G toggles the gripper: closed, then open again
        page.keyboard.press(key)
    wait_until(page, f"Number(document.getElementById('live').dataset.step) >= {taken_at + 5}", timeout=30)
    assert "(human)" in page.inner_text("#live-action")
    _shot(page, "live-taken-over")
    page.click("#btn-stop")
    wait_until(page, "document.getElementById('live').dataset.finished === '1'", timeout=30)
    assert page.inner_text("#live-status") == "finished"

    status, autonomous, reason = _query(
        db, "select status, autonomous, termination_reason from evaluator_attempt where id = ?", attempt_id
    )[0]
    assert (status, autonomous, reason) == ("finished", 0, "human_stop")
    human = _query(
        db,
        "select count(*) from evaluator_decision where attempt_id = ? and actor = 'human' and executed = 1",
        attempt_id,
    )[0][0]
    assert human == 5
    chunks = _query(
        db,
        "select accepted_chunk from evaluator_decision where attempt_id = ? and actor = 'human' order by id",
        attempt_id,
    )
    assert [json.loads(chunk)[0][-1] for (chunk,) in chunks] == [1, 1, 1, -1, 1]
    kinds = [
        k for (k,) in _query(db, "select kind from evaluator_intervention where attempt_id = ? order by id", attempt_id)
    ]
    assert kinds == ["take_over", "stop"]

    page.goto(f"{base}/attempts/{attempt_id}/")
    page.wait_for_selector("#review[data-ready='1']")
    assert page.is_visible("#non-autonomous")
    assert page.locator("#timeline .intervention-mark").count() == 2
    assert page.locator("#timeline .decision.human").count() == 5
    step = _query(
        db, "select step_index from evaluator_intervention where attempt_id = ? and kind = 'take_over'", attempt_id
    )[0][0]
    page.goto(f"{base}/attempts/{attempt_id}/#step={step}")
    wait_until(page, f"document.getElementById('step-number').textContent === '{step}'")
    assert "take_over by ivan" in page.inner_text("#step-notes")
    _shot(page, "review-with-intervention")
