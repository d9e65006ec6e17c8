"""`manage.py campaign --against`: a sequential campaign from the shell, as the launch form and `rsi launch --against`
make one ("launch it against a finished baseline ... and stops starting cells once the paired test decides",
docs/statistics.md). Real Fetch episodes through the real worker: the harness check `noop` as the baseline on
FetchReach, the scripted `fetch-oracle` as the better policy, under the privileged-state track."""

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from evaluator.records.models import Attempt, Campaign

SEEDS = 12
PLAN = ["fetch", "--tasks", "reach", "--repeats", str(SEEDS), "--sensors", "privileged-state"]
PLAN += ["--budget-mode", "decisions", "--max-policy-calls", "20", "--replan-interval", "1", "--no-progress"]


def _campaign(*args) -> dict:
    out = io.StringIO()
    call_command("campaign", *PLAN, *args, "--json", stdout=out, stderr=io.StringIO())
    return json.loads(out.getvalue())


@pytest.mark.native  # the command runs its campaigns' episodes in this process
def test_a_better_policy_run_from_the_shell_against_a_baseline_stops_once_decided(catalogs, media_root):
    baseline = _campaign("--policy", "noop", "--run")
    assert {c["status"] for c in baseline["cells"]} == {"finished"} and "sequential" not in baseline
    better = _campaign("--policy", "fetch-oracle", "--against", str(baseline["campaign"]), "--run")
    sequential = better["sequential"]
    assert sequential["verdict"] == "improved" and sequential["baseline"] == baseline["campaign"]
    statuses = [c["status"] for c in better["cells"]]
    # Stopped early: what was still waiting when it decided is not run, and counted so.
    assert statuses.count("not_run") == sequential["cells_not_run"] >= 1
    assert statuses.count("finished") == sequential["decided_at"]
    rule = Campaign.objects.get(pk=better["campaign"]).sequential
    finished_first = Attempt.objects.filter(campaign_id=better["campaign"], status="finished")
    # The cells ran in the order drawn at launch: the finished ones are its first ones.
    assert sorted(finished_first.values_list("cell_index", flat=True)) == sorted(rule["order"][: len(finished_first)])


@pytest.mark.parametrize(
    "args, reason",
    [
        (["--against", "4242"], "no campaign 4242 to run against"),
        (["--level", "0.1"], "--level and --margin set a sequential campaign's test: give --against too"),
    ],
)
def test_a_sequential_plan_the_form_would_refuse_is_refused_from_the_shell(catalogs, args, reason):
    with pytest.raises(CommandError, match=reason):
        _campaign("--policy", "noop", *args)
    assert not Campaign.objects.exists()


def test_a_level_out_of_range_is_refused_and_nothing_is_stored(catalogs, media_root):
    baseline = _campaign("--policy", "noop")
    with pytest.raises(CommandError, match=r"the level must be in \[") as refused:
        _campaign("--policy", "noop", "--against", str(baseline["campaign"]), "--level", "0.9", "--margin", "2")
    assert "the margin must be in [" in str(refused.value)  # every reason at once
    assert Campaign.objects.count() == 1
