"""A heat map of a full campaign as an HTML table, drawn in one pass (a 10 x 60 map is 600 cells: template
loops cost more than the page's queries). Colour steps are CSS classes: the Content-Security-Policy
allows no inline styles."""

from django import template
from django.utils.html import format_html, format_html_join

from evaluator.protocol.aggregates import Rate
from evaluator.protocol.full_report import HeatMap

register = template.Library()


def heat_class(rate: Rate) -> str:
    """heat-0 .. heat-10 by tenths of success; heat-none where nothing was attempted."""
    return "heat-none" if rate.value is None else f"heat-{round(rate.value * 10)}"


def _cell(rate: Rate) -> tuple:
    shown = f"{rate.numerator}/{rate.denominator}" if rate.denominator else ""
    return heat_class(rate), rate.numerator, rate.denominator, shown


@register.simple_tag
def heat_table(heat_map: HeatMap) -> str:
    head = format_html_join("", "<th>{}</th>", ((c,) for c in heat_map.columns))
    rows = format_html_join(
        "",
        "<tr><th>{}</th>{}</tr>",
        (
            (label, format_html_join("", '<td class="{}" title="{}/{}">{}</td>', (_cell(rate) for rate in rates)))
            for label, rates in heat_map.table
        ),
    )
    return format_html('<table class="heat"><thead><tr><th></th>{}</tr></thead><tbody>{}</tbody></table>', head, rows)
