"""CSV as the site writes it: a cell a spreadsheet would run as a formula is written as text.

A cell that begins with = + - @, a tab or a carriage return is a formula to Excel, LibreOffice and Google Sheets
(OWASP, "CSV Injection"): a campaign named `=HYPERLINK(...)` would run in a reader's spreadsheet. Such a cell gets a
leading apostrophe, which the spreadsheet shows as text; numbers the site writes as numbers stay numbers.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value: object) -> object:
    """`value` as a CSV cell no spreadsheet runs: text that starts like a formula is prefixed with an apostrophe."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_text(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A CSV document of `header` and `rows`, every text cell made safe."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([safe_cell(name) for name in header])
    writer.writerows([safe_cell(value) for value in row] for row in rows)
    return out.getvalue()
