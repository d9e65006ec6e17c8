from importlib import import_module
from pathlib import Path

from django.apps import AppConfig
from django.conf import settings
from django.core import checks
from django.db.backends.signals import connection_created
from django.db.models.signals import post_migrate, pre_migrate

OWNER_ONLY_FILE, OWNER_ONLY_DIR = 0o600, 0o700


def keep_sqlite_private(sender, connection, **kwargs) -> None:
    """The SQLite database and its WAL files are readable by their owner only."""
    if connection.vendor != "sqlite":
        return
    name = str(connection.settings_dict["NAME"])
    for path in (Path(name), Path(name + "-wal"), Path(name + "-shm")):
        if path.is_file() and path.stat().st_mode & 0o077:
            path.chmod(OWNER_ONLY_FILE)


def policy_hosts_check(app_configs, **kwargs) -> list[checks.CheckMessage]:
    """`check --deploy`: a deployment names the hosts its policies may be served from (RSI_POLICY_HOSTS)."""
    if settings.RSI_POLICY_HOSTS:
        return []
    return [
        checks.Warning(
            "RSI_POLICY_HOSTS is not set: an operator may point a policy at any host the server can reach, and the "
            "evaluator records its replies",
            hint="set RSI_POLICY_HOSTS to the hosts your policy servers run on (names or name:port, comma-separated)",
            id="rsi.W001",
        )
    ]


def database_user_check(app_configs, **kwargs) -> list[checks.CheckMessage]:
    """`check --deploy`: the site's PostgreSQL user is no superuser, who could switch the immutability triggers off
    for its session (SET session_replication_role = replica) and change finished records."""
    from django.db import DatabaseError, connection

    if connection.vendor != "postgresql":
        return []
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user")
            user, superuser = cursor.fetchone()
    except DatabaseError as exc:
        return [checks.Warning(f"cannot ask PostgreSQL whether the site's user is a superuser: {exc}", id="rsi.W003")]
    if not superuser:
        return []
    return [
        checks.Warning(
            f"the database user {user!r} is a superuser: it can switch the immutability triggers off "
            "(session_replication_role = replica) and change finished attempts and their records",
            hint="connect as a plain role that owns the database (createuser without -s; docs/scale-out.md)",
            id="rsi.W002",
        )
    ]


class EvaluatorConfig(AppConfig):
    name = "evaluator"
    verbose_name = "RSI evaluator"
    default_auto_field = "django.db.models.BigAutoField"

    def import_models(self) -> None:
        # Django looks for an app's models at <app>.models; RSI's live with the rest of its records.
        self.models = self.apps.all_models[self.label]
        self.models_module = import_module("evaluator.records.models")

    def ready(self) -> None:
        from evaluator.records.roles import ensure_roles
        from evaluator.records.triggers import create_triggers, drop_triggers

        import_module("evaluator.web.admin")  # registers the models with the admin site

        # Evidence is readable by its owner only: the folder is made so before anything is written.
        media = Path(settings.MEDIA_ROOT)
        media.mkdir(parents=True, exist_ok=True)
        if media.stat().st_mode & 0o077:
            media.chmod(OWNER_ONLY_DIR)
        connection_created.connect(keep_sqlite_private)
        checks.register(policy_hosts_check, checks.Tags.security, deploy=True)
        checks.register(database_user_check, checks.Tags.security, deploy=True)
        pre_migrate.connect(drop_triggers, sender=self)
        post_migrate.connect(create_triggers, sender=self)
        post_migrate.connect(ensure_roles, sender=self)
