"""Issue "Nothing counted that should not be ... fifth round", item 21: "Tags, failure modes and a campaign's cancel
mark have no trigger: raw SQL edited a tag's note and user, cleared a removal, deleted a tag, relabelled a failure
mode and set `cancelled_at` on a finished campaign, while the docs call removals "recorded, never a deletion".
Protect them as the other records are." Each forgery here is raw SQL on a connection of its own, as an operator's
shell would send it (tests/test_postgres_immutability.py sends the same to PostgreSQL)."""

import sqlite3

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection

from evaluator.execution.cancelling import do_cancel_campaign
from evaluator.records.models import Campaign, EpisodeTag, FailureMode
from evaluator.records.tagging import do_remove_tag, do_tag
from tests.records import finish_cell

FORGERIES = {
    "a tag's note edited": "UPDATE evaluator_episodetag SET note = 'forged' WHERE id = {tag}",
    "a tag's user changed": "UPDATE evaluator_episodetag SET user_id = {other}, username = 'mallory' WHERE id = {tag}",
    "a tag's mode changed": "UPDATE evaluator_episodetag SET mode_id = NULL WHERE id = {tag}",
    "a removal cleared": (
        "UPDATE evaluator_episodetag SET removed_at = NULL, removed_username = '' WHERE id = {removed}"
    ),
    "a removal rewritten": "UPDATE evaluator_episodetag SET removed_username = 'mallory' WHERE id = {removed}",
    "a tag deleted": "DELETE FROM evaluator_episodetag WHERE id = {tag}",
    "a tag replaced": "INSERT OR REPLACE INTO evaluator_episodetag SELECT * FROM evaluator_episodetag WHERE id = {tag}",
    "a failure mode relabelled": "UPDATE evaluator_failuremode SET label = 'forged' WHERE id = {mode}",
    "a tagged failure mode deleted": "DELETE FROM evaluator_failuremode WHERE id = {mode}",
    "a failure mode replaced": (
        "INSERT OR REPLACE INTO evaluator_failuremode (benchmark, name, label, created_at) "
        "VALUES ('fetch', 'dropped', 'forged', '2026-01-01')"
    ),
    "a finished campaign marked cancelled": (
        "UPDATE evaluator_campaign SET cancelled_at = '2026-01-01', cancelled_by_id = {other} WHERE id = {finished}"
    ),
    "a cancel mark moved to another user": (
        "UPDATE evaluator_campaign SET cancelled_by_id = {reviewer} WHERE id = {cancelled}"
    ),
    "a cancel mark cleared": (
        "UPDATE evaluator_campaign SET cancelled_at = NULL, cancelled_by_id = NULL WHERE id = {cancelled}"
    ),
}
KEPT = "SELECT * FROM evaluator_episodetag ORDER BY id", "SELECT * FROM evaluator_failuremode ORDER BY id"


def user_with(name: str, role: str):
    user = get_user_model().objects.create_user(name)
    user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def marked(make_attempt, transactional_db):
    rita, olga = user_with("rita", "reviewer"), user_with("olga", "operator")
    finished = make_attempt(benchmark="fetch", task_name="reach")
    finish_cell(finished, "failure")
    finished.refresh_from_db()
    tag = do_tag(rita, finished, "dropped", "let go", step=0)
    removed = do_tag(rita, finished, "", "a second look")
    do_remove_tag(rita, removed)
    pending = make_attempt(benchmark="fetch", task_name="push")
    do_cancel_campaign(olga, pending.campaign)
    return {
        "tag": tag.pk,
        "removed": removed.pk,
        "mode": tag.mode_id,
        "other": olga.pk,
        "reviewer": rita.pk,
        "finished": finished.campaign_id,
        "cancelled": pending.campaign_id,
    }


def snapshot(raw) -> list:
    campaigns = raw.execute("SELECT id, cancelled_at, cancelled_by_id FROM evaluator_campaign ORDER BY id").fetchall()
    return [raw.execute(query).fetchall() for query in KEPT] + [campaigns]


@pytest.mark.parametrize("django_pragmas", [False, True], ids=["raw connection", "Django's pragmas"])
@pytest.mark.parametrize("forgery", FORGERIES.values(), ids=FORGERIES.keys())
def test_raw_sql_cannot_rewrite_a_tag_a_failure_mode_or_a_cancel_mark(marked, forgery, django_pragmas):
    raw = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    try:
        if django_pragmas:
            raw.execute("PRAGMA foreign_keys = ON")
            raw.execute("PRAGMA recursive_triggers = ON")
        before = snapshot(raw)
        with pytest.raises(sqlite3.IntegrityError, match="never changed|set once"):
            raw.execute(forgery.format(**marked))
        assert snapshot(raw) == before
    finally:
        raw.close()


def test_what_the_rules_allow_still_happens(marked):
    """A removal is recorded once; a deleted account leaves its tags under the name they were put with; a new mode
    and a first cancel are written; an untagged mode may go."""
    rita = get_user_model().objects.get(username="rita")
    do_remove_tag(rita, EpisodeTag.objects.get(pk=marked["tag"]))
    rita.delete()
    assert set(EpisodeTag.objects.values_list("user_id", "username")) == {(None, "rita")}
    spare = FailureMode.objects.create(benchmark="fetch", name="spare", label="spare")
    spare.delete()
    assert Campaign.objects.get(pk=marked["cancelled"]).cancelled_by.username == "olga"
