"""Partial credit where the benchmark reports it (issue 46, point 5): "SimplerEnv's own info and episode stats
already say how far an episode got (grasped, consecutive grasp, lifted, moved the correct object, near the target,
source on target: see the facts sheet's scoring table); report each stage's rate per task and campaign with its
interval, and in the paired comparison, apart from success and never in place of it. Only stages upstream computes;
none invented."

The stats below have upstream's shapes (ManiSkill2_real2sim's evaluate(): grasp_single_in_scene.py 401-461,
move_near_in_scene.py 366-466, put_on_in_scene.py 43-141, open_drawer_in_scene.py 240-243,
place_in_closed_drawer_in_scene.py 217-237), as the worker stores them in each step's info.
"""

from __future__ import annotations

import pytest

from evaluator.execution.launching import do_launch_campaign
from evaluator.protocol.aggregates import wilson_interval
from evaluator.protocol.identity import configure
from evaluator.protocol.paired import mcnemar_exact_p
from evaluator.protocol.stages import stages_of
from evaluator.records.models import Decision, Step
from tests.records import finish_cell

GRASP = {"n_lift_significant": 0, "consec_grasp": False, "grasped": False}
MOVE_NEAR = {
    "all_obj_keep_height": True,
    "moved_correct_obj": False,
    "moved_wrong_obj": False,
    "near_tgt_obj": False,
    "is_closest_to_tgt": False,
}
PUT_ON = {
    "moved_correct_obj": False,
    "moved_wrong_obj": False,
    "is_src_obj_grasped": False,
    "consecutive_grasp": False,
    "src_on_target": False,
}


def test_each_familys_stages_are_upstreams_values_and_none_is_invented():
    assert stages_of({**GRASP, "grasped": True, "n_lift_significant": 3}) == {
        "grasped": True,
        "consecutive_grasp": False,
        "lifted_significantly": True,
    }
    assert stages_of({**MOVE_NEAR, "moved_correct_obj": True}) == {"moved_correct_object": True, "near_target": False}
    assert stages_of({**PUT_ON, "is_src_obj_grasped": True, "src_on_target": True}) == {
        "grasped": True,
        "consecutive_grasp": False,
        "moved_correct_object": False,
        "source_on_target": True,
    }
    assert stages_of({"qpos": 0.1, "is_drawer_open": True, "has_contact": 0}) == {
        "drawer_opened": True,
        "touched_drawer_bottom": False,
    }
    # Open and close drawer keep only the joint position, as text: no stage. Fetch and SIMPLE report none.
    assert stages_of({"qpos": "0.123"}) is None
    assert stages_of(None) is None and stages_of({"is_success": 1.0}) is None


def coke_campaign(name: str, episodes: list[tuple[str, dict]]):
    """A pick-coke-can campaign of one cell per seed, each finished with `outcome` after one stored step whose info
    holds the episode stats."""
    campaign = do_launch_campaign(
        name=name,
        benchmark="simpler_env",
        task_names=["google_robot_pick_horizontal_coke_can"],
        seeds=list(range(len(episodes))),
        policy="noop",
        config=configure("simpler_env"),
    )
    for cell, (outcome, stats) in zip(campaign.attempts.order_by("seed"), episodes, strict=True):
        decision = Decision.objects.create(
            attempt=cell, index=1, kind="actions", observation_step=0, instruction="pick coke can", response={}
        )
        for index, info in ((1, {"success": False, "episode_stats": GRASP}), (2, {"episode_stats": stats})):
            Step.objects.create(
                attempt=cell, index=index, decision=decision, action=[0.0] * 7, native_success=False,
                terminated=False, truncated=False, instruction="pick coke can", info=info,
            )  # fmt: skip
        finish_cell(cell, outcome)
    return campaign


@pytest.fixture
def two_policies(simpler_env_host):
    grasped = {**GRASP, "grasped": True}
    lifted = {**GRASP, "grasped": True, "consec_grasp": True, "n_lift_significant": 6}
    # A: 2 successes, 10 grasps; B: the same successes, grasps on 18 of 20 (A's ten and eight more).
    a = [("success", lifted)] * 2 + [("task_failure", grasped)] * 8 + [("task_failure", GRASP)] * 10
    b = [("success", lifted)] * 2 + [("task_failure", grasped)] * 16 + [("task_failure", GRASP)] * 2
    b[19] = ("policy_error", GRASP)  # errored: in no denominator, pairs with nothing
    return coke_campaign("A", a), coke_campaign("B", b)


def test_each_stages_rate_per_task_and_campaign_with_its_wilson_interval(operator, two_policies):
    a, b = two_policies
    found = operator.get(f"/api/v1/campaigns/{b.pk}/stages").json()
    grasped = found["overall"]["grasped"]
    assert (grasped["numerator"], grasped["denominator"]) == (18, 19)  # the errored one is in no denominator
    assert (grasped["wilson95_low"], grasped["wilson95_high"]) == pytest.approx(wilson_interval(18, 19))
    assert found["overall"]["lifted_significantly"]["numerator"] == 2
    assert found["per_task"]["google_robot_pick_horizontal_coke_can"]["consecutive_grasp"]["numerator"] == 2
    assert found["words"]["lifted_significantly"] == "lifted significantly"
    page = operator.get(f"/campaigns/{b.pk}/").content.decode()
    section = page[page.index('<section id="stages-section">') :]
    assert ">grasped</th>" in section and "18/19 = 0.947" in section


def test_the_paired_comparison_reports_each_stage_apart_from_success_and_never_in_its_place(operator, two_policies):
    a, b = two_policies
    found = operator.get(f"/api/v1/compare?a={a.pk}&b={b.pk}").json()
    assert found["overall"]["only_a"] == 0 and found["overall"]["only_b"] == 0  # success: the same two
    assert found["verdict"] == "underpowered"  # success alone decides it, though B grasps far more often
    grasp = found["stages"]["grasped"]
    assert (grasp["pairs"], grasp["only_a"], grasp["only_b"]) == (19, 0, 8)
    assert grasp["mcnemar_exact_p"] == mcnemar_exact_p(0, 8) and grasp["verdict"] == "improved"
    assert grasp["stage"] == "grasped"
    page = operator.get(f"/campaigns/compare/?a={a.pk}&b={b.pk}").content.decode()
    assert 'id="stage-pairs"' in page and "never in its place" in page
    assert page.index('id="verdict-label"') < page.index('id="stage-pairs"')


def test_a_benchmark_without_episode_stats_has_no_stage(operator, catalogs):
    campaign = do_launch_campaign(
        name="fetch", benchmark="fetch", task_names=["reach"], seeds=[0], policy="noop", config=configure("fetch")
    )
    found = operator.get(f"/api/v1/campaigns/{campaign.pk}/stages").json()
    assert found["overall"] == {} and found["per_task"] == {}
    assert 'id="stages-section"' not in operator.get(f"/campaigns/{campaign.pk}/").content.decode()
