"""Issue 44, item 4: "Learning curves. A page and an API operation (its path says `curve`) answer: for the campaigns
of one protocol identity that share a label (e.g. `run=abc`), success with its Wilson interval against another
label's value (the step), per task and overall, with the paired verdict between consecutive points; an SVG on the
page. A training script gets the same as data." The client's curve is tests/test_training_loop.py's."""

from django.contrib.auth import get_user_model
from django.urls import reverse

from evaluator.execution.cancelling import do_cancel_campaign
from evaluator.execution.launching import do_launch_campaign
from evaluator.protocol.aggregates import wilson_interval
from evaluator.protocol.identity import configure
from evaluator.records.models import Campaign
from tests.records import finish_cell

SEEDS = list(range(30))


def checkpoint(labels: dict, successes: dict[str, set[int]] | None = None, **options) -> Campaign:
    """A campaign of reach and push over 30 seeds, finished with success on the given seeds of each task (none:
    left pending)."""
    campaign = do_launch_campaign(
        name=f"step {labels.get('step')}",
        benchmark="fetch",
        task_names=["reach", "push"],
        seeds=SEEDS,
        policy="noop",
        config=configure("fetch", budget_mode="decisions", **options),
        labels=labels,
    )
    if successes is not None:
        for cell in campaign.attempts.select_related("task"):
            won = cell.seed in successes.get(cell.task.name, set())
            finish_cell(cell, "success" if won else "task_failure")
    return campaign


def curve(client, query: str):
    return client.get(f"/api/v1/curve?{query}")


def test_three_steps_give_rates_with_wilson_intervals_per_task_and_the_paired_verdict_between_them(operator):
    early = checkpoint({"run": "abc", "step": "1000"}, {"reach": set(range(6)), "push": set(range(3))})
    middle = checkpoint({"run": "abc", "step": "2000"}, {"reach": set(range(28)), "push": set(range(20))})
    late = checkpoint({"run": "abc", "step": "10000"}, {"reach": set(range(28)), "push": set(range(20))})
    found = curve(operator, "label=run=abc&x=step").json()

    assert [p["x"] for p in found["points"]] == [1000, 2000, 10000]  # by number, not as text
    assert [p["campaign"] for p in found["points"]] == [early.pk, middle.pk, late.pk]
    first = found["points"][0]
    assert first["success_rate"]["numerator"] == 9 and first["success_rate"]["denominator"] == 60
    low, high = wilson_interval(9, 60)
    assert (first["success_rate"]["wilson95_low"], first["success_rate"]["wilson95_high"]) == (low, high)
    assert first["per_task"]["reach"]["numerator"] == 6 and first["per_task"]["push"]["denominator"] == 30
    assert first["against_previous"] is None
    # Each point against the one before, paired by task and seed: what the comparison gives for the two.
    for before, point in zip(found["points"], found["points"][1:], strict=False):
        paired = operator.get(f"/api/v1/compare?a={before['campaign']}&b={point['campaign']}").json()
        step = point["against_previous"]
        assert step["previous"] == before["campaign"] and step["verdict"] == paired["verdict"]
        assert step["overall"]["pairs"] == 60 and step["decided_by"] == "fixed design"
    assert [p["against_previous"]["verdict"] for p in found["points"][1:]] == ["improved", "underpowered"]
    assert found["left_out"] == [] and found["tasks"] == ["reach", "push"]


def test_campaigns_that_are_not_points_are_listed_with_why(operator):
    olga = get_user_model().objects.get(username="olga")
    kept = checkpoint({"run": "abc", "step": "1000"}, {"reach": {1}})
    older = checkpoint({"run": "abc", "step": "2000"}, {"reach": {1}})
    newer = checkpoint({"run": "abc", "step": "2000.0"}, {"reach": {2}})  # the same step, evaluated again
    running = checkpoint({"run": "abc", "step": "3000"})
    cancelled = checkpoint({"run": "abc", "step": "4000"})
    do_cancel_campaign(olga, cancelled)
    unlabelled = checkpoint({"run": "abc"}, {})
    wordy = checkpoint({"run": "abc", "step": "last"}, {})
    found = curve(operator, "label=run=abc&x=step").json()
    assert [p["campaign"] for p in found["points"]] == [kept.pk, newer.pk]
    assert {(row["campaign"], row["reason"]) for row in found["left_out"]} == {
        (older.pk, f"campaign {newer.pk} is newer at step=2000"),
        (running.pk, "not finished: 60 cell(s) pending, queued or running"),
        (cancelled.pk, "cancelled"),
        (unlabelled.pk, "it has no label step"),
        (wordy.pk, "step=last is not a number"),
    }


def test_identities_are_never_pooled_and_a_curve_asked_wrongly_says_every_reason(operator):
    plain = checkpoint({"run": "abc", "step": "1000"}, {})
    other = checkpoint({"run": "abc", "step": "2000"}, {}, max_policy_calls=5)
    refused = curve(operator, "label=run=abc&x=step")
    assert refused.status_code == 422 and refused.json()["code"] == "curve_refused"
    (reason,) = refused.json()["reasons"]
    assert "ran under 2 protocol identities, never pooled: name one" in reason
    assert plain.protocol.protocol_id in reason and other.protocol.protocol_id in reason
    named = curve(operator, f"label=run=abc&x=step&protocol={other.protocol.protocol_id}").json()
    assert [p["campaign"] for p in named["points"]] == [other.pk]

    wrong = curve(operator, "label=step=1&x=step&margin=2")
    assert wrong.status_code == 422 and len(wrong.json()["reasons"]) == 2  # x is a filter too; the margin
    assert curve(operator, "label=run=none&x=step").json()["reasons"] == ["no campaign is labelled run=none"]
    assert curve(operator, "x=step").status_code == 400  # a curve names its labels
    assert curve(operator, "label=Run=abc&x=step").json()["code"] == "invalid_label"


def test_the_page_draws_the_curve_as_svg_with_a_row_a_point(operator):
    checkpoint({"run": "abc", "step": "1000"}, {"reach": set(range(6))})
    checkpoint({"run": "abc", "step": "2000"}, {"reach": set(range(28))})
    page = operator.get(reverse("evaluator:curve") + "?label=run%3Dabc&x=step").content.decode()
    assert 'id="curve-chart"' in page and page.count('class="curve-point"') == 2
    assert page.count('class="task-line"') == 2 and 'id="curve-overall"' in page
    assert '<tr data-x="1000">' in page and '<tr data-x="2000">' in page
    assert "<b>improved</b></a> (60 pairs)" in page
    refused = operator.get(reverse("evaluator:curve") + "?label=run%3Dnone&x=step")
    assert refused.status_code == 400 and "no campaign is labelled run=none" in refused.content.decode()
    assert operator.get(reverse("evaluator:curve")).status_code == 200  # the empty form
