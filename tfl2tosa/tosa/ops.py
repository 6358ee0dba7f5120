"""Every TOSA 1.0 operator, defined once as data: `OPS` and `BY_MLIR`.

The writer, reader, verifier, MLIR printer and reference model all read this
table; nothing restates it. The definitions are written in
`tfl2tosa/tosa/op_definitions.py`; the table loads from what that module
generates, `op_table.py` (plain data, cheaper to load than the definitions
are to run). Conventions used across the code base:

- An op in our IR is named as in MLIR (`tosa.conv2d`); `OpDef.mlir` gives it.
- Operands appear in specification order (= flatbuffer `inputs[]` order).
  Zero points, shifts, multipliers, pad constants are tensor operands (made by
  `tosa.const`); `shape_t` operands are made by `tosa.const_shape`, whose
  attribute `values` holds the list of ints.
- `op.attrs` is keyed by the specification's attribute names. Values: ints,
  lists of ints, bools, strings; enums as the specification spells them
  (`acc_type`: "INT32" | "INT48" | "FP16" | "FP32"; `rounding_mode`:
  "SINGLE_ROUND" | "INEXACT_ROUND" | "DOUBLE_ROUND"; `nan_mode`: "PROPAGATE" |
  "IGNORE"; RESIZE `mode`: "NEAREST" | "BILINEAR"); CLAMP bounds as Python
  numbers; `tosa.const` `values` as a numpy array; COND_IF / WHILE_LOOP graph
  attributes as the names of graphs in the same Module.
- Element type names in `TypeMode.types` are our IR's scalar type names
  (`i1` for bool, `i4`, `i8`, `i16`, `i32`, `i48`, `f16`, `bf16`, `f32`,
  `f8E4M3FN`, `f8E5M2`); `shape` for shape_t.
- A `TypeMode.profiles` entry is one alternative that allows the mode; an entry
  joining names with "+" needs all of them (the specification's `and_name`),
  e.g. "PRO-INT+EXT-VARIABLE".

Source: the specification's `tosa.xml` (type modes with `version_added="1.0"`;
the 1.1 draft's additions such as EXT-INT64 and the block-scaled formats are
left out), the flatbuffer schema `tosa.fbs` of tosa-tools 2026.8.0 for
`fbs_op`, `fbs_attr` and `Attr.fbs_field`.
"""

from __future__ import annotations

from typing import Any

from tfl2tosa.ir.types import Frozen


class Arg(Frozen):
    """One operand or result, as the specification's argument table lists it."""

    name: str        # specification name: "input", "weight", "input_zp", ...
    kind: str        # "tensor" | "shape" | "tensor_list"
    type_var: str    # "in_t", "out_t", "in_out_t", "weight_t", "acc_t", "mul_t",
                     # "table_t", "index_t", or a fixed type: "i8_t", "i32_t", "bool_t"
    shape: str       # specification shape text, e.g. "[N,IH,IW,C]" (informational)
    # Compile-time constant (the specification's <ctc>): without EXT-DYNAMIC the
    # operand must be a `tosa.const` (tensors) or `tosa.const_shape` (shape_t).
    ctc: bool
    rank: tuple[int, int] | None  # (min, max) rank; None = up to MAX_RANK

    _fields = ("name", "kind", "type_var", "shape", "ctc", "rank")

    def __init__(self, name: str, kind: str, type_var: str, shape: str = "", ctc: bool = False,
                 rank: tuple[int, int] | None = None) -> None:
        self._set(name, kind, type_var, shape, ctc, rank)


class Attr(Frozen):
    """One attribute: specification name, value type, flatbuffer field."""

    name: str
    type: str        # "i32" | "i32[]" | "bool" | "string" | "acc_type" | "rounding_mode"
                     # | "nan_mode" | "resize_mode" | "value" (typed by the op's in_out_t,
                     # serialized as raw little-endian bytes) | "graph" | "tensor"
                     # | "i64[]" (CONST_SHAPE values) | "var_type" (an element type name)
    fbs_field: str   # field name in the flatbuffer attribute table ("" = not stored there)
    default: Any     # value assumed when an optional attribute is absent
    optional: bool   # may be absent from op.attrs (the specification's optional="true"
                     # or a documented default)

    _fields = ("name", "type", "fbs_field", "default", "optional")

    def __init__(self, name: str, type: str, fbs_field: str, default: Any = None,
                 optional: bool = False) -> None:
        self._set(name, type, fbs_field, default, optional)


class TypeMode(Frozen):
    """One allowed element-type combination and the profile/extension that allows it."""

    name: str                  # specification mode name, e.g. "signed 8x8 with int32 accumulate"
    types: dict[str, str]      # type variable -> element type name
    profiles: tuple[str, ...]  # e.g. ("PRO-INT",), ("PRO-FP",), ("EXT-INT16",)
    # Non-type parameters of the mode, e.g. {"TABLE_SIZE": 256} for TABLE.
    params: dict[str, int]

    _fields = ("name", "types", "profiles", "params")

    def __init__(self, name: str, types: dict[str, str], profiles: tuple[str, ...],
                 params: dict[str, int] | None = None) -> None:
        self._set(name, types, profiles, {} if params is None else params)

    def allowed(self, enabled: frozenset[str] | set[str]) -> bool:
        """True if one of the alternatives in `profiles` is fully enabled."""
        return any(all(part in enabled for part in alt.split("+")) for alt in self.profiles)


