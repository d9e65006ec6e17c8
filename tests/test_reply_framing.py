"""Issue "Nothing counted that should not be ... fifth round", item 5: "A policy server's `Content-Length: ²` (a
Unicode digit that `isdigit()` accepts and `int()` refuses) is a 500 on the policy check and crashes an episode with
two tracebacks, closed as RSI's own `infrastructure_error`/`evaluator`; the end-of-episode signal then raises on the
half-closed connection. Any malformed reply framing is a typed policy failure; the end-of-episode signal never
raises." Each reply here comes from a real server on loopback, written byte for byte."""

import json
import logging

import pytest

from tests.servers.policies import HttpPolicyServer, Raw, always

ACTIONS = b'{"actions": [[0.0, 0.0, 0.0, 0.0]]}'


def framed(length: bytes, body: bytes = ACTIONS, extra: bytes = b"") -> Raw:
    return Raw(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
        + length
        + b"\r\n"
        + extra
        + b"\r\n"
        + body
    )


MALFORMED_LENGTHS = {
    "a superscript two": "²".encode(),
    "an Arabic-Indic three": "٣".encode(),
    "a negative length": b"-5",
    "a length with a sign": b"+36",
    "a length in hex": b"0x24",
    "no number at all": b"many",
}


@pytest.mark.parametrize("length", MALFORMED_LENGTHS.values(), ids=MALFORMED_LENGTHS.keys())
def test_a_reply_whose_content_length_is_no_whole_number_is_the_policys_malformed_output(
    run_spec, servers, length, caplog
):
    server = servers(HttpPolicyServer(always(framed(length))))
    with caplog.at_level(logging.WARNING, logger="evaluator.policies.http_json"):
        attempt = run_spec(server.url)
    assert (attempt.outcome, attempt.error_type) == ("policy_error", "malformed_output"), attempt.error_detail[:400]
    assert "Traceback" not in attempt.error_detail
    assert attempt.policy_calls == 1 and attempt.environment_steps == 0
    # The end-of-episode signal goes out on a new connection, and is answered: nothing of it raised or was logged.
    assert [signal["end_of_episode"] for signal in server.ended] == [True]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_reply_that_closes_its_connection_mid_body_is_a_typed_transport_failure(run_spec, servers):
    server = servers(HttpPolicyServer(always(framed(b"500", extra=b"Connection: close\r\n"))))
    attempt = run_spec(server.url)
    assert (attempt.outcome, attempt.error_type) == ("policy_error", "policy_transport"), attempt.error_detail[:400]
    assert [signal["end_of_episode"] for signal in server.ended] == [True]


def test_the_policy_check_reports_a_malformed_content_length_as_a_typed_error_never_a_500(operator, servers):
    server = servers(HttpPolicyServer(always(framed("²".encode()))))
    response = operator.post(
        "/api/v1/policies/check",
        json.dumps({"policy": server.url, "benchmark": "fetch"}),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    assert (response.json()["valid"], response.json()["error_type"]) == (False, "malformed_output")
    page = operator.post("/policy-check/", {"benchmark": "fetch", "policy": server.url, "all_tasks": "on"})
    assert page.status_code == 200 and b"malformed_output" in page.content


def test_the_end_of_episode_signal_never_raises_whatever_the_connection_meets(monkeypatch):
    """The signal is sent after the result is decided: a fault of any kind while sending it is logged, never raised."""
    from evaluator.policies import http_json
    from evaluator.policies.base import EpisodeStart

    policy = http_json.HttpJsonPolicy("http://127.0.0.1:9/act")
    policy.start, policy.calls = EpisodeStart("t" * 32, "reach the target", {}, {}, ()), 1

    def broken_post(*args, **kwargs):
        raise AttributeError("'NoneType' object has no attribute 'settimeout'")

    monkeypatch.setattr(policy.connection, "post", broken_post)
    policy.end_episode()  # nothing raised
    assert policy.connection.connection is None
