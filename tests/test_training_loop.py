"""Issue 44, done when: "A test drives, with the client alone against a real daphne: two labelled campaigns, one
cancelled while queued (its cells not run, who and when recorded), `wait_all` on the rest, the learning curve API with
three steps." The `rsi` command runs from a venv that holds the client only; the Python calls are the client's.

The site runs one cell at a time (RSI_EXECUTOR_WORKERS=1), so a campaign launched behind another waits queued."""

import json
import re
from pathlib import Path

import pytest

from rsi_client import Client
from tests.servers.site import daphne_site, make_token

PLAN = {
    "benchmark": "fetch",
    "tasks": ["reach"],
    "seeds": list(range(10)),
    "policy": "noop",
    "budget_mode": "decisions",
    "max_policy_calls": 3,
    "replan_interval": 1,
}
VERDICTS = {"improved", "regressed", "no_difference", "underpowered"}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("training-loop")
    with daphne_site(tmp, users={"olga": ["operator"]}, RSI_EXECUTOR_WORKERS="1") as (base, env):
        yield base, Path(env["DATABASE_URL"].removeprefix("sqlite:///"))


def cli_plan() -> list[str]:
    return [
        *("--benchmark", "fetch", "--tasks", "reach", "--seeds", ",".join(map(str, PLAN["seeds"]))),
        *("--policy", "noop", "--budget-mode", "decisions", "--max-policy-calls", "3", "--replan-interval", "1"),
    ]


def test_a_training_loop_labels_cancels_waits_and_draws_its_curve_with_the_client_alone(site, rsi):
    base, _ = site
    token = make_token(base)
    client = Client(base, token=token)
    first = client.launch(**PLAN, labels={"run": "abc", "step": "1000"})
    assert first["labels"] == {"run": "abc", "step": "1000"}
    # A stale checkpoint's evaluation, launched from the shell behind the first: its cells wait queued.
    stale = rsi("launch", *cli_plan(), "--label", "run=abc", "--label", "step=4000", token=token, url=base)
    assert stale.returncode == 0, stale.stderr
    stale_id = int(stale.stdout)
    assert client.campaign(stale_id)["statuses"]["queued"] == 10
    cancelled = rsi("cancel", str(stale_id), token=token, url=base)
    assert cancelled.returncode == 0, cancelled.stderr
    assert re.fullmatch(
        rf"campaign {stale_id} cancelled by olga at \S+: 10 cell\(s\) left not run, 0 running cell\(s\) stopped\n",
        cancelled.stdout,
    )
    gone = client.campaign(stale_id)
    assert gone["statuses"]["not_run"] == 10 and gone["done"] and gone["cancelled"]["by"] == "olga"
    assert gone["report"]["overall"]["selected"] == 0  # nothing it left is counted
    assert {cell["status"] for cell in client.cells(stale_id)["cells"]} == {"not_run"}
    assert client.campaigns(labels={"step": "4000"})["campaigns"][0]["id"] == stale_id

    second = client.launch(**PLAN, labels={"run": "abc", "step": "2000"})
    third = client.launch(**PLAN, labels={"run": "abc", "step": "3000"})
    seen = []
    done = client.wait_all([first["id"], second["id"], third["id"]], poll_s=0.5, on_progress=seen.append)
    assert all(c["done"] and c["finished"] == 10 for c in done) and len(seen) >= 2

    curve = client.curve({"run": "abc"}, x="step")
    assert [p["x_text"] for p in curve["points"]] == ["1000", "2000", "3000"]
    assert [p["campaign"] for p in curve["points"]] == [c["id"] for c in done]
    assert curve["left_out"] == [{"campaign": stale_id, "reason": "cancelled"}]
    for point in curve["points"]:
        rate = point["success_rate"]
        assert rate["denominator"] == 10 and rate["wilson95_low"] <= (rate["value"] or 0) <= rate["wilson95_high"]
        assert set(point["per_task"]) == {"reach"}
    assert [p["against_previous"] and p["against_previous"]["previous"] for p in curve["points"]] == [
        None,
        first["id"],
        second["id"],
    ]
    assert all(p["against_previous"]["verdict"] in VERDICTS for p in curve["points"][1:])
    printed = rsi("curve", "--label", "run=abc", token=token, url=base)
    assert printed.returncode == 0, printed.stderr
    assert re.search(rf"^  step=3000 +\d+/10 = .*campaign {third['id']}  vs before: ", printed.stdout, re.M)
    assert f"not drawn: campaign {stale_id}: cancelled" in printed.stdout
    listed = json.loads(rsi("campaigns", "--label", "run=abc", "--json", token=token, url=base).stdout)
    assert [c["id"] for c in listed["campaigns"]] == [third["id"], second["id"], stale_id, first["id"]]
