"""Issue 44, item 5: "`rsi_client` logs a finished campaign into the training run the script already has open: MLflow
(`log_campaign(campaign, mlflow)`: params for the protocol and policy identities and labels, metrics for rates,
interval bounds and counts per task, the report JSON and the first N episode videos as artifacts, at the training
step) and Weights & Biases (the same into `wandb.run`, videos as `wandb.Video`). Optional extras: the client itself
stays dependency-free." Done when: "MLflow: a campaign logged to a real local tracking server and read back through
MLflow's own client (params, metrics per task, artifacts). W&B: offline run files hold the same."

The logging runs as a training script would, in a training environment's venv (.venv-tracking: mlflow, wandb and the
client, no Django), against a real daphne."""

import ast
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from rsi_client import Client
from tests.servers.mlflow_server import TRACKING_PYTHON, mlflow_server
from tests.servers.policies import HttpPolicyServer
from tests.servers.site import daphne_site, make_token

ROOT = Path(__file__).resolve().parents[1]
PLAN = {
    "benchmark": "fetch",
    "tasks": ["reach", "push"],
    "seeds": [0, 1],
    "policy": "noop",
    "budget_mode": "decisions",
    "max_policy_calls": 3,
    "replan_interval": 1,
}


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory):
    """A site, a token, two finished campaigns at training steps 1000 and 2000, and one under another identity."""
    tmp = tmp_path_factory.mktemp("tracking")
    with daphne_site(tmp, users={"olga": ["operator"]}) as (base, _):
        token = make_token(base)
        client = Client(base, token=token)
        made = [
            client.launch(**PLAN, labels={"run": "abc", "step": "1000"}),
            client.launch(**PLAN, labels={"run": "abc", "step": "2000"}),
            client.launch(**{**PLAN, "max_policy_calls": 2}, labels={"run": "abc", "step": "3000"}),
        ]
        done = client.wait_all([c["id"] for c in made], poll_s=0.5)
        yield base, token, client, done


def training_script(tmp: Path, program: str, base: str, token: str, **env) -> str:
    """Run `program` in the training environment, with the client as its only RSI code; its standard output."""
    packages = tmp / "packages"
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "rsi_client", packages / "rsi_client", ignore=ignore, dirs_exist_ok=True)
    environment = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp),
        "LANG": "C.UTF-8",
        "PYTHONPATH": str(packages),
        "RSI_URL": base,
        "RSI_TOKEN": token,
        **env,
    }
    ran = subprocess.run(
        [str(TRACKING_PYTHON), "-c", program], env=environment, cwd=tmp, capture_output=True, text=True, timeout=600
    )
    assert ran.returncode == 0, ran.stderr[-4000:]
    return ran.stdout


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def first_videos(client: Client, campaign: dict, count: int) -> list[str]:
    """The sha256 of the videos of the campaign's first `count` cells, as the site serves them."""
    found = []
    for cell in client.cells(campaign["id"])["cells"][:count]:
        links = client.attempt(cell["attempt"])["artifacts"]
        found.append(sha256(client.download(next(url for name, url in links.items() if name.endswith(".mp4")))))
    return found


MLFLOW_LOG = """
import json, os, sys
import mlflow
from rsi_client import Client
from rsi_client.tracking import log_campaign

rsi = Client()
first, second, other = json.loads(os.environ["CAMPAIGNS"])
mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
mlflow.set_experiment("training")
with mlflow.start_run() as run:
    for step, campaign in ((1000, first), (2000, second)):
        log_campaign(rsi.campaign(campaign), mlflow, step=step, client=rsi, videos=2)
    try:
        log_campaign(rsi.campaign(other), mlflow, step=3000)
    except ValueError as refused:
        print(json.dumps({"refused": str(refused)}))
print(json.dumps({"run": run.info.run_id}))
"""

MLFLOW_READ = """
import json, os, sys
from mlflow.tracking import MlflowClient

client = MlflowClient(os.environ["MLFLOW_TRACKING_URI"])
run_id = os.environ["RUN"]
run = client.get_run(run_id)
history = {key: [[m.step, m.value] for m in client.get_metric_history(run_id, key)] for key in run.data.metrics}

def walk(path):
    for entry in client.list_artifacts(run_id, path):
        yield from walk(entry.path) if entry.is_dir else [entry.path]

files = {}
for path in walk("rsi"):
    local = client.download_artifacts(run_id, path, os.environ["HOME"])
    data = open(local, "rb").read()
    files[path] = json.loads(data) if path.endswith(".json") else __import__("hashlib").sha256(data).hexdigest()
print(json.dumps({"params": run.data.params, "tags": run.data.tags, "history": history, "files": files}))
"""


