"""Campaigns and attempts as evidence: "never overwrite a record"; "Keep a failed attempt and any
subsequent separately authorized evaluation as distinct records; never report only the best outcome
or replace the original record." (simpler_env_protocol.md)."""

import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from evaluator.records import triggers
from evaluator.records.models import Artifact, Attempt, Campaign, Decision, Intervention, Policy, RecordImmutable, Step

# The subject here is the records, the API and the pages: Fetch renders small (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("small_fetch_render")


def _finish(attempt, **fields):
    """Finish an attempt as its run does: its manifest is recorded first."""
    Artifact.objects.create(
        attempt=attempt, kind="manifest", path=f"attempts/{attempt.pk}/manifest.json", sha256="0" * 64, size=2
    )
    for key, value in {
        "status": Attempt.Status.FINISHED,
        "outcome": "task_failure",
        "success": False,
        **fields,
    }.items():
        setattr(attempt, key, value)
    attempt.save()
    return attempt


def _decision(attempt, index=1):
    return Decision.objects.create(
        attempt=attempt, index=index, kind=Decision.Kind.ACTIONS, observation_step=0, instruction="i", response={}
    )


def test_a_running_attempt_can_be_updated_until_it_finishes(make_attempt):
    attempt = make_attempt()
    attempt.status = Attempt.Status.RUNNING
    attempt.policy_calls = 3
    attempt.save()
    _finish(attempt, environment_steps=15)
    assert Attempt.objects.get(pk=attempt.pk).environment_steps == 15


def test_a_finished_attempt_refuses_changes_through_the_model(make_attempt):
    attempt = _finish(make_attempt())
    attempt.success = True
    with pytest.raises(RecordImmutable, match="finished"):
        attempt.save()
    assert Attempt.objects.get(pk=attempt.pk).success is False


def test_a_finished_attempt_refuses_changes_below_the_model(make_attempt):
    # Queryset updates bypass Model.save(); the database trigger still refuses them.
    attempt = _finish(make_attempt())
    with pytest.raises(IntegrityError, match="immutable"), transaction.atomic():
        Attempt.objects.filter(pk=attempt.pk).update(success=True, outcome="success")
    assert Attempt.objects.get(pk=attempt.pk).outcome == "task_failure"


def test_a_finished_attempt_cannot_be_reopened(make_attempt):
    attempt = _finish(make_attempt())
    with pytest.raises(IntegrityError), transaction.atomic():
        Attempt.objects.filter(pk=attempt.pk).update(status=Attempt.Status.RUNNING)
    assert Attempt.objects.get(pk=attempt.pk).status == Attempt.Status.FINISHED


def test_a_finished_attempt_cannot_be_deleted(make_attempt):
    attempt = _finish(make_attempt())
    with pytest.raises(RecordImmutable):
        attempt.delete()
    with pytest.raises(IntegrityError), transaction.atomic():
        Attempt.objects.filter(pk=attempt.pk).delete()
    assert Attempt.objects.filter(pk=attempt.pk).exists()


def test_records_cannot_be_added_to_a_finished_attempt(make_attempt):
    attempt = make_attempt()
    decision = _decision(attempt)
    _finish(attempt)
    with pytest.raises(RecordImmutable):
        _decision(attempt, index=2)
    step = Step(
        attempt=attempt,
        index=1,
        decision=decision,
        action=[0.0] * 7,
        native_success=False,
        terminated=False,
        truncated=False,
        instruction="i",
    )
    with pytest.raises(RecordImmutable):
        step.save()
    with pytest.raises(IntegrityError), transaction.atomic():
        Step.objects.bulk_create([step])
    with pytest.raises(IntegrityError), transaction.atomic():
        Decision.objects.filter(pk=decision.pk).update(executed=99)
    assert attempt.steps.count() == 0 and Decision.objects.get(pk=decision.pk).executed == 0


def test_records_are_written_once(make_attempt):
    decision = _decision(make_attempt())
    decision.executed = 5
    with pytest.raises(RecordImmutable, match="written once"):
        decision.save()


def test_an_intervention_needs_an_unfinished_attempt(make_attempt):
    attempt = make_attempt()
    user = get_user_model().objects.create_user("watcher")
    Intervention.objects.create(attempt=attempt, user=user, kind=Intervention.Kind.PAUSE, step_index=0)
    _finish(attempt, autonomous=False)
    with pytest.raises(RecordImmutable):
        Intervention.objects.create(attempt=attempt, user=user, kind=Intervention.Kind.ANNOTATE, step_index=0)


def test_a_rerun_is_a_new_record_linked_to_the_original(make_attempt):
    original = _finish(make_attempt(), outcome="infrastructure_error", error_type="render")
    rerun = Attempt.objects.create(
        campaign=original.campaign,
        task=original.task,
        cell_index=original.cell_index,
        seed=original.seed,
        rerun_of=original,
        policy_identity=original.policy_identity,
        budget=original.budget,
    )
    assert list(original.reruns.all()) == [rerun]
    assert Attempt.objects.get(pk=original.pk).error_type == "render"


def test_a_cell_has_only_one_original_attempt(make_attempt):
    original = make_attempt()
    with pytest.raises(IntegrityError), transaction.atomic():
        Attempt.objects.create(
            campaign=original.campaign,
            task=original.task,
            cell_index=0,
            seed=original.seed,
            policy_identity=original.policy_identity,
            budget=original.budget,
        )


