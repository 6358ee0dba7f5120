"""Every TOSA 1.0 operator, defined once as data.

The writer, reader, verifier, MLIR printer and reference model all read this
table; nothing restates it. Conventions used across the code base:

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

# ---------------------------------------------------------------------------
# Shorthands that keep each definition below one readable block.

INT, FP = "PRO-INT", "PRO-FP"
I16X, I4X, BF16X = "EXT-INT16", "EXT-INT4", "EXT-BF16"
E4M3X, E5M2X = "EXT-FP8E4M3", "EXT-FP8E5M2"
FFTX, VARX, CFX = "EXT-FFT", "EXT-VARIABLE", "EXT-CONTROLFLOW"

BOOL, I4, I8, I16, I32, I48 = "i1", "i4", "i8", "i16", "i32", "i48"
F16, BF16, F32, E4M3, E5M2 = "f16", "bf16", "f32", "f8E4M3FN", "f8E5M2"


def tensor(name: str, type_var: str, shape: str = "", *, ctc: bool = False,
           rank: tuple[int, int] | None = None) -> Arg:
    return Arg(name, "tensor", type_var, shape, ctc, rank)


def zp(name: str, type_var: str) -> Arg:
    """A zero-point operand: a [1] compile-time-constant tensor of the described type."""
    return Arg(name, "tensor", type_var, "[1]", True, (1, 1))


def shape(name: str, shape_text: str = "") -> Arg:
    return Arg(name, "shape", "shape_t", shape_text, True, (1, 1))


def tensor_list(name: str, type_var: str = "") -> Arg:
    return Arg(name, "tensor_list", type_var)


def attr(name: str, type: str, default: Any = None, fbs_field: str | None = None, *,
         optional: bool = False) -> Attr:
    """An attribute; giving a default makes it optional."""
    return Attr(name, type, name if fbs_field is None else fbs_field, default,
                optional or default is not None)


ACC_TYPE = attr("acc_type", "acc_type")
LOCAL_BOUND = attr("local_bound", "bool", False)
NAN_MODE = attr("nan_mode", "nan_mode", "PROPAGATE")
AXIS = attr("axis", "i32")


def mode(name: str, profiles: tuple[str, ...], **types: str) -> TypeMode:
    return TypeMode(name, dict(types), profiles)


# One-type-variable modes: (mode name, element type, profiles).
Preset = tuple[str, str, tuple[str, ...]]
P_BOOL: Preset = ("Boolean", BOOL, (INT, FP))
P_S8: Preset = ("signed 8", I8, (INT,))
P_S16: Preset = ("signed 16", I16, (INT,))
P_S16X: Preset = ("signed 16", I16, (I16X,))
P_S32: Preset = ("signed 32", I32, (INT,))
P_S32IF: Preset = ("signed 32", I32, (INT, FP))
P_E4M3: Preset = ("fp8e4m3", E4M3, (E4M3X,))
P_E5M2: Preset = ("fp8e5m2", E5M2, (E5M2X,))
P_F16: Preset = ("fp16", F16, (FP,))
P_BF16: Preset = ("bf16", BF16, (BF16X,))
P_F32: Preset = ("fp32", F32, (FP,))

FLOATS = (P_F16, P_BF16, P_F32)
DATA_LAYOUT = (P_BOOL, P_S8, P_S16, P_S32, P_E4M3, P_E5M2, P_F16, P_BF16, P_F32)


def modes(var: str, *presets: Preset, **fixed: str) -> tuple[TypeMode, ...]:
    """Modes where `var` takes each preset's type; `fixed` type variables are constant."""
    return tuple(TypeMode(n, {var: t, **fixed}, p) for n, t, p in presets)


def conv_modes() -> tuple[TypeMode, ...]:
    """CONV2D / CONV3D / DEPTHWISE_CONV2D / TRANSPOSE_CONV2D type support."""
    def m(name: str, prof: str, in_t: str, weight_t: str, out_t: str, acc_t: str) -> TypeMode:
        return mode(name, (prof,), in_t=in_t, weight_t=weight_t, out_t=out_t, acc_t=acc_t)
    return (
        m("signed 8x8 with int32 accumulate", INT, I8, I8, I32, I32),
        m("signed 8x4 with int32 accumulate", I4X, I8, I4, I32, I32),
        m("signed 16x8 with int48 accumulate", I16X, I16, I8, I48, I48),
        m("fp8e4m3 with fp16 accumulate", E4M3X, E4M3, E4M3, F16, F16),
        m("fp8e5m2 with fp16 accumulate", E5M2X, E5M2, E5M2, F16, F16),
        m("fp16 with fp16 accumulate", FP, F16, F16, F16, F16),
        m("fp16 with fp32 accumulate", FP, F16, F16, F16, F32),
        m("bf16 with fp32 accumulate", BF16X, BF16, BF16, BF16, F32),
        m("fp32 with fp32 accumulate", FP, F32, F32, F32, F32),
    )


