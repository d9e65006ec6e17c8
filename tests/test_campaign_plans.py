"""Campaign plans with repeats, readiness before launch, one truth for the preview and Create
(issue 12, points 1-3)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

from evaluator.execution.launching import do_launch_campaign, do_start_attempts, ensure_builtin_policies
from evaluator.protocol.errors import LaunchRefused, ProtocolError
from evaluator.protocol.identity import configure
from evaluator.protocol.seeds import InvalidSeeds, check_seeds, consecutive_seeds, parse_seed_list
from evaluator.records.comparisons import compare_campaigns
from evaluator.records.models import Attempt, Campaign, Policy, RecordImmutable
from evaluator.records.queries import campaign_cells
from tests.records import finish_cell
from tests.simple_humanoid import BEND_PICK

# The subject here is the records, the API and the pages: Fetch renders small (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("small_fetch_render")

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = {"benchmark": "fetch", "tasks": ["pick_and_place"], "seed": "3", "policy": "noop", "preview": "1"}
FETCH_TASKS = ["pick_and_place", "push", "reach", "slide"]


@pytest.fixture
def noop(catalogs):
    ensure_builtin_policies()
    return Policy.objects.get(name="noop")


def _launch(noop, seeds, tasks=FETCH_TASKS, **options):
    return do_launch_campaign(
        name="repeats",
        benchmark="fetch",
        task_names=tasks,
        seeds=seeds,
        policy=noop,
        config=configure("fetch", **options),
    )


def test_a_plan_has_one_pending_cell_per_task_and_seed(noop):
    # "Let the operator choose several frozen reset seeds per task ... frozen into the plan"
    campaign = _launch(noop, [0, 1, 2])
    cells = campaign_cells(campaign)
    assert [(c.task.name, c.seed) for c in cells] == [(t, s) for t in FETCH_TASKS for s in (0, 1, 2)]
    assert [c.cell_index for c in cells] == list(range(12))
    assert all(c.status == "pending" for c in cells)
    assert campaign.seeds == [0, 1, 2]


def test_the_protocol_identity_does_not_change_with_the_number_of_seeds(noop):
    # "The protocol identity does not change with the number of seeds; the plan records them."
    one, three = _launch(noop, [5]), _launch(noop, [5, 6, 7])
    assert one.protocol.protocol_id == three.protocol.protocol_id
    assert (one.seeds, three.seeds) == ([5], [5, 6, 7])


def test_the_seeds_of_a_plan_cannot_change(noop):
    campaign = _launch(noop, [0, 1])
    campaign.seeds = [0, 1, 2]
    with pytest.raises(RecordImmutable, match="seeds"):
        campaign.save()
    assert Campaign.objects.get().seeds == [0, 1]


@pytest.mark.parametrize(
    "seeds, message",
    [
        ([], "at least one reset seed"),
        ([1, 2, 1], "seed 1 is listed twice"),
        ([2**32], "whole number in \\[0, 2\\*\\*32\\)"),
        ([True], "whole number"),
        (list(range(2600)), "at most 1000 seeds"),
    ],
)
def test_bad_seed_lists_are_refused_and_nothing_is_stored(noop, seeds, message):
    with pytest.raises(ProtocolError, match=message):
        _launch(noop, seeds)
    assert not Campaign.objects.exists() and not Attempt.objects.exists()


def test_a_plan_of_more_than_ten_thousand_cells_is_refused_with_the_bound():
    with pytest.raises(InvalidSeeds, match="at most 10000"):
        from evaluator.protocol.seeds import check_cell_count

        check_cell_count(11, 1000)


def test_seeds_are_written_as_a_list_or_as_n_from_a_base():
    assert parse_seed_list("0, 7 42") == (0, 7, 42)
    assert consecutive_seeds(10, 3) == (10, 11, 12)
    with pytest.raises(InvalidSeeds, match="pass 2\\*\\*32 - 1"):
        consecutive_seeds(2**32 - 2, 3)
    with pytest.raises(InvalidSeeds, match="got 'x1'"):
        parse_seed_list("3, x1")
    assert check_seeds([4, 2]) == (4, 2)  # the order is the plan's


def test_aggregates_count_every_seed_of_a_task(noop):
    # "aggregates per task and overall over all of them, with the interval"
    from evaluator.records.queries import campaign_report

    campaign = _launch(noop, [0, 1, 2], tasks=["reach"])
    cells = campaign_cells(campaign)
    for cell, outcome in zip(cells, ["success", "success", "task_failure"], strict=True):
        finish_cell(cell, outcome)
    report = campaign_report(campaign_cells(campaign)).as_dict()
    reach = report["per_task"]["reach"]
    assert (reach["selected"], reach["successes"], reach["success_rate"]["denominator"]) == (3, 2, 3)
    assert 0 < reach["success_rate"]["wilson95_low"] < 2 / 3 < reach["success_rate"]["wilson95_high"] < 1
    assert report["overall"]["attempted"] == 3


def test_the_paired_comparison_pairs_cells_by_task_and_seed(noop):
    # "the paired comparison pairs cells by (task, seed)"
    a, b = _launch(noop, [0, 1], tasks=["reach"]), _launch(noop, [1, 0], tasks=["reach"])
    outcomes = {(0, "a"): "success", (1, "a"): "task_failure", (0, "b"): "task_failure", (1, "b"): "task_failure"}
    for label, campaign in (("a", a), ("b", b)):
        for cell in campaign_cells(campaign):
            finish_cell(cell, outcomes[(cell.seed, label)])
    pairs = compare_campaigns(a, b).cells.overall
    # Seed 0 is discordant (a succeeded, b failed); seed 1 fails in both, whatever the cell order.
    assert (pairs.only_a, pairs.only_b, pairs.neither, pairs.pairs) == (1, 0, 1, 2)


def test_the_comparison_keeps_non_autonomous_pairs_out_of_the_discordance_count(noop):
    # "marks non-autonomous pairs and keeps them out of the discordance count"
    a, b = _launch(noop, [0, 1], tasks=["reach"]), _launch(noop, [0, 1], tasks=["reach"])
    for campaign, outcome in ((a, "success"), (b, "task_failure")):
        for cell in campaign_cells(campaign):
            finish_cell(cell, outcome, autonomous=not (campaign == b and cell.seed == 1))
    cells = compare_campaigns(a, b).cells
    assert (cells.overall.discordant, cells.overall.pairs, cells.non_autonomous) == (1, 1, 1)


def test_an_unrunnable_benchmark_is_refused_at_launch_with_its_reason(catalogs):
    # "refuse to start cells that nothing can run, with that reason"
    ensure_builtin_policies()
    with pytest.raises(LaunchRefused, match="this executor cannot run simple_humanoid: RSI_SIMPLE_CHECKOUT is not set"):
        do_launch_campaign(
            name="humanoid",
            benchmark="simple_humanoid",
            task_names=["G1WholebodyBendPickMP-v0"],
            seeds=[20260907],
            policy="noop",
            config=configure("simple_humanoid"),
        )
    assert not Campaign.objects.exists()


def test_an_unrunnable_benchmarks_plan_previews_and_only_create_is_refused(operator):
    """Issue 35, point 7: "Preview always; refuse only Create, with the reason" (the page and the API alike)."""
    plan = {
        "benchmark": "simple_humanoid",
        "policy": "noop",
        "tasks": ["G1WholebodyBendPickMP-v0"],
        "seeds": [20260907],
    }
    preview = operator.post("/api/v1/campaigns/preview", json.dumps(plan), content_type="application/json")
    assert preview.status_code == 200
    reason = "this executor cannot run simple_humanoid: RSI_SIMPLE_CHECKOUT is not set"
    (refused,) = preview.json()["create_refused"]
    assert preview.json()["cells"] == 1 and refused.startswith(reason)
    created = operator.post("/api/v1/campaigns", json.dumps(plan), content_type="application/json")
    assert created.status_code == 422 and created.json()["reasons"] == [refused]  # the reason the preview gave
    page = operator.post(
        reverse("evaluator:launch"),
        {**LAUNCH, "benchmark": "simple_humanoid", "tasks": [BEND_PICK], "seed": "20260907"},
    ).content.decode()
    assert 'id="resolved-identity"' in page and 'id="create-refused"' in page and 'id="create"' not in page
    page = operator.post(
        reverse("evaluator:launch"),
        {**LAUNCH, "benchmark": "simple_humanoid", "tasks": [BEND_PICK], "seed": "20260907", "create": "1"},
    ).content.decode()
    assert reason in page and "1 problem to fix" in page
    assert not Campaign.objects.exists()


@pytest.mark.parametrize("seeds", [[0], [20260907, 20260908]])
def test_simple_humanoids_fast_mode_refuses_any_seed_but_20260907(simple_double, seeds):
    # "Fast mode selects each task once with seed 20260907, DR0 and released episode index 0."
    ensure_builtin_policies()
    launch = dict(
        name="humanoid",
        benchmark="simple_humanoid",
        task_names=[BEND_PICK],
        policy="noop",
        config=configure("simple_humanoid"),
    )
    with pytest.raises(InvalidSeeds, match="simple_humanoid's fast mode runs each task once with seed 20260907"):
        do_launch_campaign(seeds=seeds, **launch)
    assert not Campaign.objects.exists()
    assert do_launch_campaign(seeds=[20260907], **launch).attempts.get().seed == 20260907


def test_the_launch_form_names_simple_humanoids_fast_mode_seed(simple_double, operator):
    form = {**LAUNCH, "benchmark": "simple_humanoid", "tasks": [BEND_PICK], "sensors": "rgb-qpos31", "seed": "3"}
    page = operator.post(reverse("evaluator:launch"), form).content.decode()
    assert "simple_humanoid&#x27;s fast mode runs each task once with seed 20260907, not seeds [3]" in page
    page = operator.post(reverse("evaluator:launch"), {**form, "seed": "20260907"}).content.decode()
    assert "not seeds" not in page and "<b>1</b> cell: 1 task × 1 seed" in page


def test_a_cell_of_an_unrunnable_benchmark_is_not_started(make_attempt, django_user_model):
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user("olga")
    user.groups.add(Group.objects.get(name="operator"))
    attempt = make_attempt("G1WholebodyBendPickMP-v0", benchmark="simple_humanoid")
    with pytest.raises(LaunchRefused, match="cannot run simple_humanoid"):
        do_start_attempts(user, [attempt])
    attempt.refresh_from_db()
    assert attempt.status == "pending"


def test_the_preview_shows_the_seeds_and_the_cell_count(operator):
    response = operator.post(
        reverse("evaluator:launch"), {**LAUNCH, "tasks": ["reach", "push"], "seed": "10", "repeats": "3"}
    )
    page = response.content.decode()
    assert 'id="resolved-identity">fetch-development/rgb/v1<' in page
    assert "<b>6</b> cells: 2 tasks × 3 seeds" in page
    assert '<span id="preview-seeds">10, 11, 12</span>' in page


def test_create_freezes_the_listed_seeds(operator):
    response = operator.post(
        reverse("evaluator:launch"), {**LAUNCH, "tasks": ["reach"], "seed_list": "42, 7", "create": "1"}
    )
    campaign = Campaign.objects.get()
    assert response.status_code == 302
    assert campaign.seeds == [42, 7]
    assert list(campaign.attempts.order_by("cell_index").values_list("seed", flat=True)) == [42, 7]


def test_all_tasks_selects_every_task_of_the_chosen_benchmark(operator):
    operator.post(reverse("evaluator:launch"), {**LAUNCH, "tasks": [], "all_tasks": "on", "create": "1"})
    assert Campaign.objects.get().task_names == FETCH_TASKS


def test_several_problems_are_refused_together_each_with_its_type(noop):
    from evaluator.protocol.errors import InvalidCombination

    with pytest.raises(LaunchRefused) as refused:
        do_launch_campaign(
            name="two problems",
            benchmark="fetch",
            task_names=["reach"],
            seeds=[1, 1],
            policy="fetch-oracle",
            config=configure("fetch"),
        )
    assert [type(e) for e in refused.value.errors] == [InvalidSeeds, InvalidCombination]
    assert not Campaign.objects.exists()


def test_the_form_shows_every_problem_at_once(operator):
    # "all errors at once, not one at a time"
    response = operator.post(
        reverse("evaluator:launch"),
        {
            **LAUNCH,
            "tasks": ["reach", "widowx_spoon_on_towel"],
            "policy": "fetch-oracle",
            "seed_list": "1, 1",
            "budget_mode": "decisions",
            "max_policy_calls": "1000000000",
        },
    )
    page = response.content.decode().replace("&#x27;", "'")
    assert "seed 1 is listed twice" in page
    assert "max policy calls (C or D) must be at most 10000" in page  # the page says it with the form's label
    response = operator.post(
        reverse("evaluator:launch"),
        {**LAUNCH, "tasks": ["reach", "widowx_spoon_on_towel"], "policy": "fetch-oracle", "seed_list": "1, 1"},
    )
    page = response.content.decode().replace("&#x27;", "'")
    for problem in ("seed 1 is listed twice", "fetch has no task 'widowx_spoon_on_towel'", "reads privileged state"):
        assert problem in page
    assert not Campaign.objects.exists()


def test_the_launch_form_and_the_benchmarks_page_say_what_can_run_here(operator):
    # "The launch form and the benchmarks page show, per benchmark, whether the executor can run it and why not"
    for name in ("launch", "benchmarks"):
        page = operator.get(reverse(f"evaluator:{name}")).content.decode()
        assert "RSI_SIMPLE_CHECKOUT is not set" in page
        assert "MuJoCo renders with MUJOCO_GL=" in page


def test_the_shell_command_creates_runs_and_aggregates_a_campaign(tmp_path):
    # "Same in manage.py (a command to create and start a campaign from the shell)."
    from tests.servers.site import site_env

    env = site_env(tmp_path)
    run = lambda *args: subprocess.run(  # noqa: E731
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600
    )
    assert run("migrate", "--noinput").returncode == 0
    result = run(
        "campaign", "fetch", "--tasks", "reach", "push", "--repeats", "2", "--base-seed", "4", "--policy", "stop",
        "--run", "--json", "--no-progress",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert [(c["task"], c["seed"], c["status"]) for c in summary["cells"]] == [
        ("reach", 4, "finished"),
        ("reach", 5, "finished"),
        ("push", 4, "finished"),
        ("push", 5, "finished"),
    ]
    assert summary["aggregates"]["overall"]["attempted"] == 4
    assert "cell 4/4: push seed 5" in result.stderr
    refused = run("campaign", "fetch", "--tasks", "reach", "--seeds", "1,1", "--policy", "stop")
    assert refused.returncode == 2 and "seed 1 is listed twice" in refused.stderr
    # Queuing from the shell needs workers that outlive it (RSI_EXECUTOR=celery, tests/test_scale_out.py).
    embedded = run("campaign", "fetch", "--tasks", "reach", "--policy", "stop", "--start")
    assert embedded.returncode == 2 and "use --run here, or Start on the campaign page" in embedded.stderr
