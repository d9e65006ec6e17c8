"""Dashboard views: the launch form refuses bad input and creates nothing; every view checks its
permission; evidence is served with ranges and exact frames; search, export, compare and re-run;
query counts that do not grow with the number of attempts (issue "The dashboard")."""

import csv
import io
import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from evaluator.records.models import Attempt, Campaign, Policy
from tests.records import add_cells

# The subject here is the records, the API and the pages: Fetch renders small (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("small_fetch_render")

LAUNCH = {"benchmark": "fetch", "tasks": ["pick_and_place"], "seed": "3", "policy": "noop", "preview": "1"}


def _user(name, *roles):
    user = get_user_model().objects.create_user(name, password="pw")
    for role in roles:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def reviewer(client, catalogs):
    client.force_login(_user("rita", "reviewer"))
    return client


def test_the_form_shows_the_resolved_identity_and_budgets_before_creating_anything(operator):
    response = operator.post(
        reverse("evaluator:launch"),
        {**LAUNCH, "budget_mode": "decisions", "max_policy_calls": "3", "replan_interval": "5"},
    )
    page = response.content.decode()
    assert "fetch-development/rgb/decision-3-prefix-5/v1" in page
    assert 'id="create"' in page
    assert not Campaign.objects.exists()


def test_creating_a_campaign_freezes_its_plan_with_pending_cells(operator):
    response = operator.post(
        reverse("evaluator:launch"), {**LAUNCH, "tasks": ["pick_and_place", "reach"], "create": "1"}
    )
    campaign = Campaign.objects.get()
    assert response.status_code == 302 and response.url == reverse("evaluator:campaign", args=[campaign.pk])
    assert campaign.created_by.username == "olga"
    assert list(campaign.attempts.values_list("status", flat=True)) == ["pending", "pending"]


@pytest.mark.parametrize(
    "change, message",
    [
        ({"tasks": ["fold_towel"]}, "unknown task fold_towel"),
        ({"tasks": ["widowx_spoon_on_towel"]}, "fetch has no task"),
        ({"budget_mode": "decisions", "max_policy_calls": "0"}, "max policy calls (C or D) must be at least 1"),
        ({"budget_mode": "decisions", "horizon_multiplier": "3"}, "horizon multiplier must be 1 or 2"),
        ({"budget_mode": "decisions", "horizon_multiplier": "2"}, "cannot be combined with budget mode=decisions"),
        ({"seed": "-1"}, "the reset seed must be in [0, 2**32), got -1"),
        ({"seed": str(2**32)}, "the reset seed must be in [0, 2**32), got 4294967296"),
        ({"seed": "abc"}, "the reset seed must be a whole number"),
        ({"policy": "ftp://nowhere"}, "unknown policy spec"),
        ({"sensors": "depth"}, "unknown sensor track"),
        ({"policy": "fetch-oracle", "create": "1"}, "reads privileged state"),
    ],
)
def test_bad_input_gets_a_clear_message_and_creates_nothing(operator, change, message):
    response = operator.post(reverse("evaluator:launch"), {**LAUNCH, "create": "1", **change})
    assert response.status_code == 200
    assert message in response.content.decode().replace("&#x27;", "'")
    assert not Campaign.objects.exists() and not Attempt.objects.exists()


@pytest.mark.parametrize(
    "change, message",
    [
        ({"policy": "fetch-oracle"}, "reads privileged state"),
        ({"budget_mode": "decisions", "max_policy_calls": "1000000000"}, "(C or D) must be at most 10000"),
        ({"policy": "http://127.0.0.1:9/act?timeout_s=nan"}, "must be a finite number"),
    ],
)
def test_the_preview_refuses_what_create_refuses(operator, change, message):
    # "The preview runs every check that Create runs."
    form = {k: v for k, v in LAUNCH.items() if k != "create"}
    response = operator.post(reverse("evaluator:launch"), {**form, **change})
    page = response.content.decode().replace("&#x27;", "'")
    assert message in page and 'id="resolved-identity"' not in page
    assert not Campaign.objects.exists() and not Policy.objects.filter(spec__startswith="http").exists()


def test_every_form_is_csrf_protected(catalogs):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(_user("olga", "operator"))
    assert strict.post(reverse("evaluator:launch"), {**LAUNCH, "create": "1"}).status_code == 403
    assert not Campaign.objects.exists()