@pytest.mark.parametrize("seed", [-1, 2**32])
def test_seeds_outside_uint32_are_refused_by_the_database(make_attempt, seed):
    # Upstream: "Seeds must be in [0, 2³²)."
    with pytest.raises(IntegrityError), transaction.atomic():
        make_attempt(seed=seed)


def test_a_campaign_plan_is_frozen(make_attempt):
    campaign = make_attempt().campaign
    campaign.seed = 8
    with pytest.raises(RecordImmutable, match="seed"):
        campaign.save()
    campaign = Campaign.objects.get(pk=campaign.pk)
    campaign.name = "renamed"
    campaign.save()
    assert Campaign.objects.get(pk=campaign.pk).name == "renamed"


def test_the_same_declared_policy_settings_give_the_same_identity(db):
    a = Policy.objects.create(name="a", kind=Policy.Kind.FIXED_PROGRAM, spec="http://h/act", settings={"t": 1})
    b = Policy.objects.create(name="b", kind=Policy.Kind.FIXED_PROGRAM, spec="http://h/act", settings={"t": 1})
    c = Policy.objects.create(name="c", kind=Policy.Kind.FIXED_PROGRAM, spec="http://h/act", settings={"t": 2})
    assert a.identity == b.identity != c.identity
    assert len(a.identity) == 64


def test_the_triggers_survive_a_later_migrate(make_attempt):
    # SQLite rebuilds a table to alter it; the triggers are dropped before and made again after migrate.
    from django.core.management import call_command

    attempt = _finish(make_attempt())
    call_command("migrate", verbosity=0)
    with pytest.raises(IntegrityError), transaction.atomic():
        Attempt.objects.filter(pk=attempt.pk).update(success=True)


@pytest.mark.django_db(transaction=True)
def test_flushing_the_whole_database_keeps_the_triggers_for_what_comes_next(make_attempt):
    from django.core.management import call_command
    from django.db import connection

    _finish(make_attempt())
    for inhibit in (False, True):
        call_command("flush", interactive=False, verbosity=0, inhibit_post_migrate=inhibit)
        assert not Attempt.objects.exists()
        with connection.cursor() as cursor:
            cursor.execute("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'")
            # every one of them made again, those of what people mark (records/mark_triggers.py) included
            assert cursor.fetchone() == (len(triggers.STATEMENTS["sqlite"][0]),)


FORGERIES = {
    "INSERT OR REPLACE of the same row": "INSERT OR REPLACE INTO evaluator_attempt SELECT * FROM forged",
    "REPLACE INTO": "REPLACE INTO evaluator_attempt SELECT * FROM forged",
    "REPLACE through the one-original-per-cell key": (
        "UPDATE forged SET id = id + 1000",
        "REPLACE INTO evaluator_attempt SELECT * FROM forged",
    ),
    "UPSERT": "INSERT INTO evaluator_attempt SELECT * FROM forged WHERE true "
    "ON CONFLICT(id) DO UPDATE SET outcome = 'success', success = 1",
}


@pytest.mark.parametrize("statements", FORGERIES.values(), ids=FORGERIES.keys())
def test_raw_sql_cannot_replace_a_finished_attempt(make_attempt, transactional_db, statements):
    # "INSERT OR REPLACE ... turned a task failure into a success": REPLACE deletes the old row
    # without DELETE triggers when recursive_triggers is off, as it is on a raw connection.
    import sqlite3

    from django.db import connection

    attempt = _finish(make_attempt())
    raw = sqlite3.connect(connection.settings_dict["NAME"])
    try:
        assert raw.execute("PRAGMA recursive_triggers").fetchone() == (0,)
        raw.execute("CREATE TEMP TABLE forged AS SELECT * FROM evaluator_attempt WHERE id = ?", [attempt.pk])
        # A pending row in its place: it passes the created-pending rule, so REPLACE is what is tested.
        raw.execute("UPDATE forged SET outcome = 'success', success = 1, status = 'pending'")
        with pytest.raises(sqlite3.IntegrityError, match="immutable"):
            for statement in (statements,) if isinstance(statements, str) else statements:
                raw.execute(statement)
        raw.rollback()
    finally:
        raw.close()
    assert list(Attempt.objects.values_list("pk", "outcome", "success")) == [(attempt.pk, "task_failure", False)]


def test_raw_sql_cannot_replace_a_record_of_a_finished_attempt(make_attempt, transactional_db):
    import sqlite3

    from django.db import connection

    attempt = make_attempt()
    decision = _decision(attempt)
    _finish(attempt)
    other = make_attempt(task_name="widowx_carrot_on_plate")  # a running attempt to move the row to
    raw = sqlite3.connect(connection.settings_dict["NAME"])
    try:
        raw.execute("CREATE TEMP TABLE forged AS SELECT * FROM evaluator_decision WHERE id = ?", [decision.pk])
        raw.execute("UPDATE forged SET attempt_id = ?, executed = 5", [other.pk])
        with pytest.raises(sqlite3.IntegrityError, match="immutable"):
            raw.execute("REPLACE INTO evaluator_decision SELECT * FROM forged")
        raw.rollback()
    finally:
        raw.close()
    assert list(attempt.decisions.values_list("pk", "executed")) == [(decision.pk, 0)]


def test_django_connections_fire_delete_triggers_on_replace(db):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("PRAGMA recursive_triggers")
        assert cursor.fetchone() == (1,)
