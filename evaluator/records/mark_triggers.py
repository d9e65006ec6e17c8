"""Database triggers for what people mark on records: an episode's tags, a benchmark's failure modes and a campaign's
cancel mark. Like the triggers of records/triggers.py (which run these with their own), they hold below every view,
admin action, queryset update and raw SQL:

- a tag is never changed or deleted: its removal is recorded on it once (removed_at and removed_username set from
  empty), and its user may only go (a deleted account: SET NULL keeps the name it was put under);
- a failure mode is never changed (a tag's meaning is its mode's label), nor deleted while a tag names it;
- a campaign's cancel mark is set once, while a cell of it is still pending, queued or running, and never changed.
"""

from __future__ import annotations

TAG, MODE, CAMPAIGN = "evaluator_episodetag", "evaluator_failuremode", "evaluator_campaign"
TAG_FIXED = ("id", "attempt_id", "mode_id", "note", "step", "username", "created_at")
MODE_FIXED = ("id", "benchmark", "name", "label", "created_by_id", "created_at")
OPEN_CELLS = "SELECT 1 FROM evaluator_attempt WHERE campaign_id = OLD.id AND status IN ('pending', 'queued', 'running')"


def _changed(columns, differs: str) -> str:
    return "(" + " OR ".join(f"OLD.{column} {differs} NEW.{column}" for column in columns) + ")"


def _tag_rewritten(differs: str) -> str:
    """True when an update of a tag is anything but its one recorded removal, or its user's account going."""
    removal_rewritten = (
        f"(OLD.removed_at IS NOT NULL AND (OLD.removed_at {differs} NEW.removed_at "
        f"OR OLD.removed_username {differs} NEW.removed_username))"
    )
    removal_unsaid = (
        f"(OLD.removed_at IS NULL AND NEW.removed_at IS NULL AND OLD.removed_username {differs} NEW.removed_username)"
    )
    user_changed = f"(OLD.user_id {differs} NEW.user_id AND NEW.user_id IS NOT NULL)"
    return f"({_changed(TAG_FIXED, differs)} OR {removal_rewritten} OR {removal_unsaid} OR {user_changed})"


def _cancel_rewritten(differs: str) -> str:
    """True when an update touches a campaign's cancel mark other than by setting it once while a cell is open."""
    touched = _changed(("cancelled_at", "cancelled_by_id"), differs)
    first = f"(OLD.cancelled_at IS NULL AND OLD.cancelled_by_id IS NULL AND EXISTS ({OPEN_CELLS}))"
    return f"({touched} AND NOT {first})"


MODE_TAGGED = "EXISTS (SELECT 1 FROM evaluator_episodetag WHERE mode_id = OLD.id)"
TAG_MESSAGE = "a tag is never changed or deleted: its removal is recorded on it once"
MODE_MESSAGE = "a failure mode is never changed, nor deleted while a tag names it"
CANCEL_MESSAGE = "the cancel mark of a campaign is set once, while a cell of it is open, and never changed"

