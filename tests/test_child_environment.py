"""Issue 42, item 1: "Every child process RSI starts (policy hosts, native workers) gets an environment without
RSI's secrets and connection strings (secret key, database, Redis, broker URLs, tokens): build it from an
allow-list, not by deleting names." Done when: "A test reads a running policy host's and native worker's
environment and finds none of the secret names."
"""

from pathlib import Path

import pytest

from evaluator.native.backends import worker_spec
from evaluator.native.child_env import UPSTREAM_SETTINGS, child_environment
from evaluator.native.client import NativeWorker
from evaluator.policies.lerobot_checkpoint import LeRobotPolicy
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


def test_a_running_native_worker_sees_none_of_the_servers_secrets(server_secrets, monkeypatch):
    monkeypatch.setenv("MS2_REAL2SIM_ASSET_DIR", "/data/real2sim")  # item 23 of the fifth round: an upstream's own
    monkeypatch.setenv("db_password", "lowercase-pw")  # item 18: a credential in lower case, listed by the operator
    monkeypatch.setenv("RSI_CHILD_ENV_PASS", "db_password")
    worker = NativeWorker(worker_spec("fetch"))
    try:
        worker.describe()  # it is up and answering
        seen = environment_of(worker.pid)
    finally:
        worker.close()
    assert not set(SECRETS) & set(seen)
    assert not any(value in seen.values() for value in SECRETS.values())
    assert seen["MUJOCO_GL"] and seen["PATH"]  # what it needs to render still reaches it
    assert seen["MS2_REAL2SIM_ASSET_DIR"] == "/data/real2sim" and "db_password" not in seen


@pytest.mark.needs("lerobot")
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


def test_a_credentials_name_is_recognised_in_any_case(monkeypatch):
    """Issue "... fifth round", item 18: "The child environment's credential filter is case-sensitive:
    `aws_secret_access_key`, `Db_Password`, `SENTRY_DSN`, `MY_APP_AUTH` listed in `RSI_CHILD_ENV_PASS` reach workers
    and hosts.\""""
    credentials = [
        "aws_secret_access_key",
        "Db_Password",
        "SENTRY_DSN",
        "MY_APP_AUTH",
        "db_pass",
        "github_token",
        "sessionid",
        "Redis_Url",
        "mongo_uri",
    ]
    source = {"PATH": "/bin", "MY_TOOL_DIR": "/t", **{name: "s3cret" for name in credentials}}
    monkeypatch.setenv("RSI_CHILD_ENV_PASS", ",".join([*credentials, "MY_TOOL_*", "aws_*", "Db_*"]))
    assert child_environment(source=source) == {"PATH": "/bin", "MY_TOOL_DIR": "/t"}


def test_the_pinned_upstreams_documented_settings_pass_unlisted(monkeypatch):
    """Item 23: "a worker no longer sees `MS2_REAL2SIM_ASSET_DIR` (ManiSkill2_real2sim's documented asset location)
    ... Pass each pinned upstream's documented settings by default (named in the allow-list, with where each is
    documented).\""""
    monkeypatch.delenv("RSI_CHILD_ENV_PASS", raising=False)
    source = {"PATH": "/bin", "MS2_REAL2SIM_ASSET_DIR": "/data/real2sim", "MS2_ASSET_DIR": "/data/ms2", "OTHER": "x"}
    assert child_environment(source=source) == {
        "PATH": "/bin",
        "MS2_REAL2SIM_ASSET_DIR": "/data/real2sim",
        "MS2_ASSET_DIR": "/data/ms2",
    }
    assert all(where for where in UPSTREAM_SETTINGS.values())
