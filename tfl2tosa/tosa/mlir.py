"""TOSA MLIR text that `tosa-opt` (tosa-tools 2026.8.0) parses.

Ops print in MLIR's generic form, attributes typed the way that version of
the TOSA dialect declares them (found by round-tripping our `.tosa` files
through `tosa-opt --tosa-deserialize --mlir-print-op-generic`):

- `axis = 1 : i32`; `kernel/stride/pad/dilation/out_pad = array<i64: ...>`,
  but TRANSPOSE `perms = array<i32: ...>`; booleans `true`/`false`;
- `acc_type` as a type (`i32`, `i48`, `f16`, `f32`); enums as
  `#tosa.nan_mode<PROPAGATE>`, `#tosa.rounding_mode<DOUBLE_ROUND>`,
  `#tosa.resize_mode<BILINEAR>` (the dialect spells the nearest mode
  NEAREST_NEIGHBOR, as the specification does; the flatbuffer says NEAREST);
- CLAMP bounds as scalars of the tensor's element type (`-3 : i8`);
- `tosa.const` `values = dense<...> : tensor<...>`, `tosa.const_shape`
  `values = dense<[...]> : tensor<Nxindex>` with result type `!tosa.shape<N>`;
- COND_IF / WHILE_LOOP print their branch graphs as inline regions ending in
  `tosa.yield`; those graphs are not printed as functions of their own;
- `tosa.variable` is a module-level op (`sym_name`, `type`, `var_shape`,
  `initial_value`), hoisted out of the graph that declares it.

The text carries storage types only (tosa-opt has no quant dialect; TOSA is
signless, so `ui8` prints as `i8` with the same bits). Graph inputs and outputs
keep their names as `tosa.tensor_name` attributes and every value its name in
a `loc(...)`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tfl2tosa.errors import IRError
from tfl2tosa.ir.core import Graph, Module, Op, Value
from tfl2tosa.ir.types import (
    ElementType,
    NoneType,
    ScalarType,
    ShapeType,
    TensorType,
    Type,
    numpy_dtype,
    scalar_type,
    storage_type,
)
from tfl2tosa.tosa import ops as tosa_ops

# TOSA-dialect attribute kinds the op table does not need to know: its integer
# arrays are DenseI64ArrayAttr except TRANSPOSE's perms (DenseI32ArrayAttr).
_I32_ARRAYS = {("tosa.transpose", "perms")}
_ENUM_ATTRS = {"nan_mode": "nan_mode", "rounding_mode": "rounding_mode",
               "resize_mode": "resize_mode"}
# Enum values the dialect spells like the specification, not like the
# flatbuffer (and our IR): RESIZE's nearest mode.
_ENUM_SPELLING = {"NEAREST": "NEAREST_NEIGHBOR"}
# Constants with more elements than this print as a hex string of their bytes.
_HEX_THRESHOLD = 16


def print_tosa_mlir(module: Module, *, elide: int | None = None,
                    locations: bool = True, target_env: bool = True) -> str:
    """The module as TOSA MLIR. `elide` replaces constants with more elements
    than that by `dense_resource<__elided__>` (for display; tosa-opt then cannot
    run the graph). `target_env` states the profiles and extensions the graph
    uses as the module's `tosa.target_env`, which `tosa-opt --tosa-validate`
    checks against (without it tosa-opt assumes a target without extensions)."""
    return _ModulePrinter(module, elide, locations, target_env).print()


def target_env_attribute(module: Module) -> str | None:
    """`#tosa.target_env<...>` in tosa-opt's spelling (`pro_int`; extensions in
    lower case without `EXT-`); level 8K, the specification's level for the
    inference profiles. None for a graph that needs no extension: tosa-opt
    (tosa-tools 2026.8.0) prints `extensions = []` but cannot parse it back,
    and its default target (both profiles, no extension) accepts such a graph."""
    from tfl2tosa.tosa.verify import required_features

    profiles, extensions = required_features(module)
    if not extensions:
        return None

    profile_names = ", ".join(p.lower().replace("-", "_") for p in profiles)
    extension_names = ", ".join(e.removeprefix("EXT-").lower() for e in extensions)
    return (f'#tosa.target_env<specification_version = "1.0", level = "8k", '
            f"profiles = [{profile_names}], extensions = [{extension_names}]>")


# ---------------------------------------------------------------------------
# Types and literals


def _element_text(element: ElementType) -> str:
    scalar = storage_type(element)
    if scalar.kind == "unsigned":  # TOSA is signless: same bits, signless type
        return f"i{scalar.bits}"
    return scalar.name


def type_text(t: Type) -> str:
    if isinstance(t, ShapeType):
        return f"!tosa.shape<{t.rank}>"
    if isinstance(t, TensorType):
        if t.shape is None:
            return f"tensor<*x{_element_text(t.element)}>"
        dims = "".join(("?" if d < 0 else str(d)) + "x" for d in t.shape)
        return f"tensor<{dims}{_element_text(t.element)}>"
    if isinstance(t, NoneType):
        raise IRError("TOSA has no optional operands; a `none` value cannot be printed")
    raise IRError(f"cannot print type {t}")


def quote(text: str) -> str:
    """An MLIR string literal: printable ASCII as is, other bytes as \\XX escapes."""
    out = []
    for byte in text.encode("utf-8"):
        char = chr(byte)
        if char in '"\\' or not 0x20 <= byte < 0x7F:
            out.append(f"\\{byte:02X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _float_text(value: Any, element: ScalarType) -> str:
    x = float(value)
    if np.isfinite(x):
        text = repr(x)
        if "." not in text:  # MLIR float literals need a '.': 1e-05 -> 1.0e-05
            mantissa, _, exponent = text.partition("e")
            text = f"{mantissa}.0" + (f"e{exponent}" if exponent else "")
        return text
    # Non-finite values print as their bit pattern.
    bits = np.asarray(value).astype(_np_type(element)).view(f"u{element.bits // 8}")
    return "0x" + format(int(bits), f"0{element.bits // 4}X")


def _np_type(element: ScalarType) -> np.dtype:
    return numpy_dtype(element)


def _scalar_text(value: Any, element: ScalarType) -> str:
    if element.kind == "bool":
        return "true" if bool(value) else "false"
    if element.is_float:
        return _float_text(value, element)
    return str(int(value))


def _signless(array: np.ndarray, element: ScalarType) -> np.ndarray:
    """Unsigned storage as the signed integers with the same bits."""
    if element.kind == "unsigned":
        return np.asarray(array).astype(f"u{array.dtype.itemsize}").view(
            f"i{array.dtype.itemsize}")
    return np.asarray(array)


def _hex_ok(element: ScalarType) -> bool:
    # MLIR's hex form is the raw little-endian buffer; only byte-sized
    # widths (not i1, i4, i48) have the same layout there and in numpy.
    return element.bits in (8, 16, 32) and element.kind != "bool"


def dense_text(values: Any, t: TensorType, elide: int | None = None) -> str:
    """`dense<...> : tensor<...>` for constant `values` of type `t`."""
    element = storage_type(t.element)
    signless = scalar_type(_element_text(element))
    array = _signless(np.asarray(values), element)
    type_str = type_text(t)
    if elide is not None and array.size > elide:
        return f"dense_resource<__elided__> : {type_str}"
    flat = array.reshape(-1)
    if flat.size == 0:
        return f"dense<> : {type_str}"
    if _is_splat(flat):
        return f"dense<{_scalar_text(flat[0], signless)}> : {type_str}"
    if flat.size > _HEX_THRESHOLD and _hex_ok(signless):
        raw = np.ascontiguousarray(flat.astype(_np_type(signless), copy=False)).view(np.uint8)
        return f'dense<"0x{raw.tobytes().hex().upper()}"> : {type_str}'
    return f"dense<{_nested(array, signless)}> : {type_str}"


def _is_splat(flat: np.ndarray) -> bool:
    """All elements have the same bits (NaNs included)."""
    raw = np.ascontiguousarray(flat).view(np.uint8).reshape(flat.size, -1)
    return bool((raw == raw[0]).all())


def _nested(array: np.ndarray, element: ScalarType) -> str:
    if array.ndim == 0:
        return _scalar_text(array[()], element)
    return "[" + ", ".join(_nested(a, element) for a in array) + "]"


def _index_dense(values: list[int]) -> str:
    body = "[" + ", ".join(str(int(v)) for v in values) + "]"
    return f"dense<{body}> : tensor<{len(values)}xindex>"


# ---------------------------------------------------------------------------
# Attributes


def format_tosa_attr(op: Op, name: str, value: Any, elide: int | None = None) -> str | None:
    """Attribute text as the TOSA dialect types it, or None if `name` is not a
    TOSA attribute of `op` (also the generic IR printer's, through `tfl2tosa.tosa`)."""
    definition = tosa_ops.BY_MLIR.get(op.name)
    if definition is None:
        return None
    try:
        attr = definition.attr(name)
    except KeyError:
        return None
    kind = attr.type
    if kind == "i32":
        return f"{int(value)} : i32"
    if kind == "bool":
        return "true" if value else "false"
    if kind == "i32[]":
        width = "i32" if (op.name, name) in _I32_ARRAYS else "i64"
        return f"array<{width}: " + ", ".join(str(int(v)) for v in value) + ">"
    if kind == "acc_type":
        return tosa_ops.ACC_TYPE_ELEMENT[str(value)]
    if kind in _ENUM_ATTRS:
        return f"#tosa.{_ENUM_ATTRS[kind]}<{_ENUM_SPELLING.get(str(value), value)}>"
    if kind == "value":
        element = storage_type(op.operands[0].type.element)
        signless = scalar_type(_element_text(element))
        scalar = _signless(np.asarray([value]), element)[0] if element.is_integer else value
        return f"{_scalar_text(scalar, signless)} : {signless.name}"
    if kind in ("string", "graph"):
        return quote(value.decode() if isinstance(value, bytes) else str(value))
    if kind == "tensor":
        if op.name == "tosa.const":
            return dense_text(value, op.result.type, elide)
        return None
    if kind == "i64[]":
        return _index_dense(list(value))
    if kind == "var_type":
        return _element_text(scalar_type(str(value)))
    return None


# ---------------------------------------------------------------------------
# Printing graphs


class _Names:
    """SSA names for one function, nested regions included (MLIR needs them unique)."""

    def __init__(self) -> None:
        self.of: dict[int, str] = {}
        self.next_value = 0
        self.next_arg = 0

    def argument(self, value: Value) -> str:
        name = f"%arg{self.next_arg}"
        self.next_arg += 1
        self.of[id(value)] = name
        return name

    def results(self, op: Op) -> str:
        """Define the op's results; returns the left-hand side ("" if none)."""
        if not op.results:
            return ""
        base = f"%{self.next_value}"
        self.next_value += 1
        if len(op.results) == 1:
            self.of[id(op.result)] = base
            return base + " = "
        for i, value in enumerate(op.results):
            self.of[id(value)] = f"{base}#{i}"
        return f"{base}:{len(op.results)} = "

    def __getitem__(self, value: Value) -> str:
        try:
            return self.of[id(value)]
        except KeyError:
            raise IRError(f"value {value.name!r} is used but not defined") from None


class _ModulePrinter:
    def __init__(self, module: Module, elide: int | None, locations: bool,
                 target_env: bool = True) -> None:
        if not module.graphs:
            raise IRError("cannot print a module without graphs")
        self.module = module
        self.target_env = target_env
        self.elide = elide
        self.locations = locations
        self.branches = self._branch_graphs()

    def _branch_graphs(self) -> set[str]:
        names = set()
        for _, op in self.module.ops():
            definition = tosa_ops.BY_MLIR.get(op.name)
            for attr in definition.attrs if definition else ():
                if attr.type == "graph":
                    graph = str(op.attrs[attr.name])
                    if graph not in self.module.graphs:
                        raise IRError(f"{op.name} names graph {graph!r}, which the module "
                                      "does not have")
                    names.add(graph)
        return names

    def print(self) -> str:
        target = target_env_attribute(self.module) if self.target_env else None
        lines = [f"module attributes {{tosa.target_env = {target}}} {{" if target else "module {"]
        for _, op in self.module.ops():
            if op.name == "tosa.variable":
                lines.append("  " + self._variable(op))
        for graph in self.module.graphs.values():
            if graph.name not in self.branches:
                lines.extend(self._function(graph))
        lines.append("}")
        return "\n".join(lines) + "\n"

    def _loc(self, name: str) -> str:
        return f" loc({quote(name)})" if self.locations and name else ""

    def _variable(self, op: Op) -> str:
        element = scalar_type(str(op.attrs["type"]))
        shape = [int(d) for d in op.attrs["var_shape"]]
        attrs = [f"sym_name = {quote(str(op.attrs['name']))}",
                 f"type = {_element_text(element)}",
                 f"var_shape = {_index_dense(shape)}"]
        initial = op.attrs.get("initial_value")
        if initial is not None and initial is not False:
            attrs.append("initial_value = "
                         + dense_text(initial, TensorType(tuple(shape), element), self.elide))
        return f'"tosa.variable"() <{{{", ".join(attrs)}}}> : () -> (){self._loc(op.loc)}'

    def _function(self, graph: Graph) -> list[str]:
        names = _Names()
        args = []
        for value in graph.inputs:
            args.append(f"{names.argument(value)}: {type_text(value.type)} "
                        f"{{tosa.tensor_name = {quote(value.name)}}}")
        results = ", ".join(f"{type_text(v.type)} {{tosa.tensor_name = {quote(v.name)}}}"
                            for v in graph.outputs)
        symbol = graph.name if graph.name.replace("_", "a").isalnum() else quote(graph.name)
        lines = [f"  func.func @{symbol}({', '.join(args)}) -> ({results}) {{"]
        lines.extend(self._body(graph, names, "    "))
        outs = ", ".join(names[v] for v in graph.outputs)
        types = ", ".join(type_text(v.type) for v in graph.outputs)
        lines.append(f'    "func.return"({outs}) : ({types}) -> ()')
        lines.append("  }")
        return lines

    def _body(self, graph: Graph, names: _Names, indent: str) -> list[str]:
        lines: list[str] = []
        for op in graph.ops:
            if op.name != "tosa.variable":
                lines.extend(self._op(op, names, indent))
        return lines

    def _op(self, op: Op, names: _Names, indent: str) -> list[str]:
        definition = tosa_ops.BY_MLIR.get(op.name)
        if definition is None:
            raise IRError(f"{op.name} ({op.loc or 'no location'}) is not a TOSA operator")
        operands = ", ".join(names[v] for v in op.operands)
        properties, regions = self._properties_and_regions(op, definition)
        lhs = names.results(op)
        in_types = ", ".join(type_text(v.type) for v in op.operands)
        out_types = ", ".join(type_text(v.type) for v in op.results)
        if len(op.results) != 1:
            out_types = f"({out_types})"
        props = f" <{{{', '.join(properties)}}}>" if properties else ""
        head = f'{indent}{lhs}"{op.name}"({operands}){props}'
        tail = f" : ({in_types}) -> {out_types}{self._loc(self._op_name(op))}"
        if not regions:
            return [head + tail]
        lines = [head + " ("]
        for i, graph in enumerate(regions):
            lines.extend(self._region(graph, names, indent + "  "))
            lines[-1] += "," if i + 1 < len(regions) else ""
        lines.append(f"{indent}){tail}")
        return lines

    @staticmethod
    def _op_name(op: Op) -> str:
        return op.results[0].name if op.results else op.loc

    def _properties_and_regions(self, op: Op, definition: tosa_ops.OpDef
                                ) -> tuple[list[str], list[Graph]]:
        properties, regions = [], []
        for attr in definition.attrs:
            if attr.name not in op.attrs:
                continue
            if attr.type == "graph":
                regions.append(self.module.graphs[str(op.attrs[attr.name])])
                continue
            text = format_tosa_attr(op, attr.name, op.attrs[attr.name], self.elide)
            if text is not None:
                properties.append(f"{attr.name} = {text}")
        return properties, regions

    def _region(self, graph: Graph, names: _Names, indent: str) -> list[str]:
        args = ", ".join(f"{names.argument(v)}: {type_text(v.type)}{self._loc(v.name)}"
                         for v in graph.inputs)
        lines = [f"{indent}{{", f"{indent}^bb0({args}):"]
        lines.extend(self._body(graph, names, indent + "  "))
        outs = ", ".join(names[v] for v in graph.outputs)
        types = ", ".join(type_text(v.type) for v in graph.outputs)
        lines.append(f'{indent}  "tosa.yield"({outs}) : ({types}) -> ()')
        lines.append(f"{indent}}}")
        return lines
