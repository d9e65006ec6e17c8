"""Database triggers: a finished attempt and its records cannot be changed or deleted.

The models refuse such writes too; the triggers also stop queryset updates, bulk writes
and raw SQL, so the rule holds below every view and admin action.
"""

from django.db import migrations

RECORD_TABLES = ("evaluator_decision", "evaluator_step", "evaluator_intervention", "evaluator_artifact")

SQLITE_FORWARD = [
    """CREATE TRIGGER evaluator_attempt_finished_no_update BEFORE UPDATE ON evaluator_attempt
       FOR EACH ROW WHEN OLD.status = 'finished'
       BEGIN SELECT RAISE(ABORT, 'finished attempt is immutable'); END""",
    """CREATE TRIGGER evaluator_attempt_finished_no_delete BEFORE DELETE ON evaluator_attempt
       FOR EACH ROW WHEN OLD.status = 'finished'
       BEGIN SELECT RAISE(ABORT, 'finished attempt cannot be deleted'); END""",
] + [
    f"""CREATE TRIGGER {table}_finished_no_{op.lower()} BEFORE {op} ON {table}
        FOR EACH ROW WHEN (SELECT status FROM evaluator_attempt WHERE id = {row}.attempt_id) = 'finished'
        BEGIN SELECT RAISE(ABORT, 'records of a finished attempt are immutable'); END"""
    for table in RECORD_TABLES
    for op, row in (("INSERT", "NEW"), ("UPDATE", "OLD"), ("DELETE", "OLD"))
]
SQLITE_REVERSE = ["DROP TRIGGER evaluator_attempt_finished_no_update", "DROP TRIGGER evaluator_attempt_finished_no_delete"] + [
    f"DROP TRIGGER {table}_finished_no_{op}" for table in RECORD_TABLES for op in ("insert", "update", "delete")
]

POSTGRES_FORWARD = [
    """CREATE FUNCTION evaluator_refuse_finished_attempt() RETURNS trigger AS $$
       BEGIN
         IF OLD.status = 'finished' THEN
           RAISE EXCEPTION 'finished attempt % is immutable', OLD.id USING ERRCODE = 'integrity_constraint_violation';
         END IF;
         IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;
         RETURN NEW;
       END $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER evaluator_attempt_finished_immutable BEFORE UPDATE OR DELETE ON evaluator_attempt
       FOR EACH ROW EXECUTE FUNCTION evaluator_refuse_finished_attempt()""",
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
POSTGRES_REVERSE = [f"DROP TRIGGER {table}_finished_immutable ON {table}" for table in RECORD_TABLES] + [
    "DROP TRIGGER evaluator_attempt_finished_immutable ON evaluator_attempt",
    "DROP FUNCTION evaluator_refuse_record_of_finished_attempt()",
    "DROP FUNCTION evaluator_refuse_finished_attempt()",
]

STATEMENTS = {"sqlite": (SQLITE_FORWARD, SQLITE_REVERSE), "postgresql": (POSTGRES_FORWARD, POSTGRES_REVERSE)}


def _run(direction: int):
    def run(apps, schema_editor):
        vendor = schema_editor.connection.vendor
        if vendor not in STATEMENTS:
            raise RuntimeError(f"no immutability triggers for database vendor {vendor!r}")
        for statement in STATEMENTS[vendor][direction]:
            schema_editor.execute(statement, params=None)  # "%" in PL/pgSQL is not a placeholder

    return run


class Migration(migrations.Migration):
    dependencies = [("evaluator", "0001_initial")]

    operations = [migrations.RunPython(_run(0), _run(1))]