def test_a_reviewer_reads_but_cannot_launch_start_or_rerun(reviewer, make_attempt):
    attempt = make_attempt()
    assert reviewer.get(reverse("evaluator:campaign", args=[attempt.campaign_id])).status_code == 200
    assert reviewer.get(reverse("evaluator:launch")).status_code == 403
    assert reviewer.post(reverse("evaluator:start_attempt", args=[attempt.pk])).status_code == 403
    assert reviewer.post(reverse("evaluator:start_campaign", args=[attempt.campaign_id])).status_code == 403
    assert Attempt.objects.get(pk=attempt.pk).status == "pending"


def test_a_user_without_a_role_sees_nothing(client, make_attempt):
    attempt = make_attempt()
    client.force_login(_user("nobody"))
    for name, args in (
        ("campaigns", []),
        ("attempts", []),
        ("review", [attempt.pk]),
        ("timeline", [attempt.pk]),
        ("campaign", [attempt.campaign_id]),
        ("benchmarks", []),
    ):
        assert client.get(reverse(f"evaluator:{name}", args=args)).status_code == 403


def test_anonymous_visitors_are_sent_to_log_in(client, make_attempt):
    attempt = make_attempt()
    for url in (
        reverse("evaluator:campaigns"),
        reverse("evaluator:review", args=[attempt.pk]),
        reverse("evaluator:frame", args=[attempt.pk, 0]),
    ):
        response = client.get(url)
        assert response.status_code == 302 and response.url.startswith(reverse("login"))


def test_the_video_is_served_with_range_requests(admin_client, finished):
    url = reverse("evaluator:artifact", args=[finished.pk, "video.mp4"])
    whole = b"".join(admin_client.get(url).streaming_content)
    partial = admin_client.get(url, HTTP_RANGE="bytes=100-199")
    assert partial.status_code == 206 and partial.content == whole[100:200]
    assert partial["Content-Range"] == f"bytes 100-199/{len(whole)}"
    assert admin_client.get(url, HTTP_RANGE="bytes=-10").content == whole[-10:]
    assert admin_client.get(url, HTTP_RANGE=f"bytes={len(whole)}-").status_code == 416


def test_only_registered_artifacts_are_served(admin_client, finished):
    assert admin_client.get(reverse("evaluator:artifact", args=[finished.pk, "../../etc/passwd"])).status_code == 404


def test_the_timeline_holds_steps_decisions_and_components(admin_client, finished):
    data = admin_client.get(reverse("evaluator:timeline", args=[finished.pk])).json()
    assert data["action_components"] == ["dx", "dy", "dz", "gripper"]
    assert len(data["steps"]) == 30 and data["steps"][0]["action"] == [0.0] * 4
    assert [d["observation_step"] for d in data["decisions"]] == [0, 5, 10, 15, 20, 25]
    assert data["frames"] == list(range(31)) and data["fps"] == 25.0


def test_search_filters_and_exports(admin_client, run_cell):
    noop = run_cell(policy="noop", budget_mode="decisions", max_policy_calls=1)
    stop = run_cell(policy="stop", seed=4)
    page = admin_client.get(reverse("evaluator:attempts"), {"policy": "stop"}).content.decode()
    assert reverse("evaluator:review", args=[stop.pk]) in page
    assert reverse("evaluator:review", args=[noop.pk]) not in page
    data = admin_client.get(reverse("evaluator:attempts"), {"outcome": "task_failure", "format": "json"}).json()
    assert {row["attempt"] for row in data["attempts"]} == {noop.pk, stop.pk}
    rows = list(
        csv.DictReader(
            io.StringIO(
                admin_client.get(reverse("evaluator:attempts"), {"policy": "noop", "format": "csv"}).content.decode()
            )
        )
    )
    assert [int(r["attempt"]) for r in rows] == [noop.pk] and rows[0]["protocol_id"].startswith("fetch-development")
    assert admin_client.get(reverse("evaluator:attempts"), {"autonomous": "no", "format": "json"}).json() == {
        "attempts": []
    }


def test_a_campaign_exports_its_plan_aggregates_and_attempts(admin_client, finished):
    data = json.loads(
        admin_client.get(reverse("evaluator:export_campaign", args=[finished.campaign_id, "json"])).content
    )
    assert data["plan"]["tasks"] == ["pick_and_place"] and data["plan"]["seeds"] == [3]
    assert data["aggregates"]["overall"]["attempt_success_rate"]["denominator"] == 1
    assert data["attempts"][0]["environment_steps"] == 30
    rows = list(
        csv.DictReader(
            io.StringIO(
                admin_client.get(
                    reverse("evaluator:export_campaign", args=[finished.campaign_id, "csv"])
                ).content.decode()
            )
        )
    )
    assert rows[0]["termination_reason"] == "call_budget"
    # Issue 35, point 14: "exports lack duration and start time though the table shows them"
    attempt = Attempt.objects.get(pk=finished.pk)
    assert rows[0]["started_at"] == attempt.started_at.isoformat()
    assert float(rows[0]["duration_s"]) == pytest.approx(attempt.duration_s, abs=0.001) and attempt.duration_s > 0
    assert data["attempts"][0]["campaign_name"] == attempt.campaign.name
    page = admin_client.get(reverse("evaluator:attempts")).content.decode()
    assert f'<span class="small muted">{attempt.campaign.name}</span>' in page  # the campaign by name, not a bare id


