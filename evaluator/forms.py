"""Forms that turn input into domain values; the protocol core has the last word on combinations."""

from __future__ import annotations

from pathlib import Path

from django import forms
from django.conf import settings

from evaluator.models import Benchmark, Policy, Task
from evaluator.policies.specs import check_model_path, parse_policy_spec
from evaluator.protocol.budgets import full_chunk_calls, resolve_budget
from evaluator.protocol.catalogs import load_catalog
from evaluator.protocol.errors import ProtocolError
from evaluator.protocol.identity import BUDGET_MODES, INTERACTION_MODES, configure

BLANK = [("", "default")]


def _optional_int(label: str, help_text: str) -> forms.IntegerField:
    return forms.IntegerField(label=label, required=False, help_text=help_text)


class LaunchForm(forms.Form):
    name = forms.CharField(max_length=200, required=False, help_text="Optional; a name is made from the plan.")
    benchmark = forms.ChoiceField()
    tasks = forms.MultipleChoiceField(help_text="Cells of the plan, one per task.")
    seed = forms.IntegerField(
        label="reset seed",
        help_text="Fixed with the plan; a whole number in [0, 2**32).",
        error_messages={"invalid": "the reset seed must be a whole number in [0, 2**32)"},
    )
    policy = forms.CharField(
        max_length=500,
        help_text="A registered name, or a spec: http://HOST:PORT/act, openpi+ws://HOST:PORT, torchscript:PATH, "
        "openai+http://HOST:PORT/v1?model=NAME",
    )
    sensors = forms.CharField(required=False, help_text="e.g. rgb, rgb-qpos, privileged-state; empty = default")
    interaction_mode = forms.ChoiceField(choices=BLANK + [(m, m) for m in INTERACTION_MODES], required=False)
    action_rejection_feedback = forms.BooleanField(required=False, label="action-rejection feedback track")
    budget_mode = forms.ChoiceField(choices=BLANK + [(m, m) for m in BUDGET_MODES], required=False)
    horizon_multiplier = _optional_int("horizon multiplier", "1 (native) or 2 (extended); horizon mode only")
    max_policy_calls = _optional_int("max policy calls (C or D)", "")
    replan_interval = _optional_int("replan interval K", "the longest action prefix per decision")
    runner_step_cap = _optional_int("runner step cap", "")
    task_scope = forms.CharField(required=False, help_text="SIMPLE only: default or released-12")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["benchmark"].choices = [(b.name, b.title) for b in Benchmark.objects.all()]
        self.fields["tasks"].choices = [
            (t.name, f"{t.benchmark.name} / {t.name}")
            for t in Task.objects.filter(in_catalog=True).select_related("benchmark")
        ]
        self.fields["tasks"].error_messages["invalid_choice"] = "unknown task %(value)s"

    def clean_seed(self) -> int:
        seed = self.cleaned_data["seed"]
        if not 0 <= seed < 2**32:
            raise forms.ValidationError(f"the reset seed must be in [0, 2**32), got {seed}")
        return seed

    def clean_policy(self) -> str:
        value = self.cleaned_data["policy"].strip()
        if not Policy.objects.filter(name=value).exists():
            try:
                check_model_path(value, Path(settings.RSI_MODEL_ROOT))
                parse_policy_spec(value)
            except ProtocolError as exc:
                raise forms.ValidationError(str(exc)) from None
        return value

    def clean(self) -> dict:
        data = super().clean()
        if self.errors:
            return data
        try:
            config = configure(
                data["benchmark"],
                sensors=data["sensors"] or None,
                interaction_mode=data["interaction_mode"] or None,
                action_rejection_feedback=data["action_rejection_feedback"],
                budget_mode=data["budget_mode"] or None,
                horizon_multiplier=data["horizon_multiplier"],
                max_policy_calls=data["max_policy_calls"],
                replan_interval=data["replan_interval"],
                runner_step_cap=data["runner_step_cap"],
                task_scope=data["task_scope"] or None,
            )
            catalog = load_catalog(config.benchmark)
            budgets = []
            for name in data["tasks"]:
                budget = resolve_budget(config, catalog.task_in_scope(config, name).native_horizon)
                budgets.append(
                    (
                        name,
                        budget,
                        full_chunk_calls(budget.evaluation_horizon, budget.replan_interval),
                        budget.reaches(budget.evaluation_horizon),
                    )
                )
        except ProtocolError as exc:
            raise forms.ValidationError(str(exc)) from None
        data["config"] = config
        data["budgets"] = budgets
        return data
