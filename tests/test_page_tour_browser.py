"""Every page at 1440x900 and at 390x844 in a real browser: screenshots of each in
test-artifacts/screenshots/, and at phone width no horizontal page scroll, a top-bar menu, tables
that scroll inside their box and the review panel under the picture (issue 12, point 9 and Done when)."""

from pathlib import Path

import pytest

from tests.servers.browser import (
    DESKTOP,
    PHONE,
    VISIBLE_TASKS,
    clipped,
    launch_noop_campaign,
    logged_in,
    login,
    query,
    shot,
    wait_until,
)
from tests.servers.site import daphne_site

pytestmark = pytest.mark.usefixtures("no_csp_violations")

# One user per role, for the crawler (the password is the name twice).
CRAWLERS = {"rita": ["reviewer"], "olga": ["operator"], "walt": ["watcher"], "ivan": ["intervener"]}
NO_PAGE_SCROLL = "document.documentElement.scrollWidth <= window.innerWidth"


@pytest.fixture(scope="module")
def tour(tmp_path_factory, browser):
    """A site with two finished one-cell campaigns of the same cell (for compare) and one attempt left running, held
    by a start-paused hold before its first decision (a held episode renders nothing while the pages are toured)."""
    tmp = tmp_path_factory.mktemp("tour")
    with daphne_site(tmp, users={"vera": ["operator", "intervener"], "nora": [], **CRAWLERS}) as (base, env):
        db = Path(env["DATABASE_URL"].removeprefix("sqlite:///"))
        page = logged_in(browser, base, "vera")
        for _ in range(2):
            launch_noop_campaign(page, base, "reach", seed=1, decisions=12)
            page.click("#start-all")
            wait_until(page, "document.querySelectorAll('.cell[data-status=finished]').length === 1", timeout=120)
        launch_noop_campaign(page, base, "push", seed=3, decisions=2000)
        campaign_page, running = page.url, query(db, "select max(id) from evaluator_attempt")[0][0]
        page.on("dialog", lambda dialog: dialog.accept())
        page.goto(f"{base}/attempts/{running}/live/")
        page.click("#btn-start-paused")
        page.wait_for_selector("#starts-paused")
        page.goto(campaign_page)
        page.click("#start-all")
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
        "sim-to-real": "/sim-to-real/",
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


def _pair(db: Path) -> tuple[int, int]:
    first, second = (row[0] for row in query(db, "select id from evaluator_attempt order by id limit 2"))
    return first, second


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_the_pair_page_has_reviews_player_keys_link_and_labelled_traces(tour, browser, width):
    # Issue 35, point 10: "no arrow keys, no #step link, play loads one PNG a step, traces without legend or axes,
    # frames misaligned when a title wraps. Give it review's player and timeline."
    base, db, _ = tour
    first, second = _pair(db)
    page = logged_in(browser, base, "vera", viewport=DESKTOP if width == "desktop" else PHONE)
    page.goto(f"{base}/campaigns/compare/pair/?a={first}&b={second}#step=3")
    page.wait_for_selector("#pair[data-ready='1']")
    at = lambda: [page.get_attribute(f"#side-{s} .pair-frame", "data-step") for s in "ab"]  # noqa: E731
    assert page.inner_text("#step-number") == "3" and at() == ["3", "3"]
    page.keyboard.press("ArrowRight")
    assert page.inner_text("#step-number") == "4" and at() == ["4", "4"] and page.url.endswith("#step=4")
    assert page.get_attribute("#deep-link", "href") == "#step=4"
    page.keyboard.press("End")
    assert page.inner_text("#step-number") == "12" == page.inner_text("#step-count")
    page.keyboard.press("Home")
    assert at() == ["0", "0"] and page.is_disabled("#btn-prev")
    # Each trace has its legend (one entry per action component), its value scale and a step axis.
    for side in "ab":
        legend = page.inner_text(f"#side-{side} .side-legend")
        assert all(name in legend for name in ("dx", "dy", "dz", "gripper")), legend
        labels = page.locator(f"#side-{side} .trace .tick-label").all_text_contents()
        assert labels[0] == "0" and labels[-1] == "12"
        assert page.locator(f"#side-{side} .trace .value-label").count() == 3
    a, b = (page.locator(f"#side-{s} .screen").bounding_box() for s in "ab")
    # Both pictures level, whatever the titles; on a phone too, smaller (issue 45, point 8: "the pair page stacks A
    # above B so both are never in view at one step: put them side by side, smaller").
    assert abs(a["y"] - b["y"]) < 1 and a["x"] + a["width"] <= b["x"]
    if width != "desktop":
        assert page.evaluate(NO_PAGE_SCROLL)
    # Play shows the stored videos: no picture is fetched a step while they play.
    frames = []
    page.on("request", lambda r: frames.append(r.url) if "/frame/" in r.url else None)
    page.select_option("#speed", "0.25")
    page.locator("#pair").click(position={"x": 1, "y": 1})  # the keys go to the page, not the speed list
    page.keyboard.press(" ")
    wait_until(page, "document.getElementById('view-mode').textContent === 'videos'")
    wait_until(page, "document.getElementById('btn-play').textContent.includes('play')", timeout=30)
    assert page.inner_text("#step-number") == "12" and len(frames) <= 2  # the exact frames of the end, nothing else
    assert page.is_hidden("#side-a .pair-video") and page.get_attribute("#side-a .pair-frame", "data-step") == "12"


