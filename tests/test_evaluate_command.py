"""`manage.py evaluate` runs one cell headless, stores it like any other attempt and prints its record."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from evaluator.records.models import Attempt

RECORD_KEYS = {
    "protocol_id",
    "task",
    "seed",
    "outcome",
    "error_type",
    "success",
    "success_ever",
    "environment_steps",
    "action_decisions",
    "policy_calls",
    "rejected_calls",
    "termination_reason",
    "first_success_step",
    "first_success_decision",
    "success_at_H",
    "success_at_2H",
    "autonomous",
    "artifacts",
}


def test_it_runs_and_stores_a_cell_and_prints_its_record(db, media_root):
    out, err = io.StringIO(), io.StringIO()
    call_command(
        "evaluate",
        "fetch",
        "--task",
        "reach",
        "--policy",
        "noop",
        "--seed",
        "5",
        "--budget-mode",
        "decisions",
        "--max-policy-calls",
        "2",
        "--json",
        stdout=out,
        stderr=err,
    )
    record = json.loads(out.getvalue())
    assert set(record) >= RECORD_KEYS
    assert record["protocol_id"] == "fetch-development/rgb/decision-2-prefix-5/v1"
    assert (record["task"], record["seed"], record["environment_steps"], record["policy_calls"]) == ("reach", 5, 10, 2)
    assert record["autonomous"] is True
    assert "video" in record["artifacts"].values()
    attempt = Attempt.objects.get(pk=record["attempt"])
    assert attempt.status == "finished" and attempt.steps.count() == 10
    assert "steps 5/10" in err.getvalue()  # the progress bar


@pytest.mark.parametrize(
    "args, message",
    [
        (["--policy", "nobody"], "unknown policy"),
        (["--policy", "noop", "--horizon-multiplier", "3"], "1 or 2"),
        (["--policy", "fetch-oracle"], "privileged"),
    ],
)
def test_it_refuses_bad_options_and_stores_nothing(db, media_root, args, message):
    with pytest.raises(CommandError, match=message) as caught:
        call_command("evaluate", "fetch", "--task", "reach", "--seed", "5", *args, stdout=io.StringIO())
    assert caught.value.returncode == 2
    assert not Attempt.objects.exists()


def test_it_takes_a_policy_spec_string_and_registers_it_once(db, media_root):
    from evaluator.records.models import Policy
    from tests.servers.policies import HttpPolicyServer, always, zero_chunk

    server = HttpPolicyServer(always(zero_chunk()))
    try:
        for seed in ("1", "2"):
            out = io.StringIO()
            call_command(
                "evaluate",
                "fetch",
                "--task",
                "push",
                "--policy",
                server.url,
                "--seed",
                seed,
                "--budget-mode",
                "decisions",
                "--max-policy-calls",
                "2",
                "--json",
                "--no-progress",
                stdout=out,
            )
            assert json.loads(out.getvalue())["policy_calls"] == 2
    finally:
        server.stop()
    policy = Policy.objects.get(spec=server.url)
    assert policy.kind == "fixed_program" and server.count == 4
    assert set(Attempt.objects.values_list("policy_identity", flat=True)) == {policy.identity}


ROOT = Path(__file__).resolve().parents[1]


def _manage(cwd: Path, *args: str, database: Path) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{database}",
        "RSI_MEDIA_ROOT": str(cwd / "media"),
        "RSI_SECRET_KEY": "test",
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize(
    "command",
    [
        ["evaluate", "fetch", "--task", "reach", "--policy", "noop", "--seed", "0"],
        ["rsi_user", "ada", "--role", "reviewer", "--password", "pw"],
        ["load_catalogs"],
        ["ensure_admin"],
    ],
)
def test_a_command_on_a_database_never_migrated_says_what_to_run(tmp_path, command):
    result = _manage(ROOT, *command, database=tmp_path / "never-migrated.sqlite3")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "the database is not set up" in result.stderr and "manage.py migrate" in result.stderr


def _evaluate_in(clone: Path) -> dict:
    result = _manage(
        clone,
        *["evaluate", "fetch", "--task", "reach", "--policy", "noop", "--seed", "0", "--json", "--no-progress"],
        *["--budget-mode", "decisions", "--max-policy-calls", "1", "--replan-interval", "1"],
        database=clone / "db.sqlite3",
    )
    assert result.returncode == 0, result.stderr
    record = json.loads(result.stdout)
    provenance = next(path for path, kind in record["artifacts"].items() if kind == "provenance")
    return json.loads((clone / "media" / provenance).read_text())


def test_an_attempt_from_a_clean_checkout_records_its_commit_without_dirty(tmp_path):
    # SQLite's db.sqlite3-wal/-shm beside the checkout, media/ and .rsi/ are no change to the evaluator.
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True).stdout.strip()
    assert _manage(clone, "migrate", "--noinput", database=clone / "db.sqlite3").returncode == 0
    (clone / "notes.txt").write_text("an untracked file")
    provenance = _evaluate_in(clone)
    assert provenance["evaluator_revision"] == head
    assert "untracked files are not counted" in provenance["evaluator_revision_note"]
    with (clone / "README.md").open("a") as readme:
        readme.write("\na local change to a tracked file\n")
    assert _evaluate_in(clone)["evaluator_revision"] == head + "+dirty"
