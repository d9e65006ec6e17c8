"""Many policies at once: every pair compared on the cells they share, the p-values adjusted for the number of
pairs, and the policies grouped into sets the evidence cannot tell apart.

- Each pair: the paired counts over the cells both ran to an autonomous, protocol-completed end (paired.py), B minus
  A with Tango's score interval, and McNemar's exact p-value.
- Holm's step-down adjustment of the pairs' p-values (S. Holm, "A simple sequentially rejective multiple test
  procedure", Scandinavian Journal of Statistics 6(2):65-70, 1979): sorted ascending, the i-th of m is multiplied by
  m - i + 1, and each adjusted value is at least the one before; it holds the chance of any false "different" at the
  level, however many pairs. A pair is told apart when its adjusted p-value is under the level.
- The groups: a compact letter display, the letters of H.-P. Piepho's insert-and-absorb algorithm ("An algorithm
  for a letter-based representation of all-pairwise comparisons", Journal of Computational and Graphical
  Statistics 13(2):456-466, 2004): start with one letter shared by all; for each pair told apart, split every letter
  both hold into one without each; drop a letter whose holders another letter's holders include. What remains is
  one letter per maximal set of policies no two of which were told apart, found directly (maximal_cliques). Two
  policies share a letter exactly when they were not told apart. Letters follow the order given (the leaderboard's
  rank): the first policy's first letter is a. Piepho's last step (sweeping out redundant letters) is left out: a
  display may carry a letter that could be dropped, never a wrong one.
- Two policies with no cell in common are not compared: they cannot be told apart, and the answer says so.
"""

from __future__ import annotations

import itertools
import string
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from .aggregates import CellResult
from .mcnemar import mcnemar_exact_p
from .paired import DEFAULT_LEVEL, DEFAULT_MARGIN, PairCounts, check_level_and_margin, pair_cells, tango_interval

LETTERS = string.ascii_lowercase + string.ascii_uppercase


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's adjusted p-values, in the order given."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def letter(number: int) -> str:
    return LETTERS[number] if number < len(LETTERS) else f"({number + 1})"


def letter_groups(order: Sequence[Hashable], told_apart: set[frozenset]) -> dict[Hashable, str]:
    """Each item's letters: two items share a letter exactly when the pair is not in `told_apart`. Letters are named
    in `order`: the first item's first letter is a."""
    position = {item: index for index, item in enumerate(order)}
    near = {
        item: {other for other in order if other != item and frozenset((item, other)) not in told_apart}
        for item in order
    }
    columns = sorted(maximal_cliques(near), key=lambda column: sorted(position[item] for item in column))
    return {item: "".join(letter(n) for n, column in enumerate(columns) if item in column) for item in order}


def maximal_cliques(near: Mapping[Hashable, set]) -> list[frozenset]:
    """The maximal sets of items each pair of which is near: Piepho's insert-and-absorb ends with exactly these
    (splitting a letter on every pair told apart leaves the sets holding no such pair; absorbing keeps the maximal
    ones), found here without its intermediate letters, which grow exponentially with the pairs told apart, by C.
    Bron and J. Kerbosch's search ("Algorithm 457: finding all cliques of an undirected graph", Communications of
    the ACM 16(9):575-577, 1973) with E. Tomita's pivot (Theoretical Computer Science 363(1):28-42, 2006)."""
    found: list[frozenset] = []

    def extend(clique: frozenset, candidates: set, excluded: set) -> None:
        if not candidates and not excluded:
            found.append(clique)
            return
        pivot = max(candidates | excluded, key=lambda item: len(near[item] & candidates))
        for item in list(candidates - near[pivot]):
            extend(clique | {item}, candidates & near[item], excluded & near[item])
            candidates = candidates - {item}
            excluded = excluded | {item}

    extend(frozenset(), set(near), set())
    return found


@dataclass(frozen=True)
class PairResult:
    a: Hashable
    b: Hashable
    counts: PairCounts  # over the cells both ran to an autonomous, protocol-completed end
    common_cells: int  # cells both planned
    interval: tuple[float, float] | None  # Tango's for B - A at the level; None without a pair
    p_value: float | None  # McNemar's exact; None when not compared (no cell in common)
    adjusted_p: float | None  # Holm's
    told_apart: bool

    def as_dict(self) -> dict:
        counts = self.counts
        return {
            "a": self.a,
            "b": self.b,
            "common_cells": self.common_cells,
            "pairs": counts.pairs,
            "only_a": counts.only_a,
            "only_b": counts.only_b,
            "difference": counts.difference,
            "interval_low": self.interval[0] if self.interval else None,
            "interval_high": self.interval[1] if self.interval else None,
            "mcnemar_exact_p": self.p_value,
            "holm_p": self.adjusted_p,
            "told_apart": self.told_apart,
            "compared": self.p_value is not None,
        }


@dataclass(frozen=True)
class ManyComparison:
    level: float
    order: tuple[Hashable, ...]
    pairs: tuple[PairResult, ...]
    groups: Mapping[Hashable, str]  # item -> its letters

    def as_dict(self) -> dict:
        return {
            "level": self.level,
            "method": "every pair on its common cells: McNemar's exact test, Holm's adjustment; Piepho's letters",
            "groups": {str(item): letters for item, letters in self.groups.items()},
            "pairs": [pair.as_dict() for pair in self.pairs],
        }


def compare_all(
    cells: Mapping[Hashable, Mapping[Hashable, CellResult]], order: Sequence[Hashable], level: float = DEFAULT_LEVEL
) -> ManyComparison:
    """Every pair of `order` (items whose cells are in `cells`, by pairing key) compared on its common cells."""
    check_level_and_margin(level, DEFAULT_MARGIN)  # the level's range: no margin is used here
    tested = []
    for a, b in itertools.combinations(order, 2):
        common = set(cells[a]) & set(cells[b])
        counts = pair_cells({k: cells[a][k] for k in common}, {k: cells[b][k] for k in common}).overall
        interval = tango_interval(counts.only_a, counts.only_b, counts.pairs, level) if counts.pairs else None
        p_value = mcnemar_exact_p(counts.only_a, counts.only_b) if common else None
        tested.append((a, b, counts, len(common), interval, p_value))
    adjusted = iter(holm([row[5] for row in tested if row[5] is not None]))
    pairs = []
    for a, b, counts, common, interval, p_value in tested:
        holm_p = next(adjusted) if p_value is not None else None
        apart = holm_p is not None and holm_p < level
        pairs.append(PairResult(a, b, counts, common, interval, p_value, holm_p, apart))
    groups = letter_groups(order, {frozenset((p.a, p.b)) for p in pairs if p.told_apart})
    return ManyComparison(level, tuple(order), tuple(pairs), groups)