def test_a_rerun_is_a_new_attempt_queued_at_once_and_both_stay_visible(
    operator, finished, monkeypatch, django_capture_on_commit_callbacks
):
    # Issue 35, point 14: "a re-run needs a second click": the re-run's own click queues it.
    from evaluator.execution import executor

    submitted = []
    monkeypatch.setattr(executor, "submit", lambda attempt_id, *_: submitted.append(attempt_id))
    with django_capture_on_commit_callbacks(execute=True):
        response = operator.post(reverse("evaluator:rerun_attempt", args=[finished.pk]))
    assert response.status_code == 302
    rerun = Attempt.objects.get(rerun_of=finished)
    assert rerun.status == "queued" and submitted == [rerun.pk]
    assert Attempt.objects.get(pk=finished.pk).status == "finished"
    page = operator.get(reverse("evaluator:campaign", args=[finished.campaign_id])).content.decode()
    assert f"#{finished.pk}" in page and "Separately authorized re-runs" in page
    assert operator.post(reverse("evaluator:rerun_attempt", args=[rerun.pk])).status_code == 302
    assert Attempt.objects.filter(rerun_of=rerun).count() == 0  # an unfinished attempt cannot be re-run
    # "a paused re-run is not marked non-autonomous on its cell": a human paused it.
    Attempt.objects.filter(pk=rerun.pk).update(status="running", autonomous=False)
    page = operator.get(reverse("evaluator:campaign", args=[finished.campaign_id])).content.decode()
    listed = page[page.index(f'id="rerun-{rerun.pk}"') :].split("</li>")[0]
    assert "running" in listed and '<span class="badge human">non-autonomous</span>' in listed


def test_starting_a_cell_queues_it_once_after_commit(
    operator, make_attempt, monkeypatch, django_capture_on_commit_callbacks
):
    from evaluator.execution import executor

    submitted = []
    monkeypatch.setattr(
        executor,
        "submit",
        lambda attempt_id, benchmark, campaign, priority: submitted.append((attempt_id, benchmark, campaign, priority)),
    )
    attempt = make_attempt("reach", benchmark="fetch")
    with django_capture_on_commit_callbacks(execute=True):
        operator.post(reverse("evaluator:start_attempt", args=[attempt.pk]))
        operator.post(reverse("evaluator:start_attempt", args=[attempt.pk]))
    assert submitted == [(attempt.pk, "fetch", attempt.campaign_id, 0)]
    assert Attempt.objects.get(pk=attempt.pk).status == "queued"


def test_two_campaigns_pair_cell_by_cell(admin_client, run_cell):
    a = run_cell(task="reach", policy="fetch-oracle", sensors="privileged-state")
    b = run_cell(task="reach", policy="noop", sensors="privileged-state")
    page = admin_client.get(reverse("evaluator:compare"), {"a": a.campaign_id, "b": b.campaign_id}).content.decode()
    overall = page.split('data-task="overall"')[1].split("</tr>")[0]
    assert [c.split(">", 1)[1].split("<", 1)[0] for c in overall.split('<td class="num"')[1:4]] == ["1", "1", "0"]


@pytest.mark.parametrize("view", ["campaign", "attempts", "campaigns"])
def test_query_counts_do_not_grow_with_the_number_of_attempts(admin_client, make_attempt, view):
    first = make_attempt()
    args = [first.campaign_id] if view == "campaign" else []

    def queries():
        with CaptureQueriesContext(connection) as captured:
            assert admin_client.get(reverse(f"evaluator:{view}", args=args)).status_code == 200
        return len(captured)

    add_cells(first, 2)
    few = queries()
    add_cells(first, 120)
    assert queries() <= few  # never more; fewer once what is kept per set of finished attempts is cached


def test_the_preview_says_when_a_budget_cannot_reach_the_horizon(operator):
    # "an apple task with H=200 cannot reach 2H=400" with 40 calls of five actions.
    response = operator.post(
        reverse("evaluator:launch"), {**LAUNCH, "horizon_multiplier": "2", "max_policy_calls": "5"}
    )
    page = response.content.decode()
    assert "fetch-development/rgb/extended-horizon-2h/v1" in page
    assert "no: the call or step budget ends first" in page  # 5 calls x 5 actions = 25 < 2H = 100
    assert "<td>20</td>" in page  # full-chunk calls needed for 100 steps


