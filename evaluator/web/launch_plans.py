"""A campaign's plan as the launch form and the API take it: the API's `plan`, the launch form filled from it ("Run
another policy on these cells"), and the finished campaigns the baseline picker offers with theirs."""

from __future__ import annotations

from evaluator.records.leaderboards import finished_campaigns
from evaluator.records.models import Campaign
from evaluator.web.forms import PROTOCOL_SETTINGS


def plan_of(campaign: Campaign) -> dict:
    """A campaign's frozen plan in the launch plan's fields: the same cells under the same identity (the API's `plan`,
    and the launch form filled by "Run another policy on these cells")."""
    config = campaign.protocol_config
    plan = {"benchmark": campaign.benchmark.name, "policy": campaign.policy.name, "name": campaign.name}
    if campaign.mode == Campaign.Mode.FULL:
        plan.update(full=config["full_protocol"], families=campaign.provenance["full_matrix"]["families"])
    else:
        plan.update(tasks=campaign.task_names, seeds=campaign.seeds)
    return {**plan, **{name: config[name] for name in PROTOCOL_SETTINGS}, "labels": campaign.labels}


def initial_from(campaign: Campaign) -> dict:
    """The launch form's fields filled from a campaign's plan, all but the policy, the name and the labels: another
    policy on the same cells, under the same identity."""
    plan = plan_of(campaign)
    initial = {name: plan[name] for name in ("benchmark", *PROTOCOL_SETTINGS) if plan.get(name) not in (None, "")}
    if "full" in plan:
        initial.update(full=plan["full"], families=plan["families"], seed=campaign.seed)
    else:
        initial.update(tasks=plan["tasks"], seed=plan["seeds"][0], seed_list=", ".join(map(str, plan["seeds"])))
    return initial


def baselines() -> list[dict]:
    """The finished campaigns a sequential campaign may run against, newest first (at most 100), with their plans:
    the launch form's baseline picker fills the cells from them."""
    found = []
    for campaign in finished_campaigns().filter(mode=Campaign.Mode.FAST).select_related("policy", "benchmark")[:100]:
        found.append(
            {
                "id": campaign.pk,
                "text": f"#{campaign.pk} {campaign.name[:60]} ({campaign.policy.name}, {campaign.planned} cells)",
                "initial": initial_from(campaign),
            }
        )
    return found
