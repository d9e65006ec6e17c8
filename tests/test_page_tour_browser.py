"""Every page at 1440x900 and at 390x844 in a real browser: screenshots of each in
test-artifacts/screenshots/, and at phone width no horizontal page scroll, a top-bar menu, tables
that scroll inside their box and the review panel under the picture (issue 12, point 9 and Done when)."""

from pathlib import Path

import pytest

from tests.servers.browser import DESKTOP, PHONE, launch_noop_campaign, logged_in, query, shot, wait_until
from tests.servers.site import daphne_site

pytestmark = pytest.mark.usefixtures("no_csp_violations")

NO_PAGE_SCROLL = "document.documentElement.scrollWidth <= window.innerWidth"


@pytest.fixture(scope="module")
def tour(tmp_path_factory, browser):
    """A site with two finished one-cell campaigns of the same cell (for compare) and one attempt left running."""
    tmp = tmp_path_factory.mktemp("tour")
    with daphne_site(tmp, users={"vera": ["operator", "intervener"], "nora": []}) as (base, env):
        db = Path(env["DATABASE_URL"].removeprefix("sqlite:///"))
        page = logged_in(browser, base, "vera")
        for _ in range(2):
            launch_noop_campaign(page, base, "reach", seed=1, decisions=12)
            page.click("#start-all")
            wait_until(page, "document.querySelectorAll('.cell[data-status=finished]').length === 1", timeout=120)
        launch_noop_campaign(page, base, "push", seed=3, decisions=2000)
        page.click("#start-all")
        running = query(db, "select max(id) from evaluator_attempt")[0][0]
        wait_until(page, "document.querySelectorAll('.cell[data-status=running]').length === 1", timeout=60)
        yield base, db, running
        page.close()


def _pages(base: str, db: Path, running: int) -> dict[str, str]:
    first, second = (row[0] for row in query(db, "select id from evaluator_attempt order by id limit 2"))
    return {
        "campaigns": "/",
        "launch": "/campaigns/new/",
        "campaign": "/campaigns/1/",
        "campaign-running": "/campaigns/3/",
        "review": f"/attempts/{first}/#step=6",
        "live": f"/attempts/{running}/live/",
        "attempts": "/attempts/",
        "benchmarks": "/benchmarks/",
        "compare-picker": "/campaigns/compare/",
        "compare": "/campaigns/compare/?a=1&b=2",
        "pair": f"/campaigns/compare/pair/?a={first}&b={second}",
        "leaderboards": "/leaderboards/",
        "leaderboard": "/leaderboards/fetch-development/rgb/decision-12-prefix-1/v1/",
        "tokens": "/account/tokens/",
        "not-found": "/campaigns/4242/",
    }


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_every_page_is_screenshotted_and_phone_width_never_scrolls_the_page_sideways(tour, browser, width):
    base, db, running = tour
    page = logged_in(browser, base, "vera", viewport=DESKTOP if width == "desktop" else PHONE)
    wide = []
    for name, path in _pages(base, db, running).items():
        response = page.goto(base + path)
        assert response.status == (404 if name == "not-found" else 200), name
        if name in ("review", "pair"):
            page.wait_for_selector(f"#{name}[data-ready='1']")
        if not page.evaluate(NO_PAGE_SCROLL):
            wide.append(name)
        shot(page, f"{name}-{width}")
    assert wide == []
    nobody = logged_in(browser, base, "nora", viewport=DESKTOP if width == "desktop" else PHONE)
    shot(nobody, f"no-role-{width}")
    anonymous = browser.new_context(viewport=DESKTOP if width == "desktop" else PHONE).new_page()
    anonymous.goto(base + "/accounts/login/")
    shot(anonymous, f"login-{width}")


def test_at_phone_width_the_top_bar_is_a_menu_and_panels_stack(tour, browser):
    base, db, running = tour
    page = logged_in(browser, base, "vera", viewport=PHONE)
    page.goto(base + "/")
    # "At 390 px the top bar collapses into a menu"
    assert page.is_visible("#menu-toggle") and page.is_hidden("nav.main")
    page.click("#menu-toggle")
    assert page.is_visible("nav.main") and page.is_visible("text=Log out")
    page.click("nav.main >> text=Attempts")
    assert page.url == base + "/attempts/"
    # "tables scroll inside their box": the table is wider than the screen, the page is not.
    assert page.evaluate("document.querySelector('#attempts-table').scrollWidth > window.innerWidth")
    assert page.evaluate(NO_PAGE_SCROLL)
    # "the review side panel stacks under the picture"
    first = query(db, "select min(id) from evaluator_attempt")[0][0]
    page.goto(f"{base}/attempts/{first}/")
    page.wait_for_selector("#review[data-ready='1']")
    picture, panel = page.locator(".screen").bounding_box(), page.locator("aside.panel").bounding_box()
    assert panel["y"] >= picture["y"] + picture["height"] - 1
    assert page.evaluate(NO_PAGE_SCROLL)
    page.goto(f"{base}/attempts/{running}/live/")
    page.wait_for_selector("#live-frame", state="visible")  # the placeholder gives way to the first frame
    assert page.is_hidden("#live-placeholder")
    picture, panel = page.locator("#live-frame").bounding_box(), page.locator("aside.panel").bounding_box()
    assert panel["y"] >= picture["y"] + picture["height"] - 1
    assert page.evaluate(NO_PAGE_SCROLL)
    desktop = logged_in(browser, base, "vera")
    assert desktop.is_hidden("#menu-toggle") and desktop.is_visible("nav.main")
