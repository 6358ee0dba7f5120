"""The in-memory IR: types, values, ops, graphs, a builder, a rewrite driver, a printer."""

from tfl2tosa.ir.builder import Builder
from tfl2tosa.ir.core import Graph, Module, Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter, rewrite_graph, rewrite_module
from tfl2tosa.ir.types import (
    DYNAMIC,
    ElementType,
    NoneType,
    ScalarType,
    ShapeType,
    TensorType,
    Type,
    UniformQuantized,
    UniformQuantizedPerAxis,
    expressed_type,
    is_quantized,
    numpy_dtype,
    scalar_type,
    storage_type,
)

__all__ = [
    "DYNAMIC", "Builder", "ElementType", "Failure", "NoneType", "Graph", "Module", "Op", "Rewriter",
    "ScalarType", "ShapeType", "TensorType", "Type", "UniformQuantized",
    "UniformQuantizedPerAxis", "Value", "expressed_type", "is_quantized", "numpy_dtype",
    "print_graph", "print_module", "rewrite_graph", "rewrite_module", "scalar_type",
    "storage_type",
]


def __getattr__(name: str) -> object:
    # The printer loads when something is printed, not with every conversion.
    if name in ("print_graph", "print_module"):
        from tfl2tosa.ir import printer

        return getattr(printer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
