from django.apps import AppConfig
from django.db.models.signals import post_migrate, pre_migrate


class EvaluatorConfig(AppConfig):
    name = "evaluator"
    verbose_name = "RSI evaluator"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from evaluator.roles import ensure_roles
        from evaluator.triggers import create_triggers, drop_triggers

        pre_migrate.connect(drop_triggers, sender=self)
        post_migrate.connect(create_triggers, sender=self)
        post_migrate.connect(ensure_roles, sender=self)
