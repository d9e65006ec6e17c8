"""A full campaign's report (issue 14, points 3 and 5): per family, per task and per variant over the
scored cells, camera variants run but shown apart, each with its denominator and Wilson interval;
failures and errors stay in the denominators; heat maps by two dimensions of a family."""

from evaluator.protocol.full_matrix import load_matrix
from evaluator.protocol.full_report import FullCellResult, full_report, heat_maps, variant_of
from evaluator.protocol.scoring import Outcome

S, F, E = Outcome.SUCCESS, Outcome.TASK_FAILURE, Outcome.INFRASTRUCTURE_ERROR


def _results(matrix, outcome_of):
    return [
        FullCellResult(
            family=c.family,
            task=c.task,
            variant=variant_of(dict(c.dimensions)),
            dimensions=dict(c.dimensions),
            scored=c.scored,
            outcome=outcome_of(c),
        )
        for c in matrix.cells
    ]


def test_camera_variants_are_reported_apart_and_errors_stay_in_the_denominators():
    va = load_matrix("variant_aggregation")
    # Every coke cell succeeds but the camera variants' and one base cell that could not run.
    first_base = next(c for c in va.cells if c.family == "pick_coke_can")

    def outcome(cell):
        if cell.family != "pick_coke_can":
            return None  # not run yet: selected, not attempted
        return E if cell is first_base else S

    report = full_report(_results(va, outcome))
    coke = report.per_family["pick_coke_can"]
    assert (coke.selected, coke.attempted, coke.successes) == (675, 675, 674)
    assert coke.errors["infrastructure_error"] == 1
    rate = coke.attempt_success_rate.as_dict()
    assert (rate["numerator"], rate["denominator"]) == (674, 675)  # the error counts against the policy
    assert 0.99 < rate["wilson95_low"] < rate["value"] < rate["wilson95_high"] <= 1
    assert report.unscored["pick_coke_can"].selected == 150 and report.unscored["move_near"].selected == 120
    assert "camera_1" not in report.per_variant["pick_coke_can"]
    assert report.per_variant["pick_coke_can"]["base"].attempted == 75  # 3 orientations x 25
    assert report.per_family["move_near"].attempted == 0 and report.per_family["move_near"].selected == 480
    assert report.overall.selected == 1722
    assert set(report.per_task) >= {"google_robot_pick_horizontal_coke_can", "google_robot_open_top_drawer"}


def test_a_human_intervened_attempt_is_counted_apart():
    vm = load_matrix("visual_matching")
    cells = _results(vm, lambda c: S if c.family == "bridge" else None)
    cells[-1] = FullCellResult(**{**cells[-1].__dict__, "autonomous": False})
    report = full_report(cells)
    assert report.per_family["bridge"].attempted == 95 and report.non_autonomous.attempted == 1
    assert list(report.per_variant["bridge"]) == [""]  # the WidowX cells have no variant axis


def test_the_coke_can_heat_map_is_the_5x5_object_grid_per_orientation():
    vm = load_matrix("visual_matching")
    # success exactly where obj_x is the nearest column (-0.12), over the four URDFs
    cells = _results(
        vm, lambda c: (S if c.dimension("obj_x") == "-0.12" else F) if c.family == "pick_coke_can" else None
    )
    spec = vm.families["pick_coke_can"]["heat_map"]
    maps = heat_maps(cells, "pick_coke_can", spec["rows"], spec["columns"], spec.get("split"))
    assert [m.title for m in maps] == [
        f"pick_coke_can: obj_x x obj_y, orientation {o}" for o in ("horizontal", "standing", "vertical")
    ]
    grid = maps[0]
    assert grid.rows == ("-0.35", "-0.2925", "-0.235", "-0.1775", "-0.12")
    assert grid.columns == ("-0.02", "0.09", "0.2", "0.31", "0.42")
    assert [[(r.numerator, r.denominator) for r in row] for row in grid.rates] == [[(0, 4)] * 5] * 4 + [[(4, 4)] * 5]


def test_move_near_maps_urdf_by_episode_and_unrun_cells_have_no_denominator():
    vm = load_matrix("visual_matching")
    cells = _results(vm, lambda c: S if c.family == "move_near" and c.dimension("urdf_version") == "None" else None)
    (grid,) = heat_maps(cells, "move_near", "urdf_version", "episode_id")
    assert len(grid.rows) == 4 and len(grid.columns) == 60
    assert grid.rates[0][0].as_dict()["value"] == 1.0 and grid.rates[1][0].denominator == 0
