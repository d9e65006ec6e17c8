"""Issue 32, item 5: "one call of a policy spec with a synthetic observation of the chosen benchmark's contract (its
frame size, state, instruction), reporting the reply's validity under that contract, its latency, its chunk length
and the typed error if any, with nothing stored as an attempt. On the launch form ("Check policy") and in the API
... Same caps and deadline as a run." Done when: "against a real openpi server and RSI's HTTP test servers: a valid
reply, a wrong-shaped one, a NaN, a timeout, an unreachable host: each reported with its typed error, no attempt
row written."
"""

import json
import time
from pathlib import Path

import pytest

from evaluator.records.models import Attempt, Campaign, Policy
from tests.servers.policies import Body, HttpPolicyServer, OpenPiServer, Sleep, always, zero_chunk
from tests.servers.processes import free_port

ROOT = Path(__file__).resolve().parents[1]
OPENPI_PYTHON = ROOT / ".venv-openpi" / "bin" / "python"


def check(client, policy: str, benchmark: str = "fetch", **fields) -> dict:
    response = client.post(
        "/api/v1/policies/check",
        json.dumps({"policy": policy, "benchmark": benchmark, **fields}),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    return response.json()


@pytest.fixture
def nothing_stored(operator):
    """Every check here leaves the records as they were: no attempt, no campaign, no policy of a new spec."""
    policies = Policy.objects.count()
    yield
    assert (Attempt.objects.count(), Campaign.objects.count(), Policy.objects.count()) == (0, 0, policies)


@pytest.mark.usefixtures("nothing_stored")
class TestAgainstRSIsHttpServers:
    def test_a_valid_reply_is_reported_with_its_latency_and_chunk_length(self, operator, servers):
        server = servers(HttpPolicyServer(always(zero_chunk(length=8))))
        result = check(operator, server.url, task="reach", sensors="privileged-state")
        assert (result["valid"], result["error_type"], result["chunk_length"]) == (True, None, 8)
        assert result["latency_ms"] > 0 and "the first 5 would execute" in result["message"]
        # "a synthetic observation of the chosen benchmark's contract (its frame size, state, instruction)"
        sent = server.requests[0]
        assert sent["image"]["shape"] == [480, 640, 3] and sent["instruction"] == "move the gripper to the red target"
        assert {name: len(value) for name, value in sent["sensors"].items()} == {
            "observation": 10,
            "achieved_goal": 3,
            "desired_goal": 3,
        }
        assert sent["counters"]["policy_calls"] == 0 and sent["budgets"]["replan_interval"] == 5
        assert result["observation"]["sensors"]["observation"] == {"shape": [10], "dtype": "float64"}

    def test_a_wrong_shaped_reply_is_a_contract_violation(self, operator, servers):
        server = servers(HttpPolicyServer(always(zero_chunk(width=3))))
        result = check(operator, server.url)
        assert (result["valid"], result["error_type"]) == (False, "wrong_length")
        assert result["latency_ms"] > 0 and "[0.0, 0.0, 0.0]" in result["reply_excerpt"]

    def test_a_nan_is_non_finite(self, operator, servers):
        server = servers(HttpPolicyServer(always(Body(b'{"actions": [[NaN, 0, 0, 0]]}'))))
        assert check(operator, server.url)["error_type"] == "non_finite"

    def test_a_reply_past_the_deadline_is_a_policy_timeout(self, operator, servers):
        server = servers(HttpPolicyServer(always(Sleep(5))))
        started = time.monotonic()
        result = check(operator, server.url + "?timeout_s=0.5")
        assert (result["valid"], result["error_type"]) == (False, "policy_timeout")
        assert time.monotonic() - started < 4  # the run's one deadline per call, not the server's sleep

    def test_an_unreachable_host_is_a_setup_error_with_no_call(self, operator):
        result = check(operator, f"http://127.0.0.1:{free_port()}/act")
        assert (result["valid"], result["error_type"], result["latency_ms"]) == (False, "policy_setup", None)

    def test_an_openpi_style_server_is_checked_over_its_websocket(self, operator, servers):
        server = servers(OpenPiServer(always({"actions": [[0.0, 0.0, 0.0, float("nan")]]})))
        result = check(operator, f"openpi+{server.uri}")
        assert (result["valid"], result["error_type"]) == (False, "non_finite")


def test_a_check_that_cannot_be_made_is_refused_with_every_reason(operator):
    response = operator.post(
        "/api/v1/policies/check",
        json.dumps({"policy": "nope:x", "benchmark": "fetch", "task": "fly", "sensors": "lidar"}),
        content_type="application/json",
    )
    body = response.json()
    assert (response.status_code, body["code"]) == (422, "launch_refused")
    assert len(body["reasons"]) == 2  # the sensor track (so no task can be looked up) and the policy
    assert any("lidar" in r for r in body["reasons"]) and any("nope:x" in r for r in body["reasons"])


def test_a_host_outside_the_allow_list_is_not_called(operator, settings, servers):
    settings.RSI_POLICY_HOSTS = ["gpu7"]
    server = servers(HttpPolicyServer(always(zero_chunk())))
    response = operator.post(
        "/api/v1/policies/check",
        json.dumps({"policy": server.url, "benchmark": "fetch"}),
        content_type="application/json",
    )
    assert response.status_code == 422 and "RSI_POLICY_HOSTS" in response.json()["reasons"][0]
    assert server.count == 0


def test_the_launch_forms_check_policy_button_shows_the_result_above_the_form(operator, servers):
    server = servers(HttpPolicyServer(always(zero_chunk(width=3))))
    page = operator.post(
        "/policy-check/",
        {"benchmark": "fetch", "tasks": ["push"], "policy": server.url, "seed": "0"},
    ).content.decode()
    assert 'id="check-verdict" data-valid="0"' in page and '<code id="check-error-type">wrong_length</code>' in page
    assert f'value="{server.url}"' in page  # the form keeps what was filled in
    assert server.requests[0]["instruction"] == "push the black cube to the red target"
    assert Attempt.objects.count() == 0


def test_a_reviewer_may_not_check_a_policy(client, catalogs):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group

    rita = get_user_model().objects.create_user("rita")
    rita.groups.add(Group.objects.get(name="reviewer"))
    client.force_login(rita)
    assert client.post("/policy-check/", {"benchmark": "fetch", "policy": "noop"}).status_code == 403


@pytest.mark.usefixtures("nothing_stored")
def test_a_real_openpi_server_answers_the_check(operator, stock_server):
    uri, log = stock_server("libero", 4)
    result = check(operator, f"openpi+{uri}?profile=libero")
    assert (result["valid"], result["chunk_length"]) == (True, 10)
    seen = json.loads(log.read_text().splitlines()[0])
    assert seen["observation/image"] == {"shape": [480, 640, 3], "dtype": "|u1", "zero": False}
    assert seen["prompt"] == {"type": "str"}


@pytest.mark.usefixtures("nothing_stored")
def test_a_real_openpi_servers_chunk_of_the_wrong_width_is_refused(operator, stock_server):
    uri, _ = stock_server("libero", 7)  # a policy trained for a 7-dimensional arm, pointed at Fetch's 4
    result = check(operator, f"openpi+{uri}?profile=libero")
    assert (result["valid"], result["error_type"], result["chunk_length"]) == (False, "wrong_length", None)


def test_a_policy_the_launch_refuses_is_refused_by_the_check_with_the_launchs_reasons(operator):
    # Issue 42, item 2: "The check runs the launch's own compatibility checks first and refuses with the same
    # reasons; a policy the launch would refuse is never called." fetch-oracle reads privileged state.
    checked = operator.post(
        "/api/v1/policies/check",
        json.dumps({"policy": "fetch-oracle", "benchmark": "fetch"}),
        content_type="application/json",
    )
    launched = operator.post(
        "/api/v1/campaigns/preview",
        json.dumps({"policy": "fetch-oracle", "benchmark": "fetch", "tasks": ["reach"]}),
        content_type="application/json",
    )
    assert (checked.status_code, launched.status_code) == (422, 422)
    assert checked.json()["reasons"] == [
        "policy fetch-oracle reads privileged state: select sensors 'privileged-state'"
    ]
    assert set(checked.json()["reasons"]) <= set(launched.json()["reasons"])
    assert Attempt.objects.count() == 0


REFUSED_VERSIONS = {
    "101 characters": "v" * 101,
    "a newline": "ckpt\n2",
    "a NUL": "ckpt\x002",
    "empty": "",
    "a float": 1.5,
    "a list": [1],
    "an object": {"step": 1},
    "a boolean": True,
}


@pytest.mark.parametrize("version", REFUSED_VERSIONS.values(), ids=REFUSED_VERSIONS.keys())
def test_the_check_refuses_a_policy_version_every_episode_refuses(operator, servers, run_spec, version):
    """Issue "... fifth round", item 11: "The policy check accepts a `policy_version` every episode refuses (101
    characters, newline, NUL, empty, float, list, dict, bool): the check must apply the episode's rules.\""""
    server = servers(HttpPolicyServer(always({**zero_chunk(), "policy_version": version})))
    result = check(operator, server.url, task="reach")
    assert (result["valid"], result["error_type"]) == (False, "malformed_output")
    assert "policy_version" in result["message"]
    attempt = run_spec(server.url, task="reach")
    assert (attempt.error_type, attempt.policy_calls, attempt.environment_steps) == ("malformed_output", 1, 0)


def test_the_check_says_the_policy_version_a_server_reports(operator, servers):
    for version, said in (("ckpt-1000", "ckpt-1000"), (2000, "2000")):
        server = servers(HttpPolicyServer(always({**zero_chunk(), "policy_version": version})))
        result = check(operator, server.url, task="reach")
        assert result["valid"] and result["message"].endswith(f"(policy_version {said})")
