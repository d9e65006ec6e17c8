"""Decoding what a policy answers, before anything else touches it: JSON whose nesting is bounded, and the
usage a reply reports about itself. Everything a reply can hold that the evaluator could not handle (a
structure nested deeper than its recursion, an integer of more digits than Python converts, a NaN or a
negative count in its usage) is the policy's malformed output, never the evaluator's fault.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from evaluator.policies.base import PolicyFailure, Usage
from evaluator.protocol.actions import MAX_NESTING, nests_deeper
from evaluator.protocol.scoring import ErrorType

EXCERPT_BYTES = 300  # what the evidence keeps of a reply that is refused: enough to see what it was


def excerpt(data: bytes | str) -> str:
    """The start of a refused reply, as text, for the evaluator's evidence."""
    if isinstance(data, bytes):
        return data[:EXCERPT_BYTES].decode(errors="replace")
    return data[:EXCERPT_BYTES]


def check_nesting(value: Any, what: str) -> None:
    """malformed_output when `value` (decoded JSON or msgpack) nests deeper than MAX_NESTING."""
    if nests_deeper(value, MAX_NESTING):
        raise PolicyFailure(ErrorType.MALFORMED_OUTPUT, f"{what} nests deeper than {MAX_NESTING} levels")


def decode_json(data: bytes | str, what: str) -> Any:
    """`data` as JSON, or malformed_output saying why: not JSON, not UTF-8, a number Python will not convert
    (over 4,300 digits), or nested too deep."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise PolicyFailure(
            ErrorType.MALFORMED_OUTPUT, f"{what} nests deeper than {MAX_NESTING} levels", excerpt(data)
        ) from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError and the int-digit limit are ValueErrors
        raise PolicyFailure(ErrorType.MALFORMED_OUTPUT, f"{what} is not JSON ({exc})"[:300], excerpt(data)) from None
    check_nesting(value, what)
    return value


COUNTS = ("provider_requests", "input_tokens", "output_tokens")
MAX_COUNT = 2**63  # what a database's integer holds


def checked_usage(reported: Mapping, names: Mapping[str, str], what: str = "the reply's usage") -> Usage:
    """The Usage fields a reply reports ({Usage field: the reply's key}); absent or null stays unknown. A count
    that is not a whole number >= 0, or a cost that is not a finite number >= 0, is malformed output: usage is
    recorded as reported or not at all, never repaired."""
    fields: dict[str, Any] = {}
    for field, key in names.items():
        value = reported.get(key)
        if value is None:
            continue
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if field in COUNTS:
            valid = number and isinstance(value, int) and 0 <= value < MAX_COUNT
        else:
            valid = number and math.isfinite(value) and value >= 0
        if not valid:
            kind = f"a whole number from 0 to {MAX_COUNT - 1}" if field in COUNTS else "a finite number >= 0"
            raise PolicyFailure(ErrorType.MALFORMED_OUTPUT, f"{what}: {key} is {str(value)[:40]}, not {kind}")
        fields[field] = value
    return Usage(**fields)


MAX_VERSION_CHARS = 100


def reported_version(reply: Any) -> str | None:
    """The `policy_version` a reply may carry (a server that hot-reloads its weights says which it answered with):
    text or a whole number, one printable line of at most MAX_VERSION_CHARS; None when it says nothing. Anything
    else is malformed output, never dropped silently."""
    value = reply.get("policy_version") if isinstance(reply, Mapping) else None
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value or len(value) > MAX_VERSION_CHARS or not value.isprintable():
        raise PolicyFailure(
            ErrorType.MALFORMED_OUTPUT,
            f"the reply's policy_version is {str(value)[:40]!r}: give text or a whole number, one line of 1 to "
            f"{MAX_VERSION_CHARS} characters",
        )
    return value