def test_wide_screens_use_the_width_with_short_ids_and_tabular_numbers(tour, browser):
    # Issue 35, point 3: "Use the width; abbreviate ids with the full value on hover and copy; numbers right-aligned
    # in tabular figures."
    base, db, _ = tour
    context = browser.new_context(viewport=DESKTOP)
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = context.new_page()
    login(page, base, "vera", "veravera")
    page.goto(base + "/attempts/")
    assert page.locator("main").bounding_box()["width"] > 1350
    box = page.locator(".table-box").first
    widths = box.evaluate("b => [b.scrollWidth, b.clientWidth]")
    assert widths[0] <= widths[1], widths  # every column in view, the sort column too
    protocols = {row[0] for row in query(db, "select protocol_id from evaluator_protocolidentity")}
    ident = page.locator("#attempts-table .ident code").first
    protocol = ident.get_attribute("title")
    assert protocol in protocols and ident.inner_text() == protocol
    assert ident.bounding_box()["height"] < 24  # one line, not three
    number = page.locator("#attempts-table td.num").first
    assert number.evaluate("n => getComputedStyle(n).textAlign") == "right"
    assert number.evaluate("n => getComputedStyle(n).fontVariantNumeric") == "tabular-nums"
    page.locator("#attempts-table button.copy").first.click()
    wait_until(page, "document.querySelector('#attempts-table button.copy').classList.contains('copied')")
    assert page.evaluate("navigator.clipboard.readText()") == protocol
    context.close()


def test_at_phone_width_the_named_panels_clip_nothing_and_tables_keep_their_key_column(tour, browser):
    # Issue 35, point 1: "the review step panel clips its values; launch help texts are cut at the card edge;
    # sim-to-real pushes the page to 660 px; the attempts table shows only 4 columns with outcome hidden".
    base, db, _ = tour
    first, _ = _pair(db)
    page = logged_in(browser, base, "vera", viewport=PHONE)
    page.goto(f"{base}/attempts/{first}/#step=6")
    page.wait_for_selector("#review[data-ready='1']")
    assert clipped(page, "aside.panel") == []
    page.goto(base + "/campaigns/new/")
    assert clipped(page, "#launch-form") == [] and clipped(page, "#readiness") == []
    page.goto(base + "/sim-to-real/")
    assert clipped(page, "section.sim-to-real") == [] and page.evaluate("document.documentElement.scrollWidth") <= 390
    page.goto(base + "/attempts/")
    headers = page.locator("#attempts-table th").all_inner_texts()
    assert [h.strip(" ▲▼") for h in headers[:3]] == ["#", "task", "outcome"]
    outcome = page.locator("#attempts-table th").nth(2).bounding_box()
    assert outcome["x"] + outcome["width"] <= 390  # the outcome in view without scrolling
    box = page.locator(".table-box").first
    box.evaluate("b => { b.scrollLeft = b.scrollWidth; }")
    key = page.locator("#attempts-table tbody tr td").first.bounding_box()
    assert key["x"] >= box.bounding_box()["x"] - 1  # the attempt's number stays in view while the rest scrolls


