"""Policy transports under abuse, against real servers that misbehave on purpose (issue "Records that
cannot lie, and inputs that cannot hurt", points 7, 8 and 9): one wall-clock deadline per call, capped
replies, typed errors everywhere, and nothing an evaluator fault could erase."""

import json
import os
import socket
import time
from pathlib import Path

import numpy as np
import pytest

from evaluator.policies.calls import MAX_REPLY_BYTES
from evaluator.policies.chat import parse_action_json
from evaluator.protocol.actions import MAX_CHUNK_ACTIONS
from evaluator.protocol.errors import ProtocolError
from tests.parts import require_module
from tests.servers.policies import (
    ChatServer,
    Completion,
    HttpPolicyServer,
    OpenPiServer,
    Sleep,
    Text,
    Trickle,
    always,
    zero_chunk,
)

# The subject here is the records, the API and the pages: Fetch renders small (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("small_fetch_render")

ACTION = json.dumps(zero_chunk())


def _timed(run_spec, spec, **options):
    started = time.monotonic()
    attempt = run_spec(spec, **options)
    return attempt, time.monotonic() - started


# 7. Deadlines per call, not per read.


def test_an_http_server_trickling_its_reply_times_out_at_the_calls_deadline(run_spec, servers):
    server = servers(HttpPolicyServer(always(Trickle(zero_chunk(), 0.2))))  # a byte every 0.2 s: ~20 s
    attempt, wall = _timed(run_spec, f"{server.url}?timeout_s=1.5")
    assert (attempt.outcome, attempt.error_type, attempt.policy_calls) == ("policy_error", "policy_timeout", 1)
    latency = attempt.decisions.get().latency_ms
    assert 1400 <= latency <= 2500  # the policy's time: the deadline, not a read timeout renewed per byte
    assert wall < 15


def test_a_chat_endpoint_trickling_its_reply_times_out_at_the_calls_deadline(run_spec, servers):
    server = servers(ChatServer(always(Trickle(ACTION, 0.2))))
    attempt, _ = _timed(run_spec, f"openai+{server.base_url}?model=m&timeout_s=1.5")
    assert (attempt.error_type, attempt.policy_calls) == ("policy_timeout", 1)
    assert attempt.decisions.get().latency_ms <= 2500


def test_one_deadline_covers_every_request_of_an_agent_method(run_spec, servers):
    server = servers(ChatServer(always(Sleep(0.9))))
    spec = f"openai+{server.base_url}?model=m&composition=analyze,act&timeout_s=1.5"
    attempt = run_spec(spec, interaction_mode="agent_method")
    # analyze takes 0.9 s; act gets only what is left of the call's 1.5 s, and takes 0.9 s too.
    assert attempt.error_type == "policy_timeout" and attempt.decisions.get().latency_ms <= 2500


def test_an_openpi_timeout_is_charged_no_close_handshake(run_spec, servers):
    server = servers(OpenPiServer(always(Sleep(5))))
    attempt, wall = _timed(run_spec, f"openpi+{server.uri}?timeout_s=1")
    assert (attempt.error_type, attempt.policy_calls) == ("policy_timeout", 1)
    assert attempt.decisions.get().latency_ms <= 1600
    assert wall < 10


# 8. Reply size caps.


def test_an_http_reply_over_the_byte_cap_is_malformed_output_and_not_stored_whole(run_spec, servers, media_root):
    huge = {"actions": [[0.0] * 4] * 200_000}  # about 3.6 MB of JSON
    server = servers(HttpPolicyServer(always(huge)))
    attempt = run_spec(server.url)
    assert (attempt.outcome, attempt.error_type) == ("policy_error", "malformed_output")
    decision = attempt.decisions.get()
    assert f"larger than {MAX_REPLY_BYTES} bytes" in decision.violation["message"]
    assert (media_root / attempt.evidence_dir / "decisions.jsonl").stat().st_size < 10_000


def test_a_chunk_of_too_many_actions_is_malformed_output_with_a_bounded_excerpt(run_spec, servers, media_root):
    long_chunk = {"actions": [[0.0, 0.0, 0.0, 0.0]] * (MAX_CHUNK_ACTIONS * 5)}  # under the byte cap
    assert len(json.dumps(long_chunk)) < MAX_REPLY_BYTES
    server = servers(HttpPolicyServer(always(long_chunk)))
    attempt = run_spec(server.url)
    assert (attempt.error_type, attempt.environment_steps) == ("malformed_output", 0)
    decision = attempt.decisions.get()
    assert decision.violation["kind"] == "chunk_too_long"
    assert (
        decision.response["rsi_size"] == len(json.dumps(long_chunk)) and len(decision.response["rsi_excerpt"]) == 65536
    )


