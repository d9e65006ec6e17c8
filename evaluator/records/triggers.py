"""Database triggers: a finished attempt, its records and what its plan points to cannot be changed or deleted (and,
from records/mark_triggers.py, the tags, failure modes and cancel marks people put on them).

The models refuse such writes too; the triggers also stop queryset updates, bulk writes and
raw SQL, so the rule holds below every view and admin action. They are dropped before each
`migrate` and created again after it: SQLite rebuilds a table to alter it, which would
otherwise lose the triggers on it and break those that name it.
"""

from django.db import connections, models

from evaluator.records import mark_triggers as marks
from evaluator.records.models import Campaign, Policy, ProtocolIdentity, Task

RECORD_TABLES = ("evaluator_decision", "evaluator_step", "evaluator_intervention", "evaluator_artifact")

# SQLite's REPLACE (INSERT OR REPLACE, REPLACE INTO) deletes the conflicting row without firing
# DELETE triggers unless recursive_triggers is on, which a raw connection need not set. So an
# insert that would displace a finished attempt, or a record of one, through any unique key is
# refused before it happens.
SQLITE_CREATE = [
    """CREATE TRIGGER evaluator_attempt_finished_no_insert BEFORE INSERT ON evaluator_attempt
       FOR EACH ROW WHEN EXISTS (
         SELECT 1 FROM evaluator_attempt WHERE status = 'finished' AND (
           id = NEW.id OR (rerun_of_id IS NULL AND NEW.rerun_of_id IS NULL
                           AND campaign_id = NEW.campaign_id AND cell_index = NEW.cell_index)))
       BEGIN SELECT RAISE(ABORT, 'finished attempt is immutable'); END""",
    # A cell a sequential campaign left unrun is final too: it can neither start later nor go.
    """CREATE TRIGGER evaluator_attempt_finished_no_update BEFORE UPDATE ON evaluator_attempt
       FOR EACH ROW WHEN OLD.status IN ('finished', 'not_run')
       BEGIN SELECT RAISE(ABORT, 'finished attempt is immutable'); END""",
    """CREATE TRIGGER evaluator_attempt_finished_no_delete BEFORE DELETE ON evaluator_attempt
       FOR EACH ROW WHEN OLD.status IN ('finished', 'not_run')
       BEGIN SELECT RAISE(ABORT, 'finished attempt cannot be deleted'); END""",
] + [
    f"""CREATE TRIGGER {table}_finished_no_{op.lower()} BEFORE {op} ON {table}
        FOR EACH ROW WHEN (SELECT status FROM evaluator_attempt WHERE id = {row}.attempt_id) = 'finished'{extra}
        BEGIN SELECT RAISE(ABORT, 'records of a finished attempt are immutable'); END"""
    for table in RECORD_TABLES
    for op, row, extra in (
        (
            "INSERT",
            "NEW",
            f""" OR EXISTS (SELECT 1 FROM {table} r JOIN evaluator_attempt a ON a.id = r.attempt_id
                              WHERE r.id = NEW.id AND a.status = 'finished')""",
        ),
        ("UPDATE", "OLD", ""),
        ("DELETE", "OLD", ""),
    )
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS evaluator_attempt_finished_no_insert",
    "DROP TRIGGER IF EXISTS evaluator_attempt_finished_no_update",
    "DROP TRIGGER IF EXISTS evaluator_attempt_finished_no_delete",
] + [
    f"DROP TRIGGER IF EXISTS {table}_finished_no_{op}"
    for table in RECORD_TABLES
    for op in ("insert", "update", "delete")
]

