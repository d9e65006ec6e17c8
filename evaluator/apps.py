from django.apps import AppConfig


class EvaluatorConfig(AppConfig):
    name = "evaluator"
    verbose_name = "RSI evaluator"
    default_auto_field = "django.db.models.BigAutoField"