def test_a_longer_chunk_within_the_cap_still_executes_its_permitted_prefix(run_spec, servers):
    server = servers(HttpPolicyServer(always({"actions": [[0.0] * 4] * 50})))  # openpi-style horizons
    attempt = run_spec(server.url, budget_mode="decisions", max_policy_calls=2)
    assert (attempt.outcome, attempt.environment_steps) == ("task_failure", 10)


def test_an_openpi_reply_over_the_byte_cap_is_malformed_output(run_spec, servers):
    server = servers(OpenPiServer(always({"actions": np.zeros((100_000, 4), dtype=np.float32)})))  # 1.6 MB
    attempt = run_spec(f"openpi+{server.uri}")
    assert (attempt.outcome, attempt.error_type) == ("policy_error", "malformed_output")


# 9. Typed errors everywhere.


def _completion(content, usage=None):
    return Completion(
        {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
            **({"usage": usage} if usage is not None else {}),
        }
    )


def test_chat_content_given_as_text_parts_is_read(run_spec, servers):
    parts = [{"type": "text", "text": "```json\n"}, {"type": "text", "text": ACTION + "\n```"}]
    server = servers(ChatServer(always(_completion(parts, {"prompt_tokens": 10, "completion_tokens": 2}))))
    attempt = run_spec(f"openai+{server.base_url}?model=m", budget_mode="decisions", max_policy_calls=2)
    assert (attempt.outcome, attempt.environment_steps, attempt.policy_calls) == ("task_failure", 10, 2)


@pytest.mark.parametrize(
    "completion",
    [
        _completion(ACTION, usage="12 tokens"),
        _completion([{"type": "image_url", "image_url": {"url": "data:,"}}]),
        _completion(42),
        Completion({"choices": "none"}),
    ],
    ids=["usage as a string", "a non-text part", "a number", "no choices list"],
)
def test_odd_chat_completions_are_malformed_output_not_an_evaluator_fault(run_spec, servers, completion):
    server = servers(ChatServer(always(completion)))
    attempt = run_spec(f"openai+{server.base_url}?model=m")
    assert (attempt.outcome, attempt.error_type, attempt.policy_calls) == ("policy_error", "malformed_output", 1)


def test_chat_parsing_takes_the_first_whole_json_object():
    answer = 'Thinking {"x": 1 is not JSON. Answer: {"actions": [[0, 0, 0, 0]]} then {"stop": true}'
    assert parse_action_json(answer) == {"actions": [[0, 0, 0, 0]]}
    fenced = 'Plan {"a": 1}\n```json\n{"stop": true}\n```'
    assert parse_action_json(fenced) == {"stop": True}  # a fenced block is the answer


def test_an_evaluator_fault_keeps_what_was_recorded(run_cell, register_policy, media_root):
    from evaluator.policies.base import Policy as PolicyBase
    from evaluator.policies.base import PolicyReply

    class FaultAtThirdCall(PolicyBase):  # an in-process program is RSI's own code: its crash is RSI's fault
        def start_episode(self, start):
            self.calls = 0

        def act(self, message):
            self.calls += 1
            if self.calls == 3:
                raise RuntimeError("a bug in RSI")
            return PolicyReply({"actions": [[0.0] * 4] * 5})

    register_policy("faulty", FaultAtThirdCall)
    with pytest.raises(RuntimeError, match="a bug in RSI"):
        run_cell(policy="faulty")
    from evaluator.records.models import Attempt

    attempt = Attempt.objects.get()
    assert (attempt.outcome, attempt.error_type) == ("infrastructure_error", "evaluator")
    assert (attempt.policy_calls, attempt.environment_steps, attempt.action_decisions) == (2, 10, 2)
    assert "RuntimeError: a bug in RSI" in attempt.error_detail
    # Issue "... fifth round", item 4: "the result is stored before the worker is closed, so
    # provenance["worker"]["closed"] and reset_info never reach the stored provenance."
    assert attempt.provenance["worker"]["closed"] is not None and "reset_info" in attempt.provenance
    assert attempt.provenance["reset_info"] is not None


