"""Driving Debian's chromium with Playwright (which downloads no browser of its own)."""

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
