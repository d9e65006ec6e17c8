"""A heat map of a full campaign as an HTML table, drawn in one pass (a 10 x 60 map is 600 cells: template
loops cost more than the page's queries). Colour steps are CSS classes: the Content-Security-Policy
allows no inline styles."""

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

from evaluator.protocol.aggregates import Rate
from evaluator.protocol.full_report import HeatMap

register = template.Library()


def heat_class(rate: Rate) -> str:
    """heat-0 .. heat-10 by tenths of success; heat-none where nothing was attempted."""
    return "heat-none" if rate.value is None else f"heat-{round(rate.value * 10)}"


def _cell(rate: Rate) -> str:
    shown = f"{rate.numerator}/{rate.denominator}" if rate.denominator else ""
    return f'<td class="{heat_class(rate)}" title="{rate.numerator}/{rate.denominator}">{shown}</td>'


@register.simple_tag
def heat_table(heat_map: HeatMap) -> str:
    # Plain string building: format_html over 600 cells took a third of a full campaign's page. Every text is
    # escaped; the rest are whole numbers and our class names.
    head = "".join(f"<th>{escape(column)}</th>" for column in heat_map.columns)
    rows = "".join(
        f"<tr><th>{escape(label)}</th>{''.join(_cell(rate) for rate in rates)}</tr>" for label, rates in heat_map.table
    )
    return mark_safe(f'<table class="heat"><thead><tr><th></th>{head}</tr></thead><tbody>{rows}</tbody></table>')
