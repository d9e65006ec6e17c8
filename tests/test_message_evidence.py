"""The stored messages are exactly what the policy received, for every transport, so that evidence
can be replayed against a policy (issue "Fidelity and recovery", point 5: call-NNNN.json left out
the action contract and budgets that the HTTP body carries)."""

import base64
import json

import msgpack
import numpy as np

from evaluator.policies.openpi import unpack
from tests.servers.policies import ChatServer, HttpPolicyServer, OpenPiServer, Status, always, zero_chunk


def _sent(attempt, media_root) -> list[bytes]:
    return [(media_root / a.path).read_bytes() for a in attempt.artifacts.filter(kind="message_sent").order_by("path")]


def _file(attempt, media_root, name: str) -> bytes:
    return (media_root / attempt.artifacts.get(path__endswith=name).path).read_bytes()


def test_a_stored_http_message_is_the_body_the_server_received(run_spec, servers, media_root):
    server = servers(HttpPolicyServer(always(zero_chunk())))
    attempt = run_spec(server.url, budget_mode="decisions", max_policy_calls=3)
    assert attempt.policy_calls == 3
    assert _sent(attempt, media_root) == server.bodies  # byte for byte, minus the HTTP framing
    first = json.loads(server.bodies[0])
    assert first["action_contract"]["dimension"] == 4 and first["budgets"]["max_policy_calls"] == 3
    # The frame inside the body is the stored lossless PNG, encoded once for both.
    assert base64.b64decode(first["image"]["data"]) == _file(attempt, media_root, "messages/call-0001.png")
    start = json.loads(_file(attempt, media_root, "messages/start.json"))
    assert (start["action_contract"], start["budgets"]) == (first["action_contract"], first["budgets"])
    assert start["token"] == first["token"]


def test_what_a_failed_call_sent_is_kept_too(run_spec, servers, media_root):
    server = servers(HttpPolicyServer(always(Status(500))))
    attempt = run_spec(server.url)
    assert (attempt.error_type, attempt.policy_calls) == ("policy_server_error", 1)
    assert _sent(attempt, media_root) == server.bodies and len(server.bodies) == 1


def test_a_stored_openpi_message_is_the_msgpack_the_server_received(run_spec, servers, media_root):
    server = servers(OpenPiServer(always({"actions": np.zeros((5, 4), dtype=np.float32)})))
    attempt = run_spec(f"openpi+{server.uri}", budget_mode="decisions", max_policy_calls=2)
    stored = _sent(attempt, media_root)
    assert stored == server.received and len(stored) == 2
    assert attempt.artifacts.filter(kind="message_sent", path__endswith=".msgpack").count() == 2
    observation = unpack(stored[0])
    assert observation["observation/image"].shape == (480, 640, 3)
    assert msgpack.unpackb(stored[0], raw=False, strict_map_key=False)  # plain msgpack, readable anywhere


def test_each_request_of_an_agent_method_is_stored_in_order(run_spec, servers, media_root):
    replies = lambda request, call: "The cube is left of the gripper." if call % 2 else json.dumps(zero_chunk())  # noqa: E731
    server = servers(ChatServer(replies))
    spec = f"openai+{server.base_url}?model=m&composition=analyze,act"
    attempt = run_spec(spec, interaction_mode="agent_method", max_policy_calls=2, budget_mode="decisions")
    names = sorted(attempt.artifacts.filter(kind="message_sent").values_list("path", flat=True))
    assert [n.rsplit("/", 1)[1] for n in names] == [
        "call-0001.sent-1.json",
        "call-0001.sent-2.json",
        "call-0002.sent-1.json",
        "call-0002.sent-2.json",
    ]
    assert _sent(attempt, media_root) == server.received


def test_in_process_programs_get_the_message_itself_and_nothing_is_sent(run_cell, media_root):
    attempt = run_cell(policy="noop", budget_mode="decisions", max_policy_calls=1)
    assert not attempt.artifacts.filter(kind="message_sent").exists()
    visible = json.loads(_file(attempt, media_root, "messages/call-0001.json"))
    assert visible["rgb"]["png"] == "call-0001.png" and visible["counters"]["policy_calls"] == 0