def conv_inputs(input_shape: str, weight_shape: str) -> tuple[Arg, ...]:
    return (tensor("input", "in_t", input_shape), tensor("weight", "weight_t", weight_shape),
            tensor("bias", "out_t", "[BC]", rank=(1, 1)),
            zp("input_zp", "in_t"), zp("weight_zp", "weight_t"))


def binary(out_var: str = "in_out_t", in_var: str = "in_out_t") -> dict[str, tuple[Arg, ...]]:
    return {"inputs": (tensor("input1", in_var, "shape1"), tensor("input2", in_var, "shape2")),
            "outputs": (tensor("output", out_var, "shape"),)}


def unary(input_name: str = "input1") -> dict[str, tuple[Arg, ...]]:
    return {"inputs": (tensor(input_name, "in_out_t", "shape"),),
            "outputs": (tensor("output", "in_out_t", "shape"),)}


def reduction(*presets: Preset, nan: bool = False) -> dict[str, Any]:
    return {"inputs": (tensor("input", "in_out_t", "shape1"),),
            "outputs": (tensor("output", "in_out_t", "shape"),),
            "attrs": (AXIS, NAN_MODE) if nan else (AXIS,),
            "modes": modes("in_out_t", *presets)}


def define(name: str, chapter: str, fbs_op: int, fbs_attr: str, *,
           mlir: str | None = None, inputs: tuple[Arg, ...] = (),
           outputs: tuple[Arg, ...] = (), attrs: tuple[Attr, ...] = (),
           modes: tuple[TypeMode, ...] = (), notes: tuple[str, ...] = ()) -> OpDef:
    op = OpDef(name, mlir or "tosa." + name.lower(), chapter, inputs, outputs, attrs, modes,
               fbs_op, fbs_attr, notes)
    if name in OPS or op.mlir in BY_MLIR:
        raise RuntimeError(f"{name} defined twice")
    OPS[name] = op
    BY_MLIR[op.mlir] = op
    return op


# Filled in below: specification name -> OpDef, and MLIR name -> OpDef.
OPS: dict[str, OpDef] = {}
BY_MLIR: dict[str, OpDef] = {}

# ---------------------------------------------------------------------------
# Tensor operators

define("ARGMAX", "tensor", 1, "ArgMaxAttribute",
       inputs=(tensor("input", "in_t", "shape1"),),
       outputs=(tensor("output", "out_t", "shape"),),
       attrs=(AXIS, NAN_MODE),
       modes=modes("in_t", P_S8, P_S16X, P_E4M3, P_E5M2, *FLOATS, out_t=I32))

define("AVG_POOL2D", "tensor", 2, "AvgPool2dAttribute",
       inputs=(tensor("input", "in_out_t", "[N,IH,IW,C]", rank=(4, 4)),
               zp("input_zp", "in_out_t"), zp("output_zp", "in_out_t")),
       outputs=(tensor("output", "in_out_t", "[N,OH,OW,C]", rank=(4, 4)),),
       attrs=(attr("kernel", "i32[]"), attr("stride", "i32[]"), attr("pad", "i32[]"), ACC_TYPE),
       modes=(
           mode("signed 8 with int32 accumulate", (INT,), in_out_t=I8, acc_t=I32),
           mode("signed 16 with int32 accumulate", (I16X,), in_out_t=I16, acc_t=I32),
           mode("fp8e4m3 with fp16 accumulate", (E4M3X,), in_out_t=E4M3, acc_t=F16),
           mode("fp8e5m2 with fp16 accumulate", (E5M2X,), in_out_t=E5M2, acc_t=F16),
           mode("fp16 with fp16 accumulate", (FP,), in_out_t=F16, acc_t=F16),
           mode("fp16 with fp32 accumulate", (FP,), in_out_t=F16, acc_t=F32),
           mode("bf16 with fp32 accumulate", (BF16X,), in_out_t=BF16, acc_t=F32),
           mode("fp32 with fp32 accumulate", (FP,), in_out_t=F32, acc_t=F32),
       ))

