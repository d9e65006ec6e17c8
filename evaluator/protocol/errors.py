"""Typed errors of the protocol core.

Every invalid configuration, identity or catalog is refused with one of these; the
message is one line that a user can act on.
"""


class ProtocolError(ValueError):
    """Base class: an input that the protocol does not define."""


class UnknownBenchmark(ProtocolError):
    pass


class UnknownTask(ProtocolError):
    pass


class UnknownOption(ProtocolError):
    """A mode, sensor track or scope name that the protocol does not know."""


class InvalidCombination(ProtocolError):
    """Options that are each valid but may not be selected together."""


class InvalidBudget(ProtocolError):
    """A budget number outside its allowed range."""


class MalformedIdentity(ProtocolError):
    """A protocol identity string that does not parse."""


class CatalogError(ProtocolError):
    """A task catalog file that does not match its schema or the upstream facts."""
