"""Long identifiers (protocol ids, hashes, policy identities) shown short: the full value stays the text (so a
selection copies it whole) and the title (so hover shows it); CSS cuts what does not fit with an ellipsis (a hash
after its first dozen characters), and a copy button puts the full value on the clipboard (site.js)."""

from django import template
from django.utils.html import format_html

register = template.Library()

HASHES = ("sha256", "policy identity", "evaluator revision")  # opaque: a dozen characters tell them apart


@register.simple_tag
def identifier(value, what: str = "identifier", element_id: str = "") -> str:
    """`<span class="ident">` holding the value in a `<code>` and a copy button; `what` names it for the button."""
    if value in (None, ""):
        return "–"
    return format_html(
        '<span class="ident{}"><code{} title="{}">{}</code>'
        '<button type="button" class="copy" data-copy="{}" title="copy the full {}" aria-label="copy the full {}">'
        "copy</button></span>",
        " hash" if what in HASHES else "",
        format_html(' id="{}"', element_id) if element_id else "",
        value,
        value,
        value,
        what,
        what,
    )
