"""Every TOSA 1.0 operator as the specification defines it, written to be read:
the source of `tfl2tosa/tosa/op_table.py`, which the code base loads.

`tfl2tosa.tosa.ops` documents the records and the conventions. Loading the
table from plain data (tuples of constants, records shared where equal) costs
every command less than running these definitions would.

    python -m tfl2tosa.tosa.op_definitions --update   # regenerate op_table.py
    python -m tfl2tosa.tosa.op_definitions --check    # exit 1 when it is stale

A test fails when op_table.py is stale.
"""

from __future__ import annotations

import pprint
import sys
from pathlib import Path
from typing import Any

from tfl2tosa.generated import generated_file_command
from tfl2tosa.tosa.ops import Arg, Attr, OpDef, TypeMode

TABLE_PATH = Path(__file__).with_name("op_table.py")

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
    if name in OPS or op.mlir in {d.mlir for d in OPS.values()}:
        raise RuntimeError(f"{name} defined twice")
    OPS[name] = op
    return op


# Filled in below: specification name -> OpDef, in the order of the specification.
OPS: dict[str, OpDef] = {}

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


# ---------------------------------------------------------------------------
# The generated table


TABLE_HEADER = '''"""Generated by `python -m tfl2tosa.tosa.op_definitions --update` from
tfl2tosa/tosa/op_definitions.py; do not edit.

Each record once, as the fields its class takes in order: ARGS (Arg), ATTRS
(Attr), MODES (TypeMode; its types and params as (key, value) pairs) and OPS
(OpDef, in the specification's order; its inputs, outputs, attrs and modes as
indices into the tuples above). `tfl2tosa.tosa.ops` builds the records.
"""
'''


def render(ops: dict[str, OpDef]) -> str:
    """The text of op_table.py for `ops`."""
    pools: dict[str, dict[str, int]] = {"ARGS": {}, "ATTRS": {}, "MODES": {}}

    def index(pool: str, row: tuple[Any, ...]) -> int:
        return pools[pool].setdefault(text(row), len(pools[pool]))

    def text(row: tuple[Any, ...]) -> str:
        return pprint.pformat(row, width=95, compact=True).replace("\n", "\n    ")

    rows = []
    for d in ops.values():
        inputs = tuple(index("ARGS", a._k) for a in d.inputs)
        outputs = tuple(index("ARGS", a._k) for a in d.outputs)
        attrs = tuple(index("ATTRS", a._k) for a in d.attrs)
        modes = tuple(index("MODES", (m.name, tuple(m.types.items()), m.profiles,
                                      tuple(m.params.items()))) for m in d.modes)
        rows.append(text((d.name, d.mlir, d.chapter, inputs, outputs, attrs, modes, d.fbs_op,
                          d.fbs_attr, d.notes)))
    lines = [TABLE_HEADER]
    for pool, texts in pools.items():
        lines += ["", f"{pool} = ("]
        lines += [f"    {text}," for text in texts]
        lines.append(")")
    lines += ["", "OPS = ("]
    lines += [f"    {row}," for row in rows]
    lines.append(")")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    return generated_file_command(TABLE_PATH, render(OPS), "tfl2tosa.tosa.op_definitions", argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
