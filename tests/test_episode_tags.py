"""Issue 45, item 3, the rules behind the review page's tags (tests/test_episode_tags_browser.py drives them): "Who
and when recorded; tags never change a result or its evidence; they are their own history (removal recorded)";
failure modes come from "a per-benchmark vocabulary that operators can extend"."""

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied

from evaluator.records.models import Attempt, EpisodeTag, RecordImmutable
from evaluator.records.tagging import DEFAULT_MODES, TagRefused, do_add_mode, do_remove_tag, do_tag, vocabulary

# The subject here is the records, the API and the pages: Fetch renders small (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("small_fetch_render")


def user_with(name: str, role: str):
    user = get_user_model().objects.create_user(name)
    user.groups.add(Group.objects.get(name=role))
    return user


def test_a_tag_is_never_changed_or_deleted_and_its_removal_is_recorded_once(run_cell):
    rita = user_with("rita", "reviewer")
    attempt = run_cell(task="reach", budget_mode="decisions", max_policy_calls=2, replan_interval=1)
    tag = do_tag(rita, attempt, "dropped", "let go at the top", step=1)
    assert (tag.username, tag.mode.name, tag.step) == ("rita", "dropped", 1)
    tag.note = "edited"
    with pytest.raises(RecordImmutable, match="a tag is never changed"):
        tag.save()
    with pytest.raises(RecordImmutable, match="a tag is never deleted"):
        tag.delete()
    do_remove_tag(rita, tag)
    with pytest.raises(TagRefused, match="was removed already"):
        do_remove_tag(rita, tag)
    kept = EpisodeTag.objects.get()
    assert kept.note == "let go at the top" and kept.removed_username == "rita" and kept.removed_at is not None


def test_what_cannot_be_tagged_is_refused_with_every_reason(run_cell, catalogs):
    rita = user_with("rita", "reviewer")
    attempt = run_cell(task="reach", budget_mode="decisions", max_policy_calls=2, replan_interval=1)
    with pytest.raises(TagRefused) as refused:
        do_tag(rita, attempt, "slipped", "x" * 2001, step=99)
    assert refused.value.reasons == [
        f"'slipped' is not a failure mode of fetch: one of {', '.join(sorted(n for n, _ in DEFAULT_MODES))}",
        "a note holds at most 2000 characters, got 2001",
        f"step 99 is not one of the episode's steps (0 to {attempt.environment_steps})",
    ]
    with pytest.raises(TagRefused, match="give a failure mode, a note, or both"):
        do_tag(rita, attempt)
    with pytest.raises(PermissionDenied):
        do_tag(user_with("walt", "watcher"), attempt, "dropped")


def test_operators_extend_a_benchmarks_vocabulary_and_reviewers_do_not(db):
    assert [m.name for m in vocabulary("fetch")] == sorted(name for name, _ in DEFAULT_MODES)
    olga = user_with("olga", "operator")
    do_add_mode(olga, "fetch", "gripper_slip", "gripper slipped")
    assert "gripper_slip" in [m.name for m in vocabulary("fetch")]
    assert "gripper_slip" not in [m.name for m in vocabulary("maniskill2")]  # per benchmark
    with pytest.raises(TagRefused) as refused:
        do_add_mode(olga, "fetch", "Gripper Slip", "")
    assert len(refused.value.reasons) == 2
    with pytest.raises(PermissionDenied):
        do_add_mode(user_with("rita", "reviewer"), "fetch", "other", "other")


@pytest.mark.parametrize("note", ["dropped\x00it", "bell\x07", "escape \x1b[31mred"])
def test_a_note_with_a_control_character_is_refused_on_every_database_and_lines_are_kept(client, make_attempt, note):
    """Issue "... fifth round", item 10: "A NUL in a tag's note on PostgreSQL is a `DataError` and a 500 on the review
    page's tag POST (stored on SQLite): validate like labels." The refusal comes before the database sees the note."""
    from tests.records import finish_cell

    rita = user_with("rita", "reviewer")
    attempt = make_attempt(benchmark="fetch", task_name="reach")
    finish_cell(attempt, "failure")
    client.force_login(rita)
    page = client.post(f"/attempts/{attempt.pk}/tags/", {"note": note}, follow=True)
    assert page.status_code == 200
    assert "a note is printable text (lines and tabs, no control character such as NUL)" in page.content.decode()
    assert not EpisodeTag.objects.exists()
    kept = do_tag(rita, Attempt.objects.get(pk=attempt.pk), note="first line\n\tsecond line\r\n")
    assert kept.note == "first line\n\tsecond line"
