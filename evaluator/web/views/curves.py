"""The learning-curve page: the campaigns that share labels (run=abc), drawn along another label (step) as success
with its Wilson 95% interval, overall and per task, with the paired verdict between consecutive points; the same
curve as the API's /curve (evaluator/records/curves.py)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from evaluator.protocol.labels import InvalidLabel, parse_filters
from evaluator.protocol.paired import DEFAULT_LEVEL, DEFAULT_MARGIN
from evaluator.records.curves import Curve, CurveRefused, learning_curve
from evaluator.web.access import require
from evaluator.web.views.common import number_param

TASK_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22")


def curve_chart(curve: Curve, width: int = 720, height: int = 300) -> dict:
    """SVG coordinates: x on a linear scale between the first and last point, success from 0 to 1 on y; the
    overall rate with its interval as a bar at each point, each task's rate as a thin line."""
    pad_left, pad_right, pad_top, pad_bottom = 44, 16, 10, 28
    plot_w, plot_h = width - pad_left - pad_right, height - pad_top - pad_bottom
    xs = [point.x for point in curve.points]
    low, high = min(xs), max(xs)
    span = (high - low) or 1.0

    def x(value: float) -> float:
        middle = len(xs) == 1 or high == low
        return round(pad_left + plot_w * (0.5 if middle else (value - low) / span), 1)

    def y(rate: float) -> float:
        return round(pad_top + plot_h * (1 - rate), 1)

    overall = []
    for point in curve.points:
        rate = point.success_rate
        if rate.value is None:
            continue
        interval = rate.interval
        overall.append(
            {
                "x": x(point.x),
                "y": y(rate.value),
                "low": y(interval[0]),
                "high": y(interval[1]),
                "label": f"{curve.x}={point.x_text}: {rate.numerator}/{rate.denominator}",
            }
        )
    tasks = []
    for number, task in enumerate(curve.tasks):
        rates = [(point.x, point.per_task.get(task)) for point in curve.points]
        line = " ".join(f"{x(px)},{y(r.value)}" for px, r in rates if r is not None and r.value is not None)
        tasks.append({"task": task, "line": line, "colour": TASK_COLOURS[number % len(TASK_COLOURS)]})
    return {
        "width": width,
        "height": height,
        "left": pad_left,
        "right": width - pad_right,
        "bottom": pad_top + plot_h,
        "overall_line": " ".join(f"{p['x']},{p['y']}" for p in overall),
        "overall": overall,
        "tasks": tasks,
        "ticks_x": [(x(point.x), point.x_text) for point in curve.points],
        "ticks_y": [(y(v), f"{v:.2g}") for v in (0, 0.25, 0.5, 0.75, 1)],
    }


@login_required
def curve(request: HttpRequest) -> HttpResponse:
    require(request, "view_campaign")
    labels = [text for text in request.GET.getlist("label") if text]
    x = request.GET.get("x", "step")
    protocol = request.GET.get("protocol", "")
    level = number_param(request, "level", DEFAULT_LEVEL)
    margin = number_param(request, "margin", DEFAULT_MARGIN)
    found, reasons = None, []
    if labels:
        try:
            found = learning_curve(parse_filters(labels), x, protocol, level, margin)
        except (InvalidLabel, CurveRefused) as exc:
            reasons = exc.reasons
    context = {
        "labels": labels,
        "x": x,
        "protocol": protocol,
        "curve": found,
        "reasons": reasons,
        "chart": curve_chart(found) if found and found.points else None,
    }
    return render(request, "evaluator/curve.html", context, status=400 if reasons else 200)
