"""TOSA 1.0: the operator table (`tosa.ops`), the verifier (`tosa.verify`, whose
`verify` function checks a module) and op-building helpers (`tosa.build`).

Importing the package loads none of them: running a `.tosa` file reads the op
table but needs no verifier.
"""

from typing import Any

from tfl2tosa.ir.core import ATTR_FORMATTERS, Op

__all__ = ["BY_MLIR", "OPS", "OpDef", "Violation"]


def __getattr__(name: str) -> Any:
    if name in ("BY_MLIR", "OPS", "OpDef"):
        from tfl2tosa.tosa import ops

        return getattr(ops, name)
    if name == "Violation":
        from tfl2tosa.tosa.verify import Violation

        return Violation
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _format_attr(op: Op, name: str, value: Any) -> str | None:
    """A `tosa` op's attribute in the generic IR printer, spelled the way
    tosa-opt's dialect types it. The MLIR printer loads when something is
    printed, not with every conversion."""
    from tfl2tosa.ir.printer import DEFAULT_ELIDE_ELEMENTS
    from tfl2tosa.tosa.mlir import format_tosa_attr

    return format_tosa_attr(op, name, value, DEFAULT_ELIDE_ELEMENTS)


ATTR_FORMATTERS["tosa"] = _format_attr
