"""Campaign labels: what a training script says of a campaign at launch (the run, the step, the git commit, free
tags), and the filters that find campaigns by them.

A label is a name and a text value; a free tag is a name with an empty value. Names are short lowercase words, so a
name is safe to use as a database JSON key and in a query string; values are one line of printable text. Labels
are frozen with the plan: they say which checkpoint a result belongs to.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from evaluator.protocol.errors import ProtocolError

NAME = re.compile(r"[a-z][a-z0-9_.-]{0,39}")
MAX_LABELS = 20
MAX_VALUE_CHARS = 200


class InvalidLabel(ProtocolError):
    """Labels or label filters that are not: every reason at once (a name, a value, too many of them)."""

    def __init__(self, reasons: list[str] | str):
        self.reasons = [reasons] if isinstance(reasons, str) else list(reasons)
        super().__init__("; ".join(self.reasons))


def _name_problem(name: object) -> str | None:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        shown = repr(name)[:60]
        return f"label name {shown} is not a name: a lowercase letter, then up to 39 lowercase letters, digits or . _ -"
    return None


def _value_problem(name: str, value: object) -> str | None:
    if not isinstance(value, str):
        return f"label {name}: the value is text (give {str(value)[:40]!r} in quotes), not a {type(value).__name__}"
    if len(value) > MAX_VALUE_CHARS:
        return f"label {name}: the value holds at most {MAX_VALUE_CHARS} characters, got {len(value)}"
    if not value.isprintable():
        return f"label {name}: the value is one line of printable text"
    return None


def check_labels(labels: object) -> dict[str, str]:
    """The labels, validated, in name order; InvalidLabel naming every problem."""
    if not isinstance(labels, Mapping):
        raise InvalidLabel(f'labels are an object of names to text values, e.g. {{"run": "abc"}}, not {labels!r:.40}')
    problems = []
    if len(labels) > MAX_LABELS:
        problems.append(f"a campaign holds at most {MAX_LABELS} labels, got {len(labels)}")
    for name, value in labels.items():
        problem = _name_problem(name) or _value_problem(name, value)
        if problem:
            problems.append(problem)
    if problems:
        raise InvalidLabel(problems)
    return dict(sorted(labels.items()))


def parse_label(text: str) -> tuple[str, str]:
    """`run=abc` as (run, abc); `baseline` (a free tag) as (baseline, ""). Nothing is stripped: `run = abc` is
    refused for its name, never read as another label than the one written."""
    name, _, value = text.partition("=")
    return name, value


def parse_labels(lines: list[str]) -> dict[str, str]:
    """`name=value` items (the launch form's lines, the client's --label) as validated labels; a name given twice is
    refused, never the last one silently kept."""
    labels: dict[str, str] = {}
    twice = []
    for line in lines:
        if not line.strip():
            continue
        name, value = parse_label(line)
        if name in labels:
            twice.append(name)
        labels[name] = value
    if twice:
        raise InvalidLabel(f"label {', '.join(sorted(set(twice)))} given more than once")
    return check_labels(labels)


@dataclass(frozen=True)
class LabelFilter:
    """`run=abc`: campaigns whose label run is abc; `baseline`: campaigns that carry the label at all."""

    name: str
    value: str | None  # None: any value

    @classmethod
    def parse(cls, text: str) -> LabelFilter:
        name, has_value, value = text.partition("=")
        problem = _name_problem(name) or (_value_problem(name, value) if has_value else None)
        if problem:
            raise InvalidLabel(f"label filter {text[:60]!r}: {problem}")
        return cls(name, value if has_value else None)

    def matches(self, labels: Mapping[str, str]) -> bool:
        return self.name in labels and (self.value is None or labels[self.name] == self.value)

    def __str__(self) -> str:
        return self.name if self.value is None else f"{self.name}={self.value}"


def parse_filters(texts: list[str]) -> list[LabelFilter]:
    """Every filter, or InvalidLabel naming each that is not one. At most MAX_LABELS of them: a campaign holds no
    more labels than that, and each filter is a clause of the query (a thousand overflow SQLite's expression tree)."""
    if len(texts) > MAX_LABELS:
        bound = f"at most {MAX_LABELS} label filters (a campaign holds at most {MAX_LABELS}), got {len(texts)}"
        raise InvalidLabel([bound])
    filters, problems = [], []
    for text in texts:
        try:
            filters.append(LabelFilter.parse(text))
        except InvalidLabel as exc:
            problems += exc.reasons
    if problems:
        raise InvalidLabel(problems)
    return filters