def test_a_finished_cell_shows_its_last_frame_not_the_reset_frame(admin_client, finished):
    # "a finished one its last frame (not the reset frame, which looks the same in every cell)"
    thumbnail = admin_client.get(reverse("evaluator:thumbnail", args=[finished.pk]))
    last = admin_client.get(reverse("evaluator:frame", args=[finished.pk, finished.environment_steps]))
    reset = admin_client.get(reverse("evaluator:frame", args=[finished.pk, 0]))
    assert thumbnail.status_code == 200 and thumbnail.content == last.content != reset.content


def test_a_cell_without_video_says_why_instead_of_a_broken_image(admin_client, make_attempt, media_root):
    from evaluator.running.recorder import do_run_attempt

    attempt = do_run_attempt(make_attempt("G1WholebodyBendPickMP-v0", benchmark="simple_humanoid"))
    assert not attempt.artifacts.filter(kind="video").exists()
    page = admin_client.get(reverse("evaluator:campaign", args=[attempt.campaign_id])).content.decode()
    assert f'src="{reverse("evaluator:thumbnail", args=[attempt.pk])}"' not in page
    said = '<span class="term" title="protocol term: install">install</span>'
    assert f"No video: it ended ({said}) before a frame was recorded." in page
    assert admin_client.get(reverse("evaluator:thumbnail", args=[attempt.pk])).status_code == 404


def test_a_cell_without_a_picture_yet_says_what_is_coming_and_asks_for_none(admin_client, make_attempt):
    """Issue 35, point 2: "every newly running cell asks for /attempts/N/thumbnail/ before a frame exists ... A
    placeholder that says what is coming"."""
    from evaluator.records.models import Attempt

    starting = make_attempt("reach", benchmark="fetch")
    Attempt.objects.filter(pk=starting.pk).update(status="running")  # started, no frame published yet
    page = admin_client.get(reverse("evaluator:campaign", args=[starting.campaign_id])).content.decode()
    assert f'src="{reverse("evaluator:thumbnail", args=[starting.pk])}"' not in page
    assert "Starting: the first picture comes with the first observation." in page
    pending = make_attempt("reach", benchmark="fetch")
    live = admin_client.get(reverse("evaluator:live", args=[pending.pk])).content.decode()
    assert '<img id="live-frame" alt="the frame the policy sees" width="480" height="360" hidden>' in live
    assert "Not started yet: the picture comes with the episode's first observation." in live


def test_a_running_attempts_review_page_leads_to_the_live_view_and_follows_it(admin_client, make_attempt):
    """Issue 35, point 4: "A running attempt's review page is a dead end ... link to the live view, follow the
    attempt, and show it when it ends"."""
    from evaluator.records.models import Attempt

    running = make_attempt("reach", benchmark="fetch")
    Attempt.objects.filter(pk=running.pk).update(status="running")
    page = admin_client.get(reverse("evaluator:review", args=[running.pk])).content.decode()
    assert f'<a href="{reverse("evaluator:live", args=[running.pk])}" id="watch-live">watch it live</a>' in page
    assert f'data-follow="/api/v1/attempts/{running.pk}"' in page and "rsi/follow.js" in page
    assert 'id="verify-hashes"' not in page and "No video yet" not in page


def test_a_finished_attempts_live_page_sends_the_viewer_to_its_review(admin_client, finished):
    response = admin_client.get(reverse("evaluator:live", args=[finished.pk]))
    assert response.status_code == 302 and response.url == reverse("evaluator:review", args=[finished.pk])


def test_a_campaign_page_does_not_reload_itself(admin_client, finished):
    # "the page no longer reloads every 2 s": progress travels over the campaign's WebSocket.
    page = admin_client.get(reverse("evaluator:campaign", args=[finished.campaign_id])).content.decode()
    assert 'http-equiv="refresh"' not in page
    assert f'data-socket="/ws/campaigns/{finished.campaign_id}/progress/"' in page


def test_the_campaign_page_names_the_host_or_queue_of_each_cell(admin_client, make_attempt):
    # Issue 13: "The campaign page shows which worker host runs each cell."
    running = make_attempt("reach", benchmark="fetch", runner="gpu-host-3:4242:1234567")
    page = admin_client.get(reverse("evaluator:campaign", args=[running.campaign_id])).content.decode()
    assert '<span class="runner-host" title="gpu-host-3:4242:1234567">on gpu-host-3</span>' in page
    Attempt.objects.filter(pk=running.pk).update(status="queued", runner="broker:rsi.fetch")
    page = admin_client.get(reverse("evaluator:campaign", args=[running.campaign_id])).content.decode()
    assert "queued on rsi.fetch" in page