def test_sim_to_real_opens_with_a_summary_and_readable_plots(tour, browser):
    # Issue 35, point 11: "A summary table first, then readable plots (labelled points, axes 0–1 with ticks, the
    # diagonal)."
    base, _, _ = tour
    page = logged_in(browser, base, "vera")
    page.goto(base + "/sim-to-real/")
    rows = page.locator("#summary-table tbody tr")
    sections = page.locator("section.sim-to-real")
    assert rows.count() == sections.count() == 9
    first = sections.first
    ticks = ["0", "0.25", "0.5", "0.75", "1"]
    assert first.locator(".tick").all_text_contents() == [t for t in ticks for _ in "xy"]  # both axes, 0 to 1
    assert first.locator(".diagonal").count() == 1
    labels = first.locator(".point-label").all_text_contents()
    assert labels == [str(n) for n in range(1, first.locator("circle").count() + 1)]
    assert first.locator("svg.scatter").bounding_box()["width"] >= 250
    assert "published (SimplerEnv paper); published" not in page.inner_text("main")
    summary, plot = page.locator("#summary").bounding_box(), first.bounding_box()
    assert summary["y"] < plot["y"]


@pytest.mark.parametrize("width", ["desktop", "phone"])
def test_the_launch_form_shows_the_benchmarks_fields_its_defaults_and_the_preview_where_one_looks(tour, browser, width):
    # Issue 35, point 6: "Show only the benchmark's fields, defaults as placeholders, a policy picker (registered
    # policies and 'a server address'), the preview where the user is looking."
    base, _, _ = tour
    page = logged_in(browser, base, "vera", viewport=DESKTOP if width == "desktop" else PHONE)
    page.goto(base + "/campaigns/new/")
    page.select_option("#id_benchmark", "fetch")
    assert page.is_hidden("#section-full") and page.is_hidden("#field-task_scope")
    assert page.evaluate(VISIBLE_TASKS) == ["pick_and_place", "push", "reach", "slide"]
    assert page.get_attribute("#id_max_policy_calls", "placeholder") == "default 50"
    page.select_option("#id_budget_mode", "decisions")
    assert page.get_attribute("#id_max_policy_calls", "placeholder") == "default 10"
    assert page.get_attribute("#id_runner_step_cap", "placeholder") == "default 50"
    page.select_option("#id_benchmark", "simpler_env")
    assert page.is_visible("#section-full") and page.is_hidden("#field-task_scope")
    page.select_option("#id_benchmark", "simple_humanoid")
    assert page.is_visible("#field-task_scope") and page.is_hidden("#section-full")
    assert page.is_hidden("#field-action_rejection_feedback")  # SIMPLE's feedback is always on
    page.select_option("#id_benchmark", "fetch")
    page.check('#id_tasks input[value="reach"]')
    page.select_option("#policy-picker", "noop")
    assert page.input_value("#id_policy") == "noop"
    page.fill("#id_policy", "http://127.0.0.1:9/act")
    assert page.input_value("#policy-picker") == ""  # a server address: no registered policy chosen
    page.select_option("#policy-picker", "noop")
    page.click("#preview")
    page.wait_for_selector("#preview-panel")
    assert page.url.endswith("#launch-result")
    panel = page.locator("#preview-panel").bounding_box()
    viewport = page.viewport_size
    assert -2 < panel["y"] < viewport["height"] / 2  # the preview is where the user looks, its Create with it
    assert page.locator("#create").bounding_box()["y"] < viewport["height"]
    shot(page, f"launch-preview-{width}")
    # Point 7: a benchmark this host cannot run still previews its plan; only Create is refused, with the reason,
    # where the preview shows.
    page.select_option("#id_benchmark", "simple_humanoid")
    page.check('#id_tasks input[value="G1WholebodyBendPickMP-v0"]')
    page.click("#preview")
    page.wait_for_selector("#create-refused")
    assert page.locator("#create").count() == 0 and page.inner_text("#resolved-identity").startswith("simple-")
    assert "cannot run simple_humanoid" in page.inner_text("#create-refused")
    assert -2 < page.locator("#preview-panel").bounding_box()["y"] < viewport["height"] / 2
    shot(page, f"launch-refused-{width}")


