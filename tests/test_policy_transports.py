"""Policies behind real servers started by the tests: full Fetch episodes through each transport,
with calls, decisions and executed steps counted on both sides (issue "Policies": Done when)."""

import json
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from evaluator.execution.launching import policy_for
from evaluator.records.models import Decision, Policy
from tests.parts import require_module
from tests.servers.policies import (
    ChatServer,
    Close,
    HttpPolicyServer,
    OpenPiServer,
    Sleep,
    Status,
    Text,
    always,
    first_then,
    zero_chunk,
)

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schemas"


def _assert_full_noop_episode(attempt, server):
    assert (attempt.outcome, attempt.error_type) == ("task_failure", "")
    assert attempt.environment_steps == attempt.steps.count() == 50
    assert attempt.policy_calls == attempt.action_decisions == server.count == 10
    assert list(attempt.decisions.values_list("executed", flat=True)) == [5] * 10


def test_an_http_json_server_runs_a_full_episode(run_spec, servers):
    server = servers(HttpPolicyServer(always(zero_chunk())))
    attempt = run_spec(server.url)
    _assert_full_noop_episode(attempt, server)
    assert attempt.accounting["provider_requests"] is None  # the server did not say: unknown, not zero
    assert attempt.accounting["latency_p50_ms"] > 0


def test_the_http_request_follows_the_published_schema(run_spec, servers):
    server = servers(HttpPolicyServer(always(zero_chunk())))
    run_spec(server.url, budget_mode="decisions", max_policy_calls=2)
    schema = json.loads((SCHEMAS / "policy-http-request.schema.json").read_text())
    for request in server.requests:
        jsonschema.validate(request, schema)
    assert server.requests[0]["image"]["shape"] == [480, 640, 3]
    response_schema = json.loads((SCHEMAS / "policy-http-response.schema.json").read_text())
    jsonschema.validate(zero_chunk(), response_schema)
    jsonschema.validate({"stop": True}, response_schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"stop": True, "actions": [[0.0]]}, response_schema)


def test_server_reported_usage_is_recorded(run_spec, servers):
    reply = {**zero_chunk(), "usage": {"provider_requests": 1, "input_tokens": 10, "output_tokens": 2}}
    server = servers(HttpPolicyServer(always(reply)))
    attempt = run_spec(server.url)
    assert attempt.accounting["provider_requests"] == 10
    assert (attempt.accounting["input_tokens"], attempt.accounting["output_tokens"]) == (100, 20)
    assert attempt.accounting["cost_usd"] is None


def test_an_openpi_server_runs_a_full_episode(run_spec, servers):
    server = servers(OpenPiServer(always({"actions": np.zeros((5, 4), dtype=np.float32)})))
    attempt = run_spec(f"openpi+{server.uri}")
    _assert_full_noop_episode(attempt, server)
    assert server.connections == 1  # one connection per episode, metadata first
    assert attempt.provenance["policy"]["transport"]["server_metadata"] == OpenPiServer.METADATA
    first = server.requests[0]
    assert first["observation/image"].shape == (480, 640, 3) and first["observation/image"].dtype == np.uint8
    assert first["prompt"] == "pick up the black cube and hold it at the red target"


def saved_zeros_module(folder: Path) -> Path:
    """A TorchScript module answering a chunk of zeros, saved under `folder`."""
    torch = require_module("torch")

    class Zeros(torch.nn.Module):
        def forward(self, image: torch.Tensor) -> torch.Tensor:
            # Uses the frame, so a wrong input would fail: the mean brightness scaled to nothing.
            return torch.zeros(5, 4) * image.float().mean()

    path = folder / "zeros.pt"
    torch.jit.script(Zeros()).save(str(path))
    return path


def test_a_torchscript_module_saved_by_the_test_runs_a_full_episode(run_spec, tmp_path, media_root):
    path = saved_zeros_module(tmp_path)
    attempt = run_spec(f"torchscript:{path}")
    assert (attempt.outcome, attempt.environment_steps, attempt.policy_calls) == ("task_failure", 50, 10)
    assert attempt.action_decisions == 10
    assert attempt.accounting["provider_requests"] == 0
    transport = attempt.provenance["policy"]["transport"]
    assert transport["torch"].startswith("2.13") and transport["device"] == "cpu"
    # The module's whole input is the frame: the evidence says so and points at the lossless PNG.
    sent = attempt.artifacts.filter(kind="message_sent").order_by("path").first()
    received = json.loads((media_root / sent.path).read_bytes())
    assert received == {"input": "image", "dtype": "uint8", "shape": [480, 640, 3], "pixels": "png"}


