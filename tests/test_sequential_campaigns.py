"""Sequential campaigns and the rebuilt comparison, on stored records (issue 34; the episodes themselves are
tests/test_sequential_fetch.py's).

"a campaign launched 'against' a baseline campaign (same identity, same frozen cells) runs its cells in a
predeclared random order and, after each finished pair, updates an anytime-valid test ...; it stops starting cells
when the verdict is decided at the declared level, or runs to the end. The stopping rule and level are part of the
launch configuration and recorded ... Cells not run are shown as not run, never as failures, and the campaign's
plain aggregates say they cover the cells run." And the comparison page: "a campaign compared with itself, or two
campaigns under different identities, is refused with the reason, never silently pooled".
"""

from __future__ import annotations

import json

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse

from evaluator.execution import executor
from evaluator.execution.launching import do_launch_campaign, do_start_attempts
from evaluator.protocol.errors import LaunchRefused
from evaluator.protocol.identity import configure
from evaluator.records.models import Attempt, Campaign, RecordImmutable
from evaluator.records.queries import campaign_cells, campaign_summary
from evaluator.records.sequential import do_update_sequential, sequential_state_of
from evaluator.running.recorder import do_run_attempt
from tests.records import finish_cell

# The subject here is the records, the API and the pages: Fetch renders small (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("small_fetch_render")

SEEDS = list(range(12))


def launch(policy="noop", seeds=SEEDS, tasks=("reach",), against=None, **options) -> Campaign:
    return do_launch_campaign(
        name=f"{policy} against {against.pk if against else 'nothing'}",
        benchmark="fetch",
        task_names=list(tasks),
        seeds=seeds,
        policy=policy,
        config=configure("fetch", **options),
        against=against,
    )


@pytest.fixture
def baseline(operator) -> Campaign:
    """A finished baseline: 12 reach cells, every one failed."""
    campaign = launch()
    for cell in campaign_cells(campaign):
        finish_cell(cell, "task_failure", duration_s=1)
    return campaign


def in_run_order(campaign: Campaign) -> list[Attempt]:
    by_index = {cell.cell_index: cell for cell in campaign_cells(campaign)}
    return [by_index[index] for index in campaign.sequential["order"]]


def finish_in_order(campaign: Campaign, outcomes: list[str]) -> list[int]:
    """Finish the campaign's cells in its run order, as runs would, with the update after each; returns how many
    cells each update left unrun."""
    left = []
    for cell, outcome in zip(in_run_order(campaign), outcomes, strict=False):
        finish_cell(cell, outcome, duration_s=1)
        left.append(do_update_sequential(Campaign.objects.get(pk=campaign.pk)))
    return left


def test_a_sequential_campaign_freezes_its_rule_and_a_random_order(baseline):
    campaign = launch("stop", against=baseline)
    rule = campaign.sequential
    assert (rule["baseline"], rule["level"], rule["margin"]) == (baseline.pk, 0.05, 0.05)
    assert "Waudby-Smith & Ramdas" in rule["method"]
    assert sorted(rule["order"]) == list(range(12)) and rule["order"] != list(range(12))
    assert 0 <= rule["order_seed"] < 2**32
    campaign.sequential = {**rule, "level": 0.2}
    with pytest.raises(RecordImmutable, match="sequential"):
        campaign.save()


def test_a_baseline_that_cannot_serve_is_refused_with_every_reason(operator, baseline):
    running = launch(seeds=[0, 1])  # not finished
    with pytest.raises(LaunchRefused) as refused:
        launch("stop", seeds=[0, 1, 2], against=running, budget_mode="decisions")
    problems = refused.value.problems
    assert any(f"campaign {running.pk} ran under fetch-development/rgb/v1" in p for p in problems)
    assert any("2 cells without an outcome: a baseline must have finished every cell" in p for p in problems)
    assert any(
        "the plan's cells must be campaign" in p and "[0, 1] (2)" in p and "[0, 1, 2] (3)" in p for p in problems
    )
    assert not Campaign.objects.filter(name__startswith="stop").exists()


def test_starting_queues_the_cells_in_the_predeclared_order(baseline, monkeypatch, django_capture_on_commit_callbacks):
    campaign = launch("stop", against=baseline)
    submitted = []
    monkeypatch.setattr(executor, "submit", lambda attempt_id, *_: submitted.append(attempt_id))
    with django_capture_on_commit_callbacks(execute=True):
        do_start_attempts(None, campaign_cells(campaign))
    assert submitted == [cell.pk for cell in in_run_order(campaign)]


