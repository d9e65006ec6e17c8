"""Driving Debian's chromium with Playwright (which downloads no browser of its own)."""

import time

from playwright.sync_api import Error as PlaywrightError

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


def login(page, base: str, user: str, password: str) -> None:
    page.goto(base + "/accounts/login/")
    page.fill("#id_username", user)
    page.fill("#id_password", password)
    page.click("#login-submit")
    page.wait_for_url(base + "/")


def launch_noop_campaign(page, base: str, task: str, seed: int, decisions: int) -> None:
    """Fill the launch form: the Fetch noop policy, decision mode with one-action decisions."""
    page.goto(base + "/campaigns/new/")
    page.select_option("#id_benchmark", "fetch")
    page.select_option("#id_tasks", [task])
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
