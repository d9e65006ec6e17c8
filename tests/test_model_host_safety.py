"""Issue "Nothing counted that should not be ... fifth round", items 15, 16 and 17, on real model hosts (TorchScript
modules, which run in this interpreter's torch). Item 15: "A hung model host is never replaced ... A host that misses
its handshake or a ping within the bound is killed (it is RSI's own process group) and replaced, and the attempt says
so." Item 16: "A model replaced in place keeps its stale host: hosts are keyed by path, not by the model's sha256 ...
A launch is never refused for a change made before it." Item 17: "A model host authenticates nobody ... A host
accepts only callers that present a secret it was started with ..., refusing the rest before any model work;
`serve-policy` on a non-loopback address refuses to start without one.\""""

import json
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from evaluator.policies import hosted
from evaluator.policies.model_hosts import stop_hosts
from tests.parts import require_module
from tests.test_policy_transports import saved_zeros_module

ROOT = Path(__file__).resolve().parents[1]
torch = require_module("torch")


@pytest.fixture
def fresh_hosts():
    stop_hosts()
    yield Path(os.environ["RSI_MODEL_HOST_DIR"])
    stop_hosts()


def records(folder: Path) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(folder.glob("*.json"))]


def test_a_caller_without_the_hosts_secret_is_refused_before_any_model_work(run_spec, tmp_path, fresh_hosts):
    attempt = run_spec(f"torchscript:{saved_zeros_module(tmp_path)}")
    assert attempt.error_type == ""  # RSI's own episode presented the secret
    (record,) = records(fresh_hosts)
    (path,) = fresh_hosts.glob("*.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(record["secret"]) >= 32
    uri = f"ws://127.0.0.1:{record['port']}"
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": record["secret"]}):
        with pytest.raises(InvalidStatus) as refused:
            connect(uri, additional_headers=headers, open_timeout=10, proxy=None).close()
        assert refused.value.response.status_code == 401
    with connect(uri, additional_headers={"Authorization": f"Bearer {record['secret']}"}, proxy=None) as socket:
        assert socket.recv(timeout=10)  # its metadata: served
    log = path.with_suffix(".log").read_text()  # this host's own log (earlier tests' hosts leave theirs)
    assert log.count("a connection without its secret was refused") == 3


def test_a_host_that_does_not_answer_its_handshake_is_killed_and_replaced(run_spec, tmp_path, fresh_hosts, monkeypatch):
    path = saved_zeros_module(tmp_path)
    run_spec(f"torchscript:{path}")
    (stuck,) = records(fresh_hosts)
    os.kill(stuck["pid"], signal.SIGSTOP)  # as a deadlocked host: its port accepts, nothing answers
    monkeypatch.setattr(hosted, "HOST_CONNECT_S", 2.0)
    attempt = run_spec(f"torchscript:{path}?timeout_s=1")
    assert (attempt.outcome, attempt.error_type, attempt.policy_calls) == ("task_failure", "", 10)
    host = attempt.provenance["policy"]["transport"]["host"]
    assert host["replaced"]["pid"] == stuck["pid"] and "no server metadata within 2 s" in host["replaced"]["why"]
    assert host["pid"] != stuck["pid"] and host["started_for_this_attempt"] is True  # the replacement
    assert not Path(f"/proc/{stuck['pid']}/cmdline").read_bytes()  # killed (a zombie until reaped), never resumed
    (replacement,) = records(fresh_hosts)
    assert replacement["pid"] == host["pid"]


def test_a_model_replaced_in_place_gets_a_host_of_its_own_and_its_launch_runs(run_spec, tmp_path, fresh_hosts):
    path = saved_zeros_module(tmp_path)
    first = run_spec(f"torchscript:{path}")

    class Ones(torch.nn.Module):
        def forward(self, image: torch.Tensor) -> torch.Tensor:
            return torch.ones(5, 4) * 0.0 + image.float().mean() * 0.0

    torch.jit.script(Ones()).save(str(path))  # new weights behind the same path, before the next launch
    second = run_spec(f"torchscript:{path}")
    assert (second.outcome, second.error_type) == ("task_failure", "")
    old, new = (a.provenance["policy"]["transport"] for a in (first, second))
    assert old["module_sha256"] != new["module_sha256"] and old["host"]["instance"] != new["host"]["instance"]
    assert len(records(fresh_hosts)) == 2  # the first campaign's host is left to its own cells


def serve(spec: str, port: int, host: str, **env) -> subprocess.Popen:
    command = [sys.executable, "manage.py", "serve-policy", spec, "--port", str(port), "--host", host]
    environment = {k: v for k, v in os.environ.items() if k != "RSI_MODEL_HOST_TOKEN"} | env
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment)


def test_serve_policy_off_loopback_needs_a_secret_and_serves_only_who_presents_it(
    run_spec, tmp_path, monkeypatch, fresh_hosts
):
    spec = f"torchscript:{saved_zeros_module(tmp_path)}"
    refused = serve(spec, 0, "0.0.0.0")
    _, said = refused.communicate(timeout=120)
    assert refused.returncode == 1 and b"serves other machines: give the secret its callers present" in said
    secret = "s3cret-of-twenty-chars"
    served = serve(spec, 0, "0.0.0.0", RSI_MODEL_HOST_TOKEN=secret)
    try:
        port = json.loads(served.stdout.readline())["port"]
        with pytest.raises(InvalidStatus):
            connect(f"ws://127.0.0.1:{port}", open_timeout=10, proxy=None).close()
        credentials = tmp_path / "credentials.json"
        credentials.write_text(json.dumps({f"127.0.0.1:{port}": f"Bearer {secret}"}))
        monkeypatch.setenv("RSI_POLICY_CREDENTIALS", str(credentials))
        attempt = run_spec(f"openpi+ws://127.0.0.1:{port}")
        assert (attempt.outcome, attempt.policy_calls) == ("task_failure", 10)
    finally:
        served.terminate()
        served.wait(timeout=30)