@pytest.mark.needs("tracking")
def test_a_campaign_logged_to_a_real_mlflow_server_reads_back_through_mlflows_own_client(campaigns, tmp_path):
    base, token, client, (first, second, other) = campaigns
    with mlflow_server(tmp_path) as uri:
        env = {"MLFLOW_TRACKING_URI": uri, "CAMPAIGNS": json.dumps([first["id"], second["id"], other["id"]])}
        lines = training_script(tmp_path, MLFLOW_LOG, base, token, **env).splitlines()
        printed = [json.loads(line) for line in lines if line.startswith("{")]  # MLflow prints a link of its own
        read = json.loads(training_script(tmp_path, MLFLOW_READ, base, token, RUN=printed[-1]["run"], **env))
    # Params: the identities and labels.
    params = read["params"]
    assert params["rsi/protocol_id"] == first["protocol_id"] and params["rsi/benchmark"] == "fetch"
    for campaign, step in ((first, "1000"), (second, "2000")):
        own = f"rsi/campaign-{campaign['id']}"
        assert params[f"{own}/policy"] == "noop" and params[f"{own}/policy_identity"] == campaign["policy_identity"]
        assert params[f"{own}/label/run"] == "abc" and params[f"{own}/label/step"] == step
        assert read["tags"][f"{own}/url"] == campaign["url"]
    # Metrics at the training step: rates, their Wilson bounds and counts, overall and per task.
    history = read["history"]
    for key, pick in (
        ("rsi/success_rate", lambda c: c["report"]["overall"]["success_rate"]["value"]),
        ("rsi/success_rate_low", lambda c: c["report"]["overall"]["success_rate"]["wilson95_low"]),
        ("rsi/completed", lambda c: c["report"]["overall"]["success_rate"]["denominator"]),
        (
            "rsi/task/reach/success_rate_high",
            lambda c: c["report"]["per_task"]["reach"]["success_rate"]["wilson95_high"],
        ),
        ("rsi/task/push/successes", lambda c: c["report"]["per_task"]["push"]["successes"]),
    ):
        assert history[key] == [[1000, pytest.approx(pick(first))], [2000, pytest.approx(pick(second))]], key
    # Artifacts: the campaign's JSON and the videos of its first two cells, the very bytes the site serves.
    for campaign in (first, second):
        own = f"rsi/campaign-{campaign['id']}"
        assert read["files"][f"{own}/campaign.json"]["report"] == campaign["report"]
        videos = sorted(v for path, v in read["files"].items() if path.startswith(f"{own}/videos/"))
        assert videos == sorted(first_videos(client, campaign, 2))
    # Identities are never pooled: the third campaign ran under another one, and the run refuses it.
    assert printed[0]["refused"].startswith(f"this run holds rsi/protocol_id = {first['protocol_id']}, the campaign")
    assert not any(key.startswith(f"rsi/campaign-{other['id']}") for key in params)


FLAGGED_LOG = """
import json, os
import mlflow
from rsi_client import Client
from rsi_client.tracking import log_campaign

rsi = Client()
cancelled, changed = json.loads(os.environ["CAMPAIGNS"])
mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
mlflow.set_experiment("flags")
with mlflow.start_run() as run:
    try:
        log_campaign(rsi.campaign(cancelled), mlflow, step=1)
    except ValueError as refused:
        print(json.dumps({"refused": str(refused)}))
    log_campaign(rsi.campaign(cancelled), mlflow, step=1, partial=True)
    log_campaign(rsi.campaign(changed), mlflow, step=2)
print(json.dumps({"run": run.info.run_id}))
"""


@pytest.fixture(scope="module")
def flagged(campaigns):
    """On the same site: a campaign cancelled after one cell, and one whose policy server changed version."""
    base, token, client, _ = campaigns
    reloaded = HttpPolicyServer(lambda request, call: {"actions": [[0.0] * 4], "policy_version": f"v{call}"})
    try:
        cancelled = client.launch(**{**PLAN, "tasks": ["reach"]}, start=False)
        client.cancel(cancelled["id"])
        changed = client.launch(**{**PLAN, "tasks": ["reach"], "policy": reloaded.url})
        yield [client.wait(c["id"], poll_s=0.5) for c in (cancelled, changed)]
    finally:
        reloaded.stop()


