"""Issue 32's pages in a real browser against a real daphne, under the site's Content-Security-Policy: a token made
and revoked on its page, the launch form's "Check policy", a leaderboard, and the API's browsable docs."""

import json
import re
import urllib.request
from pathlib import Path

import pytest

from tests.servers.browser import choose_tasks, launch_noop_campaign, logged_in, shot, wait_until
from tests.servers.site import daphne_site

pytestmark = pytest.mark.usefixtures("no_csp_violations")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("api-pages")
    with daphne_site(tmp, users={"olga": ["operator"]}) as (base, env):
        yield base, Path(env["DATABASE_URL"].removeprefix("sqlite:///"))


def me(base: str, token: str) -> int:
    request = urllib.request.Request(base + "/api/v1/me", headers={"Authorization": f"Bearer {token}"})
    try:
        return urllib.request.urlopen(request, timeout=30).status
    except urllib.error.HTTPError as error:
        return error.code


def test_a_token_is_made_shown_once_and_revoked_on_its_page(site, browser):
    base, _ = site
    page = logged_in(browser, base, "olga")
    page.click("a.user")
    page.fill("#id_name", "laptop")
    page.fill("#id_expires_in_days", "30")
    page.click("#create-token")
    token = page.inner_text("#token-value")
    assert re.fullmatch(r"rsi_[\w-]{40,}", token) and me(base, token) == 200
    shot(page, "api-token-made")
    page.goto(base + "/account/tokens/")
    assert page.locator("#token-value").count() == 0 and token not in page.content()
    assert page.inner_text("#tokens tbody tr .state") == "live"
    page.click("#tokens .revoke")
    assert "is revoked" in page.inner_text(".flash")
    assert page.inner_text("#tokens tbody tr .state").startswith("revoked")
    assert me(base, token) == 401


def test_check_policy_on_the_launch_form(site, browser):
    base, _ = site
    page = logged_in(browser, base, "olga")
    page.goto(base + "/campaigns/new/")
    page.select_option("#id_benchmark", "fetch")
    choose_tasks(page, ["slide"])
    page.fill("#id_policy", "noop")
    page.click("#check-policy")
    page.wait_for_selector("#policy-check")
    assert page.get_attribute("#check-verdict", "data-valid") == "1"
    assert page.inner_text("#check-chunk") == "5"
    assert page.input_value("#id_policy") == "noop"  # the form is as it was
    shot(page, "launch-check-policy")
    page.fill("#id_policy", "http://127.0.0.1:9/act")
    page.click("#check-policy")
    page.wait_for_selector("#check-error-type")
    assert page.inner_text("#check-error-type") == "policy_setup"


def test_a_finished_campaign_appears_on_its_leaderboard(site, browser):
    base, _ = site
    page = logged_in(browser, base, "olga")
    launch_noop_campaign(page, base, "reach", seed=5, decisions=3)
    page.click("#start-all")
    wait_until(page, "document.querySelectorAll('.cell[data-status=finished]').length === 1", timeout=120)
    page.click("text=Leaderboards")
    page.click("text=fetch-development/rgb/decision-3-prefix-1/v1")
    row = page.locator("#leaderboard tbody tr")
    assert row.count() == 1 and row.get_attribute("data-policy") == "noop"
    assert re.fullmatch(r"[01]/1 = [01]\.000 \[[0-9.]+, [0-9.]+\]", row.locator(".success .rate-value").inner_text())
    shot(page, "leaderboard")
    with page.expect_download() as download:
        page.click("#export-json")
    exported = json.loads(Path(download.value.path()).read_text())
    assert exported["rows"][0]["policy"] == "noop"


def test_the_api_docs_are_browsable_under_the_sites_policy(site, browser):
    base, _ = site
    page = logged_in(browser, base, "olga")
    page.goto(base + "/api/v1/docs")
    page.wait_for_selector(".opblock", timeout=30_000)
    paths = page.locator(".opblock-summary-path").all_inner_texts()
    assert "/api/v1/campaigns" in paths and "/api/v1/policies/check" in paths
    shot(page, "api-docs")
