"""The percentile bootstrap: an interval for a statistic from resamples of the units it is computed over.

B. Efron and R. J. Tibshirani, "An Introduction to the Bootstrap", Chapman & Hall 1993, ch. 13 (the percentile
interval); resampling whole clusters rather than their members when the members are not independent, A. C.
Davison and D. V. Hinkley, "Bootstrap Methods and their Application", Cambridge 1997, §3.8. Every resample is drawn
from a generator seeded here, so a page shows the same interval on every visit.
"""

from __future__ import annotations

import numpy as np

RESAMPLES = 2000
SEED = 46  # the issue that asked for it: any fixed seed keeps a page's numbers the same on every visit


def percentile_interval(samples: np.ndarray, level: float) -> tuple[float, float] | None:
    """The (level/2, 1 - level/2) quantiles of the finite resampled statistics; None when fewer than half are
    finite (a statistic undefined on most resamples has no interval worth showing)."""
    finite = samples[np.isfinite(samples)]
    if finite.size < max(1, samples.size // 2):
        return None
    low, high = np.quantile(finite, [level / 2, 1 - level / 2])
    return float(low), float(high)


def resample_indices(units: int, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """(resamples, units) indices drawn with replacement."""
    return np.random.default_rng(seed).integers(0, units, size=(resamples, units))


def bootstrap_mean(values, level: float = 0.05, resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float, float]:
    """The percentile interval of the mean of `values` (one per independent unit)."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        raise ValueError("no unit to resample")
    means = values[resample_indices(values.size, resamples, seed)].mean(axis=1)
    return percentile_interval(means, level)