POSTGRES_CREATE = [
    """CREATE FUNCTION evaluator_refuse_finished_attempt() RETURNS trigger AS $$
       BEGIN
         IF OLD.status IN ('finished', 'not_run') THEN
           RAISE EXCEPTION 'finished attempt % is immutable', OLD.id USING ERRCODE = 'integrity_constraint_violation';
         END IF;
         IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
         RETURN NEW;
       END $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER evaluator_attempt_finished_immutable BEFORE UPDATE OR DELETE ON evaluator_attempt
       FOR EACH ROW EXECUTE FUNCTION evaluator_refuse_finished_attempt()""",
    # An upsert (INSERT ... ON CONFLICT DO UPDATE) meets the UPDATE trigger; this refuses the insert first.
    """CREATE FUNCTION evaluator_refuse_displacing_finished_attempt() RETURNS trigger AS $$
       BEGIN
         IF EXISTS (SELECT 1 FROM evaluator_attempt WHERE id = NEW.id AND status = 'finished') THEN
           RAISE EXCEPTION 'finished attempt % is immutable', NEW.id USING ERRCODE = 'integrity_constraint_violation';
         END IF;
         RETURN NEW;
       END $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER evaluator_attempt_finished_no_insert BEFORE INSERT ON evaluator_attempt
       FOR EACH ROW EXECUTE FUNCTION evaluator_refuse_displacing_finished_attempt()""",
    """CREATE FUNCTION evaluator_refuse_record_of_finished_attempt() RETURNS trigger AS $$
       DECLARE target bigint;
       BEGIN
         IF TG_OP = 'INSERT' THEN target := NEW.attempt_id; ELSE target := OLD.attempt_id; END IF;
         IF (SELECT status FROM evaluator_attempt WHERE id = target) = 'finished' THEN
           RAISE EXCEPTION 'records of finished attempt % are immutable', target
             USING ERRCODE = 'integrity_constraint_violation';
         END IF;
         IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
         RETURN NEW;
       END $$ LANGUAGE plpgsql""",
] + [
    f"""CREATE TRIGGER {table}_finished_immutable BEFORE INSERT OR UPDATE OR DELETE ON {table}
        FOR EACH ROW EXECUTE FUNCTION evaluator_refuse_record_of_finished_attempt()"""
    for table in RECORD_TABLES
]
POSTGRES_DROP = [f"DROP TRIGGER IF EXISTS {table}_finished_immutable ON {table}" for table in RECORD_TABLES] + [
    "DROP TRIGGER IF EXISTS evaluator_attempt_finished_immutable ON evaluator_attempt",
    "DROP TRIGGER IF EXISTS evaluator_attempt_finished_no_insert ON evaluator_attempt",
    "DROP FUNCTION IF EXISTS evaluator_refuse_displacing_finished_attempt()",
    "DROP FUNCTION IF EXISTS evaluator_refuse_record_of_finished_attempt()",
    "DROP FUNCTION IF EXISTS evaluator_refuse_finished_attempt()",
]

# Rows a frozen plan points to: the columns that say what ran (the models' lists: field attnames are
# the column names), and the query that finds a row referenced ({row}: the row's alias; None: always,
# for a campaign's plan). A referenced row can neither change nor go: not by UPDATE, not by DELETE (a
# raw SQLite connection may run with foreign keys off), not displaced by SQLite's REPLACE, which deletes
# without DELETE triggers when recursive_triggers is off.
FROZEN = {
    Campaign._meta.db_table: (Campaign.PLAN_FIELDS, None),
    Task._meta.db_table: (Task.FROZEN_FIELDS, "SELECT 1 FROM evaluator_attempt WHERE task_id = {row}.id"),
    Policy._meta.db_table: (Policy.FROZEN_FIELDS, "SELECT 1 FROM evaluator_campaign WHERE policy_id = {row}.id"),
    ProtocolIdentity._meta.db_table: (
        ProtocolIdentity.FROZEN_FIELDS,
        "SELECT 1 FROM evaluator_campaign WHERE protocol_id = {row}.id",
    ),
}


def _unique_keys(model) -> list[tuple[str, ...]]:
    """The columns of each key a REPLACE can conflict on: the primary key, unique fields, unique constraints."""
    keys = [(field.column,) for field in model._meta.local_fields if field.unique]
    keys += [
        tuple(model._meta.get_field(name).column for name in constraint.fields)
        for constraint in model._meta.constraints
        if isinstance(constraint, models.UniqueConstraint) and constraint.fields
    ]
    return keys


FROZEN_KEYS = {model._meta.db_table: _unique_keys(model) for model in (Campaign, Task, Policy, ProtocolIdentity)}