define("CONV2D", "tensor", 3, "Conv2dAttribute",
       inputs=conv_inputs("[N,IH,IW,IC]", "[OC,KH,KW,IC]"),
       outputs=(tensor("output", "out_t", "[N,OH,OW,OC]", rank=(4, 4)),),
       attrs=(attr("pad", "i32[]"), attr("stride", "i32[]"), attr("dilation", "i32[]"),
              ACC_TYPE, LOCAL_BOUND),
       modes=conv_modes())

define("CONV3D", "tensor", 4, "Conv3dAttribute",
       inputs=conv_inputs("[N,ID,IH,IW,IC]", "[OC,KD,KH,KW,IC]"),
       outputs=(tensor("output", "out_t", "[N,OD,OH,OW,OC]", rank=(5, 5)),),
       attrs=(attr("pad", "i32[]"), attr("stride", "i32[]"), attr("dilation", "i32[]"),
              ACC_TYPE, LOCAL_BOUND),
       modes=conv_modes())

define("DEPTHWISE_CONV2D", "tensor", 5, "DepthwiseConv2dAttribute",
       inputs=conv_inputs("[N,IH,IW,C]", "[KH,KW,C,M]"),
       outputs=(tensor("output", "out_t", "[N,OH,OW,C*M]", rank=(4, 4)),),
       attrs=(attr("pad", "i32[]"), attr("stride", "i32[]"), attr("dilation", "i32[]"),
              ACC_TYPE, LOCAL_BOUND),
       modes=conv_modes())

define("FFT2D", "tensor", 6, "FFT2dAttribute",
       inputs=(tensor("input_real", "in_out_t", "[N,H,W]", rank=(3, 3)),
               tensor("input_imag", "in_out_t", "[N,H,W]", rank=(3, 3))),
       outputs=(tensor("output_real", "in_out_t", "[N,H,W]", rank=(3, 3)),
                tensor("output_imag", "in_out_t", "[N,H,W]", rank=(3, 3))),
       attrs=(attr("inverse", "bool"), LOCAL_BOUND),
       modes=(mode("fp32", (FFTX,), in_out_t=F32),))

define("MATMUL", "tensor", 7, "MatMulAttribute",
       inputs=(tensor("A", "in_t", "[N,H,C]", rank=(3, 3)),
               tensor("B", "in_t", "[N,C,W]", rank=(3, 3)),
               zp("A_zp", "in_t"), zp("B_zp", "in_t")),
       outputs=(tensor("output", "out_t", "[N,H,W]", rank=(3, 3)),),
       modes=(
           mode("signed 8x8 with int32 accumulate", (INT,), in_t=I8, out_t=I32),
           mode("signed 16x16 with int48 accumulate", (I16X,), in_t=I16, out_t=I48),
           mode("fp8e4m3xfp8e4m3 with fp16 accumulate", (E4M3X,), in_t=E4M3, out_t=F16),
           mode("fp8e5m2xfp8e5m2 with fp16 accumulate", (E5M2X,), in_t=E5M2, out_t=F16),
           mode("fp16xfp16 with fp16 accumulate", (FP,), in_t=F16, out_t=F16),
           mode("fp16xfp16 with fp32 accumulate", (FP,), in_t=F16, out_t=F32),
           mode("bf16xbf16 with fp32 accumulate", (BF16X,), in_t=BF16, out_t=F32),
           mode("fp32xfp32 with fp32 accumulate", (FP,), in_t=F32, out_t=F32),
       ))

define("MAX_POOL2D", "tensor", 8, "MaxPool2dAttribute",
       inputs=(tensor("input", "in_out_t", "[N,IH,IW,C]", rank=(4, 4)),),
       outputs=(tensor("output", "in_out_t", "[N,OH,OW,C]", rank=(4, 4)),),
       attrs=(attr("kernel", "i32[]"), attr("stride", "i32[]"), attr("pad", "i32[]"), NAN_MODE),
       modes=modes("in_out_t", P_S8, P_S16X, P_E4M3, P_E5M2, *FLOATS))

define("RFFT2D", "tensor", 9, "RFFT2dAttribute",
       inputs=(tensor("input_real", "in_out_t", "[N,H,W]", rank=(3, 3)),),
       outputs=(tensor("output_real", "in_out_t", "[N,H,W/2 + 1]", rank=(3, 3)),
                tensor("output_imag", "in_out_t", "[N,H,W/2 + 1]", rank=(3, 3))),
       attrs=(LOCAL_BOUND,),
       modes=(mode("fp32", (FFTX,), in_out_t=F32),))

