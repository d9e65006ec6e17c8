"""Full-matrix cells run end to end through the real SAPIEN worker, the adapter and the evaluator, with
SimplerEnv's upstream replaced by its named double (tests/doubles/simpler_site.py): the only part that
cannot run here (issue 14: "A full VM campaign against that double runs end to end over two workers
and shows the family and variant aggregates and the grid; a killed cell stays an error in the
denominator")."""

import pytest

from evaluator.running.recorder import do_run_attempt
from tests.records import launch_full


@pytest.mark.django_db(transaction=True)
def test_a_full_cell_runs_through_the_real_worker_with_its_kwargs_and_options(simpler_env_host, double_upstream):
    campaign = launch_full(families=["drawer"], budget_mode="decisions", max_policy_calls=3, replan_interval=1)
    cell = campaign.attempts.order_by("cell_index")[5]
    finished = do_run_attempt(cell)
    assert (finished.status, finished.outcome, finished.error_type) == ("finished", "task_failure", "")
    assert finished.environment_steps == 3
    provenance = finished.provenance
    assert provenance["full_cell"] == cell.full_cell and provenance["env_id"] == cell.full_cell["env_id"]
    assert provenance["reset_info"]["scene_name"] == "double"  # what the double's env reported
