"""The sim-to-real page: simulated success rates beside real-robot ones, and entering real-robot rates."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from evaluator.execution.launching import (
    do_record_real_rate,
    do_record_real_rates,
)
from evaluator.protocol.errors import ProtocolError
from evaluator.protocol.sim_to_real import reference
from evaluator.records.queries import (
    REFERENCE,
    sim_to_real_points,
    sim_to_real_report,
)
from evaluator.web.access import require
from evaluator.web.sim_to_real_forms import RealRateForm, RealRatesUploadForm, SimToRealSelectionForm

# The scatter plots: a square of PLOT px for rates 0..1, offset to leave room for the ticks' labels.
PLOT, LEFT, TOP = 240, 44, 12
TICKS = (0.0, 0.25, 0.5, 0.75, 1.0)


def scatter(points: tuple[dict, ...]) -> dict:
    """A task's plot in SVG coordinates: the ticks of both axes (0 to 1) and each policy's point, numbered as in
    the table beside it (simulated to the right, real upward), with where its rates come from."""

    def x(rate: float) -> float:
        return round(LEFT + PLOT * rate, 1)

    def y(rate: float) -> float:
        return round(TOP + PLOT * (1 - rate), 1)

    return {
        "ticks": [{"label": f"{t:g}", "x": x(t), "y": y(t)} for t in TICKS],
        "marks": [_mark(n, p, x(p["simulated"]), y(p["real"])) for n, p in enumerate(points, start=1)],
        "left": LEFT,
        "right": LEFT + PLOT,
        "top": TOP,
        "bottom": TOP + PLOT,
        "size": PLOT,
        "x_ticks_y": TOP + PLOT + 14,
        "y_ticks_x": LEFT - 5,
        "middle_x": LEFT + PLOT / 2,
        "middle_y": TOP + PLOT / 2,
    }


def _mark(number: int, point: dict, x: float, y: float) -> dict:
    """A policy's point at (x, y), its number just above to the right, and where its rates come from."""
    return {
        "number": number,
        "x": x,
        "y": y,
        "label_x": x + 5,
        "label_y": y - 5,
        "point": point,
        "source": source_of(point),
    }


def source_of(point: dict) -> str:
    """Where a point's two rates come from, said once when both come from the same place; "paper" for the reference
    policies (both published in the SimplerEnv paper, which the page names above)."""
    if point["name"].startswith(REFERENCE):
        return "paper"
    simulated, real = point["simulated_from"], point["real_from"]
    return simulated if simulated == real else f"simulated: {simulated}; real: {real}"


@login_required
def sim_to_real(request: HttpRequest) -> HttpResponse:
    """Does simulation rank policies as the real robot does? Per task, Pearson's r and MMRV; operators
    enter real-robot rates of their own policies (written once, never overwritten)."""
    require(request, "view_campaign")
    uploading = "file" in request.FILES
    form = RealRateForm(request.POST if request.method == "POST" and not uploading else None)
    upload = RealRatesUploadForm(request.POST, request.FILES) if uploading else RealRatesUploadForm()
    if request.method == "POST":
        require(request, "launch_campaign")
        chosen = upload if uploading else form
        if chosen.is_valid():
            try:
                if uploading:
                    do_record_real_rates(request.user, chosen.cleaned_data["file"])
                else:
                    do_record_real_rate(request.user, **chosen.cleaned_data)
            except ProtocolError as exc:
                chosen.add_error(None, str(exc))
            else:
                return redirect("evaluator:sim_to_real")
    points = sim_to_real_points()
    policies = {p["name"]: p["label"] for task_points in points.values() for p in task_points}
    selection = SimToRealSelectionForm(request.GET or None, policies=sorted(policies.items()))
    chosen = (selection.cleaned_data["policy"] or None) if selection.is_bound and selection.is_valid() else None
    bad_query = selection.is_bound and not selection.is_valid()
    return render(
        request,
        "evaluator/sim_to_real.html",
        {
            "report": [{"row": row, "plot": scatter(row.points)} for row in sim_to_real_report(points, chosen)],
            "selection": selection,
            "form": form,
            "upload": upload,
            "source": reference()["source"],
            "can_enter": request.user.has_perm("evaluator.launch_campaign"),
        },
        status=400 if request.method == "POST" or bad_query else 200,
    )