define("TRANSPOSE_CONV2D", "tensor", 10, "TransposeConv2dAttribute",
       inputs=conv_inputs("[N,IH,IW,IC]", "[OC,KH,KW,IC]"),
       outputs=(tensor("output", "out_t", "[N,OH,OW,OC]", rank=(4, 4)),),
       attrs=(attr("out_pad", "i32[]"), attr("stride", "i32[]"), ACC_TYPE, LOCAL_BOUND),
       modes=conv_modes())

# ---------------------------------------------------------------------------
# Activation functions

define("CLAMP", "activation", 11, "ClampAttribute",
       **unary("input"),
       attrs=(attr("min_val", "value"), attr("max_val", "value"), NAN_MODE),
       modes=modes("in_out_t", P_S8, P_S16X, *FLOATS),
       notes=(("min_val/max_val are typed as in_out_t; the flatbuffer holds their raw "
               "little-endian bytes"),))

for _name, _fbs, _table in (("ERF", 12, "ErfAttribute"), ("SIGMOID", 13, "SigmoidAttribute"),
                            ("TANH", 14, "TanhAttribute")):
    define(_name, "activation", _fbs, _table, **unary("input"), modes=modes("in_out_t", *FLOATS))

# ---------------------------------------------------------------------------
# Elementwise binary operators

define("ADD", "elementwise-binary", 15, "AddAttribute", **binary(),
       modes=modes("in_out_t", P_S32IF, *FLOATS))
define("ARITHMETIC_RIGHT_SHIFT", "elementwise-binary", 16, "ArithmeticRightShiftAttribute",
       **binary(), attrs=(attr("round", "bool"),),
       modes=modes("in_out_t", P_S8, P_S16, P_S32))
define("BITWISE_AND", "elementwise-binary", 17, "BitwiseAndAttribute", **binary(),
       modes=modes("in_out_t", P_S8, P_S16, P_S32))
define("BITWISE_OR", "elementwise-binary", 18, "BitwiseOrAttribute", **binary(),
       modes=modes("in_out_t", P_S8, P_S16, P_S32))
define("BITWISE_XOR", "elementwise-binary", 19, "BitwiseXorAttribute", **binary(),
       modes=modes("in_out_t", P_S8, P_S16, P_S32))
define("INTDIV", "elementwise-binary", 20, "IntDivAttribute", **binary(),
       modes=modes("in_out_t", P_S32IF))
define("LOGICAL_AND", "elementwise-binary", 21, "LogicalAndAttribute", **binary(),
       modes=modes("in_out_t", P_BOOL))
define("LOGICAL_LEFT_SHIFT", "elementwise-binary", 22, "LogicalLeftShiftAttribute", **binary(),
       modes=modes("in_out_t", ("signed 8", I8, (INT, FP)), ("signed 16", I16, (INT, FP)),
                   P_S32IF))
define("LOGICAL_RIGHT_SHIFT", "elementwise-binary", 23, "LogicalRightShiftAttribute",
       **binary(),
       modes=modes("in_out_t", ("signed 8", I8, (INT, FP)), ("signed 16", I16, (INT, FP)),
                   P_S32IF))
define("LOGICAL_OR", "elementwise-binary", 24, "LogicalOrAttribute", **binary(),
       modes=modes("in_out_t", P_BOOL))
define("LOGICAL_XOR", "elementwise-binary", 25, "LogicalXorAttribute", **binary(),
       modes=modes("in_out_t", P_BOOL))
define("MAXIMUM", "elementwise-binary", 26, "MaximumAttribute", **binary(), attrs=(NAN_MODE,),
       modes=modes("in_out_t", P_S32, *FLOATS))
define("MINIMUM", "elementwise-binary", 27, "MinimumAttribute", **binary(), attrs=(NAN_MODE,),
       modes=modes("in_out_t", P_S32, *FLOATS))
define("MUL", "elementwise-binary", 28, "MulAttribute",
       inputs=(tensor("input1", "in_t", "shape1"), tensor("input2", "in_t", "shape2"),
               Arg("shift", "tensor", "i8_t", "[1]", True, (1, 1))),
       outputs=(tensor("output", "out_t", "shape"),),
       modes=(
           mode("signed 8", (INT,), in_t=I8, out_t=I32),
           mode("signed 16", (INT,), in_t=I16, out_t=I32),
           mode("signed 32", (INT, FP), in_t=I32, out_t=I32),
           mode("fp16", (FP,), in_t=F16, out_t=F16),
           mode("bf16", (BF16X,), in_t=BF16, out_t=BF16),
           mode("fp32", (FP,), in_t=F32, out_t=F32),
       ),
       notes=("shift is used only when in_t is i32; it must be 0 otherwise",))
