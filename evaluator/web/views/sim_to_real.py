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
    sim_to_real_points,
    sim_to_real_report,
)
from evaluator.web.access import require
from evaluator.web.forms import RealRateForm, RealRatesUploadForm, SimToRealSelectionForm


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
            "report": sim_to_real_report(points, chosen),
            "selection": selection,
            "form": form,
            "upload": upload,
            "source": reference()["source"],
            "can_enter": request.user.has_perm("evaluator.launch_campaign"),
        },
        status=400 if request.method == "POST" or bad_query else 200,
    )
