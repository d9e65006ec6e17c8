"""Which variation hurts a full campaign's policy: its cells read once and handed to the protocol core
(evaluator/protocol/factors.py) as factor cells, each level's base on the same episode."""

from __future__ import annotations

from evaluator.protocol.aggregates import CellResult
from evaluator.protocol.factors import BASE, FactorChoice, FactorReport, check_choice, factor_cells, factor_effects
from evaluator.protocol.full_matrix import VARIANT_AGGREGATION, VISUAL_MATCHING, load_matrix
from evaluator.protocol.scoring import Outcome
from evaluator.records.models import Attempt, Campaign
from evaluator.records.queries import finished_state, kept_for_finished, planned_cells

# Without a choice: Variant Aggregation's variants grouped by kind against `base`; Visual Matching's robot colour
# (urdf_version) against the default robot.
DEFAULT_CHOICES = {
    VARIANT_AGGREGATION: FactorChoice("variant", BASE, grouped=True),
    VISUAL_MATCHING: FactorChoice("urdf_version", "None"),
}


def matrix_levels(campaign: Campaign) -> dict[str, list[str]]:
    """Every dimension of the campaign's families and its labels, in matrix order."""
    matrix = load_matrix(campaign.provenance["full_matrix"]["protocol"])
    levels: dict[str, dict[str, None]] = {}
    for cell in matrix.subset(list(campaign.provenance["full_matrix"]["families"])):
        for axis, label in cell.dimensions:
            levels.setdefault(axis, {})[label] = None
    return {axis: list(labels) for axis, labels in levels.items()}


def factor_choice(campaign: Campaign, dimension: str = "", base: str = "") -> FactorChoice:
    """The campaign's default choice, or the dimension and base asked for, checked against its matrix (a family
    without the default dimension, such as Visual Matching's bridge tasks, needs one named)."""
    protocol = campaign.provenance["full_matrix"]["protocol"]
    if not dimension:
        choice = DEFAULT_CHOICES[protocol]
    else:
        grouped = dimension == "variant" and protocol == VARIANT_AGGREGATION and not base
        choice = FactorChoice(dimension, base or BASE, grouped=grouped)
    check_choice(choice, matrix_levels(campaign))
    return choice


def default_choice(campaign: Campaign) -> FactorChoice | None:
    """The page's choice: the default one where the campaign's families have its dimension."""
    choice = DEFAULT_CHOICES[campaign.provenance["full_matrix"]["protocol"]]
    return choice if choice.dimension in matrix_levels(campaign) else None


def variation_report(campaign: Campaign, choice: FactorChoice, level: float, state: dict | None = None) -> FactorReport:
    """Every factor's effect against its base over the campaign's cells, in one query over them (re-runs apart); kept
    under the campaign's finished_state (given, or asked here): it reads the finished cells alone."""
    state = state if state is not None else finished_state(campaign)
    what = ("variation", choice.as_dict(), level)
    return kept_for_finished(campaign, state, what, lambda: factor_report(campaign, choice, level))


def factor_report(campaign: Campaign, choice: FactorChoice, level: float) -> FactorReport:
    matrix = load_matrix(campaign.provenance["full_matrix"]["protocol"])
    cells = campaign.attempts.filter(rerun_of__isnull=True).order_by("cell_index")
    rows = list(cells.values_list("pk", "status", "outcome", "autonomous"))
    group_of = {(cell.family, cell.dimension("variant")): cell.group for cell in matrix.cells}
    results = []
    for (pk, status, outcome, autonomous), (family, task, dimensions, scored) in zip(
        rows, planned_cells(campaign, cells, matrix, len(rows)), strict=True
    ):
        done = Outcome(outcome) if status == Attempt.Status.FINISHED and outcome else None
        results.append((family, dimensions, scored, CellResult(task, done, autonomous), pk))
    return factor_effects(factor_cells(results, choice, group_of), level)