define("POW", "elementwise-binary", 29, "PowAttribute", **binary(),
       modes=modes("in_out_t", *FLOATS))
define("SUB", "elementwise-binary", 30, "SubAttribute", **binary(),
       modes=modes("in_out_t", P_S32IF, *FLOATS))
define("TABLE", "elementwise-binary", 31, "TableAttribute",
       inputs=(tensor("input1", "in_t", "shape"),
               tensor("table", "table_t", "[TABLE_SIZE]", rank=(1, 1), ctc=True)),
       outputs=(tensor("output", "out_t", "shape"),),
       modes=(
           TypeMode("signed 8", {"in_t": I8, "table_t": I8, "out_t": I8}, (INT,),
                    {"TABLE_SIZE": 256}),
           TypeMode("signed 16", {"in_t": I16, "table_t": I16, "out_t": I32}, (I16X,),
                    {"TABLE_SIZE": 513}),
       ))

# ---------------------------------------------------------------------------
# Elementwise unary operators

define("ABS", "elementwise-unary", 32, "AbsAttribute", **unary(),
       modes=modes("in_out_t", P_S32, *FLOATS))
define("BITWISE_NOT", "elementwise-unary", 33, "BitwiseNotAttribute", **unary(),
       modes=modes("in_out_t", P_S8, P_S16, P_S32))
define("CEIL", "elementwise-unary", 34, "CeilAttribute", **unary(),
       modes=modes("in_out_t", *FLOATS))
define("CLZ", "elementwise-unary", 35, "ClzAttribute", **unary(),
       modes=modes("in_out_t", P_S32))
for _name, _fbs, _table in (("COS", 36, "CosAttribute"), ("EXP", 37, "ExpAttribute"),
                            ("FLOOR", 38, "FloorAttribute"), ("LOG", 39, "LogAttribute")):
    define(_name, "elementwise-unary", _fbs, _table, **unary(),
           modes=modes("in_out_t", *FLOATS))
define("LOGICAL_NOT", "elementwise-unary", 40, "LogicalNotAttribute", **unary(),
       modes=modes("in_out_t", P_BOOL))
define("NEGATE", "elementwise-unary", 41, "NegateAttribute",
       inputs=(tensor("input1", "in_out_t", "shape"),
               zp("input1_zp", "in_out_t"), zp("output_zp", "in_out_t")),
       outputs=(tensor("output", "in_out_t", "shape"),),
       modes=(
           mode("signed 8", (INT,), in_out_t=I8, acc_t=I32),
           mode("signed 16", (INT,), in_out_t=I16, acc_t=I32),
           mode("signed 32", (INT,), in_out_t=I32, acc_t=I32),
           mode("fp16", (FP,), in_out_t=F16, acc_t=F16),
           mode("bf16", (BF16X,), in_out_t=BF16, acc_t=BF16),
           mode("fp32", (FP,), in_out_t=F32, acc_t=F32),
       ))
for _name, _fbs, _table in (("RECIPROCAL", 42, "ReciprocalAttribute"),
                            ("RSQRT", 43, "RsqrtAttribute"), ("SIN", 44, "SinAttribute")):
    define(_name, "elementwise-unary", _fbs, _table, **unary(),
           modes=modes("in_out_t", *FLOATS))

# ---------------------------------------------------------------------------
# Elementwise ternary, comparison

define("SELECT", "elementwise-ternary", 45, "SelectAttribute",
       inputs=(tensor("input1", "bool_t", "shape1"), tensor("input2", "in_out_t", "shape2"),
               tensor("input3", "in_out_t", "shape3")),
       outputs=(tensor("output", "in_out_t", "shape"),),
       modes=modes("in_out_t", P_BOOL, P_S8, P_S16, P_S32, *FLOATS))

for _name, _fbs, _table in (("EQUAL", 46, "EqualAttribute"), ("GREATER", 47, "GreaterAttribute"),
                            ("GREATER_EQUAL", 48, "GreaterEqualAttribute")):
    define(_name, "comparison", _fbs, _table, **binary("out_t", "in_t"),
           modes=modes("in_t", P_S32, *FLOATS, out_t=BOOL))

# ---------------------------------------------------------------------------
# Reduction operators (one axis; the output keeps it with size 1)

define("REDUCE_ALL", "reduction", 49, "ReduceAllAttribute", **reduction(P_BOOL))
define("REDUCE_ANY", "reduction", 50, "ReduceAnyAttribute", **reduction(P_BOOL))
define("REDUCE_MAX", "reduction", 51, "ReduceMaxAttribute",
       **reduction(P_S8, P_S16, P_S32, *FLOATS, nan=True))