class OpDef(Frozen):
    name: str                  # specification name, e.g. "CONV2D"
    mlir: str                  # our IR / MLIR op name, e.g. "tosa.conv2d"
    chapter: str               # "tensor", "activation", "elementwise-binary", ...
    inputs: tuple[Arg, ...]
    outputs: tuple[Arg, ...]
    attrs: tuple[Attr, ...]
    modes: tuple[TypeMode, ...]
    fbs_op: int                # value of the flatbuffer `Op` enum
    fbs_attr: str              # name of the flatbuffer attribute table (union member)
    notes: tuple[str, ...]

    _fields = ("name", "mlir", "chapter", "inputs", "outputs", "attrs", "modes", "fbs_op",
               "fbs_attr", "notes")

    def __init__(self, name: str, mlir: str, chapter: str, inputs: tuple[Arg, ...],
                 outputs: tuple[Arg, ...], attrs: tuple[Attr, ...] = (),
                 modes: tuple[TypeMode, ...] = (), fbs_op: int = 0, fbs_attr: str = "",
                 notes: tuple[str, ...] = ()) -> None:
        self._set(name, mlir, chapter, inputs, outputs, attrs, modes, fbs_op, fbs_attr, notes)

    def attr(self, name: str) -> Attr:
        for a in self.attrs:
            if a.name == name:
                return a
        raise KeyError(f"{self.name} has no attribute {name!r}")

    @property
    def attr_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attrs)

    @property
    def has_list_input(self) -> bool:
        return any(a.kind == "tensor_list" for a in self.inputs)

    @property
    def has_list_output(self) -> bool:
        return any(a.kind == "tensor_list" for a in self.outputs)

    def modes_for(self, enabled: frozenset[str] | set[str]) -> tuple[TypeMode, ...]:
        return tuple(m for m in self.modes if m.allowed(enabled))


PROFILES = ("PRO-INT", "PRO-FP")
EXTENSIONS = (
    "EXT-INT16", "EXT-INT4", "EXT-BF16", "EXT-FP8E4M3", "EXT-FP8E5M2", "EXT-FFT",
    "EXT-VARIABLE", "EXT-CONTROLFLOW", "EXT-DOUBLEROUND", "EXT-INEXACTROUND", "EXT-DYNAMIC",
)
# The profiles an extension may be combined with (specification <profile_supported>).
EXTENSION_PROFILES: dict[str, tuple[str, ...]] = {
    "EXT-INT16": ("PRO-INT",), "EXT-INT4": ("PRO-INT",), "EXT-BF16": ("PRO-FP",),
    "EXT-FP8E4M3": ("PRO-FP",), "EXT-FP8E5M2": ("PRO-FP",), "EXT-FFT": ("PRO-FP",),
    "EXT-VARIABLE": PROFILES, "EXT-CONTROLFLOW": PROFILES, "EXT-DYNAMIC": PROFILES,
    "EXT-DOUBLEROUND": ("PRO-INT",), "EXT-INEXACTROUND": ("PRO-INT",),
}

# Allowed spellings of enum attributes, by Attr.type.
ENUMS: dict[str, tuple[str, ...]] = {
    "acc_type": ("INT32", "INT48", "FP16", "FP32"),
    "rounding_mode": ("SINGLE_ROUND", "INEXACT_ROUND", "DOUBLE_ROUND"),
    "nan_mode": ("PROPAGATE", "IGNORE"),
    "resize_mode": ("NEAREST", "BILINEAR"),
}
# Enum values that exist only with an extension (tosa.xml rounding_mode_t).
ENUM_EXTENSIONS: dict[str, dict[str, str]] = {
    "rounding_mode": {"DOUBLE_ROUND": "EXT-DOUBLEROUND", "INEXACT_ROUND": "EXT-INEXACTROUND"},
}
# acc_type value -> the element type of acc_t it names.
ACC_TYPE_ELEMENT = {"INT32": "i32", "INT48": "i48", "FP16": "f16", "FP32": "f32"}


def _load_table() -> dict[str, OpDef]:
    from tfl2tosa.tosa import op_table

    args = [Arg(*row) for row in op_table.ARGS]
    attrs = [Attr(*row) for row in op_table.ATTRS]
    modes = [TypeMode(name, dict(types), profiles, dict(params))
             for name, types, profiles, params in op_table.MODES]
    arg, attr, mode = args.__getitem__, attrs.__getitem__, modes.__getitem__
    return {name: OpDef(name, mlir, chapter, tuple(map(arg, inputs)), tuple(map(arg, outputs)),
                        tuple(map(attr, attributes)), tuple(map(mode, type_modes)), fbs_op,
                        fbs_attr, notes)
            for (name, mlir, chapter, inputs, outputs, attributes, type_modes, fbs_op, fbs_attr,
                 notes) in op_table.OPS}


# Specification name -> OpDef (in the specification's order), and MLIR name -> OpDef.
OPS: dict[str, OpDef] = _load_table()
BY_MLIR: dict[str, OpDef] = {op.mlir: op for op in OPS.values()}
