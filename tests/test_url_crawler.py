"""A crawler: every URL pattern of the site, with existing, missing and malformed values and a query
string of malformed parameters, by GET and by POST, as every role, anonymous and admin included.
Nothing may answer 500 (issue 12, Done when)."""

import itertools

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, reverse

from evaluator.records.roles import ROLES

MALFORMED_QUERY = (
    "a=x&b=-1&campaign=1e9&since=garbage&until=2020-13-45&page=abc&sort=zzz&format=xml&task=%00"
    "&policy=" + "p" * 3000 + "&autonomous=maybe&outcome=%27;drop&next=//evil.example&step=-4"
)


def _patterns(resolver: URLResolver = None, namespace: str = ""):
    """(reverse name, parameter names) of every named pattern."""
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver):
            inner = f"{namespace}{entry.namespace}:" if entry.namespace else namespace
            yield from _patterns(entry, inner)
        elif isinstance(entry, URLPattern) and entry.name:
            pattern = entry.pattern
            names = list(getattr(pattern, "converters", {}) or pattern.regex.groupindex)
            yield namespace + entry.name, names


def _values(name: str, parameter: str, ids: dict) -> list[str]:
    if parameter == "app_label":
        return ["evaluator", "auth"]
    if parameter in ("object_id", "attempt_id"):
        return [str(ids["attempt"]), "999999", "0"] if "attempt" in name or parameter == "attempt_id" else ["1", "x"]
    if parameter == "campaign_id":
        return [str(ids["campaign"]), "999999"]
    if parameter == "step":
        return ["0", "3", "100000"]
    if parameter == "fmt":
        return ["json", "csv", "xml"]
    if parameter == "path":
        return ["video.mp4", "../../etc/passwd", "manifest.json", "nope"]
    return ["x", "1"]


def _urls(ids: dict) -> list[str]:
    urls = []
    for name, parameters in _patterns():
        for combo in itertools.product(*(_values(name, p, ids) for p in parameters)):
            try:
                url = reverse(name, kwargs=dict(zip(parameters, combo, strict=True)))
            except NoReverseMatch:
                continue
            urls += [url, f"{url}?{MALFORMED_QUERY}"]
    return urls


@pytest.fixture
def site_data(run_cell):
    attempt = run_cell(task="reach", policy="noop", budget_mode="decisions", max_policy_calls=2)
    return {"attempt": attempt.pk, "campaign": attempt.campaign_id}


def _clients():
    users = get_user_model()
    yield "anonymous", Client(raise_request_exception=False)
    for role in [None, *ROLES]:
        user = users.objects.create_user(f"crawler-{role or 'none'}", password="pw")
        if role:
            user.groups.add(Group.objects.get(name=role))
        client = Client(raise_request_exception=False)
        client.force_login(user)
        yield role or "no role", client
    admin = users.objects.create_superuser("crawler-admin", password="pw")
    client = Client(raise_request_exception=False)
    client.force_login(admin)
    yield "admin", client


def test_no_url_answers_500_to_any_role_with_any_parameters(site_data):
    urls = _urls(site_data)
    assert len(urls) > 100  # the evaluator's pages, the admin's, log-in and log-out
    failures = []
    for role, client in _clients():
        for url in urls:
            for method in ("get", "post"):
                if url.startswith("/accounts/logout/"):
                    continue  # logging out ends this client's session for the rest of the crawl
                status = getattr(client, method)(url).status_code
                if status >= 500:
                    failures.append(f"{role} {method.upper()} {url[:120]} -> {status}")
    assert failures == []
