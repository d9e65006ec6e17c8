"""Issue 45, item 10: "Tokens and API docs: a copy button and a ready-to-paste `export RSI_URL=... RSI_TOKEN=...`
line when a token is shown; the account menu reachable (the grey user name looks disabled on a phone); the API docs
page has a way back to the site." In chromium at 390 and 1440 px against a real daphne."""

import shlex

import pytest

from tests.servers.browser import DESKTOP, PHONE, logged_in, shot
from tests.servers.site import daphne_site

pytestmark = pytest.mark.usefixtures("no_csp_violations")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    with daphne_site(tmp_path_factory.mktemp("tokens"), users={"olga": ["operator"]}) as (base, _):
        yield base


@pytest.mark.parametrize("viewport", [PHONE, DESKTOP], ids=["390", "1440"])
def test_the_account_menu_leads_to_a_token_shown_with_copy_buttons_and_a_line_to_paste(site, browser, rsi, viewport):
    base = site
    page = logged_in(browser, base, "olga", viewport=viewport)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base)
    if viewport is PHONE:
        page.click("#menu-toggle")
    assert page.inner_text("#account-link") == "olga · API tokens"
    page.click("#account-link")
    page.wait_for_selector("#token-form")
    page.fill("#id_name", "shell")
    page.click("#create-token")
    page.wait_for_selector("#token-export")
    token = page.inner_text("#token-value")
    line = page.inner_text("#token-export")
    assert line == f"export RSI_URL={base} RSI_TOKEN={token}"
    page.click("#copy-export")
    page.wait_for_selector("#copy-export[title=copied]")
    assert page.evaluate("navigator.clipboard.readText()") == line
    page.click("#copy-token")
    page.wait_for_selector("#copy-token[title=copied]")
    assert page.evaluate("navigator.clipboard.readText()") == token
    shot(page, f"token-shown-{viewport['width']}")
    # The line, pasted into a shell, is all the client needs.
    settings = dict(part.split("=", 1) for part in shlex.split(line)[1:])
    whoami = rsi("whoami", token=settings["RSI_TOKEN"], url=settings["RSI_URL"])
    assert whoami.returncode == 0 and whoami.stdout.startswith("olga (operator)")


def test_the_api_docs_lead_back_to_the_site(site, browser):
    page = logged_in(browser, site, "olga", viewport=PHONE)
    page.goto(site + "/api/v1/docs")
    page.wait_for_selector("#swagger-ui .info")
    shot(page, "api-docs-390")
    page.click("#back-to-site")
    page.wait_for_url(site + "/")
