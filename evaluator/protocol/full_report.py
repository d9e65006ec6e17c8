"""What a full SimplerEnv campaign reports, as upstream's metric does (calc_metrics_evaluation_videos.py):
per family, per catalog task and per variant, over the scored cells; the camera variants (run, not
scored) apart; heat maps of success by two dimensions of a family. Errors stay in the denominators:
a rate here is successes over every cell attempted, and each aggregate says how many could not run and why.
Nothing is pooled with another campaign."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .aggregates import Aggregate, Rate, aggregate_of
from .scoring import Outcome


@dataclass(frozen=True)
class FullCellResult:
    family: str
    task: str
    variant: str  # the cell's variant: its `variant` label in Variant Aggregation, its URDF in Visual Matching
    dimensions: Mapping[str, str]
    scored: bool
    outcome: Outcome | None  # None: not attempted (yet)
    autonomous: bool = True


def variant_of(dimensions: Mapping[str, str]) -> str:
    return dimensions.get("variant") or dimensions.get("urdf_version", "")


@dataclass(frozen=True)
class FullReport:
    overall: Aggregate  # scored cells of autonomous attempts
    per_family: Mapping[str, Aggregate]
    per_task: Mapping[str, Aggregate]
    per_variant: Mapping[str, Mapping[str, Aggregate]]  # family -> variant -> aggregate
    unscored: Mapping[str, Aggregate]  # family -> the cells upstream runs but does not score (cameras)
    non_autonomous: Aggregate  # attempts a human intervened in, apart

    def as_dict(self) -> dict:
        return {
            "overall": self.overall.as_dict(),
            "per_family": {k: v.as_dict() for k, v in self.per_family.items()},
            "per_task": {k: v.as_dict() for k, v in self.per_task.items()},
            "per_variant": {f: {k: v.as_dict() for k, v in vs.items()} for f, vs in self.per_variant.items()},
            "unscored": {k: v.as_dict() for k, v in self.unscored.items()},
            "non_autonomous": self.non_autonomous.as_dict(),
        }


def _group(cells: list[FullCellResult], key) -> dict[str, Aggregate]:
    groups: dict[str, list[FullCellResult]] = {}
    for cell in cells:
        groups.setdefault(key(cell), []).append(cell)
    return {name: _of(members) for name, members in groups.items()}


def _of(cells: list[FullCellResult]) -> Aggregate:
    """Every selected cell counts; attempted ones by outcome (a human-intervened one is not the policy's)."""
    return aggregate_of(len(cells), [c.outcome for c in cells if c.outcome is not None and c.autonomous])


def full_report(results: Iterable[FullCellResult]) -> FullReport:
    results = list(results)
    scored = [c for c in results if c.scored]
    families = list(dict.fromkeys(c.family for c in results))
    human = [c.outcome for c in results if not c.autonomous and c.outcome is not None]
    return FullReport(
        overall=_of(scored),
        per_family=_group(scored, lambda c: c.family),
        per_task=_group(scored, lambda c: c.task),
        per_variant={f: _group([c for c in scored if c.family == f], lambda c: c.variant) for f in families},
        unscored=_group([c for c in results if not c.scored], lambda c: c.family),
        non_autonomous=aggregate_of(len(human), human),
    )


@dataclass(frozen=True)
class HeatMap:
    """Success over cells attempted at each (row, column) of two dimensions, over every other one."""

    title: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    rates: tuple[tuple[Rate, ...], ...]  # rates[row][column]: successes / autonomous attempts there

    @property
    def table(self) -> tuple[tuple[str, tuple[Rate, ...]], ...]:
        """(row label, its rates) per row, as a page draws it."""
        return tuple(zip(self.rows, self.rates, strict=True))


def heat_maps(
    results: Iterable[FullCellResult], family: str, rows: str, columns: str, split: str | None = None
) -> list[HeatMap]:
    """One map per value of `split` (e.g. the coke can's orientation), or one for the whole family."""
    cells = [c for c in results if c.family == family]
    maps = []
    for part in dict.fromkeys(c.dimensions.get(split, "") for c in cells) if split else [""]:
        members = [c for c in cells if not split or c.dimensions.get(split) == part]
        row_values = tuple(dict.fromkeys(c.dimensions[rows] for c in members))
        column_values = tuple(dict.fromkeys(c.dimensions[columns] for c in members))
        counts: dict[tuple[str, str], list[int]] = {}
        for cell in members:
            if cell.outcome is None or not cell.autonomous:
                continue
            tally = counts.setdefault((cell.dimensions[rows], cell.dimensions[columns]), [0, 0])
            tally[0] += cell.outcome == Outcome.SUCCESS
            tally[1] += 1
        rates = tuple(tuple(Rate(*counts.get((r, c), (0, 0))) for c in column_values) for r in row_values)
        title = f"{family}: {rows} x {columns}" + (f", {split} {part}" if split else "")
        maps.append(HeatMap(title, row_values, column_values, rates))
    return maps
