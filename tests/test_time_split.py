"""Issue 43, item 6: "Each attempt records its wall time split: queue wait, environment build, reset, native steps
(physics and render), policy wait (with the host's inference time and batch where known), evidence (encode and
write). The campaign page, the API and `rsi status` show the campaign's split and its observations per second, so a
user sees which side bounds them. Evidence bytes per episode are shown too." Done when: "each attempt's parts add up
to its wall time within 5%". (`rsi status` is checked on a real site in tests/test_api_client_site.py.)"""

import json
import re
from datetime import timedelta

import pytest
from django.db.models import Sum
from django.utils import timezone

from evaluator.execution import executor
from evaluator.records.models import Artifact, Attempt
from evaluator.records.throughput import PARTS
from evaluator.running.recorder import do_run_attempt
from tests.records import finish_cell

# The subject here is the records, the API and the pages: Fetch renders small (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("small_fetch_render")

PLAN = {"benchmark": "fetch", "policy": "noop", "tasks": ["reach", "push"], "seeds": [4, 9], "start": True}


@pytest.fixture
def ran(operator, media_root, monkeypatch, django_capture_on_commit_callbacks):
    """A 4-cell Fetch campaign created and started through the API (so its cells were queued), then run: four
    decisions a cell, as every part of the split is there from the first decision on."""
    queued = []
    monkeypatch.setattr(executor, "submit", lambda attempt_id, *_: queued.append(attempt_id))
    plan = {**PLAN, "budget_mode": "decisions", "max_policy_calls": 4}
    with django_capture_on_commit_callbacks(execute=True):
        response = operator.post("/api/v1/campaigns", json.dumps(plan), content_type="application/json")
    campaign_id = response.json()["id"]
    assert len(queued) == 4
    for attempt_id in queued:
        do_run_attempt(Attempt.objects.get(pk=attempt_id))
    return campaign_id


def test_each_attempts_parts_add_up_to_its_wall_time_within_5_percent(ran):
    for attempt in Attempt.objects.filter(campaign_id=ran):
        time = attempt.accounting["time"]
        parts = time["parts_s"]
        assert set(parts) == set(PARTS)
        assert all(parts[p] > 0 for p in ("env_build", "reset", "native_steps", "policy_start", "policy_wait"))
        assert parts["evidence"] > 0
        # Timed on one thread, the parts cannot overlap: their sum is at most the wall time, and at least 95% of it.
        assert 0.95 * time["wall_s"] <= sum(parts.values()) <= time["wall_s"]
        # The wall time is the attempt's own, claim to stored result, as its timestamps say it.
        stamped = (attempt.finished_at - attempt.started_at).total_seconds()
        assert 0.9 * stamped <= time["wall_s"] <= stamped + 0.01
        assert time["queue_wait_s"] is not None and time["queue_wait_s"] >= 0  # started through the queue
        assert time["host"] is None  # a built-in policy: no model host said how it batched


def test_an_attempt_run_without_a_queue_has_no_queue_wait(run_cell):
    attempt = run_cell(task="reach")
    assert attempt.accounting["time"]["queue_wait_s"] is None
    assert attempt.accounting["time"]["wall_s"] > 0


def test_the_api_sums_the_split_and_says_the_observation_rate_and_evidence_bytes(operator, ran):
    attempts = list(Attempt.objects.filter(campaign_id=ran))
    time = operator.get(f"/api/v1/campaigns/{ran}").json()["time"]
    assert time["attempts"] == 4
    for part in PARTS:
        assert time["parts_s"][part] == pytest.approx(sum(a.accounting["time"]["parts_s"][part] for a in attempts))
    assert time["wall_s"] == pytest.approx(sum(a.accounting["time"]["wall_s"] for a in attempts))
    calls = sum(a.policy_calls for a in attempts)
    elapsed = (max(a.finished_at for a in attempts) - min(a.started_at for a in attempts)).total_seconds()
    assert (time["policy_calls"], time["elapsed_s"]) == (calls, pytest.approx(elapsed))
    assert time["observations_per_s"] == pytest.approx(calls / elapsed)
    stored = Artifact.objects.filter(attempt__campaign_id=ran).aggregate(size=Sum("size"))["size"]
    assert time["evidence_bytes_per_episode"] == pytest.approx(stored / 4)
    assert time["host"]["calls_timed"] == 0 and time["host"]["batching_on"] is False


def test_the_campaign_page_shows_each_parts_share_and_the_rate(operator, ran):
    time = operator.get(f"/api/v1/campaigns/{ran}").json()["time"]
    page = operator.get(f"/campaigns/{ran}/").content.decode()
    section = page[page.index('id="time-section"') :]
    rows = re.findall(r'<tr data-part="(\w+)"><th>[^<]+</th><td class="num">([0-9.]+)</td>', section)
    assert {part for part, _ in rows} == set(PARTS)
    assert [float(seconds) for _, seconds in rows] == sorted((float(s) for _, s in rows), reverse=True)  # largest first
    for part, seconds in rows:
        assert float(seconds) == pytest.approx(time["parts_s"][part], abs=0.006)
    assert f'<b id="time-obs-rate">{time["observations_per_s"]:.2f}</b> policy observations per second' in section


def test_a_campaign_with_nothing_finished_says_so(operator, catalogs):
    response = operator.post(
        "/api/v1/campaigns", json.dumps({**PLAN, "start": False}), content_type="application/json"
    ).json()
    assert response["time"] is None
    assert 'id="time-none"' in operator.get(f"/campaigns/{response['id']}/").content.decode()


def test_a_campaign_whose_model_host_batched_its_calls_says_batching_was_on(operator, catalogs):
    # Item 3: "the campaign page says batching was on". Stored records as a served host's attempts record their split
    # (tests/test_served_policy_workers.py runs two workers' episodes through one host's shared forward passes).
    campaign = operator.post("/api/v1/campaigns", json.dumps({**PLAN, "start": False}), content_type="application/json")
    campaign_id = campaign.json()["id"]
    host = {"max_batch_setting": 4, "max_wait_ms_setting": 2.0, "calls_timed": 10, "infer_s": 0.5}
    parts = dict.fromkeys(PARTS, 0.1)
    for cell, largest in zip(Attempt.objects.filter(campaign_id=campaign_id), (1, 3, 2, 2), strict=True):
        time = {"wall_s": 0.7, "queue_wait_s": None, "parts_s": parts, "host": {**host, "batch_total": 10 + largest}}
        time["host"]["max_batch"] = largest
        now = timezone.now()
        Attempt.objects.filter(pk=cell.pk).update(
            accounting={"time": time}, policy_calls=10, started_at=now - timedelta(seconds=1), finished_at=now
        )
        finish_cell(cell, "success")
    summary = operator.get(f"/api/v1/campaigns/{campaign_id}").json()["time"]["host"]
    assert summary == {
        "infer_s": pytest.approx(2.0),
        "calls_timed": 40,
        "mean_batch": pytest.approx(48 / 40),
        "max_batch": 3,
        "batching_on": True,
        "settings": {"max_batch": 4, "max_wait_ms": 2.0},
    }
    page = operator.get(f"/campaigns/{campaign_id}/").content.decode()
    assert '<b id="batching-on">Batching was on</b> (up to 4 calls a forward pass, waiting at most 2.0 ms)' in page
    assert "2.00 s over 40 calls, each in a batch of 1.20 on average (largest 3)" in page
