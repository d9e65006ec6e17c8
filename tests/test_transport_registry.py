"""Issue 56, point 6: "A transport registry: one entry per transport (prefix, kind, network or local, what it may carry
in its query, its builder); adding a transport is one module and one entry; error messages list the prefixes from
it." (evaluator/policies/transports.py; docs/policies.md, "Adding a transport".)"""

import re
from pathlib import Path

import pytest

from evaluator.execution.launching import policy_record
from evaluator.policies import transports
from evaluator.policies.builtin import NoopPolicy
from evaluator.policies.specs import (
    InvalidPolicySpec,
    build_policy,
    check_model_path,
    check_policy_host,
    default_kind,
    is_policy_spec,
    parse_policy_spec,
)
from evaluator.policies.transports import TRANSPORTS, Transport
from evaluator.protocol.identity import configure

ROOT = Path(__file__).resolve().parents[1]
ECHO = Transport(
    name="echo",
    prefixes=("echo+ws://",),
    strip="echo+",
    kind="fixed_program",
    build=lambda target, settings, config: NoopPolicy(),
    example="echo+ws://HOST:PORT",
    network=True,
)


@pytest.fixture
def with_echo(monkeypatch):
    """A transport added as a new one would be: its entry in the registry, nothing else."""
    monkeypatch.setattr(transports, "TRANSPORTS", (*TRANSPORTS, ECHO))


def test_every_prefix_of_every_transport_parses_to_that_transport():
    examples = {
        "builtin": "builtin:noop",
        "http": "http://gpu7:8000/act",
        "openpi": "openpi+ws://gpu7:8000",
        "openai": "openai+http://gpu7:8000/v1?model=m",
    }
    for transport in TRANSPORTS:
        if transport.name in examples:
            assert parse_policy_spec(examples[transport.name])[0] == transport.name
        for prefix in transport.prefixes:
            assert is_policy_spec(prefix + "x") and transports.transport_of(prefix + "x") is transport


def test_a_transport_added_to_the_registry_parses_builds_and_is_checked_with_no_other_change(with_echo):
    assert is_policy_spec("echo+ws://gpu7:9000")
    assert parse_policy_spec("echo+ws://gpu7:9000#timeout_s=5") == ("echo", "ws://gpu7:9000", {"timeout_s": 5.0})
    assert default_kind("echo+ws://gpu7:9000") == "fixed_program"
    assert isinstance(build_policy("echo+ws://gpu7:9000", {}, configure("fetch")), NoopPolicy)
    # A network transport: its URL is checked as one, and against RSI_POLICY_HOSTS.
    with pytest.raises(InvalidPolicySpec, match="may not hold a user or password"):
        parse_policy_spec("echo+ws://me:secret@gpu7:9000")
    with pytest.raises(InvalidPolicySpec, match="not one of RSI_POLICY_HOSTS"):
        check_policy_host("echo+ws://elsewhere:9000", ["gpu7"])
    # Its query string is not the server's unless the entry says so: RSI's settings only, after '#'.
    with pytest.raises(InvalidPolicySpec, match="takes no query string"):
        parse_policy_spec("echo+ws://gpu7:9000?ckpt=3#timeout_s=5")


@pytest.mark.django_db
def test_the_error_for_an_unknown_policy_lists_every_transports_spec_from_the_registry(with_echo):
    with pytest.raises(InvalidPolicySpec) as refused:
        policy_record("no-such-policy")
    listed = re.search(r"\((.*)\)$", str(refused.value)).group(1).split(", ")
    assert listed == [transport.example for transport in (*TRANSPORTS, ECHO)]


def test_a_local_model_is_held_under_the_model_root_and_a_network_one_is_not(tmp_path):
    root = tmp_path / "models"
    root.mkdir()
    for transport in TRANSPORTS:
        spec = f"{transport.prefixes[0]}/elsewhere/model"
        if transport.local_model:
            with pytest.raises(InvalidPolicySpec, match=f"{transport.local_model} launched from the web must lie"):
                check_model_path(spec, root)
        else:
            check_model_path(spec, root)  # not a file RSI loads: the URL rules apply instead


def test_the_policies_page_of_the_docs_names_each_transports_spec():
    table = (ROOT / "docs" / "policies.md").read_text()
    for transport in TRANSPORTS:
        assert f"`{transport.example}`" in table or f"`{transport.prefixes[0]}" in table, transport.name