define("REDUCE_MIN", "reduction", 52, "ReduceMinAttribute",
       **reduction(P_S8, P_S16, P_S32, *FLOATS, nan=True))
define("REDUCE_PRODUCT", "reduction", 53, "ReduceProductAttribute", **reduction(*FLOATS))
define("REDUCE_SUM", "reduction", 54, "ReduceSumAttribute",
       inputs=(tensor("input", "in_out_t", "shape1"),),
       outputs=(tensor("output", "in_out_t", "shape"),),
       attrs=(AXIS,),
       modes=(
           mode("signed 32", (INT,), in_out_t=I32, acc_t=I32),
           mode("fp16", (FP,), in_out_t=F16, acc_t=F16),
           mode("bf16", (BF16X,), in_out_t=BF16, acc_t=F32),
           mode("fp32", (FP,), in_out_t=F32, acc_t=F32),
       ))

# ---------------------------------------------------------------------------
# Data layout

define("CONCAT", "data-layout", 55, "ConcatAttribute",
       inputs=(tensor_list("input1", "in_out_t"),),
       outputs=(tensor("output", "in_out_t", "shape"),),
       attrs=(AXIS,),
       modes=modes("in_out_t", P_BOOL, P_S8, P_S16X, P_S32, P_E4M3, P_E5M2, *FLOATS))
define("PAD", "data-layout", 56, "PadAttribute",
       inputs=(tensor("input1", "in_out_t", "shape1"), shape("padding", "[2*rank(shape1)]"),
               Arg("pad_const", "tensor", "in_out_t", "[1]", True, (1, 1))),
       outputs=(tensor("output", "in_out_t", "shape"),),
       modes=modes("in_out_t", *DATA_LAYOUT))
define("RESHAPE", "data-layout", 57, "ReshapeAttribute",
       inputs=(tensor("input1", "in_out_t", "shape1"), shape("shape", "[rank(shape)]")),
       outputs=(tensor("output", "in_out_t", "shape"),),
       modes=modes("in_out_t", *DATA_LAYOUT))
define("REVERSE", "data-layout", 58, "ReverseAttribute",
       inputs=(tensor("input1", "in_out_t", "shape"),),
       outputs=(tensor("output", "in_out_t", "shape"),),
       attrs=(AXIS,),
       modes=modes("in_out_t", *DATA_LAYOUT))
define("SLICE", "data-layout", 59, "SliceAttribute",
       inputs=(tensor("input1", "in_out_t", "shape1"), shape("start", "[rank(shape1)]"),
               shape("size", "[rank(shape1)]")),
       outputs=(tensor("output", "in_out_t", "shape"),),
       modes=modes("in_out_t", *DATA_LAYOUT))
define("TILE", "data-layout", 60, "TileAttribute",
       inputs=(tensor("input1", "in_out_t", "shape1"), shape("multiples", "[rank(shape1)]")),
       outputs=(tensor("output", "in_out_t", "shape"),),
       modes=modes("in_out_t", *DATA_LAYOUT))
define("TRANSPOSE", "data-layout", 61, "TransposeAttribute",
       inputs=(tensor("input1", "in_out_t", "shape1"),),
       outputs=(tensor("output", "in_out_t", "shape"),),
       attrs=(attr("perms", "i32[]"),),
       modes=modes("in_out_t", *DATA_LAYOUT))

# ---------------------------------------------------------------------------
# Scatter / gather

_GATHER_TYPES = (P_S8, P_S16, P_S32, P_E4M3, P_E5M2, *FLOATS)
define("GATHER", "scatter-gather", 62, "GatherAttribute",
       inputs=(tensor("values", "in_out_t", "[N,K,C]", rank=(3, 3)),
               tensor("indices", "index_t", "[N,W]", rank=(2, 2))),
       outputs=(tensor("output", "in_out_t", "[N,W,C]", rank=(3, 3)),),
       modes=modes("in_out_t", *_GATHER_TYPES, index_t=I32))
define("SCATTER", "scatter-gather", 63, "ScatterAttribute",
       inputs=(tensor("values_in", "in_out_t", "[N,K,C]", rank=(3, 3)),
               tensor("indices", "index_t", "[N,W]", rank=(2, 2)),
               tensor("input", "in_out_t", "[N,W,C]", rank=(3, 3))),
       outputs=(tensor("values_out", "in_out_t", "[N,K,C]", rank=(3, 3)),),
       modes=modes("in_out_t", *_GATHER_TYPES, index_t=I32))

# ---------------------------------------------------------------------------
# Image

