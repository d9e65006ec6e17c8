"""The immutability triggers on a real PostgreSQL server (DATABASE_URL switches the site to it):
a finished attempt and its records cannot be changed below the models there either."""

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.servers.postgres import create_database

# The subject here is the records, the API and the pages: Fetch renders small (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("small_fetch_render")

ROOT = Path(__file__).resolve().parents[1]

SETUP = """
import django; django.setup()
from evaluator.records.catalog_sync import sync_all_catalogs
from evaluator.records.models import Artifact, Attempt, Campaign, Decision, Policy, ProtocolIdentity, Step, Task
from evaluator.protocol.identity import configure
sync_all_catalogs()
config = configure("simpler_env")
identity = ProtocolIdentity.objects.create(protocol_id=config.protocol_id, benchmark="simpler_env",
                                           configuration=config.as_dict())
policy = Policy.objects.create(name="noop", kind="scripted_harness_check", spec="builtin:noop")
task = Task.objects.get(name="widowx_spoon_on_towel")
campaign = Campaign.objects.create(name="c", benchmark=task.benchmark, task_names=[task.name], seed=1, policy=policy,
                                   protocol=identity, protocol_config=config.as_dict())
for index, status in enumerate(["finished", "running"]):
    attempt = Attempt.objects.create(campaign=campaign, task=task, cell_index=index, seed=1,
                                     policy_identity=policy.identity, budget={})
    decision = Decision.objects.create(attempt=attempt, index=1, kind="actions", observation_step=0, instruction="i",
                                       response={})
    Step.objects.create(attempt=attempt, index=1, decision=decision, action=[0.0], native_success=False,
                        terminated=False, truncated=False, instruction="i")
    Artifact.objects.create(attempt=attempt, kind="manifest", path=f"attempts/{index}/manifest.json", sha256="0" * 64,
                            size=2)
    attempt.status = status
    attempt.outcome = "task_failure" if status == "finished" else ""
    attempt.save()
"""


@pytest.fixture(scope="module")
def server_url(postgres_url):
    """A database of this module's own on the run's PostgreSQL."""
    return create_database(postgres_url, "immutability")


@pytest.fixture(scope="module")
def database(server_url):
    env = {**os.environ, "DATABASE_URL": server_url, "DJANGO_SETTINGS_MODULE": "rsi_site.settings"}
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput"], cwd=ROOT, env=env, check=True, capture_output=True
    )
    subprocess.run([sys.executable, "-c", SETUP], cwd=ROOT, env=env, check=True, capture_output=True)
    with psycopg.connect(server_url.replace("postgres://", "postgresql://"), autocommit=True) as connection:
        yield connection


def _ids(connection):
    rows = connection.execute("SELECT id, status FROM evaluator_attempt ORDER BY cell_index").fetchall()
    return {status: pk for pk, status in rows}


def test_postgres_refuses_to_update_a_finished_attempt(database):
    finished = _ids(database)["finished"]
    with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="immutable"):
        database.execute("UPDATE evaluator_attempt SET outcome = 'success' WHERE id = %s", [finished])
    assert database.execute("SELECT outcome FROM evaluator_attempt WHERE id = %s", [finished]).fetchone() == (
        "task_failure",
    )


def test_postgres_refuses_to_delete_a_finished_attempt(database):
    finished = _ids(database)["finished"]
    with pytest.raises(psycopg.errors.IntegrityConstraintViolation):
        database.execute("DELETE FROM evaluator_attempt WHERE id = %s", [finished])


def test_postgres_refuses_records_of_a_finished_attempt(database):
    finished = _ids(database)["finished"]
    with pytest.raises(psycopg.errors.IntegrityConstraintViolation):
        database.execute(
            "INSERT INTO evaluator_decision (attempt_id, index, kind, actor, observation_step, instruction, response,"
            " accepted_chunk, executed, created_at) VALUES (%s, 2, 'stop', 'policy', 0, 'i', '{}', '[]', 0, now())",
            [finished],
        )
    with pytest.raises(psycopg.errors.IntegrityConstraintViolation):
        database.execute("UPDATE evaluator_decision SET executed = 9 WHERE attempt_id = %s", [finished])


