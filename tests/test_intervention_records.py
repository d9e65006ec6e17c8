"""Who intervened is kept as it was (issue "Hostile input and faults, third round", 13): "Who intervened is a user
foreign key only: renaming the user in the admin rewrote 'who' on a finished attempt. Record the user name (and id)
in the intervention row and the evidence at the time.\""""

import json

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.urls import reverse

from evaluator.live.interventions import do_intervene
from evaluator.policies.base import Policy, PolicyReply
from evaluator.records.models import Attempt, Intervention

# The subject here is the records, the API and the pages: Fetch renders small (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("small_fetch_render")


class Watched(Policy):
    """At its second call an intervener notes something; at its third, stops the attempt."""

    user = None

    def act(self, message):
        attempt = Attempt.objects.get(status="running")
        calls = message.counters["policy_calls"]
        if calls == 1:
            do_intervene(self.user, attempt.pk, "annotate", note="the gripper slips")
        elif calls == 2:
            do_intervene(self.user, attempt.pk, "stop")
        return PolicyReply({"actions": [[0.0, 0.0, 0.0, 0.0]]})


def test_renaming_an_intervener_later_changes_no_record_of_who_intervened(
    run_cell, register_policy, admin_client, media_root
):
    user = get_user_model().objects.create_user("ivan")
    user.groups.add(Group.objects.get(name="intervener"))
    Watched.user = user
    register_policy("watched", Watched)
    attempt = run_cell(policy="watched", budget_mode="decisions", max_policy_calls=8, replan_interval=1)
    assert attempt.termination_reason == "human_stop" and attempt.interventions.count() == 2
    user.username = "mallory"  # as the admin would rename them
    user.save()
    assert list(Intervention.objects.values_list("username", flat=True)) == ["ivan", "ivan"]
    timeline = admin_client.get(reverse("evaluator:timeline", args=[attempt.pk])).json()
    assert [i["user"] for i in timeline["interventions"]] == ["ivan", "ivan"]
    summary = json.loads((media_root / attempt.artifacts.get(kind="summary").path).read_text())
    assert summary["interventions"] == [
        {"kind": "annotate", "step_index": 1, "note": "the gripper slips", "username": "ivan", "user_id": user.pk},
        {"kind": "stop", "step_index": 2, "note": "", "username": "ivan", "user_id": user.pk},
    ]


class PausedThenStopped(Policy):
    """At its second call an intervener pauses the attempt; a moment later the process is asked to stop."""

    user = None

    def act(self, message):
        import signal
        import threading

        from evaluator.running.interrupts import request_stop

        if message.counters["policy_calls"] == 1:
            do_intervene(self.user, Attempt.objects.get(status="running").pk, "pause")
            threading.Timer(1.0, request_stop, (signal.SIGTERM, "the server is stopping")).start()
        return PolicyReply({"actions": [[0.0, 0.0, 0.0, 0.0]]})


def test_a_paused_attempt_closes_as_interrupted_when_its_process_is_asked_to_stop(
    run_cell, register_policy, monkeypatch
):
    # Hostile input, third round, 11: "Both signals stop the attempt at once or at the next step boundary": a pause
    # holding the episode does not hold the stop up until the pause's own limit.
    monkeypatch.setattr("evaluator.running.interrupts._request", None)  # this process's request ends with the test
    monkeypatch.setenv("RSI_MAX_PAUSE_S", "60")
    user = get_user_model().objects.create_user("ivan")
    user.groups.add(Group.objects.get(name="intervener"))
    PausedThenStopped.user = user
    register_policy("paused", PausedThenStopped)
    attempt = run_cell(policy="paused", budget_mode="decisions", max_policy_calls=8, replan_interval=1)
    assert (attempt.outcome, attempt.error_type) == ("infrastructure_error", "interrupted")
    assert attempt.policy_calls == 2 and attempt.autonomous is False  # paused after its second call, then closed


class ClickedWhileClosing(Policy):
    """A zero action each call; when its episode ends (after the last control, before the attempt is recorded as
    finished) a watcher clicks every control."""

    user = None
    refusals: list = []
    seen: list = []

    def act(self, message):
        return PolicyReply({"actions": [[0.0, 0.0, 0.0, 0.0]]})

    def end_episode(self):
        from evaluator.live.hub import hub
        from evaluator.protocol.errors import ControlsEnded

        attempt = Attempt.objects.get(status="running")
        self.seen.append(hub.snapshot(attempt.pk))
        for kind in ("pause", "take_over", "stop", "annotate"):
            try:
                do_intervene(self.user, attempt.pk, kind, note="too late")
            except ControlsEnded as refused:
                self.refusals.append((kind, str(refused)))


def test_a_pause_after_the_last_control_is_refused_and_the_attempt_stays_autonomous(run_cell, register_policy):
    # Issue 42, item 3: "A pause after the last step takes an episode out of the results ... Once the last control
    # has executed, the server refuses every intervention with a typed reason and the page shows the controls as
    # ended."
    user = get_user_model().objects.create_user("late")
    user.groups.add(Group.objects.get(name="intervener"))
    ClickedWhileClosing.user = user
    register_policy("clicked", ClickedWhileClosing)
    attempt = run_cell(task="reach", policy="clicked")
    assert attempt.termination_reason == "evaluation_horizon" and attempt.environment_steps == 50
    refusals = ClickedWhileClosing.refusals
    assert [kind for kind, _ in refusals] == ["pause", "take_over", "stop", "annotate"]
    assert "the attempt's last control has executed" in refusals[0][1]
    assert ClickedWhileClosing.seen[0]["controls_ended"] is True  # what a late viewer's page is given
    attempt.refresh_from_db()
    assert attempt.autonomous and not attempt.interventions.exists()


class NotedWithNul(Policy):
    """At its first call an intervener notes something holding a NUL, then a clean note."""

    user = None
    refusals: list = []

    def act(self, message):
        from evaluator.protocol.errors import InterventionRefused

        attempt = Attempt.objects.get(status="running")
        if message.counters["policy_calls"] == 0:
            try:
                do_intervene(self.user, attempt.pk, "annotate", note="slips\x00")
            except InterventionRefused as refused:
                self.refusals.append(str(refused))
            do_intervene(self.user, attempt.pk, "annotate", note="slips\nat the rim")
        return PolicyReply({"stop": True})


def test_an_intervention_note_with_a_control_character_is_refused_as_a_tags_is(run_cell, register_policy):
    # Issue "... fifth round", item 10 (the class: every note people write): "A NUL in a tag's note on PostgreSQL is a
    # DataError and a 500 ... validate like labels."
    user = get_user_model().objects.create_user("ivan")
    user.groups.add(Group.objects.get(name="intervener"))
    NotedWithNul.user = user
    register_policy("noted", NotedWithNul)
    attempt = run_cell(policy="noted")
    assert NotedWithNul.refusals == ["a note is printable text (lines and tabs, no control character such as NUL)"]
    assert list(attempt.interventions.values_list("note", flat=True)) == ["slips\nat the rim"]
