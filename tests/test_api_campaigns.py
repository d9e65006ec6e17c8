"""Issue 32, item 1: "protocol preview (the same checks as the launch form), create and start a campaign, its status
and progress, its aggregates and cells, an attempt's record and artifact links, the run table's search, the
comparison of two campaigns, the LeRobot export ... every error is a JSON body with a typed code and the reasons
(all of them at once for a launch)." The whole run from launch to aggregates is tests/test_api_client_site.py."""

import json
import re

import pytest

from evaluator.execution import executor
from evaluator.records.models import Attempt, Campaign, Policy
from evaluator.web.forms import LaunchForm
from evaluator.web.views.campaigns import in_labels
from tests.records import finish_cell

# The subject here is the records, the API and the pages: Fetch renders small (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("small_fetch_render")

REFUSED_PLAN = {"benchmark": "fetch", "policy": "nope:thing", "tasks": ["reach", "fly"], "seed": -1}


def body_of(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def post(client, path: str, body: dict):
    return client.post(path, json.dumps(body), content_type="application/json")


@pytest.fixture
def submitted(monkeypatch):
    """What would go to the executor: recorded, not run."""
    calls = []
    monkeypatch.setattr(executor, "submit", lambda *args: calls.append(("attempt", *args)))
    monkeypatch.setattr(executor, "submit_export", lambda *args: calls.append(("export", *args)))
    return calls


def test_a_refused_launch_gives_every_reason_at_once_and_stores_nothing(operator):
    policies = Policy.objects.count()
    response = post(operator, "/api/v1/campaigns", REFUSED_PLAN)
    body = response.json()
    assert (response.status_code, body["code"]) == (422, "launch_refused")
    assert len(body["reasons"]) == 3
    assert any(r.startswith("tasks: unknown task fly") for r in body["reasons"])
    assert any(r.startswith("seed: the reset seed must be in [0, 2**32)") for r in body["reasons"])
    assert any(r.startswith("policy: ") for r in body["reasons"])
    assert (Campaign.objects.count(), Policy.objects.count()) == (0, policies)


def test_an_unknown_task_is_said_as_such_not_as_no_task_selected(operator):
    # Issue 44, item 9: "an unknown task also gives 'select at least one task' when one was selected".
    for tasks in (["fly"], ["reach", "fly"]):
        body = post(operator, "/api/v1/campaigns", {"benchmark": "fetch", "policy": "noop", "tasks": tasks}).json()
        assert body["reasons"] == ["tasks: unknown task fly"]
    none = post(operator, "/api/v1/campaigns", {"benchmark": "fetch", "policy": "noop", "tasks": []}).json()
    assert "select at least one task" in " ".join(none["reasons"])


def test_the_api_refuses_what_the_launch_form_refuses(operator):
    """One plan through the form and through the API: the same problems, since both run the same form."""
    plan = {"benchmark": "fetch", "policy": "noop", "tasks": ["reach"], "budget_mode": "decisions"}
    plan |= {"max_policy_calls": 0, "replan_interval": 99}
    api = post(operator, "/api/v1/campaigns/preview", plan).json()
    form_fields = {**plan, "seed": "0", "repeats": "1", "preview": "1"}
    page = operator.post("/campaigns/new/", form_fields).content.decode()
    listed = re.findall(r"<li>(.*?)</li>", page.split('id="form-errors"')[1].split("</ul>")[0])
    assert api["code"] == "launch_refused" and api["reasons"]
    # The API names the options by its fields (max_policy_calls), the page by the form's labels.
    assert sorted(in_labels(LaunchForm(), reason) for reason in api["reasons"]) == sorted(map(_unescape, listed))


def _unescape(text: str) -> str:
    import html

    return html.unescape(text)


def test_the_preview_resolves_the_plan_as_create_would_freeze_it(operator):
    body = post(operator, "/api/v1/campaigns/preview", {"benchmark": "fetch", "policy": "noop", "tasks": "all"}).json()
    assert body["protocol_id"] == "fetch-development/rgb/v1"
    assert (body["tasks"], body["seeds"], body["cells"]) == (["pick_and_place", "push", "reach", "slide"], [0], 4)
    assert body["budgets"][0]["budget"]["native_horizon"] == 50
    assert Campaign.objects.count() == 0


def test_create_freezes_the_plan_and_start_queues_each_cell_once(
    operator, submitted, django_capture_on_commit_callbacks
):
    plan = {"benchmark": "fetch", "policy": "noop", "tasks": ["reach", "push"], "seeds": [4, 9]}
    response = post(operator, "/api/v1/campaigns", plan)
    assert response.status_code == 201
    campaign = response.json()
    assert (campaign["cells"], campaign["statuses"]["pending"], campaign["done"]) == (4, 4, False)
    assert campaign["url"].endswith(f"/campaigns/{campaign['id']}/")
    with django_capture_on_commit_callbacks(execute=True):
        started = operator.post(f"/api/v1/campaigns/{campaign['id']}/start").json()
    ids = sorted(Attempt.objects.filter(campaign_id=campaign["id"]).values_list("pk", flat=True))
    assert sorted(started["queued"]) == ids
    assert sorted(call[1] for call in submitted) == ids
    again = operator.post(f"/api/v1/campaigns/{campaign['id']}/start")
    assert (again.status_code, again.json()["reasons"]) == (422, ["no pending cell to start"])
    status = operator.get(f"/api/v1/campaigns/{campaign['id']}").json()
    assert status["statuses"] == {"pending": 0, "queued": 4, "running": 0, "finished": 0, "not_run": 0}


def test_create_with_start_queues_in_the_same_request(operator, submitted, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = post(
            operator, "/api/v1/campaigns", {"benchmark": "fetch", "policy": "noop", "tasks": ["reach"], "start": True}
        )
    assert response.json()["statuses"]["queued"] == 1 and len(submitted) == 1


def test_status_cells_records_search_and_comparison_carry_their_denominators(operator, submitted):
    first = post(
        operator, "/api/v1/campaigns", {"benchmark": "fetch", "policy": "noop", "tasks": ["reach"], "repeats": 3}
    ).json()
    second = post(
        operator, "/api/v1/campaigns", {"benchmark": "fetch", "policy": "stop", "tasks": ["reach"], "repeats": 3}
    ).json()
    cells_a = list(Attempt.objects.filter(campaign_id=first["id"]).order_by("cell_index"))
    cells_b = list(Attempt.objects.filter(campaign_id=second["id"]).order_by("cell_index"))
    for cell, outcome in zip(cells_a, ["success", "task_failure", "infrastructure_error"], strict=True):
        finish_cell(cell, outcome)
    for cell, outcome in zip(cells_b, ["task_failure", "task_failure", "success"], strict=True):
        finish_cell(cell, outcome, autonomous=cell.cell_index != 2)

    status = operator.get(f"/api/v1/campaigns/{first['id']}").json()
    assert (status["done"], status["finished"], status["infrastructure_errors"]) == (True, 3, 1)
    overall = status["report"]["overall"]
    assert overall["success_rate"]["numerator"] == 1 and overall["success_rate"]["denominator"] == 2
    assert overall["attempt_success_rate"]["denominator"] == 3 and overall["success_rate"]["wilson95_low"] > 0

    cells = operator.get(f"/api/v1/campaigns/{first['id']}/cells").json()
    assert [c["outcome"] for c in cells["cells"]] == ["success", "task_failure", "infrastructure_error"]
    assert operator.get(f"/api/v1/campaigns/{first['id']}/cells?page=2").status_code == 404

    found = operator.get("/api/v1/attempts?outcome=success&sort=seed").json()
    assert [a["attempt"] for a in found["attempts"]] == [cells_a[0].pk, cells_b[2].pk]
    assert operator.get("/api/v1/attempts?autonomous=no").json()["count"] == 1
    bad = operator.get("/api/v1/attempts?since=yesterday")
    assert (bad.status_code, bad.json()["reasons"]) == (400, ["since must be a date, YYYY-MM-DD"])

    record = operator.get(f"/api/v1/attempts/{cells_a[0].pk}").json()
    assert record["record"]["outcome"] == "success" and record["campaign"] == first["id"]
    name = f"attempts/{cells_a[0].pk}/manifest.json"  # finish_cell's record, in no evidence folder
    assert record["artifacts"] == {name: f"http://testserver/api/v1/attempts/{cells_a[0].pk}/files/{name}"}

    compared = operator.get(f"/api/v1/compare?a={first['id']}&b={second['id']}").json()
    # seed 0: success / failure, seed 1: failure / failure, seed 2: not paired (an error, a human)
    overall, kept_out = compared["overall"], compared["kept_out"]
    assert (overall["pairs"], overall["only_a"], overall["neither"], kept_out["non_autonomous"]) == (2, 1, 1, 1)
    assert operator.get(f"/api/v1/compare?a={first['id']}").status_code == 400


def test_the_lerobot_export_is_prepared_on_the_executor_and_its_state_read(operator, submitted, media_root):
    made = post(operator, "/api/v1/campaigns", {"benchmark": "fetch", "policy": "noop", "tasks": ["reach"]}).json()
    state = operator.get(f"/api/v1/campaigns/{made['id']}/lerobot").json()
    reason = f"campaign {made['id']} has no finished attempt to export yet"  # said before anyone asks
    assert state == {"state": "refused", "reason": reason, "download": None}
    refused = operator.post(f"/api/v1/campaigns/{made['id']}/lerobot/prepare")
    assert refused.status_code == 422 and submitted == []
    finish_cell(Attempt.objects.get(campaign_id=made["id"]), "task_failure")
    state = operator.get(f"/api/v1/campaigns/{made['id']}/lerobot").json()
    assert state == {"state": "none", "reason": "", "download": None}
    prepared = operator.post(f"/api/v1/campaigns/{made['id']}/lerobot/prepare").json()
    assert prepared["state"] == "preparing" and submitted == [("export", made["id"], "fetch")]
    again = operator.post(f"/api/v1/campaigns/{made['id']}/lerobot/prepare")
    assert again.status_code == 422 and "preparing already" in again.json()["reasons"][0]


def test_a_missing_record_is_a_typed_404(operator):
    for path in ("/api/v1/campaigns/424242", "/api/v1/attempts/424242", "/api/v1/benchmarks/nope/tasks"):
        response = operator.get(path)
        assert (response.status_code, response.json()["code"]) == (404, "not_found"), path


def test_a_token_downloads_an_attempts_artifacts_and_the_lerobot_dataset(run_cell, catalogs):
    """The API's links are readable with a token, as the pages' are with a session: ranges included."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.test import Client

    from evaluator.exports.archives import archive_of, build_archive, mark_preparing
    from evaluator.records.tokens import do_create_token

    attempt = run_cell(task="reach", budget_mode="decisions", max_policy_calls=3, replan_interval=1)
    rita = get_user_model().objects.create_user("rita")
    rita.groups.add(Group.objects.get(name="reviewer"))
    client = Client(HTTP_AUTHORIZATION=f"Bearer {do_create_token(rita, 'ci')[1]}")
    links = client.get(f"/api/v1/attempts/{attempt.pk}").json()["artifacts"]
    assert "video.mp4" in links and "manifest.json" in links
    video = client.get(links["video.mp4"].removeprefix("http://testserver"), HTTP_RANGE="bytes=0-99")
    assert video.status_code == 206 and len(body_of(video)) == 100
    manifest = client.get(links["manifest.json"].removeprefix("http://testserver"))
    assert "video.mp4" in json.dumps(json.loads(body_of(manifest)))  # the manifest lists the video
    assert client.get(f"/api/v1/attempts/{attempt.pk}/files/../../secret").status_code == 404

    campaign = attempt.campaign
    assert client.get(f"/api/v1/campaigns/{campaign.pk}/lerobot.zip").json()["code"] == "not_found"
    mark_preparing(archive_of(campaign))
    build_archive(campaign.pk)
    state = client.get(f"/api/v1/campaigns/{campaign.pk}/lerobot").json()
    assert state["state"] == "ready" and state["download"].endswith(f"/api/v1/campaigns/{campaign.pk}/lerobot.zip")
    archive = client.get(state["download"].removeprefix("http://testserver"))
    assert archive.status_code == 200 and archive["Content-Type"] == "application/zip"
