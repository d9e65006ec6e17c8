"""Ranks on a leaderboard, with ties where the evidence does not separate two rows.

A row's rank is one plus the number of rows that are better beyond doubt: whose Wilson 95% interval lies wholly
above its own (the other's lower bound over its upper bound). Rows whose intervals overlap are not told apart by
that rule, and so can share a rank: they are shown as tied. This is the "Rank (UB)" of LMSYS's Chatbot Arena
leaderboard ("one + the number of models that are statistically better than the target model ... when A's
lower-bound score is greater than B's upper-bound score (in 95% confidence interval)"; Chiang et al., "Chatbot
Arena", ICML 2024), with the Wilson score interval of each row's success rate (E. B. Wilson, JASA 22(158), 1927)
in place of the Arena's bootstrap intervals. A row with no protocol-completed attempt has no interval and ranks
after every row that has one.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from .aggregates import Rate


@dataclass(frozen=True)
class Standing:
    rank: int
    tied: bool  # another row has the same rank


def separated_above(a: Rate, b: Rate) -> bool:
    """Whether `a` is better than `b` beyond doubt: a's interval lies wholly above b's."""
    if a.interval is None or b.interval is None:
        return a.interval is not None
    return a.interval[0] > b.interval[1]


def standings(rates: Sequence[Rate]) -> list[Standing]:
    """The rank of each rate, in the order given: one sort of the lower bounds, then a binary search per row for how
    many lie above its upper bound (n log n; the pairwise count of `separated_above` is n squared)."""
    intervals = [rate.interval for rate in rates]
    lows = sorted(interval[0] for interval in intervals if interval is not None)
    ranks = [
        1 + len(lows) if interval is None else 1 + len(lows) - bisect.bisect_right(lows, interval[1])
        for interval in intervals
    ]
    counts = Counter(ranks)
    return [Standing(rank, counts[rank] > 1) for rank in ranks]
