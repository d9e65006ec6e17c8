"""Intervals on sim-to-real (issue 46, point 3): "Pearson r and MMRV per task with bootstrap intervals over
policies (and over episodes within each rate, since each rate is itself an estimate), with the number of policies
said; a 'how many real trials would narrow this' note."""

from __future__ import annotations

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.test import Client
from scipy import stats

from evaluator.protocol.resampling import RESAMPLES, SEED, resample_indices
from evaluator.protocol.sim_to_real import mmrv, pearson, reference
from evaluator.protocol.sim_to_real_intervals import (
    RatePoint,
    metric_intervals,
    mmrv_many,
    pearson_many,
)

COKE = "google_robot_pick_coke_can"


def reference_points(task: str = COKE) -> list[RatePoint]:
    ref = reference()
    return [
        RatePoint(name, ref["simulated_visual_matching"][task][name], real)
        for name, real in ref["real"][task].items()
        if name in ref["simulated_visual_matching"][task]
    ]


def test_the_vectorised_metrics_are_the_reports_own_on_every_resample():
    points = reference_points()
    s = np.array([p.simulated for p in points])
    r = np.array([p.real for p in points])
    picks = resample_indices(len(points), 200, SEED)
    many_r, many_m = pearson_many(s[picks], r[picks]), mmrv_many(s[picks], r[picks])
    for row, got_r, got_m in zip(picks, many_r, many_m, strict=True):
        expected = pearson(list(s[row]), list(r[row]))
        assert (np.isnan(got_r) and expected is None) or got_r == pytest.approx(expected, abs=1e-12)
        assert got_m == pytest.approx(mmrv(list(s[row]), list(r[row])), abs=1e-12)


def test_the_policy_bootstrap_of_r_is_scipys_paired_percentile_bootstrap_within_resampling_error():
    """Rates held (no episode counts): the interval is the policies' bootstrap alone, as scipy computes it."""
    rng = np.random.default_rng(2)
    s = rng.uniform(0, 1, 12)
    r = np.clip(s + rng.normal(0, 0.15, 12), 0, 1)
    found = metric_intervals([RatePoint(f"p{i}", s[i], r[i]) for i in range(12)])
    theirs = stats.bootstrap(
        (s, r), lambda a, b: stats.pearsonr(a, b)[0], paired=True, vectorized=False, method="percentile",
        n_resamples=4000, random_state=3,
    ).confidence_interval  # fmt: skip
    assert found.pearson == pytest.approx((theirs.low, theirs.high), abs=0.04)
    assert found.pearson == found.pearson_policies_only and found.held_fixed == 24


def test_episodes_behind_each_rate_widen_the_interval_and_more_real_trials_narrow_it():
    points = reference_points()
    few = [RatePoint(p.name, p.simulated, p.real, simulated_trials=300, real_trials=15) for p in points]
    found = metric_intervals(few)
    assert found.policies == 6 and found.held_fixed == 0
    width = found.mmrv[1] - found.mmrv[0]
    assert width >= found.mmrv_policies_only[1] - found.mmrv_policies_only[0]
    widths = [m for _, _, m in found.real_trials]
    assert [n for n, _, _ in found.real_trials] == [10, 25, 50, 100]
    assert widths[0] > widths[-1]  # 100 real trials a rate narrow MMRV's interval against 10
    assert found.as_dict()["method"].startswith(f"percentile bootstrap, {RESAMPLES} resamples")


def test_fewer_than_three_policies_have_no_interval():
    assert metric_intervals(reference_points()[:2]) is None


def test_the_page_says_each_tasks_intervals_the_number_of_policies_and_the_real_trials_note(simpler_env_host):
    user = get_user_model().objects.create_user("rita", password="pw")
    user.groups.add(Group.objects.get(name="reviewer"))
    client = Client()
    client.force_login(user)
    page = client.get("/sim-to-real/").content.decode()
    section = page[page.index(f'id="task-{COKE}"') :]
    section = section[: section.index("</section>")]
    found = metric_intervals(reference_points())
    assert "With 6 policies, 95% bootstrap intervals" in section
    assert f"MMRV [{found.mmrv[0]:.3f}, {found.mmrv[1]:.3f}]" in section
    assert "12 rates without a known number of episodes held fixed" in section
    assert "How many real trials would narrow this: with every real rate from 10 trials" in section