def test_once_the_test_decides_the_cells_not_started_are_left_not_run(baseline):
    """The candidate succeeds where the baseline failed: the eighth such pair decides `improved` (the capital of
    the bets at zero difference first reaches 2 / level there: tests/test_sequential_test.py); the four cells
    not yet started are then left not run, with the reason, and the aggregates cover the eight run."""
    campaign = launch("stop", against=baseline)
    assert finish_in_order(campaign, ["success"] * 8) == [0] * 7 + [4]
    state = sequential_state_of(campaign)
    assert (state.verdict.value, state.decided_at, state.counts.only_b) == ("improved", 8, 8)
    not_run = campaign.attempts.filter(status="not_run")
    assert not_run.count() == 4
    assert set(not_run.values_list("error_detail", flat=True)) == {
        f"not run: the sequential test against campaign {baseline.pk} decided improved after 8 pairs"
    }
    summary = campaign_summary(campaign)
    overall = summary.report.overall
    assert (overall.selected, overall.not_run, overall.attempted, overall.successes) == (8, 4, 8, 8)
    assert overall.success_rate.denominator == 8  # never a failure: the four are in no denominator
    assert summary.statuses["not_run"] == 4


def test_an_undecided_campaign_runs_to_the_end(baseline):
    """A copy of the baseline: every pair agrees; twelve pairs cannot show a difference within 5 points."""
    campaign = launch("noop", against=baseline)
    assert finish_in_order(campaign, ["task_failure"] * 12) == [0] * 12
    state = sequential_state_of(campaign)
    assert state.verdict.value == "underpowered" and state.decided_at is None
    needed, more_than = state.projection()
    assert needed > 12 and not more_than
    assert not campaign.attempts.filter(status="not_run").exists()


def test_a_cell_not_run_is_final(baseline, media_root):
    campaign = launch("stop", against=baseline)
    finish_in_order(campaign, ["success"] * 8)
    cell = campaign.attempts.filter(status="not_run").first()
    cell.status = "pending"
    with pytest.raises(RecordImmutable, match="not run and cannot be changed"):
        cell.save()
    with pytest.raises(IntegrityError), transaction.atomic():  # below the model: the database's trigger
        Attempt.objects.filter(pk=cell.pk).update(status="pending")
    with pytest.raises(RecordImmutable):
        Attempt.objects.get(pk=cell.pk).delete()
    with pytest.raises(LaunchRefused, match="no pending cell to start"):
        do_start_attempts(None, list(campaign.attempts.filter(status="not_run")))
    # A queued job that reaches it after the stop runs nothing.
    assert do_run_attempt(Attempt.objects.get(pk=cell.pk)).status == "not_run"
    assert not Attempt.objects.get(pk=cell.pk).evidence_dir


def test_the_comparison_takes_its_verdict_from_the_sequential_test(operator, baseline):
    campaign = launch("stop", against=baseline)
    finish_in_order(campaign, ["success"] * 8)
    page = operator.get(reverse("evaluator:compare"), {"a": baseline.pk, "b": campaign.pk}).content.decode()
    assert 'data-verdict="improved"' in page and 'id="sequence-chart"' in page
    assert 'id="cells-saved">4<' in page
    assert "It decided <b>improved</b> after <b>8</b> pairs" in page
    assert 'href="#pairs-reach"' in page and 'id="pairs-reach"' in page  # each task row links to its pairs
    assert page.count('class="side-by-side"') == 8 and page.count(">not run</span>") == 4
    compared = operator.get(f"/api/v1/compare?a={baseline.pk}&b={campaign.pk}").json()
    assert (compared["verdict"], compared["decided_by"]) == ("improved", "sequential test")
    assert (compared["sequential"]["decided_at"], compared["sequential"]["cells_not_run"]) == (8, 4)
    assert compared["kept_out"]["not_run"] == 4 and compared["overall"]["pairs"] == 8
    # Swapped, the page points to the comparison where the sequential campaign is the candidate.
    swapped = operator.get(reverse("evaluator:compare"), {"a": campaign.pk, "b": baseline.pk}).content.decode()
    assert f"?a={baseline.pk}&amp;b={campaign.pk}" in swapped