def _referenced(table: str, row: str) -> str:
    """SQL that is true when the row `row` of a frozen-plan table is referenced."""
    referenced = FROZEN[table][1]
    return f"EXISTS ({referenced.format(row=row)})" if referenced else "TRUE"


def _changed(table: str, differs: str) -> str:
    """SQL that is true when an update changes a column that says what ran (`differs`: the dialect's IS NOT)."""
    return "(" + " OR ".join(f"OLD.{column} {differs} NEW.{column}" for column in FROZEN[table][0]) + ")"


def _displaced(table: str) -> str:
    """SQL that is true when an insert into `table` would displace a referenced row through any unique key."""
    conflict = " OR ".join(
        "(" + " AND ".join(f"displaced.{column} = NEW.{column}" for column in key) + ")" for key in FROZEN_KEYS[table]
    )
    return f"EXISTS (SELECT 1 FROM {table} AS displaced WHERE ({conflict}) AND {_referenced(table, 'displaced')})"


FROZEN_MESSAGE = "part of a frozen plan: immutable"
# Only a run creates and finishes evidence: an attempt starts pending, and finishes with its manifest.
SQLITE_CREATE += [
    """CREATE TRIGGER evaluator_attempt_created_pending BEFORE INSERT ON evaluator_attempt
       FOR EACH ROW WHEN NEW.status != 'pending'
       BEGIN SELECT RAISE(ABORT, 'an attempt is created pending: only its run finishes it'); END""",
    """CREATE TRIGGER evaluator_attempt_finished_with_manifest BEFORE UPDATE ON evaluator_attempt
       FOR EACH ROW WHEN NEW.status = 'finished' AND OLD.status != 'finished' AND NOT EXISTS (
         SELECT 1 FROM evaluator_artifact WHERE attempt_id = NEW.id AND kind = 'manifest')
       BEGIN SELECT RAISE(ABORT, 'a finished attempt has its evidence manifest'); END""",
] + [
    statement
    for table in FROZEN
    for statement in (
        f"""CREATE TRIGGER {table}_frozen BEFORE UPDATE ON {table}
            FOR EACH ROW WHEN {_changed(table, "IS NOT")} AND {_referenced(table, "OLD")}
            BEGIN SELECT RAISE(ABORT, '{table} row {FROZEN_MESSAGE}'); END""",
        f"""CREATE TRIGGER {table}_frozen_no_insert BEFORE INSERT ON {table}
            FOR EACH ROW WHEN {_displaced(table)}
            BEGIN SELECT RAISE(ABORT, '{table} row {FROZEN_MESSAGE}'); END""",
        f"""CREATE TRIGGER {table}_frozen_no_delete BEFORE DELETE ON {table}
            FOR EACH ROW WHEN {_referenced(table, "OLD")}
            BEGIN SELECT RAISE(ABORT, '{table} row {FROZEN_MESSAGE}'); END""",
    )
]
SQLITE_DROP += [
    "DROP TRIGGER IF EXISTS evaluator_attempt_created_pending",
    "DROP TRIGGER IF EXISTS evaluator_attempt_finished_with_manifest",
] + [
    f"DROP TRIGGER IF EXISTS {table}_frozen{suffix}" for table in FROZEN for suffix in ("", "_no_insert", "_no_delete")
]
POSTGRES_CREATE += [
    """CREATE FUNCTION evaluator_attempt_from_its_run() RETURNS trigger AS $$
       BEGIN
         IF TG_OP = 'INSERT' AND NEW.status != 'pending' THEN
           RAISE EXCEPTION 'an attempt is created pending: only its run finishes it'
             USING ERRCODE = 'integrity_constraint_violation';
         END IF;
         IF TG_OP = 'UPDATE' AND NEW.status = 'finished' AND OLD.status != 'finished' AND NOT EXISTS (
             SELECT 1 FROM evaluator_artifact WHERE attempt_id = NEW.id AND kind = 'manifest') THEN
           RAISE EXCEPTION 'a finished attempt has its evidence manifest'
             USING ERRCODE = 'integrity_constraint_violation';
         END IF;
         RETURN NEW;
       END $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER evaluator_attempt_from_its_run BEFORE INSERT OR UPDATE ON evaluator_attempt
       FOR EACH ROW EXECUTE FUNCTION evaluator_attempt_from_its_run()""",
] + [
    statement
    for table in FROZEN
    for statement in (
        f"""CREATE FUNCTION {table}_frozen() RETURNS trigger AS $$
            BEGIN
              IF TG_OP = 'DELETE' THEN
                IF {_referenced(table, "OLD")} THEN
                  RAISE EXCEPTION '{table} row % {FROZEN_MESSAGE}', OLD.id
                    USING ERRCODE = 'integrity_constraint_violation';
                END IF;
                RETURN OLD;
              END IF;
              IF {_changed(table, "IS DISTINCT FROM")} AND {_referenced(table, "OLD")} THEN
                RAISE EXCEPTION '{table} row % {FROZEN_MESSAGE}', OLD.id
                  USING ERRCODE = 'integrity_constraint_violation';
              END IF;
              RETURN NEW;
            END $$ LANGUAGE plpgsql""",
        f"""CREATE TRIGGER {table}_frozen BEFORE UPDATE OR DELETE ON {table}
            FOR EACH ROW EXECUTE FUNCTION {table}_frozen()""",
    )
]
# Row triggers do not fire on TRUNCATE: a statement trigger on every guarded table refuses it while the
# table holds a row the rules above keep (CASCADE fires it on each table it would empty).
KEPT = {
    "evaluator_attempt": "kept.status = 'finished'",
    **{
        table: "EXISTS (SELECT 1 FROM evaluator_attempt WHERE id = kept.attempt_id AND status = 'finished')"
        for table in RECORD_TABLES
    },
    **{table: _referenced(table, "kept") for table in FROZEN},
}
POSTGRES_CREATE += [
    statement
    for table, kept in KEPT.items()
    for statement in (
        f"""CREATE FUNCTION {table}_no_truncate() RETURNS trigger AS $$
            BEGIN
              IF EXISTS (SELECT 1 FROM {table} AS kept WHERE {kept}) THEN
                RAISE EXCEPTION '{table} holds evidence of finished attempts: TRUNCATE is refused'
                  USING ERRCODE = 'integrity_constraint_violation';
              END IF;
              RETURN NULL;
            END $$ LANGUAGE plpgsql""",
        f"""CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
            FOR EACH STATEMENT EXECUTE FUNCTION {table}_no_truncate()""",
    )
]
POSTGRES_DROP += (
    [
        "DROP TRIGGER IF EXISTS evaluator_attempt_from_its_run ON evaluator_attempt",
        "DROP FUNCTION IF EXISTS evaluator_attempt_from_its_run()",
    ]
    + [
        s
        for table in FROZEN
        for s in (f"DROP TRIGGER IF EXISTS {table}_frozen ON {table}", f"DROP FUNCTION IF EXISTS {table}_frozen()")
    ]
    + [
        s
        for table in KEPT
        for s in (
            f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}",
            f"DROP FUNCTION IF EXISTS {table}_no_truncate()",
        )
    ]
)

STATEMENTS = {
    "sqlite": (SQLITE_CREATE + marks.SQLITE_CREATE, SQLITE_DROP + marks.SQLITE_DROP),
    "postgresql": (POSTGRES_CREATE + marks.POSTGRES_CREATE, POSTGRES_DROP + marks.POSTGRES_DROP),
}
TABLES = ("evaluator_attempt", *RECORD_TABLES, *FROZEN, *marks.TABLES)


def _run(using: str, create: bool) -> None:
    db = connections[using]
    if db.vendor not in STATEMENTS:
        raise RuntimeError(f"no immutability triggers for database vendor {db.vendor!r}")
    if not set(TABLES) <= set(db.introspection.table_names()):
        return  # nothing to guard yet
    create_statements, drop_statements = STATEMENTS[db.vendor]
    with db.cursor() as cursor:
        for statement in drop_statements + (create_statements if create else []):
            cursor.execute(statement)  # no parameters: "%" in PL/pgSQL is not a placeholder


def drop_triggers(sender, using: str = "default", **kwargs) -> None:
    _run(using, create=False)


def create_triggers(sender, using: str = "default", **kwargs) -> None:
    _run(using, create=True)
