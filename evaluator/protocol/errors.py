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


class InterventionRefused(ProtocolError):
    """An intervention that cannot be applied (unknown, not permitted now, or unable to reach the runner)."""


class ControlsEnded(InterventionRefused):
    """The attempt's last control has executed: nothing is left to intervene in while it closes."""


class LaunchRefused(ProtocolError):
    """A plan that cannot be launched. Raised with several typed errors, it holds each of them (the form
    shows them all at once); a plan with one problem raises that problem's own typed error."""

    def __init__(self, problems: list[ProtocolError] | str):
        self.errors = [] if isinstance(problems, str) else list(problems)
        self.problems = [problems] if isinstance(problems, str) else [str(e) for e in problems]
        super().__init__("; ".join(self.problems))


class ComparisonRefused(ProtocolError):
    """Two campaigns whose results cannot be compared (the same campaign, different protocol identities, no
    shared cell); it holds every reason."""

    def __init__(self, reasons: list[str]):
        self.reasons = list(reasons)
        super().__init__("; ".join(self.reasons))
