"""`manage.py evaluate` runs one cell headless, stores it like any other attempt and prints its record."""

import io
import json

import pytest
from django.core.management import CommandError, call_command

from evaluator.models import Attempt

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
    from evaluator.models import Policy
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