def test_postgres_lets_a_running_attempt_change(database):
    running = _ids(database)["running"]
    database.execute("UPDATE evaluator_attempt SET policy_calls = 4 WHERE id = %s", [running])
    database.execute("UPDATE evaluator_decision SET executed = 2 WHERE attempt_id = %s", [running])
    assert database.execute("SELECT policy_calls FROM evaluator_attempt WHERE id = %s", [running]).fetchone() == (4,)


def test_postgres_keeps_tags_failure_modes_and_cancel_marks_as_written(database):
    """Issue "... fifth round", item 21: "raw SQL edited a tag's note and user, cleared a removal, deleted a tag,
    relabelled a failure mode and set `cancelled_at` on a finished campaign ... Protect them as the other records
    are" (tests/test_mark_triggers.py sends every forgery to SQLite)."""
    finished = _ids(database)["finished"]
    (mode,) = database.execute(
        "INSERT INTO evaluator_failuremode (benchmark, name, label, created_at) VALUES ('simpler_env', 'slip', 'slip',"
        " now()) RETURNING id"
    ).fetchone()
    (tag,) = database.execute(
        "INSERT INTO evaluator_episodetag (attempt_id, mode_id, note, username, created_at, removed_username)"
        " VALUES (%s, %s, 'let go', 'rita', now(), '') RETURNING id",
        [finished, mode],
    ).fetchone()
    (campaign,) = database.execute("SELECT campaign_id FROM evaluator_attempt WHERE id = %s", [finished]).fetchone()
    # What the rules allow: the removal recorded once, the first cancel while a cell is open.
    database.execute(
        "UPDATE evaluator_episodetag SET removed_at = now(), removed_username = 'rita' WHERE id = %s", [tag]
    )
    database.execute("UPDATE evaluator_campaign SET cancelled_at = now() WHERE id = %s", [campaign])
    for forgery in (
        "UPDATE evaluator_episodetag SET note = 'forged' WHERE id = {tag}",
        "UPDATE evaluator_episodetag SET removed_at = NULL, removed_username = '' WHERE id = {tag}",
        "DELETE FROM evaluator_episodetag WHERE id = {tag}",
        "TRUNCATE evaluator_episodetag",
        "UPDATE evaluator_failuremode SET label = 'forged' WHERE id = {mode}",
        "DELETE FROM evaluator_failuremode WHERE id = {mode}",
        "UPDATE evaluator_campaign SET cancelled_at = NULL WHERE id = {campaign}",
        "UPDATE evaluator_campaign SET cancelled_at = now() - interval '1 day' WHERE id = {campaign}",
    ):
        with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="never changed|set once"):
            database.execute(forgery.format(tag=tag, mode=mode, campaign=campaign))
    assert database.execute("SELECT note, removed_username FROM evaluator_episodetag").fetchall() == [
        ("let go", "rita")
    ]
    assert database.execute("SELECT label FROM evaluator_failuremode WHERE id = %s", [mode]).fetchone() == ("slip",)


def test_postgres_refuses_an_upsert_over_a_finished_attempt(database):
    # "test the REPLACE and UPSERT forms": PostgreSQL has no REPLACE; ON CONFLICT is its upsert.
    finished = _ids(database)["finished"]
    database.execute("CREATE TEMP TABLE forged AS SELECT * FROM evaluator_attempt WHERE id = %s", [finished])
    database.execute("UPDATE forged SET outcome = 'success', success = true")
    for conflict in ("DO UPDATE SET outcome = 'success', success = true", "DO NOTHING"):
        with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="immutable"):
            database.execute(f"INSERT INTO evaluator_attempt SELECT * FROM forged ON CONFLICT (id) {conflict}")
    row = database.execute("SELECT outcome, success FROM evaluator_attempt WHERE id = %s", [finished]).fetchone()
    assert row == ("task_failure", None)  # as the set-up finished it
    decision = database.execute("SELECT id FROM evaluator_decision WHERE attempt_id = %s", [finished]).fetchone()[0]
    with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="immutable"):
        database.execute(
            "INSERT INTO evaluator_decision SELECT * FROM evaluator_decision WHERE id = %s "
            "ON CONFLICT (id) DO UPDATE SET executed = 7",
            [decision],
        )


