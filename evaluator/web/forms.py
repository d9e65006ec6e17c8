"""Forms that turn input into domain values; the protocol core has the last word on combinations."""

from __future__ import annotations

from pathlib import Path

from django import forms
from django.conf import settings

from evaluator.execution.launching import (
    NO_TASK,
    check_full_launch,
    do_launch_campaign,
    do_launch_full_campaign,
    full_plan,
    plan_problems,
    policy_record,
)
from evaluator.policies.specs import check_model_path, parse_policy_spec, under_model_root
from evaluator.policies.transports import spec_examples
from evaluator.protocol.budgets import full_chunk_calls, resolve_budget
from evaluator.protocol.catalogs import load_catalog
from evaluator.protocol.errors import LaunchRefused, ProtocolError
from evaluator.protocol.full_matrix import load_matrix
from evaluator.protocol.identity import (
    BUDGET_MODES,
    FULL_MATRIX_BENCHMARK,
    FULL_PROTOCOLS,
    INTERACTION_MODES,
    ProtocolConfig,
    configure,
)
from evaluator.protocol.labels import MAX_LABELS, MAX_VALUE_CHARS, InvalidLabel, check_labels, parse_labels
from evaluator.protocol.paired import DEFAULT_LEVEL, DEFAULT_MARGIN, LEVEL_RANGE, MARGIN_RANGE
from evaluator.protocol.registry import PROTOCOLS
from evaluator.protocol.seeds import MAX_SEEDS, check_cell_count, consecutive_seeds, parse_seed_list
from evaluator.readiness.verdicts import check_media_space, readiness
from evaluator.records.models import Benchmark, Campaign, Policy, Task
from evaluator.records.power_plans import sequential_preview
from evaluator.records.sequential import baseline_problems

BLANK = [("", "default")]


def _optional_int(label: str, help_text: str) -> forms.IntegerField:
    return forms.IntegerField(label=label, required=False, help_text=help_text)


