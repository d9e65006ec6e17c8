"""The launch form's "Check policy" and the API's policy check: who may make the call, and on what. The call itself
is evaluator/running/policy_check.py's; it is made in the request, under the policy's own deadline per call, and
leaves no record (the policy of a new spec is not saved either)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from evaluator.execution.launching import policy_problems, policy_record
from evaluator.policies.specs import check_model_path, under_model_root
from evaluator.protocol.catalogs import TaskSpec, load_catalog
from evaluator.protocol.errors import LaunchRefused, ProtocolError
from evaluator.protocol.identity import ProtocolConfig, configure
from evaluator.records.roles import check_can
from evaluator.running.policy_check import PolicyCheck, check_policy


@dataclass(frozen=True)
class CheckPlan:
    spec: str
    settings: dict
    config: ProtocolConfig
    task: TaskSpec


def check_policy_check(
    user, policy: str, benchmark: str, task: str = "", sensors: str = "", replan_interval: int | None = None
) -> CheckPlan:
    """What the check would call, or every reason it may not (LaunchRefused holds each)."""
    check_can(user, "launch_campaign")
    problems: list[ProtocolError] = []
    config = task_spec = None
    try:
        config = configure(benchmark, sensors=sensors or None, replan_interval=replan_interval)
    except ProtocolError as exc:
        problems.append(exc)
    if config is not None:
        catalog = load_catalog(benchmark)
        try:
            task_spec = catalog.task_in_scope(config, task) if task else next(iter(catalog.tasks.values()))
        except ProtocolError as exc:
            problems.append(exc)
    record = None
    try:
        # The model root is checked before the folder is read and hashed (policy_record hashes it).
        check_model_path(under_model_root(policy.strip(), settings.RSI_MODEL_ROOT), Path(settings.RSI_MODEL_ROOT))
        record = policy_record(policy.strip())
    except ProtocolError as exc:
        problems.append(exc)
    if record is not None and task_spec is not None:
        # The launch's own checks: a policy the launch would refuse is never called.
        problems += policy_problems(record, config, [task_spec])
    if problems:
        raise LaunchRefused(problems)
    return CheckPlan(record.spec, record.settings, config, task_spec)


def do_check_policy(user, **request) -> PolicyCheck:
    plan = check_policy_check(user, **request)
    return check_policy(plan.spec, plan.settings, plan.config, plan.task)
