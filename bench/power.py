"""The power of a fixed paired design, computed exactly, beside a simulation of the exact test; and what a sequential
campaign takes at the same rates.

    .venv/bin/python bench/power.py [--runs 20000] [--level 0.05] [--seed 0]

Per scenario (a baseline rate, a candidate rate, pairs independent given the rates):
  fixed design   the pairs McNemar's exact test needs for 80% and 90% power (evaluator/protocol/mcnemar.py, summed
                 exactly); at each, the exact power beside the share of `runs` simulated tables whose exact
                 p-value (the comparison's own mcnemar_exact_p) is under the level in the right direction, with that
                 share's Monte Carlo standard error and the gap in standard errors (12 gaps: within 3.3, the
                 two-sided 99.9% band, unless the computation is wrong).
  sequential     the mean pairs a sequential campaign takes with its cells capped at the 90% design's pairs times
                 two (evaluator/protocol/power.py, the campaign's own stopping rule), with its Monte Carlo error.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluator.protocol.mcnemar import PowerCurve, fixed_pairs, mcnemar_exact_p
from evaluator.protocol.power import design_from_rates, simulate_sequential

SCENARIOS = [(0.2, 0.5), (0.3, 0.6), (0.5, 0.7), (0.3, 0.9), (0.6, 0.4), (0.7, 0.8)]


def simulated_power(design, pairs: int, level: float, runs: int, rng: np.random.Generator) -> float:
    """The share of simulated tables the exact test rejects with the candidate better (a regression mirrored)."""
    tables = rng.multinomial(pairs, [design.only_a, design.only_b, 1 - design.discordance], size=runs)
    better = tables[:, 1] > tables[:, 0] if design.difference > 0 else tables[:, 0] > tables[:, 1]
    p_values = {pair: mcnemar_exact_p(*pair) for pair in set(map(tuple, tables[:, :2].tolist()))}
    rejects = np.array([p_values[a, b] < level for a, b in tables[:, :2].tolist()])
    return float((rejects & better).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20000)
    parser.add_argument("--level", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"level {args.level}; {args.runs} simulated tables per power; pairs independent given the rates")
    for rate_a, rate_b in SCENARIOS:
        design = design_from_rates(rate_a, rate_b - rate_a)
        mirrored = design if design.difference > 0 else type(design)(design.only_b, design.only_a)
        curve = PowerCurve(mirrored, args.level)
        print(f"\nA {rate_a:.0%} vs B {rate_b:.0%} (discordance {design.discordance:.3f})")
        most = 0
        for power in (0.8, 0.9):
            pairs = fixed_pairs(design, args.level, power)
            most = max(most, pairs)
            exact = curve(pairs)
            simulated = simulated_power(design, pairs, args.level, args.runs, rng)
            error = math.sqrt(exact * (1 - exact) / args.runs)
            print(
                f"  {power:.0%} power: {pairs:5d} pairs; exact power {exact:.4f}, simulated {simulated:.4f} "
                f"+- {error:.4f} (gap {abs(simulated - exact) / error:.2f} standard errors)"
            )
        sequential = simulate_sequential(design, 2 * most, args.level)
        print(
            f"  sequential, up to {2 * most} pairs: mean {sequential.mean:.1f} +- {sequential.standard_error:.1f}, "
            f"median {sequential.median:.0f}, right direction {sequential.right_direction:.1%} "
            f"({sequential.runs} simulated campaigns)"
        )


if __name__ == "__main__":
    main()
