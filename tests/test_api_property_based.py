"""Issue 42, Done when: "A property-based run of every API operation from the generated OpenAPI document
(schemathesis, from PyPI), as an operator token and as a reviewer token, is part of the test suite: no 500, every
error a JSON body with a typed code."

A real daphne serves the site (tests/servers/site.py); schemathesis reads its OpenAPI document and generates
requests for each operation from it (valid and invalid ones), sent with a personal token made through the tokens
page. The site's policies may be served from loopback only (RSI_POLICY_HOSTS), so that no generated policy URL
makes the site contact another host.
"""

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from rsi_client import Client
from tests.servers.site import daphne_site, make_token

EXAMPLES = 30  # generated requests per operation and role


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site with one finished Fetch campaign (campaign 1, attempt 1), so that generated ids find records."""
    tmp = tmp_path_factory.mktemp("property-site")
    users = {"olga": ["operator"], "rita": ["reviewer"]}
    with daphne_site(tmp, users=users, RSI_POLICY_HOSTS="127.0.0.1") as (base, _):
        api = Client(base, token=make_token(base, "olga"), timeout_s=60)
        plan = {"benchmark": "fetch", "policy": "noop", "tasks": ["reach"], "budget_mode": "decisions"}
        campaign = api.launch(**plan, max_policy_calls=4, replan_interval=1)
        assert api.wait(campaign["id"], poll_s=0.5, timeout_s=120)["finished"] == 1
        yield base


def error_problems(response) -> list[str]:
    """Why an error reply is not the API's: a JSON object with a typed code and a list of reasons."""
    try:
        body = response.json()
    except ValueError:
        return [f"not JSON: {response.content[:100]!r}"]
    if not isinstance(body, dict) or not isinstance(body.get("code"), str) or not body["code"]:
        return [f"no typed code: {str(body)[:200]}"]
    if not isinstance(body.get("reasons"), list) or not all(isinstance(r, str) for r in body["reasons"]):
        return [f"no list of reasons: {str(body)[:200]}"]
    return []


@pytest.mark.parametrize("user", ["olga", "rita"], ids=["operator-token", "reviewer-token"])
def test_every_operation_answers_generated_requests_with_no_500_and_typed_json_errors(site, user):
    token = make_token(site, user)
    schema = schemathesis.openapi.from_url(site + "/api/v1/openapi.json")
    failures, seen = [], {}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 19  # every operation of the document, none skipped

    for operation in operations:

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def exercise(case):
            response = case.call(base_url=site, headers={"Authorization": f"Bearer {token}"}, timeout=120)
            seen.setdefault(case.operation.label, set()).add(response.status_code)
            where = f"{case.method} {case.formatted_path} -> {response.status_code}"
            if response.status_code >= 500:
                failures.append(f"{where}: {response.text[:300]}")
            elif response.status_code >= 400:
                failures.extend(f"{where}: {problem}" for problem in error_problems(response))

        exercise()
    assert not failures, "\n".join(failures[:30])
    assert set(seen) == {operation.label for operation in operations}
    # The tokens were honoured throughout: a revoked or throttled token would have made every answer a 401 or 429.
    assert any(code < 400 for codes in seen.values() for code in codes)
