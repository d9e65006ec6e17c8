"""Protocol terms (termination reasons, error classes, modes) in the user's words on the pages; the term itself
stays in a tooltip, as the exports and the API name it."""

from django import template
from django.utils.html import format_html

register = template.Library()

# Where words say more than the term with its underscores replaced.
WORDS = {
    "evaluation_horizon": "evaluation horizon reached",
    "call_budget": "policy call budget spent",
    "runner_step_cap": "runner step cap reached",
    "native_termination": "the benchmark ended the episode",
    "policy_stop": "the policy stopped",
    "human_stop": "stopped by a human",
    "error": "an error ended it",
}


@register.simple_tag
def term(value) -> str:
    """A protocol term as words, the term on hover; "–" for none."""
    if value in (None, ""):
        return "–"
    return format_html(
        '<span class="term" title="protocol term: {}">{}</span>', value, WORDS.get(value, value.replace("_", " "))
    )