define("RESIZE", "image", 64, "ResizeAttribute",
       inputs=(tensor("input", "in_t", "[N,IH,IW,C]", rank=(4, 4)),
               shape("scale", "[4]"), shape("offset", "[2]"), shape("border", "[2]")),
       outputs=(tensor("output", "out_t", "[N,OH,OW,C]", rank=(4, 4)),),
       attrs=(attr("mode", "resize_mode"),),
       modes=(
           mode("signed 8, bilinear", (INT,), resize_t=I16, in_t=I8, out_t=I32),
           mode("signed 8, nearest neighbor", (INT,), resize_t=I16, in_t=I8, out_t=I8),
           mode("signed 16, bilinear", (I16X,), resize_t=I16, in_t=I16, out_t=I48),
           mode("signed 16, nearest neighbor", (I16X,), resize_t=I16, in_t=I16, out_t=I16),
           mode("fp16", (FP,), resize_t=F16, in_t=F16, out_t=F16),
           mode("bf16", (BF16X,), resize_t=BF16, in_t=BF16, out_t=BF16),
           mode("fp32", (FP,), resize_t=F32, in_t=F32, out_t=F32),
       ),
       notes=(("the integer modes are tied to `mode`: bilinear widens (i8->i32, i16->i48), "
               "nearest keeps the input type"),
              ("the specification spells the nearest mode NEAREST_NEIGHBOR; the flatbuffer "
               "and our IR use NEAREST")))

# ---------------------------------------------------------------------------
# Type conversion

_TYPE_WORD = {BOOL: "bool", I8: "signed 8", I16: "signed 16", I32: "signed 32", F16: "fp16",
              BF16: "bf16", F32: "fp32", E4M3: "fp8e4m3", E5M2: "fp8e5m2"}


def cast_modes(*rows: tuple[str, str, str]) -> tuple[TypeMode, ...]:
    return tuple(TypeMode(f"{_TYPE_WORD[a]} to {_TYPE_WORD[b]}", {"in_t": a, "out_t": b}, (p,))
                 for a, b, p in rows)


define("CAST", "type-conversion", 65, "CastAttribute",
       inputs=(tensor("input", "in_t", "shape"),),
       outputs=(tensor("output", "out_t", "shape"),),
       modes=cast_modes(
           (BOOL, I8, INT), (BOOL, I16, INT), (BOOL, I32, INT),
           (I8, BOOL, INT), (I8, I16, INT), (I8, I32, INT),
           (I8, F16, FP), (I8, BF16, BF16X), (I8, F32, FP),
           (I16, BOOL, INT), (I16, I8, INT), (I16, I32, INT),
           (I16, F16, FP), (I16, BF16, BF16X), (I16, F32, FP),
           (I32, BOOL, INT), (I32, I8, INT), (I32, I16, INT),
           (I32, F16, FP), (I32, BF16, BF16X), (I32, F32, FP),
           (BF16, I8, BF16X), (BF16, I16, BF16X), (BF16, I32, BF16X),
           (BF16, E4M3, BF16X + "+" + E4M3X), (BF16, E5M2, BF16X + "+" + E5M2X),
           (BF16, F32, BF16X),
           (E4M3, F16, E4M3X), (E4M3, BF16, E4M3X + "+" + BF16X), (E4M3, F32, E4M3X),
           (E5M2, F16, E5M2X), (E5M2, BF16, E5M2X + "+" + BF16X), (E5M2, F32, E5M2X),
           (F16, I8, FP), (F16, I16, FP), (F16, I32, FP),
           (F16, E4M3, E4M3X), (F16, E5M2, E5M2X), (F16, F32, FP),
           (F32, I8, FP), (F32, I16, FP), (F32, I32, FP),
           (F32, E4M3, E4M3X), (F32, E5M2, E5M2X), (F32, BF16, BF16X), (F32, F16, FP),
       ))


def rescale_modes() -> tuple[TypeMode, ...]:
    bits = {I8: "8-bit", I16: "16-bit", I32: "32-bit", I48: "48-bit"}
    return tuple(TypeMode(f"{bits[a]} to {bits[b]}", {"in_t": a, "out_t": b},
                          (I16X if a == I48 else INT,))
                 for a in (I8, I16, I32, I48) for b in (I8, I16, I32))