# Hostile input, third round, 2: "PostgreSQL `TRUNCATE evaluator_step CASCADE` is accepted (row triggers do not fire
# on TRUNCATE): a finished attempt lost all its steps. Statement-level TRUNCATE triggers on every protected table."
TRUNCATED = ["evaluator_step", "evaluator_decision", "evaluator_artifact", "evaluator_attempt", "evaluator_task",
             "evaluator_policy", "evaluator_protocolidentity", "evaluator_campaign", "evaluator_benchmark"]  # fmt: skip


@pytest.mark.parametrize("table", TRUNCATED)
def test_postgres_refuses_to_truncate_evidence(database, table):
    steps = "SELECT count(*) FROM evaluator_step WHERE attempt_id = %s"
    finished = _ids(database)["finished"]
    assert database.execute(steps, [finished]).fetchone() == (1,)
    with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="TRUNCATE is refused"):
        database.execute(f"TRUNCATE {table} CASCADE")
    assert database.execute(steps, [finished]).fetchone() == (1,)


def test_postgres_truncates_a_guarded_table_that_holds_no_evidence(database):
    database.execute("TRUNCATE evaluator_intervention")  # no intervention was recorded: nothing is kept


# 1, on PostgreSQL: the rows a plan points to cannot be deleted or upserted either.
PLAN_ROWS = {
    "evaluator_policy": ("SELECT policy_id FROM evaluator_campaign", "spec = 'http://127.0.0.1:9/other'"),
    "evaluator_task": ("SELECT task_id FROM evaluator_attempt LIMIT 1", "native_horizon = 999"),
    "evaluator_protocolidentity": ("SELECT protocol_id FROM evaluator_campaign", "configuration = '{}'"),
    "evaluator_campaign": ("SELECT id FROM evaluator_campaign", "seed = 8"),
}


@pytest.mark.parametrize("table", PLAN_ROWS)
def test_postgres_refuses_to_delete_or_upsert_a_row_a_plan_points_to(database, table):
    find, change = PLAN_ROWS[table]
    pk = database.execute(find).fetchone()[0]
    before = database.execute(f"SELECT * FROM {table} WHERE id = %s", [pk]).fetchone()
    with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="frozen plan"):
        database.execute(f"DELETE FROM {table} WHERE id = %s", [pk])
    with pytest.raises(psycopg.errors.IntegrityConstraintViolation, match="frozen plan"):
        database.execute(
            f"INSERT INTO {table} SELECT * FROM {table} WHERE id = %s ON CONFLICT (id) DO UPDATE SET {change}", [pk]
        )
    assert database.execute(f"SELECT * FROM {table} WHERE id = %s", [pk]).fetchone() == before


def check_deploy(url: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "RSI_SECRET_KEY"}
    env.update(DATABASE_URL=url, RSI_HTTPS="1", RSI_POLICY_HOSTS="gpu7", DJANGO_SETTINGS_MODULE="rsi_site.settings")
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    return result.stdout + result.stderr


def test_the_deploy_check_warns_while_the_sites_database_user_is_a_superuser(database, server_url):
    # Issue 42, item 15: "A database user that is a superuser can switch the immutability triggers off
    # (`session_replication_role = replica`): the deploy check warns when the app's database user is a superuser,
    # and docs/scale-out.md says to create a plain one."
    assert "(rsi.W002) the database user 'rsi' is a superuser" in check_deploy(server_url)
    database.execute("CREATE ROLE rsi_app LOGIN")
    database.execute("GRANT ALL ON SCHEMA public TO rsi_app")
    plain_url = server_url.replace("postgres://rsi@", "postgres://rsi_app@")
    said = check_deploy(plain_url)
    assert "rsi.W002" not in said and "rsi.W003" not in said, said
    # What the warning is about: a plain role cannot switch the triggers off.
    with (
        psycopg.connect(plain_url.replace("postgres://", "postgresql://"), autocommit=True) as plain,
        pytest.raises(psycopg.errors.InsufficientPrivilege),
    ):
        plain.execute("SET session_replication_role = replica")
