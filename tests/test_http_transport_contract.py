"""Issue 44, item 7: "The HTTP transport, documented so a server can be written from the docs alone ...: each sensor
track's field names and shapes ...; a signal at an episode's end so a stateful server can free that episode's state;
that several episodes call one server at once with different tokens; that NaN is refused as `non_finite`. A policy
URL's own query string must reach the server (today `http://host/act?ckpt=3` is refused as "unknown policy setting
'ckpt'"): RSI's settings get a form that cannot collide with it, and specs written today keep working." Done when: "A
stateful HTTP test server receives the end-of-episode signal and its own query string." (docs/policies.md)"""

import json
import re
import threading
import time
from pathlib import Path

import jsonschema
import pytest

from evaluator.policies.specs import InvalidPolicySpec, parse_policy_spec
from evaluator.protocol.registry import PROTOCOLS
from tests.servers.policies import Body, HttpPolicyServer
from tests.servers.site import daphne_site, make_token

DOCS = Path(__file__).resolve().parents[1] / "docs"
FAST = {"budget_mode": "decisions", "max_policy_calls": 3, "replan_interval": 1}


class StatefulServer:
    """Keeps each episode's calls by token, as a recurrent policy would, and frees them at the episode's end."""

    def __init__(self, delay_s: float = 0.0):
        self.state: dict[str, int] = {}
        self.freed: list[str] = []
        self.order: list[str] = []  # the token of each call, in the order they arrived
        self.lock = threading.Lock()
        self.delay_s = delay_s

    def __call__(self, request, call):
        with self.lock:
            self.state[request["token"]] = self.state.get(request["token"], 0) + 1
            self.order.append(request["token"])
        time.sleep(self.delay_s)
        return {"actions": [[0.0, 0.0, 0.0, 0.0]]}


def test_a_stateful_server_gets_its_own_query_string_and_each_episodes_end(run_spec, servers):
    behaviour = StatefulServer()
    server = servers(HttpPolicyServer(behaviour))
    spec = f"{server.url}?ckpt=3&run=a%20b#timeout_s=5"
    first = run_spec(spec, seed=0, **FAST)
    second = run_spec(spec, seed=1, **FAST)
    assert first.outcome and second.outcome and first.policy_calls == 3
    assert set(server.paths) == {"/act?ckpt=3&run=a%20b"}  # as written, on every call
    tokens = list(dict.fromkeys(behaviour.order))
    assert len(tokens) == 2 and behaviour.state == {tokens[0]: 3, tokens[1]: 3}
    # One end signal an episode, after its last call, in the published shape.
    assert [signal["token"] for signal in server.ended] == tokens
    schema = json.loads((DOCS / "schemas" / "policy-http-end.schema.json").read_text())
    for signal in server.ended:
        jsonschema.validate(signal, schema)
    # The signal is not a call: nothing of it is among the episode's recorded requests.
    assert server.count == 6


def test_the_end_signal_keeps_the_msgpack_body_and_an_episode_that_never_called_sends_none(run_spec, servers):
    server = servers(HttpPolicyServer(StatefulServer()))
    run_spec(f"{server.url}?body=msgpack&ckpt=7", **FAST)  # written before the '#' form: still a setting
    assert server.paths == ["/act?ckpt=7"] * 3
    assert len(server.ended) == 1 and server.ended[0]["end_of_episode"] is True
    silent = servers(HttpPolicyServer(StatefulServer()))
    silent.stop()  # unreachable: the episode ends as a setup error before any call
    ended = run_spec(silent.url + "#timeout_s=1", **FAST)
    assert ended.error_type == "policy_setup" and silent.ended == []


