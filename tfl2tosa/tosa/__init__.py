"""TOSA 1.0: the operator table, the verifier and op-building helpers."""

from typing import Any

from tfl2tosa.ir import printer as _generic_printer
from tfl2tosa.ir.core import Op
from tfl2tosa.tosa.ops import BY_MLIR, OPS, OpDef
from tfl2tosa.tosa.verify import Violation, verify

__all__ = ["BY_MLIR", "OPS", "OpDef", "Violation", "verify"]


def _format_attr(op: Op, name: str, value: Any) -> str | None:
    """A `tosa` op's attribute in the generic IR printer, spelled the way
    tosa-opt's dialect types it. The MLIR printer loads when something is
    printed, not with every conversion."""
    from tfl2tosa.tosa.mlir import format_tosa_attr

    return format_tosa_attr(op, name, value, _generic_printer.DEFAULT_ELIDE_ELEMENTS)


_generic_printer.ATTR_FORMATTERS["tosa"] = _format_attr
