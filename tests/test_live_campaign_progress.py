"""A campaign page's live socket (/ws/campaigns/N/progress/): its cells' progress and interventions, heard by
reviewers and refused to a user without a role, with real Fetch rollouts in executor threads."""

import asyncio

import pytest

from evaluator.execution.launching import ensure_builtin_policies
from evaluator.records.models import Attempt, Intervention
from tests.live_sockets import (
    attempt_socket,
    campaign_socket,
    is_finished,
    next_json,
    pending_attempt,
    read_until,
    run_attempt,
    user_session,
)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def setup(catalogs, media_root):
    ensure_builtin_policies()


def test_a_campaign_page_hears_its_cells_start_progress_and_finish(setup):
    # "Cells update in place over the existing WebSocket (status, step / max steps, calls, elapsed, ETA)"
    attempt = pending_attempt()
    _, session = user_session("rita", "reviewer")

    async def scenario():
        socket = campaign_socket(attempt.campaign_id, session)
        assert (await socket.connect())[0]
        run = asyncio.get_running_loop().run_in_executor(None, run_attempt, attempt.pk)
        seen = await read_until(socket, is_finished)
        await socket.send_json_to({"type": "intervene", "kind": "stop"})
        refusal = await next_json(socket)
        await run
        await socket.disconnect()
        return seen, refusal

    seen, refusal = asyncio.run(scenario())
    events = [m["event"] for m in seen if m.get("type") == "event"]
    assert {e["attempt"] for e in events} == {attempt.pk}
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "started" and kinds[-1] == "finished" and "step" in kinds
    steps = [e for e in events if e["kind"] == "step"]
    # Thinned out: a campaign page needs a few updates per second per cell, not every step.
    assert len(steps) < 51
    assert steps[-1]["counters"]["max_executable_steps"] == 50 and "policy_calls" in steps[-1]["counters"]
    assert "action" not in steps[-1] and "instruction" not in steps[-1]  # small events
    assert events[-1]["outcome"] == Attempt.objects.get(pk=attempt.pk).outcome
    assert refusal["type"] == "refused"  # the progress socket only sends
    assert Intervention.objects.count() == 0


def test_a_user_without_a_role_cannot_follow_a_campaign(setup):
    attempt = pending_attempt()
    _, session = user_session("nobody")

    async def scenario():
        socket = campaign_socket(attempt.campaign_id, session)
        connected, code = await socket.connect()
        return connected, code

    connected, code = asyncio.run(scenario())
    assert not connected and code == 4403


def test_a_campaign_page_hears_that_a_human_paused_one_of_its_cells(setup):
    # Issue 35, point 14: "a paused re-run is not marked non-autonomous on its cell": the pause reaches the
    # campaign's socket at once (the page then fetches its cells again), not only when the attempt ends.
    attempt = pending_attempt(budget_mode="decisions", max_policy_calls=200, replan_interval=1)
    _, session = user_session("ivan", "intervener")

    async def scenario():
        campaign = campaign_socket(attempt.campaign_id, session)
        live = attempt_socket(attempt.pk, session)
        assert (await campaign.connect())[0] and (await live.connect())[0]
        run = asyncio.get_running_loop().run_in_executor(None, run_attempt, attempt.pk)
        await read_until(live, lambda d: d.get("type") == "event" and d["event"].get("step") == 2)
        await live.send_json_to({"type": "intervene", "kind": "pause"})

        def paused(d):
            return d.get("type") == "event" and d["event"]["kind"] == "intervention"

        heard = [d["event"] for d in await read_until(campaign, paused) if paused(d)]
        await live.send_json_to({"type": "intervene", "kind": "stop"})
        await read_until(live, is_finished)
        await run
        await campaign.disconnect()
        await live.disconnect()
        return heard

    heard = asyncio.run(scenario())
    assert heard[0]["attempt"] == attempt.pk and heard[0]["autonomous"] is False
    assert "note" not in heard[0] and "user" not in heard[0]  # small events: who paused is the live page's
