"""The policy check: one call of a policy spec with a synthetic observation of a benchmark's contract."""

from ninja import Router

from evaluator.execution.policy_checks import do_check_policy
from evaluator.web.api.common import operation
from evaluator.web.api.schemas import PolicyCheckIn, PolicyCheckOut

router = Router(tags=["policies"])


@operation(router, "POST", "/policies/check", permission="launch_campaign", response=PolicyCheckOut)
def check_policy(request, body: PolicyCheckIn):
    """Call the policy once as a run's first call would (same caps, same deadline) and report the reply's
    validity under the contract, its latency and chunk length, or the typed error a run would record. Nothing is
    stored. A policy that answers wrongly is a 200 with valid false; a request that cannot be checked is a 422."""
    return do_check_policy(
        request.auth,
        policy=body.policy,
        benchmark=body.benchmark,
        task=body.task,
        sensors=body.sensors,
        replan_interval=body.replan_interval,
    ).as_dict()