def test_a_setup_failure_mid_episode_keeps_what_was_recorded(run_spec, servers, tmp_path, monkeypatch):
    """Item 4 of the same round: "A PolicySetupFailure raised mid-episode (for example from re-reading the
    credentials file on a POST ...) lands in the before-control path and stores policy_calls=0, action_decisions=0
    although decision and step rows were written ("what was recorded is never zeroed")." Here the credentials file
    turns unreadable after the server's second reply."""
    from tests.servers.policies import HttpPolicyServer

    held = tmp_path / "credentials.json"
    held.write_text('{"127.0.0.1": "Bearer abc"}')
    monkeypatch.setenv("RSI_POLICY_CREDENTIALS", str(held))

    def then_unreadable(request, call):
        if call == 2:
            held.write_text("{not json")
        return {"actions": [[0.0] * 4] * 5}

    server = servers(HttpPolicyServer(then_unreadable))
    attempt = run_spec(server.url)
    assert (attempt.outcome, attempt.error_type) == ("infrastructure_error", "policy_setup")
    assert "RSI_POLICY_CREDENTIALS cannot be read" in attempt.error_detail
    decisions = attempt.decisions.filter(actor="policy")
    assert (attempt.policy_calls, attempt.action_decisions) == (decisions.count(), 2) == (2, 2)
    assert attempt.environment_steps == attempt.steps.count() == 10


@pytest.mark.parametrize(
    "content, reason",
    [(b"\x00random bytes", "is not a TorchScript module"), (b"pickle", "holds no TorchScript code")],
    ids=["random bytes", "a state_dict"],
)
def test_a_file_that_is_no_torchscript_module_is_refused_at_launch_without_loading_it(
    run_spec, tmp_path, content, reason
):
    # Issue 43, item 2: "Launch, preview and the policy check load no model: they check the folder ... as today."
    torch = require_module("torch")
    path = tmp_path / "model.pt"
    if content == b"pickle":
        torch.save(torch.nn.Linear(2, 2).state_dict(), str(path))
    else:
        path.write_bytes(content)
    hosts = sorted(Path(os.environ["RSI_MODEL_HOST_DIR"]).glob("*.log"))
    with pytest.raises(ProtocolError, match=reason):
        run_spec(f"torchscript:{path}")
    assert sorted(Path(os.environ["RSI_MODEL_HOST_DIR"]).glob("*.log")) == hosts  # no host was started for it


def test_a_torchscript_module_on_a_missing_cuda_device_ends_its_attempt_as_a_setup_error(run_spec, tmp_path):
    torch = require_module("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    path = tmp_path / "zeros.pt"
    torch.jit.script(torch.nn.Identity()).save(str(path))
    attempt = run_spec(f"torchscript:{path}?device=cuda")  # the device is the executor's: its host tells
    assert (attempt.outcome, attempt.error_type, attempt.policy_calls) == ("infrastructure_error", "policy_setup", 0)
    assert "does not load" in attempt.error_detail


def test_an_unreachable_policy_server_is_a_setup_error_before_any_call(run_spec):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens there once it is closed
    attempt = run_spec(f"http://127.0.0.1:{port}/act")
    assert (attempt.outcome, attempt.error_type) == ("infrastructure_error", "policy_setup")
    assert attempt.policy_calls == 0 and "cannot be reached" in attempt.error_detail


# Hostile input, third round, 17: "An operator can point a policy at any URL, and the first 2,000 bytes of its reply
# are recorded in the error detail: an allow-list setting for policy hosts (RSI_POLICY_HOSTS ...) and a shorter
# excerpt."


def test_a_policy_host_outside_the_allow_list_is_refused_at_launch(run_spec, servers, settings):
    from evaluator.policies.specs import InvalidPolicySpec

    server = servers(HttpPolicyServer(always(zero_chunk())))
    settings.RSI_POLICY_HOSTS = ["policies.lab.example"]
    with pytest.raises(InvalidPolicySpec, match="policy host '127.0.0.1' is not one of RSI_POLICY_HOSTS"):
        run_spec(server.url)
    assert server.count == 0  # refused before any call
    settings.RSI_POLICY_HOSTS = ["policies.lab.example", f"127.0.0.1:{server.url.split(':')[2].split('/')[0]}"]
    assert run_spec(server.url).policy_calls > 0  # the host and port named: allowed


def test_a_refused_reply_is_kept_as_a_short_excerpt(run_spec, servers):
    from evaluator.policies.replies import EXCERPT_BYTES

    server = servers(HttpPolicyServer(always(Text("s" * 5000))))  # not JSON: malformed output
    attempt = run_spec(server.url)
    assert attempt.error_type == "malformed_output"
    assert "s" * EXCERPT_BYTES in attempt.error_detail and "s" * (EXCERPT_BYTES + 1) not in attempt.error_detail
    assert EXCERPT_BYTES <= 300
