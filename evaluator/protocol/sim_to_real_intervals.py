"""How sure the sim-to-real metrics are: percentile bootstrap intervals of Pearson's r and MMRV per task.

A task's r and MMRV (evaluator/protocol/sim_to_real.py) rest on a handful of policies, each rate itself an
estimate from a finite number of episodes. Two sources of doubt, resampled together (B. Efron and R. J. Tibshirani,
"An Introduction to the Bootstrap", 1993, ch. 13, percentile intervals; evaluator/protocol/resampling.py):

- over policies: each resample draws the policies with replacement (the metrics of another set of policies like
  these);
- over episodes within each rate: a rate with a known number of episodes n (a campaign's attempted cells; a real
  rate entered with its trials) is redrawn as Binomial(n, rate) / n in each resample (the parametric bootstrap of
  one proportion). A rate whose episodes are not known (the paper's published rates) is held as it is, and the answer
  says how many were held, since its doubt is then left out.

A resample whose r is undefined (no spread on a side) is left out of r's interval. With fewer than 3 policies there
is nothing to resample. "How many real trials would narrow this": the same bootstrap with every real rate redrawn
from N trials, for N = 10, 25, 50 and 100, gives the interval's width at each N.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .resampling import RESAMPLES, SEED, percentile_interval, resample_indices

REAL_TRIALS_ASKED = (10, 25, 50, 100)
FEWEST_POLICIES = 3


@dataclass(frozen=True)
class RatePoint:
    name: str
    simulated: float
    real: float
    simulated_trials: int | None = None  # episodes behind the simulated rate, where known
    real_trials: int | None = None


def pearson_many(s: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Pearson's r along the last axis; NaN where a side has no spread."""
    ds, dr = s - s.mean(axis=-1, keepdims=True), r - r.mean(axis=-1, keepdims=True)
    spread = np.sqrt((ds * ds).sum(axis=-1) * (dr * dr).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(spread > 1e-12, (ds * dr).sum(axis=-1) / np.where(spread > 1e-12, spread, 1), np.nan)


def mmrv_many(s: np.ndarray, r: np.ndarray) -> np.ndarray:
    """MMRV along the last axis: the mean over i of the largest |R_i - R_j| among the j simulation orders the other
    way from the real robot."""
    violated = (s[..., :, None] < s[..., None, :]) != (r[..., :, None] < r[..., None, :])
    gaps = np.abs(r[..., :, None] - r[..., None, :])
    return np.where(violated, gaps, 0.0).max(axis=-1).mean(axis=-1)


def redraw(rates: np.ndarray, trials: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each rate with a trial count redrawn as Binomial(trials, rate) / trials; one without (0) kept."""
    known = trials > 0
    drawn = rng.binomial(np.where(known, trials, 1), rates) / np.where(known, trials, 1)
    return np.where(known, drawn, rates)


@dataclass(frozen=True)
class MetricIntervals:
    policies: int
    pearson: tuple[float, float] | None  # over policies and episodes
    mmrv: tuple[float, float] | None
    pearson_policies_only: tuple[float, float] | None
    mmrv_policies_only: tuple[float, float] | None
    held_fixed: int  # rates whose episodes are unknown: not redrawn
    real_trials: tuple[tuple[int, float | None, float | None], ...]  # (N, r's width, MMRV's width) with N real trials

    def as_dict(self) -> dict:
        def pair(interval):
            return list(interval) if interval else None

        return {
            "policies": self.policies,
            "method": f"percentile bootstrap, {RESAMPLES} resamples: policies with replacement, each rate with known "
            "episodes redrawn binomially",
            "pearson_interval": pair(self.pearson),
            "mmrv_interval": pair(self.mmrv),
            "pearson_interval_policies_only": pair(self.pearson_policies_only),
            "mmrv_interval_policies_only": pair(self.mmrv_policies_only),
            "rates_held_fixed": self.held_fixed,
            "with_real_trials": [
                {"real_trials": n, "pearson_width": r, "mmrv_width": m} for n, r, m in self.real_trials
            ],
        }


def bootstrap_metrics(
    simulated: np.ndarray,
    real: np.ndarray,
    simulated_trials: np.ndarray,
    real_trials: np.ndarray,
    level: float,
    seed: int,
    redraw_episodes: bool = True,
) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    picks = resample_indices(simulated.size, RESAMPLES, seed)
    rng = np.random.default_rng(seed + 1)
    s, r = simulated[picks], real[picks]
    if redraw_episodes:
        s, r = redraw(s, simulated_trials[picks], rng), redraw(r, real_trials[picks], rng)
    return percentile_interval(pearson_many(s, r), level), percentile_interval(mmrv_many(s, r), level)


def width(interval: tuple[float, float] | None) -> float | None:
    return None if interval is None else interval[1] - interval[0]


def metric_intervals(points: Sequence[RatePoint], level: float = 0.05, seed: int = SEED) -> MetricIntervals | None:
    """Both metrics' intervals over the points (None with fewer than FEWEST_POLICIES)."""
    if len(points) < FEWEST_POLICIES:
        return None
    simulated = np.array([p.simulated for p in points], dtype=float)
    real = np.array([p.real for p in points], dtype=float)
    sim_trials = np.array([p.simulated_trials or 0 for p in points])
    real_trials = np.array([p.real_trials or 0 for p in points])
    pearson, mmrv = bootstrap_metrics(simulated, real, sim_trials, real_trials, level, seed)
    policies_only = bootstrap_metrics(simulated, real, sim_trials, real_trials, level, seed, redraw_episodes=False)
    asked = []
    for n in REAL_TRIALS_ASKED:
        found = bootstrap_metrics(simulated, real, sim_trials, np.full(len(points), n), level, seed)
        asked.append((n, width(found[0]), width(found[1])))
    return MetricIntervals(
        policies=len(points),
        pearson=pearson,
        mmrv=mmrv,
        pearson_policies_only=policies_only[0],
        mmrv_policies_only=policies_only[1],
        held_fixed=int((sim_trials == 0).sum() + (real_trials == 0).sum()),
        real_trials=tuple(asked),
    )