def test_the_campaign_page_shows_the_sequence_and_the_cells_not_run(operator, baseline):
    campaign = launch("stop", against=baseline)
    finish_in_order(campaign, ["success"] * 8)
    page = operator.get(reverse("evaluator:campaign", args=[campaign.pk])).content.decode()
    assert 'id="sequential-section"' in page and 'data-decided-at="8"' in page
    assert 'id="sequential-saved">4<' in page and 'id="not-run-count">4 not run<' in page
    assert page.count('data-status="not_run"') == 4
    assert page.count("Not run: the sequential test had decided.") == 4
    assert "These aggregates cover the 8 cells run; 4 cells were not run" in page
    assert page.count('id="sequence-low"') == 1


def test_a_campaign_compared_with_itself_or_across_identities_is_refused(operator, baseline):
    other = launch("stop", budget_mode="decisions")
    page = operator.get(reverse("evaluator:compare"), {"a": baseline.pk, "b": baseline.pk})
    assert page.status_code == 400
    assert f"campaign {baseline.pk} compared with itself" in page.content.decode()
    page = operator.get(reverse("evaluator:compare"), {"a": baseline.pk, "b": other.pk}).content.decode()
    assert "results of different protocol identities are never pooled or compared" in page
    assert 'id="verdict"' not in page
    answer = operator.get(f"/api/v1/compare?a={baseline.pk}&b={other.pk}")
    assert (answer.status_code, answer.json()["code"]) == (422, "comparison_refused")
    assert "never pooled or compared" in answer.json()["reasons"][0]


def test_the_api_gives_a_fixed_design_verdict_at_the_asked_level_and_margin(operator, baseline):
    candidate = launch("stop")  # a fixed campaign of the same cells: every one a success
    for cell in campaign_cells(candidate):
        finish_cell(cell, "success")
    compared = operator.get(f"/api/v1/compare?a={baseline.pk}&b={candidate.pk}&level=0.01&margin=0.1").json()
    assert (compared["verdict"], compared["decided_by"], compared["level"], compared["margin"]) == (
        "improved",
        "fixed design",
        0.01,
        0.1,
    )
    overall = compared["overall"]
    assert (overall["pairs"], overall["only_b"], overall["difference"]) == (12, 12, 1.0)
    assert overall["mcnemar_exact_p"] == pytest.approx(2 / 4096)
    (reach,) = compared["per_task"]
    assert (reach["task"], reach["rate_a"]["numerator"], reach["rate_b"]["numerator"]) == ("reach", 0, 12)
    assert compared["sequential"] is None
    bad = operator.get(f"/api/v1/compare?a={baseline.pk}&b={candidate.pk}&level=0.5&margin=0")
    assert (bad.status_code, bad.json()["code"]) == (422, "invalid_comparison_setting")
    assert bad.json()["reasons"] == [
        "the level must be in [0.001, 0.2], got 0.5",
        "the margin must be in [0.01, 0.5], got 0.0",
    ]
    page = operator.get(reverse("evaluator:compare"), {"a": baseline.pk, "b": candidate.pk, "margin": "x"})
    assert page.status_code == 400


def test_the_api_launches_against_a_baseline_and_names_what_is_wrong(operator, baseline):
    def post(body):
        return operator.post("/api/v1/campaigns", json.dumps(body), content_type="application/json")

    plan = operator.get(f"/api/v1/campaigns/{baseline.pk}").json()["plan"]
    assert (plan["benchmark"], plan["tasks"], plan["seeds"], plan["sensors"]) == ("fetch", ["reach"], SEEDS, "rgb")
    refused = post({**plan, "policy": "stop", "against": 999999}).json()
    assert refused["code"] == "launch_refused" and "no campaign 999999 to run against" in refused["reasons"]
    refused = post({**plan, "policy": "stop", "level": 0.01}).json()
    assert refused["reasons"] == ["a level and margin set a sequential campaign's test: give the baseline campaign too"]
    refused = post({**plan, "policy": "stop", "seeds": [0, 1], "against": baseline.pk}).json()
    assert any("the plan's cells must be campaign" in reason for reason in refused["reasons"])
    created = post({**plan, "policy": "stop", "against": baseline.pk, "level": 0.01, "margin": 0.1})
    assert created.status_code == 201
    campaign = created.json()
    assert campaign["protocol_id"] == "fetch-development/rgb/v1"
    assert campaign["sequential"]["baseline"] == baseline.pk
    assert (campaign["sequential"]["verdict"], campaign["sequential"]["level"]) == ("underpowered", 0.01)
    assert Campaign.objects.get(pk=campaign["id"]).sequential["margin"] == 0.1
