"""No dead ends: styled error pages with navigation, what a user without a role should ask for,
400s with their reason, an admin that offers only what the database allows (issue 12, point 7)."""

from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client, override_settings
from django.urls import path, reverse

from rsi_site.urls import urlpatterns as site_urlpatterns
from tests.servers.browser import logged_in, shot
from tests.servers.site import daphne_site


def _fault(request):
    raise RuntimeError("an evaluator fault")


urlpatterns = [*site_urlpatterns, path("fault/", _fault)]
handler500 = "rsi_site.errors.server_error"


def _client(*roles) -> Client:
    user = get_user_model().objects.create_user("uma", password="pw")
    for role in roles:
        user.groups.add(Group.objects.get(name=role))
    client = Client(raise_request_exception=False)
    client.force_login(user)
    return client


def _page(response) -> str:
    return response.content.decode().replace("&#x27;", "'")


def test_a_missing_record_gets_a_styled_404_with_navigation_and_log_out(catalogs):
    response = _client("reviewer").get(reverse("evaluator:campaign", args=[999]))
    page = _page(response)
    assert response.status_code == 404
    assert 'id="error-page" data-status="404"' in page
    assert 'class="main"' in page and "Log out" in page


def test_a_user_without_a_role_is_told_what_to_ask_for(catalogs):
    # "a user without a role sees what to ask for"
    response = _client().get("/")
    page = _page(response)
    assert response.status_code == 403
    assert 'id="no-role"' in page and "uma" in page
    for role in ("reviewer", "operator", "watcher", "intervener"):
        assert f"<b>{role}</b>" in page


def test_a_reviewer_who_may_not_launch_is_told_which_role_does(catalogs):
    page = _page(_client("reviewer").get(reverse("evaluator:launch")))
    assert "with the role reviewer, which does not allow this" in page
    assert "<b>operator</b>: launch campaigns" in page


@pytest.mark.parametrize(
    "url, message",
    [
        ("/campaigns/compare/?a=x&b=1", "a must be a record id"),
        ("/attempts/?since=garbage", "since must be a date, YYYY-MM-DD"),
    ],
)
def test_bad_query_parameters_are_a_400_that_says_why(catalogs, url, message):
    response = _client("reviewer").get(url)
    assert response.status_code == 400
    assert message in _page(response) and "Log out" in _page(response)


@override_settings(ROOT_URLCONF=__name__)
def test_a_server_error_gets_a_styled_500_page_without_details(catalogs):
    response = _client("reviewer").get("/fault/")
    page = _page(response)
    assert response.status_code == 500
    assert 'data-status="500"' in page and "Log out" in page
    assert "an evaluator fault" not in page  # no internals shown


def test_the_admin_offers_no_add_or_delete_that_the_database_would_refuse(admin_client, run_cell):
    attempt = run_cell(policy="noop", budget_mode="decisions", max_policy_calls=3)
    page = _page(admin_client.get(reverse("admin:evaluator_attempt_change", args=[attempt.pk])))
    assert "deletelink" not in page
    # "names records readably ... finished attempts' inlines collapsed"
    assert f"Attempt {attempt.pk}: fetch/pick_and_place, finished" in page
    assert page.count("collapse") >= 3
    listing = _page(admin_client.get(reverse("admin:evaluator_attempt_changelist")))
    assert f"Attempt {attempt.pk}: fetch/pick_and_place, finished" in listing
    assert reverse("admin:evaluator_attempt_add") not in listing and 'value="delete_selected"' not in listing
    for model in ("campaign", "decision", "step", "artifact", "intervention"):
        assert admin_client.get(reverse(f"admin:evaluator_{model}_add")).status_code == 403
    policy = attempt.campaign.policy
    assert "deletelink" not in _page(admin_client.get(reverse("admin:evaluator_policy_change", args=[policy.pk])))
    assert 'value="delete_selected"' not in _page(admin_client.get(reverse("admin:evaluator_policy_changelist")))
    assert admin_client.get(reverse("admin:evaluator_policy_delete", args=[policy.pk])).status_code == 403


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("errors")
    with daphne_site(tmp, users={"rita": ["reviewer"], "nora": []}) as (base, env):
        yield base, Path(env["DATABASE_URL"].removeprefix("sqlite:///"))


@pytest.mark.usefixtures("no_csp_violations")
def test_error_pages_in_the_browser_keep_the_navigation(site, browser):
    base, _ = site
    page = logged_in(browser, base, "rita")
    for status, url in ((404, "/campaigns/424242/"), (403, "/campaigns/new/"), (400, "/attempts/?since=garbage")):
        assert page.goto(base + url).status == status
        assert page.is_visible("nav.main") and page.is_visible("text=Log out")
        assert page.get_attribute("#error-page", "data-status") == str(status)
        shot(page, f"error-{status}")
    page.click("text=Campaigns")
    assert page.url == base + "/"
    nobody = logged_in(browser, base, "nora")  # lands on the home page, which a user without a role may not see
    assert nobody.is_visible("#no-role")
    shot(nobody, "error-403-no-role")