@pytest.mark.needs("tracking")
def test_a_cancelled_campaign_is_logged_only_when_asked_for_and_then_flagged_as_a_changed_version_is(
    campaigns, flagged, tmp_path
):
    """Issue "... fifth round", item 2: "`log_campaign` logs its rate into MLflow and W&B unflagged ... One rule for
    every reader: refused, or flagged where a partial result is asked for explicitly"; item 3: "A policy whose version
    changed mid-campaign ranks unflagged ... in `log_campaign`"."""
    base, token, _, _ = campaigns
    cancelled, changed = flagged
    with mlflow_server(tmp_path) as uri:
        env = {"MLFLOW_TRACKING_URI": uri, "CAMPAIGNS": json.dumps([cancelled["id"], changed["id"]])}
        lines = training_script(tmp_path, FLAGGED_LOG, base, token, **env).splitlines()
        printed = [json.loads(line) for line in lines if line.startswith("{")]
        read = json.loads(training_script(tmp_path, MLFLOW_READ, base, token, RUN=printed[-1]["run"], **env))
    (reason,) = [flag["reason"] for flag in cancelled["flags"]]
    assert printed[0]["refused"] == f"{reason}: pass partial=True to log it anyway, flagged"
    params = read["params"]
    assert params[f"rsi/campaign-{cancelled['id']}/flag/cancelled"] == reason
    (changed_flag,) = changed["flags"]
    assert changed_flag["code"] == "policy_version_changed"
    assert params[f"rsi/campaign-{changed['id']}/flag/policy_version_changed"] == changed_flag["reason"]


WANDB_LOG = """
import json, os
import wandb
from rsi_client import Client
from rsi_client.tracking import log_campaign

rsi = Client()
first, second = json.loads(os.environ["CAMPAIGNS"])
run = wandb.init(project="training", mode="offline", dir=os.environ["HOME"])
for step, campaign in ((1000, first), (2000, second)):
    log_campaign(rsi.campaign(campaign), wandb.run, step=step, client=rsi, videos=1)
files = run.dir
run.finish()
print(json.dumps({"files": files}))
"""

# W&B 0.31 has no Python reader of its run files left: their format is LevelDB's log (a ":W&B" header, then 32 KiB
# blocks of records, each a 7-byte header and a piece of one protobuf Record), read here with W&B's own protobufs.
WANDB_RECORDS = """
import json, struct, sys
from wandb.proto import wandb_internal_pb2

def records(path):
    data = open(path, "rb").read()
    assert data[:4] == b":W&B", data[:7]
    position, block, pending = 7, 32768, b""
    while position + 7 <= len(data):
        if block - position % block < 7:  # a block's tail too short for a header is padding
            position += block - position % block
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + 7])
        if kind == 0 and length == 0:
            break
        pending += data[position + 7 : position + 7 + length]
        position += 7 + length
        if kind in (1, 4):  # a whole record, or the last piece of one
            yield pending
            pending = b""

def items(update):
    return {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in update}

found = {"config": {}, "history": [], "summary": {}}
for raw in records(sys.argv[1]):
    record = wandb_internal_pb2.Record()
    record.ParseFromString(raw)
    kind = record.WhichOneof("record_type")
    if kind == "config":
        found["config"].update(items(record.config.update))
    elif kind == "history":
        found["history"].append(items(record.history.item))
    elif kind == "summary":
        found["summary"].update(items(record.summary.update))
print(json.dumps(found))
"""