# What the crawler does not open as a page: downloads (exports, evidence files, videos, pictures), the API, the
# admin, and logging out (it would end the crawl).
NOT_PAGES = ("format=", "/files/", "/artifact", "/frame/", "/thumbnail/", ".mp4", ".png", ".zip", "/api/", "/admin/")
NOT_PAGES += ("/accounts/logout/", "/export/", ".csv", ".json")


def _crawl(page, base: str, limit: int = 80) -> tuple[dict[str, int], list[str]]:
    """Every page reachable by links from the home page, each address once (one of its sort or filter variants):
    ({page: status}, the 4xx and 5xx the browser met on them besides the page's own status, console errors, the
    pages wider than the screen, and text cut or drawn outside the page)."""
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"{page.url}: console {m.text}") if m.type == "error" else None)
    page.on(
        "response",
        lambda r: (
            problems.append(f"{page.url}: {r.status} {r.url}")
            if r.status >= 400 and r.request.resource_type != "document"
            else None
        ),
    )
    # the home page, and a comparison (the picker is a form, not a link): its pairs link the side-by-side pages
    seen, statuses, queue = set(), {}, ["/", "/campaigns/compare/?a=1&b=2"]
    while queue and len(statuses) < limit:
        path = queue.pop(0)
        variant = (
            path.split("#")[0].split("?")[0] + "?" + ",".join(sorted(k.split("=")[0] for k in path.split("?")[1:]))
        )
        if variant in seen:
            continue
        seen.add(variant)
        before = len(problems)
        response = page.goto(base + path)
        statuses[path] = response.status
        page.wait_for_timeout(300)  # what the page fetches after it loads (timelines, sockets)
        if response.status >= 400:  # the page's own status, asserted apart: the browser logs it too
            problems[before:] = [p for p in problems[before:] if "the server responded with a status" not in p]
        if not page.evaluate(NO_PAGE_SCROLL):
            problems.append(f"{path}: wider than the screen")
        problems += [f"{path}: cut or outside the page: {what}" for what in clipped(page, "main")]
        for href in page.eval_on_selector_all("a[href]", "links => links.map(a => a.getAttribute('href'))"):
            if href.startswith("/") and not href.startswith("//") and not any(n in href for n in NOT_PAGES):
                queue.append(href.split("#")[0])
    return statuses, problems


@pytest.mark.parametrize(
    "user, width",
    [(user, "desktop") for user in ("rita", "olga", "walt", "ivan", "vera", "nora")] + [("vera", "phone")],
)
def test_a_crawl_of_every_page_as_every_role_meets_no_4xx_in_the_browser(tour, browser, user, width):
    # Issue 35, Done when: "A crawler run of every page as every role shows no 4xx in the browser console other
    # than the ones a test provokes on purpose"; point 1: "Every page at 390 px: no clipped text, no page wider than
    # the screen".
    base, _, _ = tour
    page = logged_in(browser, base, user, viewport=DESKTOP if width == "desktop" else PHONE)
    statuses, problems = _crawl(page, base)
    assert problems == []
    if user == "nora":  # no role: the pages say which role to ask for (403); only her own tokens page opens
        assert statuses["/"] == 403 and {p for p, s in statuses.items() if s == 200} <= {"/account/tokens/"}
    else:
        assert [p for p, s in statuses.items() if s != 200] == []
        every_role_reads = ["/", "/attempts/", "/benchmarks/", "/leaderboards/", "/sim-to-real/", "/account/tokens/"]
        every_role_reads += ["/campaigns/1/", "/campaigns/3/", "/attempts/1/", "/campaigns/compare/"]
        every_role_reads += ["/campaigns/compare/pair/?a=1&b=2"]
        assert set(every_role_reads) <= set(statuses), sorted(statuses)


def test_review_names_the_call_that_saw_the_frame(tour, browser):
    # Issue 35, point 12: "at step K review shows 'call K+1'" (the live chunk: tests/test_dashboard_browser.py).
    base, db, _ = tour
    first, _ = _pair(db)
    page = logged_in(browser, base, "vera")
    page.goto(f"{base}/attempts/{first}/#step=6")
    page.wait_for_selector("#review[data-ready='1']")
    # one action a decision: the call that saw the frame after 6 steps is call 7, and it chose step 7's action
    assert page.inner_text("#step-message").startswith("call 7 saw this frame and chose what follows: png json")
