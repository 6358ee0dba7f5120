"""MLIR text for a Module, in MLIR's generic op form.

Each graph prints as a `func.func`; values print as `%N` (TFLite tensor names
carry characters MLIR identifiers cannot) with the tensor name kept in a
`loc(...)` so the text still points at the model. A dialect may register an
attribute formatter (the TOSA backend does, to print attributes with the types
`tosa-opt` expects); otherwise attributes print by their Python type.
"""

from __future__ import annotations

from typing import Any

import numpy as np

# The dialects' formatters and printers are registered in ir.core, so that
# registering one does not load this module.
from tfl2tosa.ir.core import (
    ATTR_FORMATTERS,
    OP_PRINTERS,
    Graph,
    Module,
    Op,
    Value,
)
from tfl2tosa.ir.types import TensorType, Type, mlir_float

# Constants with more elements than this print as MLIR's elided resource.
DEFAULT_ELIDE_ELEMENTS = 16


def quote(text: str) -> str:
    import json  # printing is rare next to converting, which imports this module

    return json.dumps(text)


def format_dense(array: np.ndarray, type_text: str, elide: int | None) -> str:
    if elide is not None and array.size > elide:
        return f"dense_resource<__elided__> : {type_text}"
    if array.size == 0:
        return f"dense<> : {type_text}"
    flat = np.asarray(array).reshape(-1)
    if array.size > 1 and np.all(flat == flat[0]):
        body = _scalar_text(flat[0])  # a splat
    else:
        body = _nested(np.asarray(array))
    return f"dense<{body}> : {type_text}"


def _scalar_text(x: Any) -> str:
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if isinstance(x, (np.floating, float)):
        f = float(x)
        if np.isfinite(f):
            return mlir_float(f)
        # MLIR spells non-finite floats by their bit pattern.
        return "0x" + np.asarray(x).view(f"u{np.asarray(x).itemsize}").tobytes()[::-1].hex().upper()
    if isinstance(x, (np.complexfloating, complex)):
        return f"({mlir_float(x.real)},{mlir_float(x.imag)})"
    return str(int(x))


def _nested(array: np.ndarray) -> str:
    if array.ndim == 0:
        return _scalar_text(array[()])
    return "[" + ", ".join(_nested(a) for a in array) + "]"


def format_attr(op: Op, name: str, value: Any, elide: int | None) -> str:
    formatter = ATTR_FORMATTERS.get(op.dialect)
    if formatter is not None:
        text = formatter(op, name, value)
        if text is not None:
            return text
    return format_value(value, elide, op.results[0].type if op.results else None)


def format_value(value: Any, elide: int | None = DEFAULT_ELIDE_ELEMENTS,
                 type_hint: Type | None = None) -> str:
    """Generic attribute text by Python type."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return f"{int(value)} : i32"
    if isinstance(value, (float, np.floating)):
        return f"{mlir_float(value)} : f32"
    if isinstance(value, str):
        return quote(value)
    if isinstance(value, bytes):
        return quote("0x" + value.hex().upper())
    if isinstance(value, np.ndarray):
        type_text = str(type_hint) if isinstance(type_hint, TensorType) else _array_type(value)
        return format_dense(value, type_text, elide)
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                         for v in value):
            return "array<i32: " + ", ".join(str(int(v)) for v in value) + ">"
        return "[" + ", ".join(format_value(v, elide) for v in value) + "]"
    if value is None:
        return "unit"
    return quote(str(value))


def _array_type(array: np.ndarray) -> str:
    from tfl2tosa.ir import types as t

    by_dtype = {"float32": t.f32, "float16": t.f16, "float64": t.f64, "int8": t.i8,
                "int16": t.i16, "int32": t.i32, "int64": t.i64, "uint8": t.u8, "bool": t.i1,
                "uint16": t.u16, "uint32": t.u32, "uint64": t.u64}
    element = by_dtype.get(array.dtype.name, t.i8)
    return str(TensorType(array.shape, element))


class _Names:
    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.counter = 0

    def define(self, value: Value, name: str | None = None) -> str:
        if name is None:
            name = f"%{self.counter}"
            self.counter += 1
        self.names[id(value)] = name
        return name

    def __getitem__(self, value: Value) -> str:
        return self.names.get(id(value), "%<undefined>")


def print_graph(graph: Graph, *, elide: int | None = DEFAULT_ELIDE_ELEMENTS,
                locations: bool = True, indent: str = "  ") -> str:
    names = _Names()
    args = []
    for i, v in enumerate(graph.inputs):
        arg = names.define(v, f"%arg{i}")
        loc = f" loc({quote(v.name)})" if locations else ""
        args.append(f"{arg}: {v.type}{loc}")
    results = ", ".join(str(v.type) for v in graph.outputs)
    lines = [f"{indent}func.func @{_symbol(graph.name)}({', '.join(args)}) -> ({results}) {{"]
    body = indent * 2
    for op in graph.ops:
        lines.append(body + _print_op(op, names, elide, locations))
    outs = ", ".join(names[v] for v in graph.outputs)
    types = ", ".join(str(v.type) for v in graph.outputs)
    lines.append(f"{body}func.return {outs} : {types}" if graph.outputs else f"{body}func.return")
    lines.append(f"{indent}}}")
    return "\n".join(lines)


def _symbol(name: str) -> str:
    return name if name.replace("_", "a").isalnum() else quote(name)


def _print_op(op: Op, names: _Names, elide: int | None, locations: bool) -> str:
    operand_names = [names[v] for v in op.operands]
    results = [names.define(v) for v in op.results]
    lhs = (", ".join(results) + " = ") if results else ""
    loc = ""
    if locations:
        loc = f" loc({quote(op.results[0].name if op.results else op.loc or op.opname)})"
    printer = OP_PRINTERS.get(op.dialect)
    custom = printer(op, operand_names) if printer is not None else None
    if custom is not None:
        return f"{lhs}{custom}{loc}"
    operands = ", ".join(operand_names)
    attrs = ""
    if op.attrs:
        items = ", ".join(f"{k} = {format_attr(op, k, v, elide)}" for k, v in op.attrs.items())
        attrs = f" <{{{items}}}>"
    in_types = ", ".join(str(v.type) for v in op.operands)
    out_types = ", ".join(str(v.type) for v in op.results)
    if len(op.results) != 1:
        out_types = f"({out_types})"
    return f'{lhs}"{op.name}"({operands}){attrs} : ({in_types}) -> {out_types}{loc}'


def print_module(module: Module, *, elide: int | None = DEFAULT_ELIDE_ELEMENTS,
                 locations: bool = True) -> str:
    graphs = "\n".join(print_graph(g, elide=elide, locations=locations)
                       for g in module.graphs.values())
    return f"module {{\n{graphs}\n}}\n"
