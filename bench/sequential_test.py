"""The sequential test's error rate and the pairs it needs, simulated: Bernoulli pairs with known rates, no robots.

    .venv/bin/python bench/sequential_test.py [--runs 2000] [--level 0.05] [--margin 0.05] [--seed 0]

For each scenario, `runs` sequences of pairs are drawn (the baseline succeeds with rate A, the candidate with rate
B; with `agreement` the two share one outcome that often, as cells that are easy or hard for both do) and the
campaign's own rule (evaluator/protocol/sequential.py: the confidence sequence, its first decided verdict) runs
over each, up to `max_pairs`. Printed per scenario:

  no difference   how often a direction (improved or regressed) was declared: the type-I error, against the level;
  a difference    the median and quartiles of the pairs at which the sequence decided, beside the pairs a fixed
                  design needs: the smallest n at which McNemar's exact test at the same level rejects with 80%
                  power at these rates (computed exactly by evaluator/protocol/mcnemar.py), and their ratio.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluator.protocol.mcnemar import fixed_pairs
from evaluator.protocol.power import design_from_rates
from evaluator.protocol.sequential import VERDICT_ORDER, first_decisions, running_bounds


@dataclass(frozen=True)
class Scenario:
    rate_a: float
    rate_b: float
    agreement: float = 0.0  # the chance a pair shares one outcome (drawn at rate_a, so only when the rates match)
    max_pairs: int = 200

    @property
    def label(self) -> str:
        shared = f", agreement {self.agreement:.0%}" if self.agreement else ""
        return f"A {self.rate_a:.0%} vs B {self.rate_b:.0%}{shared}"


@dataclass(frozen=True)
class Simulated:
    verdicts: np.ndarray  # per run: an index into VERDICT_ORDER (0: undecided by max_pairs)
    pairs_run: np.ndarray  # per run: the pairs at which it decided, or every pair it was allowed

    def share(self, *verdicts) -> float:
        codes = [VERDICT_ORDER.index(v) for v in verdicts]
        return float(np.isin(self.verdicts, codes).mean())


def draw_pairs(scenario: Scenario, runs: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    shape = (runs, scenario.max_pairs)
    a = rng.random(shape) < scenario.rate_a
    b = rng.random(shape) < scenario.rate_b
    if scenario.agreement:
        if scenario.rate_a != scenario.rate_b:
            raise ValueError("a shared outcome keeps both rates only when they are equal")
        shared = rng.random(shape) < scenario.agreement
        b = np.where(shared, a, b)
    return a, b


def simulate(scenario: Scenario, runs: int, level: float, margin: float, seed: int) -> Simulated:
    """The campaign's stopping rule over `runs` simulated sequences of pairs."""
    a, b = draw_pairs(scenario, runs, np.random.default_rng(seed))
    low, high = running_bounds(np.cumsum(b & ~a, axis=1), np.cumsum(a == b, axis=1), np.cumsum(a & ~b, axis=1), level)
    verdicts, decided_at = first_decisions(low, high, margin)
    return Simulated(verdicts, np.where(decided_at > 0, decided_at, scenario.max_pairs))


NULLS = [Scenario(0.5, 0.5), Scenario(0.2, 0.2), Scenario(0.6, 0.6, agreement=0.7)]
DIFFERENCES = [
    Scenario(0.2, 0.5, max_pairs=300),
    Scenario(0.3, 0.6, max_pairs=300),
    Scenario(0.5, 0.7, max_pairs=600),
    Scenario(0.3, 0.9, max_pairs=200),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--level", type=float, default=0.05)
    parser.add_argument("--margin", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"{args.runs} simulated sequences per scenario, level {args.level}, margin {args.margin}")
    print("\nno difference: how often a direction was declared (type-I error)")
    for index, scenario in enumerate(NULLS):
        found = simulate(scenario, args.runs, args.level, args.margin, args.seed + index)
        wrong = found.share(VERDICT_ORDER[1], VERDICT_ORDER[2])
        print(
            f"  {scenario.label:<32} up to {scenario.max_pairs} pairs: {wrong:.4f} "
            f"({wrong / args.level:.2f} x the level); no difference declared {found.share(VERDICT_ORDER[3]):.3f}"
        )
    print("\na difference: pairs until the sequence decided, against the fixed design at 80% power")
    for index, scenario in enumerate(DIFFERENCES):
        found = simulate(scenario, args.runs, args.level, args.margin, args.seed + 100 + index)
        pairs = found.pairs_run
        fixed = fixed_pairs(design_from_rates(scenario.rate_a, scenario.rate_b - scenario.rate_a), args.level, 0.8)
        median = float(np.median(pairs))
        q1, q3 = np.percentile(pairs, [25, 75])
        print(
            f"  {scenario.label:<32} sequential median {median:5.1f} (quartiles {q1:.0f}-{q3:.0f}), "
            f"improved {found.share(VERDICT_ORDER[1]):.3f} by {scenario.max_pairs}; "
            f"fixed design {fixed} pairs; median / fixed {median / fixed:.2f}"
        )


if __name__ == "__main__":
    main()
