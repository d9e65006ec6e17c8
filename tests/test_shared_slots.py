"""Issue 54, point 3: "Slots are shared across running campaigns (round robin by campaign, an optional priority per
campaign, documented); a sequential campaign's pairs keep their order." and its goal: "Two 6-cell campaigns started
together share the slots: the second campaign's first cell starts within about one cell's time of its start, never
after the first campaign ends." """

import threading
import time

import pytest
from django.urls import reverse

from evaluator.execution import executor
from evaluator.execution.capacity import executor_workers
from evaluator.execution.fair_queue import FairQueue
from evaluator.execution.launching import do_launch_campaign, do_start_attempts, ensure_builtin_policies
from evaluator.protocol.identity import configure
from evaluator.records.models import Attempt, Policy


def drain(queue: FairQueue) -> list:
    taken = []
    while (job := queue.take()) is not None:
        taken.append(job)
    return taken


def test_groups_take_turns_and_each_keeps_its_own_order():
    queue = FairQueue()
    for cell in range(4):
        queue.put("first", ("first", cell))
    for cell in range(2):
        queue.put("second", ("second", cell))
    assert len(queue) == 6
    assert drain(queue) == [
        ("first", 0),
        ("second", 0),
        ("first", 1),
        ("second", 1),
        ("first", 2),
        ("first", 3),
    ]
    assert len(queue) == 0 and queue.take() is None


def test_a_group_of_higher_priority_goes_first_and_equals_share():
    queue = FairQueue()
    for group, priority in (("low", 0), ("urgent", 5), ("also urgent", 5)):
        for cell in range(2):
            queue.put(group, (group, cell), priority)
    assert drain(queue) == [
        ("urgent", 0),
        ("also urgent", 0),
        ("urgent", 1),
        ("also urgent", 1),
        ("low", 0),
        ("low", 1),
    ]


def test_a_group_that_arrives_goes_before_the_groups_already_served():
    queue = FairQueue()
    for cell in range(3):
        queue.put("running", ("running", cell))
    assert queue.take() == ("running", 0)
    queue.put("new", ("new", 0))
    assert drain(queue) == [("new", 0), ("running", 1), ("running", 2)]


def test_a_group_that_ran_dry_and_comes_back_waits_for_its_turn():
    queue = FairQueue()
    queue.put("a", 1)
    queue.put("b", 1)
    assert queue.take() == 1  # a's
    queue.put("a", 2)
    assert [queue.take(), queue.take()] == [1, 2]  # b's turn first, then a again


def test_a_group_fed_one_job_at_a_time_keeps_its_place_behind_a_group_that_waits():
    # How a campaign's cells reach the executor: one put per cell, the slots taking each as it comes.
    queue = FairQueue()
    queue.put("first", ("first", 0))
    assert queue.take() == ("first", 0)
    for cell in (1, 2):
        queue.put("first", ("first", cell))
    queue.put("second", ("second", 0))
    assert drain(queue) == [("second", 0), ("first", 1), ("first", 2)]


def wait_finished(attempts, timeout_s: float = 300) -> list[Attempt]:
    ids = [a.pk for a in attempts]
    deadline = time.monotonic() + timeout_s
    while Attempt.objects.filter(pk__in=ids).exclude(status="finished").exists():
        assert time.monotonic() < deadline, "the cells did not finish in time"
        time.sleep(0.2)
    return list(Attempt.objects.filter(pk__in=ids))


@pytest.mark.django_db(transaction=True)
def test_two_campaigns_started_together_interleave_their_cells_on_the_executor(catalogs, media_root, monkeypatch):
    ensure_builtin_policies()
    config = configure("fetch", budget_mode="decisions", max_policy_calls=2, replan_interval=1)

    def launch():
        return do_launch_campaign(
            name="shared",
            benchmark="fetch",
            task_names=["reach"],
            seeds=list(range(6)),
            policy=Policy.objects.get(name="noop"),
            config=config,
        )

    # The slots' first cells wait until both campaigns are started: "started together" is then what the pool sees,
    # however long starting the second takes beside a finishing first cell on a loaded machine.
    both_started, run = threading.Event(), executor.run
    monkeypatch.setattr(executor, "run", lambda attempt_id: both_started.wait(60) and run(attempt_id))
    first, second = launch(), launch()
    do_start_attempts(None, list(first.attempts.all()))
    do_start_attempts(None, list(second.attempts.all()))
    both_started.set()
    finished = wait_finished([*first.attempts.all(), *second.attempts.all()])
    starts = sorted(finished, key=lambda a: a.started_at)
    order = [a.campaign_id for a in starts]
    # The pool's slots took the first campaign's first cells; the second's first is next, as soon as one is free.
    assert order.index(second.pk) == executor_workers(), order
    assert order.count(first.pk) == order.count(second.pk) == 6
    first_cells = [a for a in starts if a.campaign_id == first.pk]
    second_cells = [a for a in starts if a.campaign_id == second.pk]
    assert second_cells[0].started_at < first_cells[-1].finished_at  # never after the first campaign ends
    assert first_cells[-1].started_at > second_cells[0].started_at  # they interleave
    # Each campaign's cells are taken in plan order; the slots' first cells, taken at once, may claim in either order.
    for cells in (first_cells, second_cells):
        started = {a.cell_index: a.started_at for a in cells}
        slots = executor_workers()
        assert all(started[i] <= started[j] for i in started for j in started if j - i >= slots), started


@pytest.fixture
def submitted(monkeypatch):
    calls = []
    monkeypatch.setattr(executor, "submit", lambda *args: calls.append(args))
    return calls


@pytest.mark.django_db
def test_the_start_form_and_the_api_give_a_campaign_its_priority_and_refuse_one_out_of_range(
    operator, make_attempt, submitted, django_capture_on_commit_callbacks
):
    first, second = make_attempt("reach", benchmark="fetch"), make_attempt("push", benchmark="fetch")
    with django_capture_on_commit_callbacks(execute=True):
        refused = operator.post(reverse("evaluator:start_campaign", args=[first.campaign_id]), {"priority": "12"})
        page = operator.get(refused.url).content.decode()
        assert "priority must be a whole number from -9 to 9, not &#x27;12&#x27;" in page and submitted == []
        operator.post(reverse("evaluator:start_campaign", args=[first.campaign_id]), {"priority": "5"})
        api = f"/api/v1/campaigns/{second.campaign_id}/start"
        wrong = operator.post(f"{api}?priority=high", content_type="application/json")
        assert wrong.status_code == 422 and wrong.json()["code"] == "invalid_priority"
        assert operator.post(f"{api}?priority=-3", content_type="application/json").status_code == 200
    assert submitted == [(first.pk, "fetch", first.campaign_id, 5), (second.pk, "fetch", second.campaign_id, -3)]
