"""Issue 42, item 1: "Every child process RSI starts (policy hosts, native workers) gets an environment without
RSI's secrets and connection strings (secret key, database, Redis, broker URLs, tokens): build it from an
allow-list, not by deleting names." Done when: "A test reads a running policy host's and native worker's
environment and finds none of the secret names."
"""

from pathlib import Path

import pytest

from evaluator.native.backends import worker_spec
from evaluator.native.child_env import child_environment
from evaluator.native.client import NativeWorker
from evaluator.policies.lerobot_checkpoint import LeRobotPolicy, lerobot_python
from evaluator.policies.model_hosts import model_host
from evaluator.protocol.identity import configure
from tests.servers.checkpoints import make_checkpoint

ROOT = Path(__file__).resolve().parents[1]
SECRETS = {
    "RSI_SECRET_KEY": "s3cret-key",
    "DATABASE_URL": "postgres://rsi:pw@db/rsi",
    "REDIS_URL": "redis://:pw@cache:6379/0",
    "RSI_BROKER_URL": "redis://:pw@broker:6379/1",
    "RSI_TOKEN": "rsi_abcdef",
    "RSI_ADMIN_PASSWORD": "admin-pw",
    "AWS_SECRET_ACCESS_KEY": "aws",
    "OPENAI_API_KEY": "sk-x",
    "SOME_NEW_SETTING": "not on the allow-list either",
}


@pytest.fixture
def server_secrets(monkeypatch):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)


def environment_of(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def test_a_running_native_worker_sees_none_of_the_servers_secrets(server_secrets):
    worker = NativeWorker(worker_spec("fetch"))
    try:
        worker.describe()  # it is up and answering
        seen = environment_of(worker.pid)
    finally:
        worker.close()
    assert not set(SECRETS) & set(seen)
    assert not any(value in seen.values() for value in SECRETS.values())
    assert seen["MUJOCO_GL"] and seen["PATH"]  # what it needs to render still reaches it


@pytest.mark.skipif(not Path(lerobot_python()).exists(), reason="make lerobot-env builds .venv-lerobot")
def test_a_running_policy_host_sees_none_of_the_servers_secrets(server_secrets, tmp_path):
    folder = make_checkpoint(tmp_path / "act")
    policy = LeRobotPolicy(str(folder), configure("fetch", sensors="privileged-state"))
    with model_host(policy.plan()) as host:  # the machine's model host for the checkpoint, started and loaded
        seen = environment_of(host.pid)
    assert not set(SECRETS) & set(seen)
    assert not any(value in seen.values() for value in SECRETS.values())


def test_an_operator_may_pass_a_name_but_never_one_that_looks_like_a_credential(monkeypatch):
    source = {"PATH": "/bin", "HF_HOME": "/cache", "MY_TOOL_DIR": "/t", "MY_TOOL_TOKEN": "x", "DATABASE_URL": "pg://"}
    monkeypatch.setenv("RSI_CHILD_ENV_PASS", "HF_HOME,MY_TOOL_*,DATABASE_URL")
    assert child_environment({"RSI_SIMPLE_CHECKOUT": "/s"}, source=source) == {
        "PATH": "/bin",
        "HF_HOME": "/cache",
        "MY_TOOL_DIR": "/t",
        "RSI_SIMPLE_CHECKOUT": "/s",
    }
    monkeypatch.delenv("RSI_CHILD_ENV_PASS")
    assert child_environment(source=source) == {"PATH": "/bin"}
