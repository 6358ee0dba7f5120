"""The exception types the library raises. The CLI turns each into one line."""

from __future__ import annotations


class Tfl2TosaError(Exception):
    """Base class: anything the library reports about its input or its own limits."""

    exit_code = 1


class UsageError(Tfl2TosaError):
    """The caller asked for something that does not exist (an unknown pattern label)."""

    exit_code = 2


class IRError(Tfl2TosaError):
    """A malformed IR object (inconsistent type, bad operand, broken graph)."""


class ModelError(Tfl2TosaError):
    """The input model cannot be read: not a file, not a TFLite flatbuffer, corrupt."""

    exit_code = 2


class TosaFileError(Tfl2TosaError):
    """A `.tosa` file cannot be read."""

    exit_code = 2


class ConversionError(Tfl2TosaError):
    """One or more ops could not be converted; `failures` names each with its location."""

    def __init__(self, message: str, failures: list | None = None) -> None:
        super().__init__(message)
        self.failures = failures or []


class VerificationError(Tfl2TosaError):
    """A TOSA graph breaks the specification; `violations` lists each."""

    def __init__(self, message: str, violations: list | None = None) -> None:
        super().__init__(message)
        self.violations = violations or []


class InputDomainError(Tfl2TosaError):
    """TFLite itself cannot run the model on the inputs given or drawn (a zero
    divisor, a negative RSQRT input), or quantizes a NaN it computed there: the
    inputs are outside the model's domain."""


class ReferenceModelError(Tfl2TosaError):
    """The reference model cannot run a graph (invalid graph, missing input)."""


class SpecErrorIf(ReferenceModelError):
    """A TOSA ERROR_IF condition holds: the graph is not a valid TOSA graph."""


class SpecRequire(ReferenceModelError):
    """A TOSA REQUIRE condition fails at run time: the result is unpredictable."""


class ResourceLimitError(Tfl2TosaError):
    """A tensor, constant or loop would exceed a resource bound (`--max-tensor-bytes`,
    the unrolling limit of recurrent ops): refused before anything is allocated."""