class LaunchForm(forms.Form):
    name = forms.CharField(
        max_length=200,
        required=False,
        help_text="Optional; a name is made from the plan.",
        widget=forms.TextInput(attrs={"placeholder": "made from the plan"}),
    )
    benchmark = forms.ChoiceField()
    tasks = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, help_text="The chosen benchmark's tasks: tick each one."
    )
    all_tasks = forms.BooleanField(required=False, label="all tasks", help_text="Every task of the benchmark's scope.")
    seed = forms.IntegerField(
        label="base reset seed",
        help_text="The first seed; a whole number in [0, 2**32). A benchmark whose fast mode fixes it (SIMPLE: each "
        "task once, seed 20260907) fills it in when chosen.",
        error_messages={"invalid": "the reset seed must be a whole number in [0, 2**32)"},
    )
    repeats = forms.IntegerField(
        label="seeds per task",
        required=False,
        initial=1,
        min_value=1,
        max_value=MAX_SEEDS,
        help_text="N consecutive seeds from the base seed (default 1): one cell per (task, seed).",
    )
    seed_list = forms.CharField(
        label="or these seeds",
        required=False,
        max_length=20_000,
        help_text="e.g. 0, 7, 42: replaces the base seed and N. Frozen into the plan.",
    )
    policy = forms.CharField(
        max_length=500,
        widget=forms.TextInput(attrs={"placeholder": "a registered name, or http://HOST:PORT/act", "size": 40}),
        help_text=f"A registered name, or a spec: {spec_examples()}",
    )
    sensors = forms.ChoiceField(required=False, help_text="the chosen benchmark's sensor tracks; empty = its default")
    interaction_mode = forms.ChoiceField(choices=BLANK + [(m, m) for m in INTERACTION_MODES], required=False)
    action_rejection_feedback = forms.BooleanField(required=False, label="action-rejection feedback track")
    budget_mode = forms.ChoiceField(choices=BLANK + [(m, m) for m in BUDGET_MODES], required=False)
    horizon_multiplier = _optional_int("horizon multiplier", "1 (native) or 2 (extended); horizon mode only")
    max_policy_calls = _optional_int("max policy calls (C or D)", "")
    replan_interval = _optional_int("replan interval K", "the longest action prefix per decision")
    runner_step_cap = _optional_int("runner step cap", "")
    task_scope = forms.ChoiceField(required=False, help_text="the chosen benchmark's task scopes (SIMPLE: released-12)")
    full = forms.ChoiceField(
        label="native full matrix",
        required=False,
        choices=[
            ("", "none: the chosen tasks x seeds"),
            ("visual_matching", "Visual Matching (960 cells)"),
            ("variant_aggregation", "Variant Aggregation (1,992 cells)"),
        ],
        help_text="SimplerEnv: upstream's whole matrix, cell by cell, instead of the tasks and seeds above.",
    )
    families = forms.MultipleChoiceField(
        required=False, help_text="With a full matrix: only these families (default: all of them)."
    )
    against = forms.IntegerField(
        label="against baseline campaign",
        required=False,
        min_value=1,
        widget=forms.NumberInput(attrs={"placeholder": "none: a campaign of its own", "list": "baseline-choices"}),
        help_text="A finished campaign (pick one, or type its id): its cells and protocol are filled in; a sequential "
        "campaign runs its very cells in a random order and stops once the paired test decides (improved, regressed "
        "or no difference).",
    )
    level = forms.FloatField(
        required=False,
        min_value=LEVEL_RANGE[0],
        max_value=LEVEL_RANGE[1],
        help_text=f"With a baseline: the chance at most of a wrong verdict (default {DEFAULT_LEVEL}).",
        widget=forms.NumberInput(attrs={"placeholder": f"default {DEFAULT_LEVEL}", "step": "any"}),
    )
    margin = forms.FloatField(
        required=False,
        min_value=MARGIN_RANGE[0],
        max_value=MARGIN_RANGE[1],
        help_text=f"With a baseline: differences of success rate under this count as none (default {DEFAULT_MARGIN}).",
        widget=forms.NumberInput(attrs={"placeholder": f"default {DEFAULT_MARGIN}", "step": "any"}),
    )
    detect = forms.FloatField(
        label="difference to detect",
        required=False,
        min_value=-1,
        max_value=1,
        help_text="With a baseline: the preview says how many pairs this difference needs (B - A, e.g. 0.15).",
        widget=forms.NumberInput(attrs={"placeholder": "5, 10 and 20 points", "step": "any"}),
    )

    labels = forms.CharField(
        required=False,
        max_length=MAX_LABELS * (MAX_VALUE_CHARS + 42),
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "run=abc\nstep=5000\ncommit=1a2b3c4"}),
        help_text="One per line: name=value (the training run, the step, the git commit), or a name alone as a "
        "tag. They filter the campaigns, the leaderboards and learning curves; frozen with the plan.",
    )

    def __init__(self, *args, labels: dict | None = None, **kwargs):
        """`labels`: the API's object of labels, checked as it is (the page's box holds one label a line)."""
        super().__init__(*args, **kwargs)
        self.given_labels = labels
        self.fields["benchmark"].choices = [(b.name, _benchmark_label(b)) for b in Benchmark.objects.all()]
        groups: dict[str, list] = {}
        for task in Task.objects.filter(in_catalog=True).select_related("benchmark"):
            groups.setdefault(task.benchmark.name, []).append((task.name, task.name))
        # Grouped by benchmark: the page shows only the chosen benchmark's group.
        self.fields["tasks"].choices = list(groups.items())
        self.fields["tasks"].error_messages["invalid_choice"] = "unknown task %(value)s"
        # Each benchmark's sensor tracks and task scopes, grouped like the tasks: one track or scope per campaign.
        protocols = [PROTOCOLS[name] for name, _ in self.fields["benchmark"].choices if name in PROTOCOLS]
        self.fields["sensors"].choices = BLANK + [(p.family.benchmark, _options(p.family.sensors)) for p in protocols]
        self.fields["task_scope"].choices = BLANK + [(p.family.benchmark, _options(p.family.scopes)) for p in protocols]
        for name, what in (("sensors", "sensor track"), ("task_scope", "task scope")):
            self.fields[name].error_messages["invalid_choice"] = f"unknown {what} %(value)s"
        families = {f: f for protocol in FULL_PROTOCOLS for f in load_matrix(protocol).family_counts()}
        self.fields["families"].choices = list(families.items())

    def launch(self, user) -> Campaign:
        """Create the campaign of a valid form: Create runs every check the preview ran (check_launch) again."""
        data = self.cleaned_data
        if data.get("full"):  # never sequential: clean refuses a baseline with a full matrix
            return do_launch_full_campaign(
                name=data["name"] or data["full_plan"]["matrix"],
                protocol=data["full"],
                policy=data["policy"],
                config=data["config"],
                families=data["families"],
                user=user,
                labels=data["labels"],
            )
        return do_launch_campaign(
            name=data["name"] or _plan_name(data),
            benchmark=data["benchmark"],
            task_names=data["tasks"],
            seeds=data["seeds"],
            policy=data["policy"],
            config=data["config"],
            user=user,
            labels=data["labels"],
            against=data.get("baseline"),
            level=data["level"] if data.get("level") is not None else DEFAULT_LEVEL,
            margin=data["margin"] if data.get("margin") is not None else DEFAULT_MARGIN,
        )

    def preview(self) -> dict:
        """What a valid form would create, as the launch page previews it."""
        data = self.cleaned_data
        return {
            "config": data["config"],
            "budgets": data["budgets"],
            "seeds": data["seeds"],
            "cells": len(data["tasks"]) * len(data["seeds"]),
            "full": data.get("full_plan"),
            "sequential": sequential_preview(
                data.get("baseline"), data.get("level"), data.get("margin"), data.get("detect")
            ),
            "create_refused": create_refused(data["config"].benchmark),
        }

    def clean_seed(self) -> int:
        seed = self.cleaned_data["seed"]
        if not 0 <= seed < 2**32:
            raise forms.ValidationError(f"the reset seed must be in [0, 2**32), got {seed}")
        return seed

    def clean_labels(self) -> dict[str, str]:
        try:
            if self.given_labels is not None:
                return check_labels(self.given_labels)
            return parse_labels(self.cleaned_data["labels"].splitlines())
        except InvalidLabel as exc:
            raise forms.ValidationError(exc.reasons) from None

    def clean_policy(self) -> str:
        value = self.cleaned_data["policy"].strip()
        if not Policy.objects.filter(name=value).exists():
            value = under_model_root(value, Path(settings.RSI_MODEL_ROOT))
            try:
                check_model_path(value, Path(settings.RSI_MODEL_ROOT))
                parse_policy_spec(value)
            except ProtocolError as exc:
                raise forms.ValidationError(str(exc)) from None
        return value

    def clean(self) -> dict:
        """Every problem at once: each part is checked as far as the fields it needs are valid."""
        data = super().clean()
        problems: list[str] = self._baseline(data)
        config = self._config(data, problems)
        seeds = self._seeds(data)
        tasks = data.get("tasks") or []
        if data.get("full"):
            return self._clean_full(data, config, problems)
        if config is not None and data.get("all_tasks"):
            catalog = load_catalog(config.benchmark)
            tasks = [name for name in catalog.tasks if _in_scope(catalog, config, name)]
        data["tasks"] = tasks
        if config is not None:
            data["config"], data["budgets"] = config, _budgets(config, tasks)
            # check_launch's checks: the seeds' as a field (above), the rest here.
            if seeds is not None:
                catalog = load_catalog(config.benchmark)
                for check in (catalog.check_seeds, lambda seeds: check_cell_count(len(tasks), len(seeds))):
                    try:
                        check(seeds)
                    except ProtocolError as exc:
                        problems.append(str(exc))
            if "policy" in data:
                policy = policy_record(data["policy"])
                found = map(str, plan_problems(config.benchmark, tasks, policy, config, ready=False))
                # Tasks that were named but are unknown are the tasks field's own error, not "none selected".
                problems += [p for p in found if not (p == NO_TASK and "tasks" in self.errors)]
            if data.get("baseline") and seeds is not None:
                problems += baseline_problems(data["baseline"], config.benchmark, tasks, seeds, config.protocol_id)
        for problem in dict.fromkeys(problems):
            self.add_error(None, problem)
        data["seeds"] = seeds
        return data

    def _clean_full(self, data: dict, config: ProtocolConfig | None, problems: list[str]) -> dict:
        """A full matrix: its cells replace the tasks and seeds; Create runs the same checks (check_full_launch)."""
        if config is not None and "policy" in data:
            try:
                policy = policy_record(data["policy"])
                matrix, cells = check_full_launch(data["full"], data["families"], policy, config, ready=False)
            except (LaunchRefused, ProtocolError) as exc:
                problems += getattr(exc, "problems", None) or [str(exc)]
            else:
                data["tasks"] = list(dict.fromkeys(cell.task for cell in cells))
                data["seeds"] = (cells[0].seed,)
                data["config"], data["budgets"] = config, _budgets(config, data["tasks"])
                data["full_plan"] = {"matrix": matrix.title, **full_plan(cells)}
        for problem in dict.fromkeys(problems):
            self.add_error(None, problem)
        return data

    def _baseline(self, data: dict) -> list[str]:
        """The campaign a sequential plan runs against (data["baseline"]), or why it cannot be one."""
        against = data.get("against")
        if against is None:
            if data.get("level") is not None or data.get("margin") is not None:
                return ["a level and margin set a sequential campaign's test: give the baseline campaign too"]
            if data.get("detect") is not None:
                return ["a difference to detect is planned against a baseline: give the baseline campaign too"]
            return []
        baseline = Campaign.objects.select_related("protocol").filter(pk=against).first()
        if baseline is None:
            return [f"no campaign {against} to run against"]
        if data.get("full"):
            return ["a sequential campaign pairs task-and-seed cells: it cannot run a full matrix"]
        data["baseline"] = baseline
        return []

    def _config(self, data: dict, problems: list[str]) -> ProtocolConfig | None:
        if any(name in self.errors for name in CONFIG_FIELDS) or "benchmark" not in data:
            return None
        full = {}
        if data.get("full"):
            full = {"full_protocol": data["full"], "matrix_sha": load_matrix(data["full"]).sha256[:12]}
        try:
            return configure(
                data["benchmark"],
                **full,
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
        except ProtocolError as exc:
            problems.append(str(exc))
            return None

    def _seeds(self, data: dict) -> tuple[int, ...] | None:
        try:
            if data.get("seed_list", "").strip():
                return parse_seed_list(data["seed_list"])
            if "seed" in data and "repeats" in data:
                return consecutive_seeds(data["seed"], data["repeats"] or 1)
        except ProtocolError as exc:
            self.add_error("seed_list" if data.get("seed_list", "").strip() else "repeats", str(exc))
        return None


# The protocol options of a plan, named as the configuration names them (ProtocolConfig.as_dict).
PROTOCOL_SETTINGS = (
    "sensors",
    "interaction_mode",
    "action_rejection_feedback",
    "budget_mode",
    "horizon_multiplier",
    "max_policy_calls",
    "replan_interval",
    "runner_step_cap",
    "task_scope",
)
CONFIG_FIELDS = ("benchmark", *PROTOCOL_SETTINGS, "full")

# The launch form's fields in sections, in the order the page shows them.
LAUNCH_SECTIONS = (
    ("plan", "What to run", ("name", "benchmark", "tasks", "all_tasks", "seed", "repeats", "seed_list", "labels")),
    ("policy", "Policy", ("policy",)),
    ("track", "Protocol track", ("sensors", "task_scope", "interaction_mode", "action_rejection_feedback")),
    (
        "budgets",
        "Budgets",
        ("budget_mode", "horizon_multiplier", "max_policy_calls", "replan_interval", "runner_step_cap"),
    ),
    ("full", "Native full matrix", ("full", "families")),
    ("sequential", "Sequential test against a baseline (optional)", ("against", "level", "margin", "detect")),
)


def applies(name: str, benchmark: str) -> bool:
    """Whether a launch field means anything for a benchmark: the form shows only the chosen benchmark's fields."""
    fam = PROTOCOLS[benchmark].family
    return {
        "full": benchmark == FULL_MATRIX_BENCHMARK,
        "families": benchmark == FULL_MATRIX_BENCHMARK,
        "task_scope": len(fam.scopes) > 1,
        "interaction_mode": fam.agent_method,
        "action_rejection_feedback": not fam.feedback_always_on,
        "horizon_multiplier": fam.extended_horizon,
    }.get(name, True)


def launch_sections(form: LaunchForm) -> list[dict]:
    """The sections of the launch page, each field with the benchmarks it applies to ("" = all of them)."""
    benchmarks = [name for name, _ in form.fields["benchmark"].choices if name in PROTOCOLS]
    sections = []
    for key, title, names in LAUNCH_SECTIONS:
        fields = []
        for name in names:
            only = [b for b in benchmarks if applies(name, b)]
            fields.append({"field": form[name], "benchmarks": "" if only == benchmarks else " ".join(only)})
        shown_for = {b for f in fields for b in (f["benchmarks"].split() or benchmarks)}
        sections.append(
            {
                "key": key,
                "title": title,
                "fields": fields,
                "benchmarks": " ".join(b for b in benchmarks if b in shown_for),
            }
        )
    return sections


def launch_defaults() -> dict[str, dict]:
    """Per benchmark, what each protocol field left empty stands for (the page shows it as the placeholder), per
    budget mode where it depends on it, and the default budget mode."""
    defaults = {}
    for name in Benchmark.objects.values_list("name", flat=True):
        if name not in PROTOCOLS:
            continue
        base = configure(name)
        defaults[name] = {
            "budget_mode": base.budget_mode,
            "choices": {
                "sensors": base.sensors,
                "interaction_mode": base.interaction_mode,
                "task_scope": base.task_scope,
            },
            "budgets": {
                mode: {
                    key: str(getattr(config, key))
                    for key in ("horizon_multiplier", "max_policy_calls", "replan_interval", "runner_step_cap")
                }
                for mode, config in ((mode, configure(name, budget_mode=mode)) for mode in BUDGET_MODES)
            },
        }
    return defaults


def create_refused(benchmark: str) -> list[str]:
    """Why Create would be refused though the plan is sound: this executor cannot run the benchmark (the verdict kept
    now; waited for only when there has never been one, which the server asks for as it starts), or the media root
    is too full. Empty: Create may go ahead."""
    problems = []
    verdict = readiness(benchmark)
    if not verdict.ready:
        problems.append(f"this executor cannot run {benchmark}: {verdict.reason}")
    try:
        check_media_space()
    except ProtocolError as exc:
        problems.append(str(exc))
    return problems


def _plan_name(data: dict) -> str:
    seeds = data["seeds"]
    seed_text = f"seed {seeds[0]}" if len(seeds) == 1 else f"{len(seeds)} seeds from {seeds[0]}"
    tasks = data["tasks"]
    task_text = ", ".join(tasks) if len(tasks) <= 3 else f"{len(tasks)} tasks"
    against = f", against campaign {data['baseline'].pk}" if data.get("baseline") else ""
    return f"{data['benchmark']}: {task_text} ({seed_text}){against}"


def _in_scope(catalog, config: ProtocolConfig, name: str) -> bool:
    try:
        catalog.task_in_scope(config, name)
    except ProtocolError:
        return False
    return True


def _budgets(config: ProtocolConfig, tasks: list[str]) -> list[tuple]:
    """Per task in scope: its budget, the full-chunk calls to reach its horizon, whether it can."""
    catalog = load_catalog(config.benchmark)
    rows = []
    for name in tasks:
        if name in catalog.tasks and _in_scope(catalog, config, name):
            budget = resolve_budget(config, catalog.tasks[name].native_horizon)
            calls = full_chunk_calls(budget.evaluation_horizon, budget.replan_interval)
            rows.append((name, budget, calls, budget.reaches(budget.evaluation_horizon)))
    return rows


def _benchmark_label(benchmark: Benchmark) -> str:
    """The benchmark's title, marked when this executor cannot run it (its plans still preview)."""
    verdict = readiness(benchmark.name, wait=False)
    return benchmark.title if verdict.ready or verdict.checking else f"{benchmark.title} (cannot run here)"


def fast_mode_seeds() -> dict[str, int]:
    """The benchmarks whose fast mode fixes the reset seed (SIMPLE: each task once with seed 20260907): the
    launch page puts that seed in the form when one of them is chosen."""
    seeds = {}
    for name in Benchmark.objects.values_list("name", flat=True):
        fast = load_catalog(name).settings.get("fast_mode") if name in PROTOCOLS else None
        if fast is not None:
            seeds[name] = fast["seed"]
    return seeds


def _options(values: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(value, value) for value in values]
