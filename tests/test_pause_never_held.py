"""Issue "Nothing counted that should not be ... fifth round", item 1: "A pause at a step the episode never reaches
costs the episode. *Pause at step 50* on a 50-step episode, or *999*, is accepted (the server allows 0–MOST_STEPS,
not the attempt's own maximum); the pause never holds, yet the episode becomes non-autonomous and leaves the
aggregates, the leaderboard and every comparison. Refuse a step the attempt cannot reach, with the reason; and a
requested pause that never took effect is recorded as such and does not make the episode non-autonomous."

Each episode is a real Fetch episode of 50 steps (10 decisions of 5 steps); an intervener acts from inside the
policy's call, as a watcher's click would arrive while the episode runs."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from evaluator.live.interventions import do_intervene
from evaluator.policies.base import Policy, PolicyReply
from evaluator.protocol.errors import InterventionRefused
from evaluator.protocol.interventions import last_pausable_step
from evaluator.records.models import Attempt
from evaluator.records.queries import campaign_report

FIFTY_STEPS = {"task": "reach", "budget_mode": "decisions", "max_policy_calls": 10, "replan_interval": 5}


class PausesAt(Policy):
    """At its first call an intervener sets a pause for each step of `asked` in turn; refusals are kept."""

    user = None
    asked: list = []
    refusals: list = []

    def act(self, message):
        if message.counters["policy_calls"] == 0:
            attempt = Attempt.objects.get(status="running")
            for step in self.asked:
                try:
                    do_intervene(self.user, attempt.pk, "pause_at", action=[step])
                except InterventionRefused as refused:
                    self.refusals.append(str(refused))
        return PolicyReply({"actions": [[0.0] * 4] * 5})


@pytest.fixture
def pauses_at(register_policy):
    user = get_user_model().objects.create_user("ivan")
    user.groups.add(Group.objects.get(name="intervener"))
    PausesAt.user, PausesAt.refusals = user, []
    register_policy("pauses_at", PausesAt)

    def run(run_cell, *steps):
        PausesAt.asked = list(steps)
        return run_cell(policy="pauses_at", **FIFTY_STEPS)

    return run


def test_a_pause_set_for_a_step_the_episode_cannot_reach_is_refused_with_the_reason(run_cell, pauses_at):
    attempt = pauses_at(run_cell, 50, 999, -1)
    reason = (
        "pause at a step: a whole number of steps from 0 to 49 (the episode makes its last decision before step 50: "
        "a pause set later would never hold)"
    )
    assert PausesAt.refusals == [reason, reason, reason]
    assert last_pausable_step(attempt.budget) == 49
    assert attempt.autonomous and not attempt.interventions.exists()
    assert attempt.termination_reason == "call_budget" and attempt.environment_steps == 50


def test_a_pause_that_never_holds_is_recorded_as_such_and_the_episode_stays_autonomous(run_cell, pauses_at):
    # Step 49 is reachable, but the last decision comes at step 45: its chunk carries the episode to its end.
    attempt = pauses_at(run_cell, 49)
    assert PausesAt.refusals == []
    assert attempt.autonomous and attempt.environment_steps == 50
    assert list(attempt.interventions.values_list("kind", "step_index", "note")) == [
        ("pause_at", 0, "pause set for step 49")
    ]
    assert attempt.accounting["pause_never_held"] == {
        "set_by": "ivan",
        "at_step": 0,
        "request": "pause set for step 49",
    }
    # It counts as the policy's own episode.
    report = campaign_report([attempt])
    assert (report.overall.attempted, report.non_autonomous.attempted) == (1, 0)


def test_a_pause_that_holds_withdraws_autonomy_when_it_holds(run_cell, pauses_at, monkeypatch):
    monkeypatch.setenv("RSI_MAX_PAUSE_S", "0.3")  # nobody resumes it: the hold expires and the attempt stops
    attempt = pauses_at(run_cell, 12)
    assert list(attempt.interventions.values_list("kind", "step_index", "note", "username")) == [
        ("pause_at", 0, "pause set for step 12", "ivan"),
        ("pause", 15, "paused at step 15, as set for step 12", "ivan"),  # the first decision after step 12
    ]
    assert not attempt.autonomous and attempt.environment_steps == 15
    assert "pause_never_held" not in attempt.accounting