SQLITE_CREATE = [
    f"""CREATE TRIGGER {TAG}_kept BEFORE UPDATE ON {TAG} FOR EACH ROW WHEN {_tag_rewritten("IS NOT")}
        BEGIN SELECT RAISE(ABORT, '{TAG_MESSAGE}'); END""",
    f"""CREATE TRIGGER {TAG}_no_delete BEFORE DELETE ON {TAG}
        BEGIN SELECT RAISE(ABORT, '{TAG_MESSAGE}'); END""",
    # SQLite's REPLACE deletes the row it displaces without DELETE triggers (recursive_triggers off).
    f"""CREATE TRIGGER {TAG}_no_replace BEFORE INSERT ON {TAG}
        FOR EACH ROW WHEN EXISTS (SELECT 1 FROM {TAG} WHERE id = NEW.id)
        BEGIN SELECT RAISE(ABORT, '{TAG_MESSAGE}'); END""",
    f"""CREATE TRIGGER {MODE}_kept BEFORE UPDATE ON {MODE} FOR EACH ROW WHEN {_changed(MODE_FIXED, "IS NOT")}
        BEGIN SELECT RAISE(ABORT, '{MODE_MESSAGE}'); END""",
    f"""CREATE TRIGGER {MODE}_no_delete BEFORE DELETE ON {MODE} FOR EACH ROW WHEN {MODE_TAGGED}
        BEGIN SELECT RAISE(ABORT, '{MODE_MESSAGE}'); END""",
    f"""CREATE TRIGGER {MODE}_no_replace BEFORE INSERT ON {MODE}
        FOR EACH ROW WHEN EXISTS (
          SELECT 1 FROM {MODE} WHERE id = NEW.id OR (benchmark = NEW.benchmark AND name = NEW.name))
        BEGIN SELECT RAISE(ABORT, '{MODE_MESSAGE}'); END""",
    f"""CREATE TRIGGER {CAMPAIGN}_cancel_kept BEFORE UPDATE ON {CAMPAIGN}
        FOR EACH ROW WHEN {_cancel_rewritten("IS NOT")} BEGIN SELECT RAISE(ABORT, '{CANCEL_MESSAGE}'); END""",
]
SQLITE_DROP = [
    f"DROP TRIGGER IF EXISTS {name}"
    for name in (
        f"{TAG}_kept",
        f"{TAG}_no_delete",
        f"{TAG}_no_replace",
        f"{MODE}_kept",
        f"{MODE}_no_delete",
        f"{MODE}_no_replace",
        f"{CAMPAIGN}_cancel_kept",
    )
]


def _postgres_guard(table: str, on: str, condition: str, message: str) -> list[str]:
    return [
        f"""CREATE FUNCTION {table}_{on}_guard() RETURNS trigger AS $$
            BEGIN
              IF {condition} THEN
                RAISE EXCEPTION '{message}' USING ERRCODE = 'integrity_constraint_violation';
              END IF;
              IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
              RETURN NEW;
            END $$ LANGUAGE plpgsql""",
        f"""CREATE TRIGGER {table}_{on}_guard BEFORE {on.upper()} ON {table}
            FOR EACH ROW EXECUTE FUNCTION {table}_{on}_guard()""",
    ]


GUARDS = [
    (TAG, "update", _tag_rewritten("IS DISTINCT FROM"), TAG_MESSAGE),
    (TAG, "delete", "TRUE", TAG_MESSAGE),
    (MODE, "update", _changed(MODE_FIXED, "IS DISTINCT FROM"), MODE_MESSAGE),
    (MODE, "delete", MODE_TAGGED, MODE_MESSAGE),
    (CAMPAIGN, "update", _cancel_rewritten("IS DISTINCT FROM"), CANCEL_MESSAGE),
]
POSTGRES_CREATE = [statement for guard in GUARDS for statement in _postgres_guard(*guard)] + [
    # Row triggers do not fire on TRUNCATE: tags are refused it while any is kept.
    f"""CREATE FUNCTION {TAG}_no_truncate() RETURNS trigger AS $$
        BEGIN
          IF EXISTS (SELECT 1 FROM {TAG}) THEN
            RAISE EXCEPTION '{TAG_MESSAGE}: TRUNCATE is refused' USING ERRCODE = 'integrity_constraint_violation';
          END IF;
          RETURN NULL;
        END $$ LANGUAGE plpgsql""",
    f"""CREATE TRIGGER {TAG}_no_truncate BEFORE TRUNCATE ON {TAG}
        FOR EACH STATEMENT EXECUTE FUNCTION {TAG}_no_truncate()""",
]
POSTGRES_DROP = [
    statement
    for table, on, _, _ in GUARDS
    for statement in (
        f"DROP TRIGGER IF EXISTS {table}_{on}_guard ON {table}",
        f"DROP FUNCTION IF EXISTS {table}_{on}_guard()",
    )
] + [f"DROP TRIGGER IF EXISTS {TAG}_no_truncate ON {TAG}", f"DROP FUNCTION IF EXISTS {TAG}_no_truncate()"]
TABLES = (TAG, MODE, CAMPAIGN)
