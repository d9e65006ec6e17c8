"""Small plots beside the numbers: a success rate with its Wilson 95% interval as a bar on the 0-1 scale, drawn the
same size wherever it shows, so that bars one above another compare (overlapping intervals are visible as such)."""

from django import template
from django.utils.html import format_html

from evaluator.protocol.aggregates import Rate

register = template.Library()

WIDTH, HEIGHT = 120, 14


@register.simple_tag
def rate_bar(rate: Rate) -> str:
    """The interval as a band and the rate as a dot on a 0-1 line; an empty line when nothing completed."""
    if not rate.denominator:
        return format_html(
            '<svg class="rate-bar" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="no completed '
            'attempt"><line class="rate-axis" x1="0" x2="{}" y1="7" y2="7"/></svg>',
            WIDTH,
            HEIGHT,
            WIDTH,
            HEIGHT,
            WIDTH,
        )
    low, high = rate.interval
    x = round(WIDTH * rate.value, 1)
    return format_html(
        '<svg class="rate-bar" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="{}/{}: {} in [{}, {}]"'
        ' data-low="{}" data-high="{}"><line class="rate-axis" x1="0" x2="{}" y1="7" y2="7"/>'
        '<rect class="rate-interval" x="{}" y="3" width="{}" height="8"/>'
        '<circle class="rate-dot" cx="{}" cy="7" r="3"/></svg>',
        WIDTH,
        HEIGHT,
        WIDTH,
        HEIGHT,
        rate.numerator,
        rate.denominator,
        f"{rate.value:.3f}",
        f"{low:.3f}",
        f"{high:.3f}",
        f"{low:.6f}",
        f"{high:.6f}",
        WIDTH,
        round(WIDTH * low, 1),
        max(1.0, round(WIDTH * (high - low), 1)),
        x,
    )
