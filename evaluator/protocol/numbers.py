"""Whole numbers written outside RSI (a query string, a form field, a header, an environment variable): ASCII
digits only.

`str.isdigit()` is true of "²" and "٣": `int()` refuses the first (a ValueError, a 500) and reads the second, so a
check made with it lets through what the next line cannot read. Every such number is read here instead.
"""

from __future__ import annotations

import re

ASCII_DIGITS = re.compile(r"[0-9]+")


def whole_number(text: str, most_digits: int = 18) -> int | None:
    """The number that `text` writes in ASCII digits alone (no sign, no space, at most `most_digits`), or None."""
    if len(text) > most_digits or not ASCII_DIGITS.fullmatch(text):
        return None
    return int(text)
