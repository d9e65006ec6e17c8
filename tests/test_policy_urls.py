"""Issue 42, items 6 and 9: policy URLs are parsed and checked at launch.

Item 6: "A policy URL with a bad port (`:99999`, `:-1`, `host:1:80`) is a 500 on the API, the launch and the policy
check, and a traceback in `evaluate`, when `RSI_POLICY_HOSTS` is set; without it the URL is accepted at launch.
Every policy URL is parsed and checked at launch: a 422 with the reason." Item 9: "Refuse a user or password in a
policy URL at launch (say in docs/policies.md how to pass a credential instead: a setting the server holds)."
"""

import io
import json
import re
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from evaluator.records.models import Campaign, Policy
from tests.servers.policies import HttpPolicyServer, always, zero_chunk

# The subject here is the records, the API and the pages: Fetch renders small (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("small_fetch_render")

ROOT = Path(__file__).resolve().parents[1]
BAD_PORTS = ["http://gpu7:99999/act", "http://gpu7:-1/act", "http://gpu7:1:80/act", "openpi+ws://gpu7:99999"]
WITH_CREDENTIALS = ["http://alice:secret@gpu7/act", "openai+http://alice@gpu7:8000/v1?model=m"]


def post(client, path: str, body: dict):
    return client.post(path, json.dumps(body), content_type="application/json")


def every_way_in(client, spec: str) -> list:
    plan = {"benchmark": "fetch", "tasks": ["reach"], "policy": spec}
    return [
        post(client, "/api/v1/campaigns/preview", plan),
        post(client, "/api/v1/campaigns", {**plan, "start": False}),
        post(client, "/api/v1/policies/check", {"policy": spec, "benchmark": "fetch"}),
        client.post("/campaigns/new/", {**plan, "seed": 0, "repeats": 1}),
    ]


def refused_everywhere(client, spec: str, reason: str) -> None:
    """The API's preview, create and check are a 422 saying `reason`, the launch page says it, `evaluate` fails
    with it, and nothing is stored."""
    *api, page = every_way_in(client, spec)
    for response in api:
        assert response.status_code == 422, response.content[:300]
        assert any(reason in r for r in response.json()["reasons"]), response.json()
    assert page.status_code == 200 and reason in page.content.decode()
    with pytest.raises(CommandError, match=re.escape(reason)):
        call_command("evaluate", "fetch", "--task", "reach", "--seed", "0", "--policy", spec, stdout=io.StringIO())
    assert not Campaign.objects.exists() and not Policy.objects.filter(spec=spec).exists()


@pytest.mark.parametrize("allowed", [[], ["gpu7"]], ids=["no-allow-list", "RSI_POLICY_HOSTS=gpu7"])
@pytest.mark.parametrize("spec", BAD_PORTS)
def test_a_bad_port_is_refused_with_the_reason_everywhere(operator, settings, allowed, spec):
    settings.RSI_POLICY_HOSTS = allowed
    refused_everywhere(operator, spec, "its port is not a number in 1..65535")


BAD_BRACKETS = ["http://[::1/okpol", "http://[zz]:80/x", "openpi+ws://[::1", "openai+http://[::1/v1?model=m"]
UNSENDABLE = {
    "a space in the path": "http://127.0.0.1:9/a b",
    "CR LF in the path": "http://127.0.0.1:9/act\r\nX-Injected: 1",
    "a tab in the host": "http://127.0.0.1\t:9/act",
    "a space in an openpi path": "openpi+ws://127.0.0.1:9/a b",
    "a control character in the query": "http://127.0.0.1:9/act?ckpt=\x073",
    "a non-ASCII path over HTTP": "http://127.0.0.1:9/politique-é",
}


@pytest.mark.parametrize("allowed", [[], ["gpu7"]], ids=["no-allow-list", "RSI_POLICY_HOSTS=gpu7"])
@pytest.mark.parametrize("spec", BAD_BRACKETS)
def test_an_unbalanced_or_invalid_ipv6_bracket_is_refused_with_the_reason_everywhere(operator, settings, allowed, spec):
    """Issue "... fifth round", item 7: "A policy URL with an unbalanced or invalid IPv6 bracket (`http://[::1/okpol`,
    `http://[zz]:80/x`, `openpi+ws://[::1`) is still a 500 on preview, create and check, and a traceback in
    `evaluate`"."""
    settings.RSI_POLICY_HOSTS = allowed
    refused_everywhere(operator, spec, "cannot be read")


@pytest.mark.parametrize("spec", UNSENDABLE.values(), ids=UNSENDABLE.keys())
def test_a_url_its_transport_cannot_send_is_refused_at_launch(operator, spec):
    """Item 8: "A policy URL with a space or CR LF passes the launch check and every call then fails as
    `policy_transport`: refuse it at launch, as its transport will parse it."""
    refused_everywhere(operator, spec, "percent-encoded")


def test_a_percent_encoded_url_reaches_its_server_as_written(run_spec, servers):
    server = servers(HttpPolicyServer(always({"stop": True})))
    run_spec(server.url + "/a%20b?ckpt=%C3%A9")
    assert server.paths == ["/act/a%20b?ckpt=%C3%A9"]


@pytest.mark.parametrize("spec", WITH_CREDENTIALS)
def test_a_user_or_password_in_a_policy_url_is_refused_and_never_stored(operator, spec):
    policies = Policy.objects.count()
    *api, page = every_way_in(operator, spec)
    for response in api:
        assert response.status_code == 422
        assert any("may not hold a user or password" in r for r in response.json()["reasons"])
    assert "may not hold a user or password" in page.content.decode()
    assert Policy.objects.count() == policies and not Campaign.objects.exists()
    assert "secret" not in json.dumps(list(Policy.objects.values_list("spec", "name")))


def test_a_credential_the_server_holds_is_sent_to_its_host_only(operator, servers, tmp_path, monkeypatch):
    server = servers(HttpPolicyServer(always(zero_chunk())))
    held = tmp_path / "credentials.json"
    held.write_text(json.dumps({"127.0.0.1": "Bearer held-by-the-server", "gpu7": "Bearer for-gpu7"}))
    monkeypatch.setenv("RSI_POLICY_CREDENTIALS", str(held))
    response = post(operator, "/api/v1/policies/check", {"policy": server.url, "benchmark": "fetch"})
    assert response.status_code == 200 and response.json()["valid"]
    assert b"Authorization: Bearer held-by-the-server\n" in server.received[0]
    assert b"for-gpu7" not in server.received[0]
    assert "held-by-the-server" not in response.content.decode()
