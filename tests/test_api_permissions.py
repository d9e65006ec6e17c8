"""Issue 32: "Permission tests: every API endpoint × anonymous, no role, the four roles, a revoked and an expired
token", and "Every endpoint checks the same permissions as its page".

The endpoints come from the OpenAPI document, each with the permission it declares (x-rsi-permission); the test
that the document lists every endpoint is tests/test_api_openapi.py. A caller whose roles grant the permission
is sent a request that the endpoint then refuses on its merits (a missing record, an empty body): it gets past
the permission check, and nothing runs. A caller without it gets 403 before the body is read."""

import datetime
import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from django.utils import timezone

from evaluator.execution.launching import do_launch_campaign, ensure_builtin_policies
from evaluator.protocol.identity import configure
from evaluator.records.models import ApiToken
from evaluator.records.roles import ROLES
from evaluator.records.tokens import do_create_token, do_revoke_token
from evaluator.web.api import api
from tests.records import finish_cell

MISSING = 999_999


def endpoints() -> list[tuple[str, str, str]]:
    """(method, path template, permission) of every operation the OpenAPI document lists."""
    schema = api.get_openapi_schema(path_prefix="/api/v1")
    return [
        (method.upper(), path, operation["x-rsi-permission"])
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
    ]


ENDPOINTS = endpoints()


@pytest.fixture
def world(catalogs):
    """A finished one-cell fetch campaign: real ids for the GET endpoints, a leaderboard for its identity."""
    ensure_builtin_policies()
    campaign = do_launch_campaign(
        name="one", benchmark="fetch", task_names=["reach"], seeds=[0], policy="noop", config=configure("fetch")
    )
    attempt = campaign.attempts.get()
    finish_cell(attempt, "success")
    return {
        "campaign_id": campaign.pk,
        "attempt_id": attempt.pk,
        "name": "fetch",
        "protocol_id": campaign.protocol.protocol_id,
        "path": "manifest.json",
    }


def url_of(path: str, method: str, world: dict) -> str:
    """GET: real records; POST: a campaign that does not exist, so that nothing is started or prepared."""
    values = dict(world, campaign_id=MISSING) if method == "POST" else world
    for name, value in values.items():
        path = path.replace(f"{{{name}}}", str(value))
    query = f"?a={world['campaign_id']}&b={world['campaign_id']}" if path.endswith("/compare") else ""
    return path + query


def call(client: Client, method: str, url: str, **headers):
    if method == "GET":
        return client.get(url, **headers)
    return client.post(url, "{}", content_type="application/json", **headers)


def user_with(name: str, roles: list[str]):
    user = get_user_model().objects.create_user(name, password="pw")
    for role in roles:
        user.groups.add(Group.objects.get(name=role))
    return user


def bearer(user) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {do_create_token(user, 'test')[1]}"}


def test_the_document_lists_a_permission_for_each_endpoint_from_the_roles():
    known = {codename for codenames in ROLES.values() for codename in codenames} | {"authenticated"}
    assert len(ENDPOINTS) >= 17
    assert {permission for *_, permission in ENDPOINTS} <= known


@pytest.mark.parametrize(("method", "path", "permission"), ENDPOINTS, ids=[f"{m} {p}" for m, p, _ in ENDPOINTS])
def test_every_endpoint_answers_each_caller_as_its_roles_allow(world, method, path, permission):
    url = url_of(path, method, world)
    # Anonymous: 401, whatever the endpoint.
    response = call(Client(enforce_csrf_checks=True), method, url)
    assert (response.status_code, response.json()["code"]) == (401, "unauthenticated")

    # A revoked and an expired token: 401, saying which.
    holder = user_with("holder", ["operator", "intervener"])
    revoked_token, revoked = do_create_token(holder, "old")
    do_revoke_token(holder, revoked_token.pk)
    expired_token, expired = do_create_token(holder, "short", expires_in_days=1)
    ApiToken.objects.filter(pk=expired_token.pk).update(expires_at=timezone.now() - datetime.timedelta(seconds=1))
    for raw, code in ((revoked, "token_revoked"), (expired, "token_expired")):
        response = call(Client(), method, url, HTTP_AUTHORIZATION=f"Bearer {raw}")
        assert (response.status_code, response.json()["code"]) == (401, code)

    # No role, then each role, by token and by session: 403 exactly where the role lacks the permission.
    callers = [("no role", [])] + [(role, [role]) for role in ROLES]
    for label, roles in callers:
        user = user_with(label.replace(" ", "_"), roles)
        session = Client()
        session.force_login(user)
        allowed = permission == "authenticated" or any(permission in ROLES[r] for r in roles)
        for how, client, headers in (("token", Client(), bearer(user)), ("session", session, {})):
            response = call(client, method, url, **headers)
            body = response.json()
            if allowed:
                assert response.status_code not in (401, 403), (label, how, body)
            else:
                assert (response.status_code, body["code"]) == (403, "forbidden"), (label, how, body)
                assert body["reasons"] == [f"{user.username} may not {permission.replace('_', ' ')}"]


def test_the_pages_check_what_their_endpoints_check(world):
    """The same permission on both sides: a reviewer reads a campaign on its page and by the API, and may launch
    on neither; an operator may launch on both."""
    reviewer, operator = Client(), Client()
    reviewer.force_login(user_with("rita", ["reviewer"]))
    operator.force_login(user_with("olga", ["operator"]))
    pairs = [
        (f"/campaigns/{world['campaign_id']}/", f"/api/v1/campaigns/{world['campaign_id']}"),
        (f"/attempts/{world['attempt_id']}/", f"/api/v1/attempts/{world['attempt_id']}"),
    ]
    for page, endpoint in pairs:
        assert reviewer.get(page).status_code == 200 and reviewer.get(endpoint).status_code == 200
    assert reviewer.get("/campaigns/new/").status_code == 403
    assert reviewer.post("/api/v1/campaigns/preview", "{}", content_type="application/json").status_code == 403
    assert operator.get("/campaigns/new/").status_code == 200
    preview = operator.post(
        "/api/v1/campaigns/preview",
        json.dumps({"benchmark": "fetch", "policy": "noop", "tasks": ["reach"]}),
        content_type="application/json",
    )
    assert preview.status_code == 200 and preview.json()["cells"] == 1