def test_a_torchscript_identity_follows_the_module_bytes(db, tmp_path):
    path = tmp_path / "m.pt"
    path.write_bytes(b"first")
    first = policy_for(f"torchscript:{path}")
    assert first.settings["module_sha256"]
    path.write_bytes(b"second")
    Policy.objects.all().delete()
    second = policy_for(f"torchscript:{path}")
    assert first.identity != second.identity


ACTION = json.dumps(zero_chunk())


def test_single_response_issues_exactly_one_provider_request_per_act(run_spec, servers):
    server = servers(ChatServer(always("```json\n" + ACTION + "\n```")))
    attempt = run_spec(f"openai+{server.base_url}?model=test-model", max_policy_calls=10)
    assert attempt.campaign.policy.kind == "general_purpose_model_method"
    assert server.count == attempt.policy_calls == attempt.action_decisions == 10
    assert attempt.environment_steps == attempt.steps.count() == 50
    assert list(attempt.decisions.values_list("provider_requests", flat=True)) == [1] * 10
    assert attempt.accounting["provider_requests"] == 10
    assert attempt.accounting["input_tokens"] == 10 * ChatServer.PROMPT_TOKENS
    assert attempt.accounting["output_tokens"] == 10 * ChatServer.COMPLETION_TOKENS
    request = server.requests[0]
    assert request["model"] == "test-model"
    image = request["messages"][1]["content"][1]["image_url"]["url"]
    assert image.startswith("data:image/png;base64,")


def test_agent_method_runs_its_declared_composition(run_spec, servers):
    replies = lambda request, call: "The cube is left of the gripper." if call % 2 else ACTION  # noqa: E731
    server = servers(ChatServer(replies))
    spec = f"openai+{server.base_url}?model=m&composition=analyze,act&usd_per_1k_input=0.001&usd_per_1k_output=0.002"
    attempt = run_spec(spec, interaction_mode="agent_method", max_policy_calls=3, budget_mode="decisions")
    assert attempt.campaign.protocol.protocol_id == "fetch-development/rgb/decision-3-prefix-5/agent-method/v1"
    assert server.count == 6 and attempt.accounting["provider_requests"] == 6
    # The act request sees the analysis of the same observation.
    act_text = server.requests[1]["messages"][1]["content"][0]["text"]
    assert "The cube is left of the gripper." in act_text
    assert server.requests[0]["messages"][1]["content"][1] == server.requests[1]["messages"][1]["content"][1]
    expected_cost = 6 * (ChatServer.PROMPT_TOKENS / 1000 * 0.001 + ChatServer.COMPLETION_TOKENS / 1000 * 0.002)
    assert attempt.accounting["cost_usd"] == pytest.approx(expected_cost)


def test_a_composition_is_refused_under_single_response(run_spec, servers):
    from evaluator.protocol.errors import ProtocolError

    server = servers(ChatServer(always(ACTION)))
    with pytest.raises(ProtocolError, match="exactly one request"):
        run_spec(f"openai+{server.base_url}?model=m&composition=analyze,act")
    assert server.count == 0


def test_a_chat_answer_without_json_is_malformed_output_and_never_repaired(run_spec, servers):
    server = servers(ChatServer(always("I would move the arm to the left.")))
    attempt = run_spec(f"openai+{server.base_url}?model=m")
    assert (attempt.outcome, attempt.error_type) == ("policy_error", "malformed_output")
    assert server.count == attempt.policy_calls == 1
    assert attempt.accounting["provider_requests"] == 1


BAD_HTTP = [
    (Sleep(3.0), "policy_error", "policy_timeout"),
    ({"actions": [[0.0] * 6]}, "contract_violation", "wrong_length"),
    (Text("sorry, no JSON"), "policy_error", "malformed_output"),
    (Close(), "policy_error", "policy_transport"),
    (Status(500), "policy_error", "policy_server_error"),
]
BAD_OPENPI = [
    (Sleep(3.0), "policy_error", "policy_timeout"),
    ({"actions": np.zeros((1, 6))}, "contract_violation", "wrong_length"),
    (Text("Traceback: boom"), "policy_error", "policy_server_error"),
    (Close(), "policy_error", "policy_transport"),
]


def _spec(kind, server):
    return f"{server.url}?timeout_s=1" if kind == "http" else f"openpi+{server.uri}?timeout_s=1"


def _server(kind, behaviour):
    return HttpPolicyServer(behaviour) if kind == "http" else OpenPiServer(behaviour)


