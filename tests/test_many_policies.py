"""Many policies at once (issue 46, point 4): "for any set of campaigns of one identity that share cells: every pair
compared on its common cells (Tango + exact McNemar), p-values adjusted (Holm), and the policies grouped into
"cannot tell apart" groups (letters, as compact letter display does)"."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from evaluator.protocol.aggregates import CellResult
from evaluator.protocol.multiple import compare_all, holm, letter_groups
from evaluator.protocol.paired import mcnemar_exact_p
from evaluator.protocol.scoring import Outcome


@pytest.mark.parametrize("seed", range(6))
def test_holms_adjustment_is_statsmodels(seed):
    p_values = list(np.random.default_rng(seed).uniform(0, 0.2, size=3 + seed * 4))
    p_values[0] = p_values[1]  # ties too
    expected = multipletests(p_values, method="holm")[1]
    assert holm(p_values) == pytest.approx(list(expected), abs=1e-15)


def test_holm_by_hand():
    # Sorted 0.01, 0.03, 0.04: x 3 = 0.03; x 2 = 0.06; x 1 = 0.04, raised to the 0.06 before it.
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def shares_a_letter(groups, x, y) -> bool:
    return bool(set(groups[x]) & set(groups[y]))


@pytest.mark.parametrize("seed", range(40))
def test_two_items_share_a_letter_exactly_when_they_were_not_told_apart(seed):
    """The display's defining property (Piepho 2004), over random patterns of pairs told apart."""
    rng = random.Random(seed)
    items = [f"p{i}" for i in range(rng.randint(2, 9))]
    apart = {frozenset(pair) for pair in itertools.combinations(items, 2) if rng.random() < rng.random()}
    groups = letter_groups(items, apart)
    for x, y in itertools.combinations(items, 2):
        assert shares_a_letter(groups, x, y) == (frozenset((x, y)) not in apart)
    assert groups[items[0]].startswith("a")


def test_letters_by_hand():
    assert letter_groups(["A", "B", "C"], set()) == {"A": "a", "B": "a", "C": "a"}
    # A chain: A and C told apart, B with both.
    assert letter_groups(["A", "B", "C"], {frozenset("AC")}) == {"A": "a", "B": "ab", "C": "b"}
    # Two clear groups.
    apart = {frozenset(p) for p in ("AC", "AD", "BC", "BD")}
    assert letter_groups(list("ABCD"), apart) == {"A": "a", "B": "a", "C": "b", "D": "b"}


def campaign_cells(rate: float, seed: int, cells: int = 80) -> dict:
    rng = random.Random(seed)
    return {
        ("reach", s, ""): CellResult("reach", Outcome.SUCCESS if rng.random() < rate else Outcome.TASK_FAILURE)
        for s in range(cells)
    }


def test_every_pair_on_its_common_cells_adjusted_and_grouped():
    strong = campaign_cells(0.9, 1)
    close = dict(strong)  # the strong policy's outcomes but on three cells: two lost, one won
    flips = [k for k, v in strong.items() if v.outcome is Outcome.SUCCESS][:2]
    flips += [k for k, v in strong.items() if v.outcome is Outcome.TASK_FAILURE][:1]
    for key in flips:
        won = strong[key].outcome is Outcome.SUCCESS
        close[key] = CellResult("reach", Outcome.TASK_FAILURE if won else Outcome.SUCCESS)
    cells = {"strong": strong, "close": close, "weak": campaign_cells(0.2, 3)}
    found = compare_all(cells, ["strong", "close", "weak"])
    assert found.groups == {"strong": "a", "close": "a", "weak": "b"}
    by_pair = {(p.a, p.b): p for p in found.pairs}
    assert set(by_pair) == {("strong", "close"), ("strong", "weak"), ("close", "weak")}
    weak = by_pair["strong", "weak"]
    assert weak.p_value == mcnemar_exact_p(weak.counts.only_a, weak.counts.only_b)
    assert by_pair["strong", "close"].counts.discordant == 3 and not by_pair["strong", "close"].told_apart
    assert weak.told_apart and weak.interval[1] < 0  # B (weak) minus A (strong)
    raw = [p.p_value for p in found.pairs]
    assert [p.adjusted_p for p in found.pairs] == pytest.approx(list(multipletests(raw, method="holm")[1]))


def test_only_common_cells_pair_and_a_pair_with_none_is_not_compared():
    left = campaign_cells(0.5, 4, cells=40)
    right = {key: value for key, value in campaign_cells(0.5, 5, cells=60).items() if key[1] >= 20}
    apart = {("reach", s, ""): CellResult("reach", Outcome.SUCCESS) for s in range(100, 140)}
    found = compare_all({"L": left, "R": right, "X": apart}, ["L", "R", "X"])
    pairs = {(p.a, p.b): p for p in found.pairs}
    assert pairs["L", "R"].common_cells == 20 and pairs["L", "R"].counts.pairs == 20
    assert pairs["L", "X"].p_value is None and not pairs["L", "X"].told_apart
    assert not pairs["L", "X"].as_dict()["compared"]
    assert shares_a_letter(found.groups, "L", "X")  # never told apart: not compared


def insert_and_absorb(items, apart) -> set[frozenset]:
    """Piepho's (2004) algorithm as the paper states it, for small sets: the letters' holders."""
    columns = [frozenset(items)]
    for pair in apart:
        first, second = tuple(pair)
        split = []
        for column in columns:
            split += [column - {first}, column - {second}] if first in column and second in column else [column]
        columns = [c for c in set(split) if not any(c < other for other in split)]
    return set(columns)


@pytest.mark.parametrize("seed", range(30))
def test_the_letters_are_those_of_piephos_insert_and_absorb(seed):
    rng = random.Random(100 + seed)
    items = list(range(rng.randint(2, 8)))
    apart = {frozenset(pair) for pair in itertools.combinations(items, 2) if rng.random() < 0.5}
    groups = letter_groups(items, apart)
    holders = {frozenset(i for i in items if mark in groups[i]) for mark in set("".join(groups.values()))}
    assert holders == insert_and_absorb(items, apart)