@pytest.mark.needs("tracking")
def test_a_campaign_logged_to_wandb_offline_leaves_the_same_in_its_run_files(campaigns, tmp_path):
    base, token, client, (first, second, _) = campaigns
    env = {"CAMPAIGNS": json.dumps([first["id"], second["id"]]), "WANDB_SILENT": "true"}
    files = Path(json.loads(training_script(tmp_path, WANDB_LOG, base, token, **env))["files"])
    # The run's own record file, read back with W&B's own reader: its config, history and summary.
    (record,) = files.parent.glob("run-*.wandb")
    scanned = subprocess.run(
        [str(TRACKING_PYTHON), "-c", WANDB_RECORDS, str(record)], capture_output=True, text=True, timeout=120
    )
    assert scanned.returncode == 0, scanned.stderr[-3000:]
    records = json.loads(scanned.stdout)
    config = records["config"]
    assert config["rsi/protocol_id"] == first["protocol_id"]
    own = f"rsi/campaign-{second['id']}"
    assert config[f"{own}/policy_identity"] == second["policy_identity"] and config[f"{own}/label/step"] == "2000"
    rows = [row for row in records["history"] if "rsi/completed" in row]
    assert [row["_step"] for row in rows] == [1000, 2000]
    for row, campaign in zip(rows, (first, second), strict=True):
        reach = campaign["report"]["per_task"]["reach"]["success_rate"]
        assert row["rsi/task/reach/completed"] == reach["denominator"]
        assert row["rsi/task/reach/success_rate_low"] == pytest.approx(reach["wilson95_low"])
        video = {key: value for key, value in row.items() if key.startswith("rsi/video/")}  # its fields, nested keys
        assert "video-file" in video.values() and any(str(v).endswith(".mp4") for v in video.values()), video
    summary = records["summary"]
    assert summary["rsi/success_rate"] == pytest.approx(second["report"]["overall"]["success_rate"]["value"])
    assert json.loads((files / own / "campaign.json").read_text())["report"] == second["report"]
    videos = sorted(sha256(path.read_bytes()) for path in (files / "media" / "videos").rglob("*.mp4"))
    assert videos == sorted(first_videos(client, first, 1) + first_videos(client, second, 1))


def test_the_client_itself_needs_neither_tracker(rsi):
    # "Optional extras: the client itself stays dependency-free": in a venv that holds the client alone, its tracking
    # module imports, and says what it needs when given something that is no tracker.
    program = (
        "import sys; from rsi_client.tracking import log_campaign\n"
        "assert not {'mlflow', 'wandb'} & set(sys.modules)\n"
        "try:\n    log_campaign({'done': True, 'id': 1}, object())\n"
        "except TypeError as refused:\n    print(refused)\n"
    )
    ran = rsi("-c", program, token="", url="http://127.0.0.1:9", program="python")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "log_campaign takes the mlflow module or a wandb run, not object\n"
    project = (ROOT / "rsi_client" / "pyproject.toml").read_text()
    assert "dependencies = []" in project and 'mlflow = ["mlflow>=2.9"]' in project


MLFLOW_RUNS = """
import json, os
from mlflow.tracking import MlflowClient

client = MlflowClient(os.environ["MLFLOW_TRACKING_URI"])
(run,) = client.search_runs([client.get_experiment_by_name("fetch-training").experiment_id])
steps = [m.step for m in client.get_metric_history(run.info.run_id, "rsi/success_rate_high")]
print(json.dumps({"steps": steps, "params": run.data.params}))
"""


@pytest.mark.needs("tracking")
def test_the_readme_training_loop_works_as_written_and_docs_api_shows_the_same(campaigns, tmp_path):
    # Issue 44, done when: "README and docs/api.md show a training loop that evaluates every N steps, gates on the
    # paired verdict, and logs to MLflow, working as written".
    base, token, _, _ = campaigns
    section = (ROOT / "README.md").read_text().split("### A training loop")[1].split("\n## ")[0]
    program = section.split("```python\n")[1].split("```")[0]
    assert f"```python\n{program}```" in (ROOT / "docs" / "api.md").read_text()
    with mlflow_server(tmp_path) as uri:
        printed = training_script(tmp_path, program, base, token, MLFLOW_TRACKING_URI=uri).splitlines()
        logged = json.loads(training_script(tmp_path, MLFLOW_RUNS, base, token, MLFLOW_TRACKING_URI=uri))
    verdicts = [line for line in printed if line.startswith("step ")]
    assert [line.split(":")[0] for line in verdicts] == ["step 2000", "step 3000"]
    assert all(line.split(": ")[1].split()[0] in ("improved", "no_difference", "underpowered") for line in verdicts)
    curve = next(line for line in printed if line.startswith("curve: "))
    assert [x for x, _ in ast.literal_eval(curve.removeprefix("curve: "))] == ["1000", "2000", "3000"]
    assert logged["steps"] == [1000, 2000, 3000]
    assert (
        sorted(k for k in logged["params"] if k.endswith("/label/step"))
        and logged["params"]["rsi/benchmark"] == "fetch"
    )
