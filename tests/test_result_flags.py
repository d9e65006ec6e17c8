"""Issue "Nothing counted that should not be ... fifth round", items 2 and 3. Item 2: "A cancelled campaign still
counts in three places. `rsi_client.tracking.log_campaign` logs its rate into MLflow and W&B unflagged ...; `rsi
compare` gives it a verdict; `GET /pairwise` gives it a group letter. Curves and leaderboards already leave it out. One
rule for every reader: refused, or flagged where a partial result is asked for explicitly." Item 3: "A policy whose
version changed mid-campaign ranks unflagged on the leaderboard and in `log_campaign` (the campaign page flags it)."
The trackers' side is tests/test_tracking_logs.py; here the site's: the campaign API's flags (which the client reads),
the comparison (page, API and so `rsi compare`), the pairwise groups and the leaderboard."""

import json

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.urls import reverse

from evaluator.execution.cancelling import do_cancel_campaign
from evaluator.records.models import Attempt
from evaluator.running.recorder import do_run_attempt
from tests.servers.policies import HttpPolicyServer

PLAN = {"benchmark": "fetch", "tasks": ["reach"], "seeds": [0, 1], "budget_mode": "decisions", "max_policy_calls": 2}


def launch(client, **plan) -> int:
    made = client.post(
        "/api/v1/campaigns", json.dumps({**PLAN, "policy": "noop", **plan}), content_type="application/json"
    )
    assert made.status_code == 201, made.content
    return made.json()["id"]


def run_all(campaign_id: int, first: int | None = None) -> None:
    for attempt in Attempt.objects.filter(campaign_id=campaign_id).order_by("cell_index")[:first]:
        do_run_attempt(attempt)


def cancelled_after_one_cell(client) -> int:
    campaign = launch(client)
    run_all(campaign, first=1)
    olga = get_user_model().objects.create_user("olga2")
    olga.groups.add(Group.objects.get(name="operator"))
    do_cancel_campaign(olga, Attempt.objects.get(campaign_id=campaign, cell_index=0).campaign)
    return campaign


def test_a_cancelled_campaign_is_flagged_in_the_api_and_refused_by_every_comparison(operator, media_root):
    whole = launch(operator)
    run_all(whole)
    cancelled = cancelled_after_one_cell(operator)

    flags = operator.get(f"/api/v1/campaigns/{cancelled}").json()["flags"]
    assert [(f["code"], f["ranked"]) for f in flags] == [("cancelled", False)]
    assert flags[0]["reason"].startswith(f"campaign {cancelled} was cancelled by olga2 at ")
    assert operator.get(f"/api/v1/campaigns/{whole}").json()["flags"] == []

    compared = operator.get(f"/api/v1/compare?a={whole}&b={cancelled}")
    assert compared.status_code == 422 and compared.json()["reasons"] == [flags[0]["reason"]]
    page = operator.get(reverse("evaluator:compare") + f"?a={whole}&b={cancelled}").content.decode()
    assert "its rates miss the cells it left not run" in page
    grouped = operator.get(f"/api/v1/pairwise?campaign={whole}&campaign={cancelled}")
    assert grouped.status_code == 422 and flags[0]["reason"] in grouped.json()["reasons"]


def test_a_policy_whose_version_changed_ranks_flagged_on_the_leaderboard(operator, servers, media_root):
    reloaded = servers(HttpPolicyServer(lambda request, call: {"actions": [[0.0] * 4], "policy_version": f"v{call}"}))
    changed = launch(operator, policy=reloaded.url)
    steady = launch(operator)
    run_all(changed)
    run_all(steady)
    flags = operator.get(f"/api/v1/campaigns/{changed}").json()["flags"]
    assert [(f["code"], f["ranked"]) for f in flags] == [("policy_version_changed", True)]
    assert "reported 4 versions (v1, v2, v3, v4)" in flags[0]["reason"]

    protocol = Attempt.objects.filter(campaign_id=changed).first().campaign.protocol.protocol_id
    rows = {row["campaign"]: row["flags"] for row in operator.get(f"/api/v1/leaderboards/{protocol}").json()["rows"]}
    assert rows == {changed: flags, steady: []}
    page = operator.get(reverse("evaluator:leaderboard", args=[protocol])).content.decode()
    assert page.count('data-flag="policy_version_changed"') == 1 and "version changed</span>" in page
    csv_text = operator.get(reverse("evaluator:leaderboard", args=[protocol]) + "?format=csv").content.decode()
    assert "policy_version_changed" in csv_text