def test_the_campaign_page_says_it_in_the_users_words(admin_client, make_attempt):
    """Issue 35, point 12: no `success_rate (over completed)`, no "fast mode", no "on vm" on cells this very host
    runs (the embedded executor): protocol terms stay in tooltips."""
    import socket

    here = make_attempt("reach", benchmark="fetch", runner=f"{socket.gethostname()}:4242:1234567")
    page = admin_client.get(reverse("evaluator:campaign", args=[here.campaign_id])).content.decode()
    assert "success_rate (over completed)" not in page and "attempt_success_rate (over attempts)" not in page
    assert "Success rate <small>of completed episodes</small>" in page
    assert "the protocol&#x27;s attempt_success_rate" in page or "the protocol's attempt_success_rate" in page
    assert "fast mode" not in page and "chosen tasks and seeds" in page
    assert 'class="runner-host"' not in page


def test_an_attempt_a_human_stopped_says_so_wherever_its_outcome_is_shown(admin_client, make_attempt):
    """Issue 35, point 12: "a human-stopped attempt shown as `task_failure`"."""
    from tests.records import finish_cell

    stopped = make_attempt("reach", benchmark="fetch")
    Attempt.objects.filter(pk=stopped.pk).update(termination_reason="human_stop")  # before it is finished: final
    finish_cell(stopped, "task_failure", autonomous=False)
    for page in (
        admin_client.get(reverse("evaluator:review", args=[stopped.pk])),
        admin_client.get(reverse("evaluator:campaign", args=[stopped.campaign_id])),
        admin_client.get(reverse("evaluator:attempts")),
    ):
        assert "task failure (stopped by a human)" in page.content.decode()


def _select(page: str, field: str) -> str:
    start = page.index(f'id="id_{field}"')
    return page[start : page.index("</select>", start)]


def test_the_launch_form_offers_each_benchmarks_sensor_tracks_and_task_scopes(operator):
    # "the launch form offers the SIMPLE tracks and scopes (and refuses mixing them in one campaign)"
    page = operator.get(reverse("evaluator:launch")).content.decode()
    sensors, scopes = _select(page, "sensors"), _select(page, "task_scope")
    simple = sensors[sensors.index('<optgroup label="simple_humanoid">') :]
    assert '<option value="rgb-qpos31">' in simple[: simple.index("</optgroup>")]
    assert '<option value="released-12">' in scopes and '<optgroup label="fetch">' in sensors
    # one track per campaign: a track of another benchmark is refused by name
    response = operator.post(reverse("evaluator:launch"), {**LAUNCH, "sensors": "rgb-qpos31", "create": "1"})
    assert "unknown sensor track" in response.content.decode() and not Campaign.objects.exists()


def test_long_identifiers_are_shortened_with_the_full_value_kept_for_hover_and_copy(reviewer, finished):
    # Issue 35, point 3: "abbreviate ids with the full value on hover and copy".
    page = reviewer.get(reverse("evaluator:campaign", args=[finished.campaign_id])).content.decode()
    identity, protocol = finished.campaign.policy.identity, finished.campaign.protocol.protocol_id
    assert (
        f'<span class="ident hash"><code title="{identity}">{identity}</code><button type="button" class="copy" '
        f'data-copy="{identity}" title="copy the full policy identity"'
    ) in page
    assert f'<span class="ident"><code id="campaign-protocol" title="{protocol}">{protocol}</code>' in page
    attempts = reviewer.get(reverse("evaluator:attempts")).content.decode()
    assert f'<td><span class="ident"><code title="{protocol}">{protocol}</code>' in attempts


def test_protocol_terms_are_said_in_words_with_the_term_on_hover(reviewer, finished):
    # Issue 35, point 12: "Say it in the user's words, with a glossary line or tooltip where a protocol term is
    # needed."
    page = reviewer.get(reverse("evaluator:review", args=[finished.pk])).content.decode()
    assert finished.termination_reason == "call_budget"
    assert 'ended by <span class="term" title="protocol term: call_budget">policy call budget spent</span>' in page
    campaign = reviewer.get(reverse("evaluator:campaign", args=[finished.campaign_id])).content.decode()
    assert '<span class="term" title="protocol term: policy_error">policy error</span> 0' in campaign
