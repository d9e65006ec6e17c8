"""Driving Debian's chromium with Playwright (which downloads no browser of its own)."""

import sqlite3
import time
from pathlib import Path

from playwright.sync_api import Error as PlaywrightError

ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "test-artifacts" / "screenshots"
DESKTOP = {"width": 1440, "height": 900}
PHONE = {"width": 390, "height": 844}
# Chromium reports each Content-Security-Policy violation on the console; the conftest fixture
# no_csp_violations fails a test that caused one.
CSP_VIOLATIONS: list[str] = []

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]


def watch_csp(page):
    page.on("console", lambda m: CSP_VIOLATIONS.append(m.text) if "Content Security Policy" in m.text else None)
    return page


def shot(page, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def query(db: Path, sql: str, *args):
    with sqlite3.connect(db) as connection:
        return connection.execute(sql, args).fetchall()


def logged_in(browser, base: str, user: str, viewport: dict = DESKTOP):
    """A new page of a new browser context, logged in as `user` (password: the name twice)."""
    page = watch_csp(browser.new_context(viewport=viewport).new_page())
    login(page, base, user, user * 2)
    return page


def login(page, base: str, user: str, password: str) -> None:
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", user)
    page.fill("#id_password", password)
    page.click("#login-submit")
    page.wait_for_url(base + "/")


def choose_tasks(page, names: list[str]) -> None:
    """Tick these tasks in the launch form's task list (one checkbox per task of the chosen benchmark)."""
    for name in names:
        page.check(f'#id_tasks input[value="{name}"]')


VISIBLE_TASKS = """Array.from(document.querySelectorAll('#id_tasks input'))
    .filter(box => box.offsetParent !== null).map(box => box.value)"""


def launch_noop_campaign(page, base: str, task: str, seed: int, decisions: int) -> None:
    """Fill the launch form: the Fetch noop policy, decision mode with one-action decisions."""
    page.goto(base + "/campaigns/new/")
    page.select_option("#id_benchmark", "fetch")
    choose_tasks(page, [task])
    page.fill("#id_seed", str(seed))
    page.fill("#id_policy", "noop")
    page.select_option("#id_budget_mode", "decisions")
    page.fill("#id_max_policy_calls", str(decisions))
    page.fill("#id_replan_interval", "1")
    page.click("#preview")
    page.click("#create")
    page.wait_for_selector("#start-all")


def wait_until(page, expression: str, timeout: float = 30.0, poll: float = 0.2) -> None:
    """Wait until a JavaScript expression is true on the page. Playwright's wait_for_function builds
    its predicate with `new Function`, which the site's Content-Security-Policy (no unsafe-eval)
    forbids; page.evaluate runs through the DevTools protocol, which the policy does not govern."""
    deadline = time.monotonic() + timeout
    while not _evaluate(page, expression):
        if time.monotonic() > deadline:
            raise TimeoutError(f"still false after {timeout:g} s: {expression}")
        time.sleep(poll)


def _evaluate(page, expression: str):
    try:
        return page.evaluate(expression)
    except PlaywrightError as error:
        if "context was destroyed" in str(error) or "Cannot find context" in str(error):  # it reloaded: ask again
            return False
        raise


# Elements of a panel drawn outside it, or cut by their own overflow: text a reader cannot see. A box that scrolls
# (.table-box), a shortened identifier (.ident: full value on hover and copy) and a drawing's parts (cut at the
# drawing's edge) are cut on purpose.
CLIPPED = """(selector) => {
  const out = [];
  for (const panel of document.querySelectorAll(selector)) {
    const edge = panel.getBoundingClientRect();
    for (const node of panel.querySelectorAll('*')) {
      // a drawing's own parts are cut at its edge by design, as is what scrolls or is shortened on purpose
      if (node.ownerSVGElement || node.closest('.table-box, .table-scroll, .ident')) continue;
      if (node.offsetParent === null && !(node instanceof SVGElement)) continue;
      const box = node.getBoundingClientRect();
      const style = getComputedStyle(node);
      const outside = box.width > 0 && (box.right > edge.right + 1 || box.left < edge.left - 1);
      const cut = ['hidden', 'clip', 'auto', 'scroll'].includes(style.overflowX)
        && node.scrollWidth > node.clientWidth + 1;
      const name = node.tagName + (node.id ? '#' + node.id : '');
      if (outside || cut) out.push(name + ': ' + (node.textContent || '').trim().slice(0, 40));
    }
  }
  return out;
}"""


def clipped(page, selector: str) -> list[str]:
    """What the panels matching `selector` show cut or outside their edge (see CLIPPED)."""
    return page.evaluate(CLIPPED, selector)
