"""What several page groups share: the page size of lists, the playback speeds, record ids and numbers in query
strings, an attempt's action contract and a sequential campaign's chart as the pages show them."""

from __future__ import annotations

import math

from django.core.exceptions import BadRequest
from django.http import HttpRequest

from evaluator.protocol.actions import ActionContract
from evaluator.protocol.numbers import whole_number
from evaluator.protocol.registry import action_contract
from evaluator.protocol.sequential import SequencePoint, SequentialState
from evaluator.records.models import Attempt

PAGE_SIZE = 50


PLAYBACK_SPEEDS = (0.1, 0.25, 0.5, 1, 2, 4)  # Chromium plays no slower than 1/16


def id_param(request: HttpRequest, name: str) -> int | None:
    """A record id from the query string, or a 400 that says what it must be."""
    raw = request.GET.get(name, "").strip()
    if not raw:
        return None
    number = whole_number(raw)
    if number is None:
        raise BadRequest(f"{name} must be a record id (a whole number)")
    return number


def number_param(request: HttpRequest, name: str, default: float) -> float:
    """A number from the query string (its default when absent), or a 400 that says what it must be."""
    raw = request.GET.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw[:40])
    except ValueError:
        raise BadRequest(f"{name} must be a number, e.g. {default}") from None
    if not math.isfinite(value):
        raise BadRequest(f"{name} must be a finite number")
    return value


def sequence_chart(state: SequentialState, width: int = 640, height: int = 220, most_points: int = 400) -> dict:
    """A sequential campaign's confidence sequence as SVG coordinates: pairs on x, the difference on y from -1
    to 1, with zero, the margins and where it decided. At most `most_points` points a line (evenly thinned)."""
    pad_left, pad_bottom, pad_top = 44, 26, 10
    plot_w, plot_h = width - pad_left - 10, height - pad_bottom - pad_top
    points = state.points
    step = max(1, -(-len(points) // most_points))
    shown = list(points[::step]) + ([points[-1]] if points and (len(points) - 1) % step else [])
    last = max(1, points[-1].pairs if points else 1)

    def x(pairs: float) -> float:
        return round(pad_left + plot_w * pairs / last, 1)

    def y(value: float) -> float:
        return round(pad_top + plot_h * (1 - value) / 2, 1)

    def line(attribute: str) -> str:
        return " ".join(f"{x(p.pairs)},{y(getattr(p, attribute))}" for p in [SequencePoint(0, -1.0, 1.0), *shown])

    ticks_x = sorted({round(last * k / 4) for k in range(5)})
    return {
        "width": width,
        "height": height,
        "low": line("low"),
        "high": line("high"),
        "left": pad_left,
        "right": width - 10,
        "bottom": pad_top + plot_h,
        "zero": y(0),
        "margins": (y(state.margin), y(-state.margin)),
        "ticks_x": [(x(t), t) for t in ticks_x],
        "ticks_y": [(y(v), f"{v:+.1f}" if v else "0") for v in (1, 0.5, 0, -0.5, -1)],
        "decided": (x(state.decided_at), state.decided_at) if state.decided_at else None,
        "confidence": round(1 - state.level, 4),
        "margin": state.margin,
    }


def action_groups(contract: ActionContract) -> list[dict]:
    """The action's components in the groups the review and live pages draw."""
    return [{"label": label, "components": list(components)} for label, components in contract.display_groups]


def attempt_contract(attempt: Attempt) -> ActionContract:
    """The action contract of the interface the attempt ran under."""
    config = attempt.campaign.protocol_config
    return action_contract(config["benchmark"], config["interface_version"])