@pytest.mark.parametrize(
    "kind, bad, outcome, error_type",
    [("http", *case) for case in BAD_HTTP] + [("openpi", *case) for case in BAD_OPENPI],
)
def test_a_bad_reply_ends_the_attempt_with_its_typed_error(run_spec, servers, kind, bad, outcome, error_type):
    server = servers(_server(kind, first_then(bad)))
    attempt = run_spec(_spec(kind, server))
    assert (attempt.outcome, attempt.error_type, attempt.success) == (outcome, error_type, False)
    assert attempt.policy_calls == server.count == 1  # never retried
    assert attempt.environment_steps == 0 and attempt.termination_reason == "error"


@pytest.mark.parametrize(
    "kind, bad, outcome, error_type",
    [("http", *case) for case in BAD_HTTP] + [("openpi", *case) for case in BAD_OPENPI],
)
def test_on_the_feedback_track_a_bad_reply_consumes_one_call(run_spec, servers, kind, bad, outcome, error_type):
    # "Every rejected response consumes a policy call ... the same last acknowledged observation is reused."
    server = servers(_server(kind, first_then(bad)))
    attempt = run_spec(_spec(kind, server), action_rejection_feedback=True, max_policy_calls=3, budget_mode="decisions")
    assert (attempt.outcome, attempt.error_type) == ("task_failure", "")
    assert (attempt.policy_calls, attempt.rejected_calls, attempt.environment_steps) == (3, 1, 10)
    rejected = attempt.decisions.get(index=1)
    assert rejected.kind == Decision.Kind.REJECTED and rejected.violation["kind"] == error_type
    second = attempt.decisions.get(index=2)
    assert second.observation_step == 0  # the same observation again
    if kind == "http":
        first_request, second_request = server.requests[0], server.requests[1]
        assert first_request["feedback"] is None and second_request["feedback"] == rejected.violation["message"]
        assert first_request["image"]["data"] == second_request["image"]["data"]
        assert second_request["counters"]["environment_steps"] == 0
        assert len(second_request["feedback"]) <= 200


def test_the_torchscript_host_loads_the_very_bytes_it_hashes(tmp_path):
    # Hostile input, third round, 15: "TorchScript loads the module from its path, then reads the file again to hash
    # it: hash the bytes, then load those same bytes." A named pipe gives its bytes once: a second read gets none.
    import hashlib
    import os
    import threading

    torch = require_module("torch")
    from evaluator.policies import torch_host

    class Doubles(torch.nn.Module):
        def forward(self, image: torch.Tensor) -> torch.Tensor:
            return torch.ones(1, 4) * 2

    saved = tmp_path / "doubles.pt"
    torch.jit.script(Doubles()).save(str(saved))
    data = saved.read_bytes()
    pipe = tmp_path / "module.pipe"
    os.mkfifo(pipe)
    writer = threading.Thread(target=lambda: pipe.write_bytes(data))
    writer.start()
    # A host that reads the path twice would wait for a second writer: after 10 s one comes, with no bytes.
    unblock = threading.Timer(10, lambda: pipe.open("wb").close())
    unblock.daemon = True
    unblock.start()
    try:
        model, loaded = torch_host.load({"path": str(pipe)})
    finally:
        unblock.cancel()
    writer.join(timeout=10)
    assert loaded["sha256"] == hashlib.sha256(data).hexdigest()
    [actions] = model.infer([({}, {"observation/image": np.zeros((4, 4, 3), dtype=np.uint8)})])
    assert actions.tolist() == [[2.0, 2.0, 2.0, 2.0]]


def test_a_model_hosts_slow_handshake_is_setup_never_charged_to_the_calls_deadline(run_spec, tmp_path, monkeypatch):
    # docs/policies.md: "One wall-clock deadline per call (`timeout_s`)", and a model host's load "is recorded ...
    # never as call latency". Connecting to the machine's own host is setup: on a busy machine the handshake may
    # take longer than a fast model's call deadline, and must not end the episode as a setup error.
    import time

    from evaluator.policies import openpi

    path = saved_zeros_module(tmp_path)
    handshakes = []

    def slow_connect(*args, **kwargs):
        handshakes.append(kwargs["open_timeout"])
        time.sleep(1.5)  # longer than the call deadline below
        return real_connect(*args, **kwargs)

    real_connect = openpi.connect
    monkeypatch.setattr(openpi, "connect", slow_connect)
    attempt = run_spec(f"torchscript:{path}?timeout_s=1")
    assert (attempt.outcome, attempt.error_type, attempt.policy_calls) == ("task_failure", "", 10)
    assert len(handshakes) == 1 and handshakes[0] > 1.5
