"""Issue 44, item 1: "Cancel. A campaign's pending and queued cells can be cancelled (page, API, `rsi cancel N`),
recorded as not run with who cancelled and when; a running attempt can be stopped the way a watcher stops one.
Today a stale checkpoint's evaluation runs to its end." (The client's `rsi cancel` is tests/test_training_loop.py's.)"""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.urls import reverse

from evaluator.execution.cancelling import do_cancel_campaign
from evaluator.execution.launching import do_launch_campaign, do_rerun, ensure_builtin_policies
from evaluator.policies.base import Policy, PolicyReply
from evaluator.protocol.errors import LaunchRefused
from evaluator.protocol.identity import configure
from evaluator.records.models import Attempt, Campaign, Intervention, RecordImmutable
from evaluator.records.models import Policy as PolicyRecord
from evaluator.running.recorder import do_run_attempt

# The subject here is the records, the API and the pages: Fetch renders small (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("small_fetch_render")

FAST = {"budget_mode": "decisions", "max_policy_calls": 6, "replan_interval": 1}


def user_with(name: str, role: str):
    user = get_user_model().objects.create_user(name, password="pw")
    user.groups.add(Group.objects.get(name=role))
    return user


def three_cells(policy: str = "noop") -> Campaign:
    ensure_builtin_policies()
    return do_launch_campaign(
        name="stale checkpoint",
        benchmark="fetch",
        task_names=["reach"],
        seeds=[0, 1, 2],
        policy=PolicyRecord.objects.get(name=policy),
        config=configure("fetch", **FAST),
    )


def test_pending_and_queued_cells_are_left_not_run_with_who_and_when(catalogs, media_root):
    olga = user_with("olga", "operator")
    campaign = three_cells()
    first, second, third = campaign.attempts.order_by("cell_index")
    do_run_attempt(first)
    Attempt.objects.filter(pk=second.pk).update(status="queued")  # waiting for an executor slot

    cancelled = do_cancel_campaign(olga, campaign)

    assert cancelled.not_run == [second.pk, third.pk] and cancelled.stopped == [] and not cancelled.still_running
    campaign.refresh_from_db()
    assert campaign.cancelled_by == olga and campaign.cancelled_at is not None
    rows = {a.pk: a for a in campaign.attempts.all()}
    assert rows[first.pk].status == "finished"  # what ran stays as it ran
    when = campaign.cancelled_at.isoformat(timespec="seconds")
    for pk in (second.pk, third.pk):
        assert rows[pk].status == "not_run" and rows[pk].started_at is None
        assert rows[pk].error_detail == f"not run: campaign cancelled by olga at {when}"
    # "recorded as not run": final, never started later by an executor that still holds it, never changed
    assert do_run_attempt(rows[second.pk]).status == "not_run"
    with pytest.raises(RecordImmutable):
        rows[third.pk].save()


def test_not_run_cells_are_not_counted_and_the_campaign_leaves_the_leaderboards(catalogs, media_root, operator):
    campaign = three_cells()
    do_run_attempt(campaign.attempts.order_by("cell_index").first())
    do_cancel_campaign(get_user_model().objects.get(username="olga"), campaign)
    api = operator.get(f"/api/v1/campaigns/{campaign.pk}").json()
    assert api["statuses"]["not_run"] == 2 and api["done"]
    assert api["report"]["overall"]["selected"] == 1 and api["report"]["overall"]["not_run"] == 2
    assert api["cancelled"]["by"] == "olga" and api["cancelled"]["at"]
    # A cancelled campaign is missing cells: it never ranks beside whole ones.
    assert operator.get("/api/v1/leaderboards").json() == []


class CancelledWhileRunning(Policy):
    """At its second call the operator cancels the campaign, as from the page while this cell runs."""

    user = None

    def act(self, message):
        if message.counters["policy_calls"] == 2:
            do_cancel_campaign(self.user, Attempt.objects.get(status="running").campaign)
        return PolicyReply({"actions": [[0.0, 0.0, 0.0, 0.0]]})


