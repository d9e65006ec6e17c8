"""Issue 44, item 3: "Labels. A campaign carries labels set at launch (form, API, `rsi launch --label step=5000
--label run=abc`; in the API `"labels": {"run": "abc", "step": "5000"}`): the training run, the step, the git commit,
free tags. They filter the campaigns list, the API (`GET /api/v1/campaigns?label=run=abc`, repeatable) and the
leaderboards, and show on the campaign page. A policy server that hot-reloads weights behind one URL can report its
version (a documented reply or metadata field); it is recorded per call, and a change of version within a campaign is
flagged on the campaign page." (`rsi launch --label` is tests/test_training_loop.py's.)"""

import json

import pytest
from django.urls import reverse

from evaluator.records.models import Attempt, Campaign, Decision, RecordImmutable
from evaluator.running.recorder import do_run_attempt
from tests.servers.policies import HttpPolicyServer

# The subject here is the records, the API and the pages: Fetch renders small (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("small_fetch_render")

PLAN = {"benchmark": "fetch", "policy": "noop", "tasks": ["reach"], "seeds": [0, 1]}


def post(client, path: str, body: dict):
    return client.post(path, json.dumps(body), content_type="application/json")


def launch(client, **labels) -> dict:
    response = post(client, "/api/v1/campaigns", {**PLAN, "labels": labels})
    assert response.status_code == 201, response.content
    return response.json()


def test_labels_set_at_launch_are_frozen_and_shown_in_the_api_and_on_the_page(operator):
    made = launch(operator, run="abc", step="5000", commit="1a2b3c4", baseline="")
    assert made["labels"] == {"baseline": "", "commit": "1a2b3c4", "run": "abc", "step": "5000"}
    assert made["plan"]["labels"] == made["labels"]  # launching the plan again labels the same
    page = operator.get(reverse("evaluator:campaign", args=[made["id"]])).content.decode()
    assert 'id="campaign-labels"' in page
    for text in ("run=abc", "step=5000", "commit=1a2b3c4", ">baseline<"):
        assert text in page
    campaign = Campaign.objects.get(pk=made["id"])
    campaign.labels = {"run": "xyz"}
    with pytest.raises(RecordImmutable, match="the plan is frozen \\(labels\\)"):
        campaign.save()


def test_labels_that_are_not_are_refused_with_every_reason_and_nothing_is_made(operator):
    bad = {"Run": "abc", "step": "5000\n6000", "note": "x" * 201}
    response = post(operator, "/api/v1/campaigns", {**PLAN, "labels": bad})
    assert response.status_code == 422 and response.json()["code"] == "launch_refused"
    reasons = response.json()["reasons"]
    assert any("label name 'Run' is not a name" in r for r in reasons)
    assert "labels: label step: the value is one line of printable text" in reasons
    assert "labels: label note: the value holds at most 200 characters, got 201" in reasons
    not_text = post(operator, "/api/v1/campaigns", {**PLAN, "labels": {"step": 5000}})
    assert not_text.status_code == 400 and "labels.step" in not_text.json()["reasons"][0]
    assert not Campaign.objects.exists()


def test_the_launch_form_takes_one_label_a_line(operator):
    form = {"benchmark": "fetch", "tasks": ["reach"], "seed": "0", "policy": "noop", "create": "1"}
    operator.post(reverse("evaluator:launch"), {**form, "labels": "run=abc\r\nstep=5000\r\n\r\nablation"})
    assert Campaign.objects.get().labels == {"ablation": "", "run": "abc", "step": "5000"}
    twice = operator.post(reverse("evaluator:launch"), {**form, "labels": "step=1\nstep=2"}).content.decode()
    assert "label step given more than once" in twice and Campaign.objects.count() == 1


def test_labels_filter_the_campaigns_list_the_api_and_the_leaderboards(operator):
    first = launch(operator, run="abc", step="1000")["id"]
    second = launch(operator, run="abc", step="2000", baseline="")["id"]
    other = launch(operator, run="xyz", step="1000")["id"]

    def listed(*filters) -> list[int]:
        query = "&".join(f"label={f}" for f in filters)
        return [c["id"] for c in operator.get(f"/api/v1/campaigns?{query}").json()["campaigns"]]

    assert listed("run=abc") == [second, first]
    assert listed("run=abc", "step=1000") == [first]  # every filter must hold
    assert listed("step=1000") == [other, first]
    assert listed("baseline") == [second]  # a name alone: campaigns that carry it
    assert listed("run=nope") == []
    refused = operator.get("/api/v1/campaigns?label=Bad=1&label=run=abc")
    assert refused.status_code == 400 and refused.json()["code"] == "invalid_label"
    assert refused.json()["reasons"][0].startswith("label filter 'Bad=1': label name 'Bad' is not a name")

    page = operator.get(reverse("evaluator:campaigns") + "?label=run%3Dabc&label=").content.decode()
    shown = {c.pk for c in Campaign.objects.all() if reverse("evaluator:campaign", args=[c.pk]) + '"' in page}
    assert shown == {first, second}
    bad_page = operator.get(reverse("evaluator:campaigns") + "?label=Bad")
    assert bad_page.status_code == 400 and "is not a name" in bad_page.content.decode()

    for campaign in Campaign.objects.all():
        for attempt in campaign.attempts.all():
            do_run_attempt(attempt)
    protocol = Campaign.objects.get(pk=first).protocol.protocol_id
    assert [row["campaign"] for row in operator.get(f"/api/v1/leaderboards/{protocol}").json()["rows"]] == [other]
    board = operator.get(f"/api/v1/leaderboards/{protocol}?label=run=abc").json()
    assert [row["campaign"] for row in board["rows"]] == [second]  # noop's newest campaign among run=abc
    assert operator.get(f"/api/v1/leaderboards/{protocol}?label=run=none").status_code == 404
    page = operator.get(reverse("evaluator:leaderboard", args=[protocol]) + "?label=run%3Dabc").content.decode()
    assert f'href="/campaigns/{second}/"' in page and f'href="/campaigns/{other}/"' not in page


