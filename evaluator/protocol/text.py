"""Free text people write into records (a tag's note, an intervention's note): printable, lines and tabs allowed.

A NUL is stored by SQLite and refused by PostgreSQL (a DataError, a 500), and no other control character belongs in
text a reviewer reads: each is refused with the reason on every database alike, as labels are (labels.py).
"""

from __future__ import annotations

LINE_BREAKS = str.maketrans("", "", "\n\r\t")


def note_problem(note: str, most_chars: int, what: str = "a note") -> str | None:
    """Why `note` cannot be stored as `what`, or None."""
    if len(note) > most_chars:
        return f"{what} holds at most {most_chars} characters, got {len(note)}"
    if not note.translate(LINE_BREAKS).isprintable():
        return f"{what} is printable text (lines and tabs, no control character such as NUL)"
    return None