def test_settings_after_the_hash_never_reach_the_server_and_old_specs_keep_their_identity():
    assert parse_policy_spec("http://gpu7:8000/act?ckpt=3#body=msgpack&timeout_s=5") == (
        "http",
        "http://gpu7:8000/act?ckpt=3",
        {"body": "msgpack", "timeout_s": 5.0},
    )
    # A server's own parameter named like a setting: after '#', the whole query string is the server's.
    assert parse_policy_spec("http://gpu7/act?timeout_s=9#timeout_s=2")[1:] == (
        "http://gpu7/act?timeout_s=9",
        {"timeout_s": 2.0},
    )
    # Specs written before it: the same target and settings as then, so the same policy identity.
    assert parse_policy_spec("http://gpu7/act?body=msgpack&timeout_s=2")[1:] == (
        "http://gpu7/act",
        {"body": "msgpack", "timeout_s": 2.0},
    )
    assert parse_policy_spec("openpi+ws://gpu7:8000?profile=libero&ckpt=3")[1:] == (
        "ws://gpu7:8000?ckpt=3",
        {"profile": "libero"},
    )
    for spec, reason in (
        ("http://gpu7/act#ckpt=3", "unknown policy setting 'ckpt'"),
        ("http://gpu7/act#timeout_s=1&timeout_s=2", "policy setting timeout_s is given twice"),
        ("http://gpu7/act#timeout_s", "policy setting 'timeout_s' is not NAME=VALUE"),
        ("openai+http://gpu7/v1?model=m&ckpt=3", "unknown policy setting 'ckpt'"),
    ):
        with pytest.raises(InvalidPolicySpec, match=re.escape(reason)):
            parse_policy_spec(spec)


def test_a_nan_in_a_reply_is_refused_as_non_finite(run_spec, servers):
    server = servers(HttpPolicyServer(lambda request, call: Body(b'{"actions": [[NaN, 0, 0, 0]]}')))
    ended = run_spec(server.url, **FAST)
    assert (ended.outcome, ended.error_type) == ("contract_violation", "non_finite")


def test_the_docs_table_of_sensor_fields_is_the_registrys():
    # "each sensor track's field names and shapes (the privileged-state track sends `observation`, `achieved_goal`,
    # `desired_goal`)": every track of every benchmark has its row, naming exactly the arrays it sends.
    text = (DOCS / "policies.md").read_text().split("### What `sensors` holds, by sensor track")[1].split("\n### ")[0]
    rows, benchmark, track = {}, None, None
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")] if line.startswith("| ") else None
        if not cells or cells[0] == "benchmark" or set(cells[0]) <= {"-", " "} and cells[0]:
            continue
        benchmark, track = cells[0].strip("`") or benchmark, cells[1].strip("`") or track
        rows.setdefault((benchmark, track), [])
        if cells[2] != "none":
            rows[(benchmark, track)].append(cells[2].strip("`"))
    expected = {
        (name, track): list(protocol.sensor_arrays.get(track, ()))
        for name, protocol in PROTOCOLS.items()
        for track in protocol.family.sensors
    }
    assert rows == expected


def test_several_episodes_call_one_server_at_once_with_their_own_tokens(tmp_path, servers):
    from rsi_client import Client

    behaviour = StatefulServer(delay_s=0.2)
    server = servers(HttpPolicyServer(behaviour))
    with daphne_site(tmp_path, users={"olga": ["operator"]}, RSI_EXECUTOR_WORKERS="2") as (base, _):
        client = Client(base, token=make_token(base))
        plan = {"benchmark": "fetch", "tasks": ["reach"], "seeds": [0, 1], "policy": server.url, **FAST}
        done = client.wait(client.launch(**plan)["id"], poll_s=0.5)
    assert done["finished"] == 2
    first, second = dict.fromkeys(behaviour.order)
    # The two episodes' calls interleave: one's call came while the other's were still coming.
    assert behaviour.order.index(second) < len(behaviour.order) - 1 - behaviour.order[::-1].index(first)
    assert sorted(s["token"] for s in server.ended) == sorted((first, second))


def test_an_openpi_url_keeps_its_query_string_and_its_replies_may_say_their_version(run_spec, servers):
    from tests.servers.policies import OpenPiServer

    server = servers(OpenPiServer(lambda request, call: {"actions": [[0.0] * 4] * 5, "policy_version": "ckpt-7"}))
    attempt = run_spec(f"openpi+{server.uri}/?ckpt=7#timeout_s=5", **FAST)
    assert attempt.error_type == "" and server.paths == ["/?ckpt=7"]
    assert attempt.accounting["policy_versions"] == ["ckpt-7"]