def versions_after(first_calls: int):
    """A server whose weights are reloaded behind its URL after `first_calls` calls: it says so in each reply."""
    return lambda request, call: {
        "actions": [[0.0, 0.0, 0.0, 0.0]],
        "policy_version": "ckpt-1000" if call <= first_calls else "ckpt-2000",
    }


def test_a_policy_version_is_recorded_per_call_and_a_change_is_flagged(operator, servers, media_root):
    server = servers(HttpPolicyServer(versions_after(3)))
    plan = {**PLAN, "policy": server.url, "budget_mode": "decisions", "max_policy_calls": 2, "replan_interval": 1}
    made = post(operator, "/api/v1/campaigns", plan).json()
    for attempt in Attempt.objects.filter(campaign_id=made["id"]).order_by("cell_index"):
        do_run_attempt(attempt)
    replies = Decision.objects.filter(attempt__campaign_id=made["id"]).order_by("attempt_id", "index")
    assert [d.response["policy_version"] for d in replies] == ["ckpt-1000"] * 3 + ["ckpt-2000"]
    assert operator.get(f"/api/v1/campaigns/{made['id']}").json()["policy_versions"] == ["ckpt-1000", "ckpt-2000"]
    page = operator.get(reverse("evaluator:campaign", args=[made["id"]])).content.decode()
    assert 'id="version-changed"' in page and "<code>ckpt-1000</code>, <code>ckpt-2000</code>" in page


def test_one_version_throughout_is_said_once_and_a_version_that_is_not_one_is_malformed_output(
    operator, servers, media_root
):
    steady = servers(HttpPolicyServer(versions_after(100)))
    plan = {**PLAN, "budget_mode": "decisions", "max_policy_calls": 2, "replan_interval": 1}
    made = post(operator, "/api/v1/campaigns", {**plan, "policy": steady.url}).json()
    for attempt in Attempt.objects.filter(campaign_id=made["id"]):
        do_run_attempt(attempt)
    page = operator.get(reverse("evaluator:campaign", args=[made["id"]])).content.decode()
    assert 'id="version-changed"' not in page and "reported version <code>ckpt-1000</code> on every call" in page

    odd = servers(HttpPolicyServer(lambda request, call: {"actions": [[0.0] * 4], "policy_version": ["v", 2]}))
    made = post(operator, "/api/v1/campaigns", {**plan, "policy": odd.url, "seeds": [0]}).json()
    ended = do_run_attempt(Attempt.objects.get(campaign_id=made["id"]))
    assert (ended.outcome, ended.error_type) == ("policy_error", "malformed_output")
    assert "the reply's policy_version is \"['v', 2]\"" in ended.error_detail


@pytest.mark.parametrize("count", [21, 998])
def test_more_label_filters_than_a_campaign_holds_are_a_400_with_the_bound(operator, count):
    """Issue "... fifth round", item 9: "996–998 `?label=` filters give a 500 (SQLite "Expression tree is too large")
    on the campaigns API and page, the leaderboard API and page and the curve page: a bound on filters, a 400 with
    the reason." A campaign holds at most 20 labels, so 20 filters is the bound."""
    campaign = launch(operator, run="abc")
    query = "&".join(f"label=l{i}" for i in range(count))
    reason = f"at most 20 label filters (a campaign holds at most 20), got {count}"
    protocol = Campaign.objects.get(pk=campaign["id"]).protocol.protocol_id
    api = ("/api/v1/campaigns?", f"/api/v1/leaderboards/{protocol}?", "/api/v1/curve?x=step&")
    for url in (prefix + query for prefix in api):
        refused = operator.get(url)
        assert refused.status_code == 400 and refused.json()["reasons"] == [reason], (url, refused.content[:200])
    for url in (reverse("evaluator:campaigns"), reverse("evaluator:leaderboard", args=[protocol]), "/campaigns/curve/"):
        page = operator.get(f"{url}?{query}")
        assert page.status_code == 400 and reason in page.content.decode(), url
    within = "&".join(f"label=l{i}" for i in range(20))
    assert operator.get(f"/api/v1/campaigns?{within}").json()["campaigns"] == []
