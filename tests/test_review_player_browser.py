"""Issue 45, item 5: "A player for reviewing. The 640x480 frame is shown at 480x360 beside an 860 px step panel: let
the picture take the space (and fullscreen, zoom); dragging on the timeline scrubs while dragging; the speed list says
what 1x is (real time at the benchmark's control frequency: a 50-step Fetch episode lasts 2 s) and offers slower
speeds than 0.25x for close review." In chromium at 1440 px against a real daphne, with a real 50-step episode."""

import pytest

from rsi_client import Client
from tests.servers.browser import logged_in, shot, wait_until
from tests.servers.site import daphne_site, make_token

pytestmark = pytest.mark.usefixtures("no_csp_violations")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    users = {"olga": ["operator"], "rita": ["reviewer"]}
    with daphne_site(tmp_path_factory.mktemp("player"), users=users) as (base, _):
        client = Client(base, token=make_token(base))
        plan = {"benchmark": "fetch", "tasks": ["reach"], "seeds": [0], "policy": "noop"}
        client.evaluate(budget_mode="decisions", max_policy_calls=10, replan_interval=5, poll_s=0.5, **plan)
        yield base


def test_the_picture_takes_the_space_zooms_goes_full_screen_and_the_timeline_scrubs_while_dragged(site, browser):
    base = site
    # A tall window: the picture grows with it (at 1440x900 the timeline keeps its place above the fold).
    page = logged_in(browser, base, "rita", viewport={"width": 1440, "height": 1200})
    page.goto(f"{base}/attempts/1/")
    wait_until(page, "document.getElementById('step-count').textContent === '50'")
    width = page.evaluate("document.querySelector('#review .screen').getBoundingClientRect().width")
    assert width >= 800  # was 480 beside the step panel, whatever the window
    assert page.evaluate("document.getElementById('timeline').getBoundingClientRect().bottom") <= 1200
    real_time = page.evaluate("document.querySelector('#speed option[value=\"1\"]').textContent")
    assert real_time == "1× real time, 25 steps/s"
    assert page.get_attribute("#speed-label", "title").endswith("this episode's 50 steps last 2.0 s")
    speeds = page.evaluate("Array.from(document.querySelectorAll('#speed option')).map(o => o.value)")
    assert "0.1" in speeds and speeds.index("0.1") < speeds.index("0.25")
    page.click("#btn-zoom")
    assert page.inner_text("#btn-zoom") == "zoom 2×" and "zoomed" in page.get_attribute("#review .screen", "class")
    scale = page.evaluate("getComputedStyle(document.getElementById('exact-frame')).transform")
    assert scale.startswith("matrix(2, 0, 0, 2")
    page.click("#btn-zoom")
    page.click("#btn-zoom")  # 4x, then back to 1x
    assert page.inner_text("#btn-zoom") == "zoom 1×"
    page.click("#btn-fullscreen")
    wait_until(page, "document.fullscreenElement === document.querySelector('#review .screen')")
    page.evaluate("document.exitFullscreen()")  # what Esc does: the picture covers the page, its buttons too
    wait_until(page, "document.fullscreenElement === null")
    # Drag on the timeline: the step follows the pointer while the button is held.
    page.locator("#timeline").scroll_into_view_if_needed()
    box = page.locator("#timeline").bounding_box()
    y = box["y"] + 100
    page.mouse.move(box["x"] + box["width"] * 0.2, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.5, y, steps=5)
    middle = int(page.inner_text("#step-number"))
    page.mouse.move(box["x"] + box["width"] * 0.8, y, steps=5)
    later = int(page.inner_text("#step-number"))
    page.mouse.up()
    assert 10 < middle < later <= 50
    shot(page, "review-player-1440")