def test_a_running_cell_is_stopped_as_a_watcher_stops_one_and_reported_apart(catalogs, media_root, register_policy):
    olga = user_with("olga", "operator")  # an operator: start_attempt, not intervene_attempt
    CancelledWhileRunning.user = olga
    register_policy("cancelled-while-running", CancelledWhileRunning)
    campaign = three_cells("cancelled-while-running")
    running = do_run_attempt(campaign.attempts.order_by("cell_index").first())

    assert running.termination_reason == "human_stop" and running.outcome == "task_failure"
    assert running.autonomous is False  # "reported apart"
    stop = Intervention.objects.get(attempt=running)
    assert (stop.kind, stop.username, stop.note) == ("stop", "olga", f"campaign {campaign.pk} cancelled")
    assert set(campaign.attempts.exclude(pk=running.pk).values_list("status", flat=True)) == {"not_run"}


def test_the_page_cancels_says_what_it_did_and_refuses_a_second_time(catalogs, media_root, operator):
    campaign = three_cells()
    page = operator.get(reverse("evaluator:campaign", args=[campaign.pk])).content.decode()
    assert 'id="cancel-campaign"' in page and "Cancel the campaign (3 cells not finished)" in page
    done = operator.post(reverse("evaluator:cancel_campaign", args=[campaign.pk]), follow=True).content.decode()
    assert "Cancelled: 3 cell(s) left not run, 0 running cell(s) stopped." in done
    assert 'id="cancelled"' in done and "Cancelled by <b>olga</b>" in done
    assert 'id="cancel-campaign"' not in done and 'id="start-all"' not in done
    assert done.count("Not run: the campaign was cancelled.") == 3
    again = operator.post(f"/api/v1/campaigns/{campaign.pk}/cancel")
    assert again.status_code == 422 and again.json()["reasons"] == [
        f"campaign {campaign.pk} was already cancelled by olga at "
        f"{Campaign.objects.get().cancelled_at.isoformat(timespec='seconds')}"
    ]


def test_only_an_operator_cancels_and_a_finished_campaign_has_nothing_to_cancel(catalogs, media_root, client):
    campaign = three_cells()
    reviewer = user_with("rita", "reviewer")
    client.force_login(reviewer)
    assert client.post(f"/api/v1/campaigns/{campaign.pk}/cancel").status_code == 403
    assert client.post(reverse("evaluator:cancel_campaign", args=[campaign.pk])).status_code == 403
    assert set(campaign.attempts.values_list("status", flat=True)) == {"pending"}
    for attempt in campaign.attempts.all():
        do_run_attempt(attempt)
    with pytest.raises(LaunchRefused, match="has no cell left to cancel: each has finished or was left not run"):
        do_cancel_campaign(user_with("olga", "operator"), campaign)


def test_a_cancelled_campaigns_cells_are_not_re_run(catalogs, media_root):
    olga = user_with("olga", "operator")
    campaign = three_cells()
    finished = do_run_attempt(campaign.attempts.order_by("cell_index").first())
    do_cancel_campaign(olga, campaign)
    with pytest.raises(LaunchRefused, match=f"campaign {campaign.pk} was cancelled: its cells run no more"):
        do_rerun(olga, Attempt.objects.get(pk=finished.pk))


def test_of_two_cancels_racing_past_the_check_one_wins_and_the_other_is_refused_naming_it(catalogs, media_root):
    """Issue "... fifth round", item 12: "Two concurrent cancels both answer 200, and the campaign names one canceller
    while its cells name the other." Both requests read the campaign before either wrote (each passed the check)."""
    olga, omar = user_with("olga", "operator"), user_with("omar", "operator")
    campaign = three_cells()
    running = campaign.attempts.order_by("cell_index").first()
    Attempt.objects.filter(pk=running.pk).update(status="running", runner="gpu7:4242")  # another host's executor
    seen_by_olga, seen_by_omar = Campaign.objects.get(pk=campaign.pk), Campaign.objects.get(pk=campaign.pk)

    do_cancel_campaign(olga, seen_by_olga)
    with pytest.raises(LaunchRefused, match=f"campaign {campaign.pk} was already cancelled by olga at"):
        do_cancel_campaign(omar, seen_by_omar)

    campaign.refresh_from_db()
    assert campaign.cancelled_by == olga
    not_run = campaign.attempts.exclude(pk=running.pk)
    assert {a.error_detail.split(" at ")[0] for a in not_run} == {"not run: campaign cancelled by olga"}
