"""Two campaigns compared, as the comparison page, the API and `rsi compare` show them.

Campaign A is the baseline, B the candidate; differences are B minus A. Refused, with every reason, when the two
cannot be compared: a campaign with itself, two protocol identities (never pooled), no cell in common. Otherwise
the cells pair by task and seed (evaluator/records/sequential.py, cell_key), per task and overall, with the
fixed-design statistics of evaluator/protocol/paired.py at the asked level and margin. When B was run against A as
a sequential campaign, its confidence sequence decides the verdict, at the level and margin declared at launch: a
fixed-design interval is not valid once a campaign may stop when the data look decided.
"""

from __future__ import annotations

from dataclasses import dataclass

from evaluator.protocol.aggregates import Rate
from evaluator.protocol.errors import ComparisonRefused
from evaluator.protocol.paired import (
    DEFAULT_LEVEL,
    DEFAULT_MARGIN,
    PairCounts,
    PairedCells,
    PairedComparison,
    Verdict,
    check_level_and_margin,
    compare_pairs,
    pair_cells,
)
from evaluator.protocol.sequential import SequentialState
from evaluator.records.models import Campaign
from evaluator.records.result_flags import never_ranked
from evaluator.records.sequential import cells_by_key, rule_of, sequential_state_of


@dataclass(frozen=True)
class TaskRow:
    task: str
    paired: PairedComparison  # at the comparison's level and margin

    @property
    def rate_a(self) -> Rate:
        counts = self.paired.counts
        return Rate(counts.both + counts.only_a, counts.pairs)

    @property
    def rate_b(self) -> Rate:
        counts = self.paired.counts
        return Rate(counts.both + counts.only_b, counts.pairs)


@dataclass(frozen=True)
class CampaignComparison:
    a: Campaign
    b: Campaign
    cells: PairedCells
    overall: TaskRow
    per_task: list[TaskRow]
    sequential: SequentialState | None  # B was run against A: its sequence, at its declared level and margin

    @property
    def verdict(self) -> Verdict:
        return self.sequential.verdict if self.sequential else self.overall.paired.verdict

    @property
    def level(self) -> float:
        return self.sequential.level if self.sequential else self.overall.paired.level

    @property
    def margin(self) -> float:
        return self.sequential.margin if self.sequential else self.overall.paired.margin


def check_comparable(a: Campaign, b: Campaign) -> None:
    reasons = []
    if a.pk == b.pk:
        reasons.append(f"campaign {a.pk} compared with itself: choose two campaigns")
    if a.protocol_id != b.protocol_id:
        reasons.append(
            f"campaign {a.pk} ran under {a.protocol.protocol_id} and campaign {b.pk} under {b.protocol.protocol_id}: "
            "results of different protocol identities are never pooled or compared"
        )
    reasons += never_ranked([a, b])
    if reasons:
        raise ComparisonRefused(reasons)


def compare_campaigns(
    a: Campaign, b: Campaign, level: float = DEFAULT_LEVEL, margin: float = DEFAULT_MARGIN
) -> CampaignComparison:
    """B against A: refused with every reason, or the pairs and their statistics."""
    check_comparable(a, b)
    check_level_and_margin(level, margin)
    cells_a, cells_b = cells_by_key(a), cells_by_key(b)
    if not set(cells_a) & set(cells_b):
        raise ComparisonRefused([f"campaigns {a.pk} and {b.pk} have no cell (task and seed) in common"])
    paired = pair_cells(cells_a, cells_b)
    tasks = dict.fromkeys(cell.task for cell in [*cells_a.values(), *cells_b.values()])
    rows = [TaskRow(task, compare_pairs(paired.per_task.get(task, PairCounts()), level, margin)) for task in tasks]
    rule = rule_of(b)
    return CampaignComparison(
        a=a,
        b=b,
        cells=paired,
        overall=TaskRow("overall", compare_pairs(paired.overall, level, margin)),
        per_task=rows,
        sequential=sequential_state_of(b) if rule and rule.baseline == a.pk else None,
    )