define("RESCALE", "type-conversion", 66, "RescaleAttribute",
       inputs=(tensor("input", "in_t", "shape"),
               tensor("multiplier", "mul_t", "[NC]", ctc=True, rank=(1, 1)),
               tensor("shift", "i8_t", "[NC]", ctc=True, rank=(1, 1)),
               zp("input_zp", "in_t"), zp("output_zp", "out_t")),
       outputs=(tensor("output", "out_t", "shape"),),
       attrs=(attr("scale32", "bool"), attr("rounding_mode", "rounding_mode"),
              attr("per_channel", "bool"), attr("input_unsigned", "bool"),
              attr("output_unsigned", "bool")),
       modes=rescale_modes(),
       notes=(("mul_t is i32 when scale32 else i16; NC is the last dimension when "
               "per_channel else 1"),
              ("rounding_mode DOUBLE_ROUND needs EXT-DOUBLEROUND, INEXACT_ROUND needs "
               "EXT-INEXACTROUND; 48-bit input needs EXT-INT16 and scale32 = false")))

# ---------------------------------------------------------------------------
# Data nodes

_ANY_DATA: tuple[Preset, ...] = (
    P_BOOL, ("4-bit", I4, (I4X,)), ("8-bit", I8, (INT, FP)), ("16-bit", I16, (INT, FP)),
    ("32-bit", I32, (INT, FP)), ("48-bit", I48, (I16X,)), P_E4M3, P_E5M2, *FLOATS)
define("CONST", "data-node", 67, "ConstAttribute",
       outputs=(tensor("output", "out_t", "shape"),),
       attrs=(attr("values", "tensor", fbs_field=""),),
       modes=modes("out_t", *_ANY_DATA),
       notes=("the flatbuffer holds `values` in the output tensor's data",))
define("IDENTITY", "data-node", 68, "IdentityAttribute", **unary(),
       modes=modes("in_out_t", *_ANY_DATA))

# ---------------------------------------------------------------------------
# Custom, control flow, variables, shape

define("CUSTOM", "custom", 69, "CustomAttribute",
       inputs=(tensor_list("input_list"),),
       outputs=(tensor_list("output_list"),),
       attrs=(attr("operator_name", "string"), attr("domain_name", "string"),
              attr("implementation_attrs", "string")),
       modes=(TypeMode("All", {}, (INT, FP)),),
       notes=("the flatbuffer stores implementation_attrs as [ubyte] (UTF-8 bytes)",))
define("COND_IF", "control-flow", 70, "CondIfAttribute",
       inputs=(tensor("condition", "bool_t", "shape"), tensor_list("input_list")),
       outputs=(tensor_list("output_list"),),
       attrs=(attr("then_graph", "graph"), attr("else_graph", "graph")),
       modes=(TypeMode("All", {}, (CFX,)),))
define("WHILE_LOOP", "control-flow", 71, "WhileLoopAttribute",
       inputs=(tensor_list("input_list"),),
       outputs=(tensor_list("output_list"),),
       attrs=(attr("cond_graph", "graph"), attr("body_graph", "graph")),
       modes=(TypeMode("All", {}, (CFX,)),))

_VARIABLE_TYPES = (("signed 8", I8, (INT + "+" + VARX,)), ("fp16", F16, (FP + "+" + VARX,)),
                   ("fp32", F32, (FP + "+" + VARX,)))
define("VARIABLE", "variable", 72, "VariableAttribute",
       attrs=(attr("name", "string", fbs_field=""), attr("var_shape", "i32[]", fbs_field=""),
              attr("type", "var_type", fbs_field=""),
              attr("initial_value", "tensor", fbs_field="", optional=True)),
       modes=modes("in_t", *_VARIABLE_TYPES),
       notes=(("tosa-tools' VariableAttribute table is empty: the variable is a TosaTensor "
               "with variable = true, variable_name = name, shape = var_shape, type = type "
               "and data = initial_value"),))
define("VARIABLE_WRITE", "variable", 73, "VariableWriteAttribute",
       inputs=(tensor("input1", "in_t", "shape"),),
       attrs=(attr("name", "string", fbs_field=""),),
       modes=modes("in_t", *_VARIABLE_TYPES))
define("VARIABLE_READ", "variable", 74, "VariableReadAttribute",
       outputs=(tensor("output1", "out_t", "shape"),),
       attrs=(attr("name", "string", fbs_field=""),),
       modes=modes("out_t", *_VARIABLE_TYPES))
define("CONST_SHAPE", "shape", 75, "ConstShapeAttribute",
       outputs=(Arg("output", "shape", "shape_t", ctc=True),),
       attrs=(attr("values", "i64[]", fbs_field=""),),
       modes=(TypeMode("shape", {}, (INT, FP)),),
       notes=("the flatbuffer holds `values` in a TosaShape (int64 little-endian data)",))
