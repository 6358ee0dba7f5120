"""The TOSA verifier: deliberately wrong graphs are reported, correct graphs pass.

Each case breaks one rule of the TOSA 1.0 specification (an ERROR_IF of the
operator's pseudocode, its argument table or its supported-data-types table);
the expected numbers (output sizes, limits) are worked out by hand from those
formulas in the case comments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tfl2tosa.errors import VerificationError
from tfl2tosa.ir import Builder, Graph, Module, ShapeType, TensorType, Value
from tfl2tosa.ir.types import bf16, f16, f32, i1, i4, i8, i16, i32, i48
from tfl2tosa.tosa import build as tb
from tfl2tosa.tosa.verify import verify

LOC = "main/op#7(tfl.conv_2d)"
T = TensorType


def make(build: Callable[..., Value | list[Value]], *input_types: TensorType) -> Module:
    module = Module()
    graph = module.add_graph(Graph("main"))
    inputs = [graph.add_input(f"x{i}", t) for i, t in enumerate(input_types)]
    result = build(Builder(graph, loc=LOC), *inputs)
    graph.set_outputs(result if isinstance(result, list) else [result])
    return module


def conv2d(b: Builder, x: Value, out: TensorType, weight_shape=(4, 3, 3, 3), *,
           element=i8, weight_element=i8, zp=0, acc="INT32", weight_values=0,
           **attrs) -> Value:
    attrs = {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1], "acc_type": acc,
             **attrs}
    w = tb.const(b, np.full(weight_shape, weight_values, np.int8), weight_element)
    bias = tb.const(b, np.zeros((weight_shape[0],), np.int64), out.element)
    return tb.op(b, "tosa.conv2d", [x, w, bias, tb.zero_point(b, zp, element),
                                    tb.zero_point(b, 0, weight_element)], out, **attrs)


def rescale(b: Builder, x: Value, out_element=i8, **kw) -> Value:
    args = {"multiplier": 1 << 30, "shift": 30, "in_zp": 0, "out_zp": 0, **kw}
    return tb.rescale(b, x, args.pop("multiplier"), args.pop("shift"), args.pop("in_zp"),
                      args.pop("out_zp"), out_element, **args)


def shape_input(b: Builder, x: Value, shape_arg: Value) -> Value:
    return b.op("tosa.reshape", [x, shape_arg], T((6,), i8))


# (id, build, input types, op that must be reported, text in its message, verify kwargs)
CASES = [
    ("tfl_op_left", lambda b, x: b.op("tfl.add", [x, x], x.type), [T((2,), f32)],
     "tfl.add", "not a TOSA 1.0 operator", {}),
    ("quant_op_left", lambda b, x: b.op("quant.dcast", [x], T((2,), f32)), [T((2,), i8)],
     "quant.dcast", "not a TOSA 1.0 operator", {}),
    ("conv2d_three_operands",
     lambda b, x: b.op("tosa.conv2d", [x, x, x], T((1, 4, 4, 3), i32), pad=[0] * 4,
                       stride=[1, 1], dilation=[1, 1], acc_type="INT32"),
     [T((1, 4, 4, 3), i8)], "tosa.conv2d", "expects 5 operand(s)", {}),
    # CONV2D 16x8 is an EXT-INT16 mode.
    ("conv2d_i16_without_ext_int16",
     lambda b, x: conv2d(b, x, T((1, 8, 8, 4), i48), element=i16, acc="INT48"),
     [T((1, 8, 8, 3), i16)], "tosa.conv2d", "needs EXT-INT16",
     {"profile": ("PRO-INT",), "extensions": ()}),
    ("conv2d_acc_type_mismatch",
     lambda b, x: conv2d(b, x, T((1, 8, 8, 4), i32), acc="FP32"),
     [T((1, 8, 8, 3), i8)], "tosa.conv2d", "acc_type FP32", {}),
    # OH = (IH - 1 + pad_top + pad_bottom - (KH - 1) * dilation) / stride + 1 = (8-1+2-2)/1+1 = 8
    ("conv2d_output_height",
     lambda b, x: conv2d(b, x, T((1, 7, 8, 4), i32)),
     [T((1, 8, 8, 3), i8)], "tosa.conv2d", "output dimension 1 must be 8, got 7", {}),
    # (8 - 1 + 0 + 0 - 2) = 5 is not divisible by stride 2: idiv_check fails.
    ("conv2d_inexact_stride",
     lambda b, x: conv2d(b, x, T((1, 3, 3, 4), i32), pad=[0, 0, 0, 0], stride=[2, 2]),
     [T((1, 8, 8, 3), i8)], "tosa.conv2d", "5 is not divisible by 2", {}),
    ("conv2d_negative_pad",
     lambda b, x: conv2d(b, x, T((1, 8, 8, 4), i32), pad=[-1, 1, 1, 1]),
     [T((1, 8, 8, 3), i8)], "tosa.conv2d", "'pad' must be >= 0", {}),
    ("conv2d_zero_dilation",
     lambda b, x: conv2d(b, x, T((1, 8, 8, 4), i32), dilation=[0, 1]),
     [T((1, 8, 8, 3), i8)], "tosa.conv2d", "'dilation' must be >= 1", {}),
    ("conv2d_channel_mismatch",
     lambda b, x: conv2d(b, x, T((1, 8, 8, 4), i32), weight_shape=(4, 3, 3, 2)),
     [T((1, 8, 8, 3), i8)], "tosa.conv2d", "weight expects 2", {}),
    ("conv2d_i16_input_zero_point",
     lambda b, x: conv2d(b, x, T((1, 8, 8, 4), i48), element=i16, acc="INT48", zp=3),
     [T((1, 8, 8, 3), i16)], "tosa.conv2d", "input_zp must be 0 for i16", {}),
    ("conv2d_missing_acc_type",
     lambda b, x: b.op("tosa.conv2d", [x, *[tb.const(b, np.zeros(s, np.int8)) for s in
                                             ((4, 3, 3, 3),)],
                                       tb.const(b, np.zeros(4, np.int32)),
                                       tb.zero_point(b, 0, i8), tb.zero_point(b, 0, i8)],
                       T((1, 8, 8, 4), i32), pad=[1] * 4, stride=[1, 1], dilation=[1, 1]),
     [T((1, 8, 8, 3), i8)], "tosa.conv2d", "missing attribute 'acc_type'", {}),
    # DEPTHWISE: weight [KH,KW,C,M] = [3,3,3,2] -> output channels C*M = 6.
    ("depthwise_output_channels",
     lambda b, x: tb.op(b, "tosa.depthwise_conv2d",
                        [x, tb.const(b, np.zeros((3, 3, 3, 2), np.float32)),
                         tb.const(b, np.zeros(6, np.float32)), tb.zero_point(b, 0, f32),
                         tb.zero_point(b, 0, f32)], T((1, 8, 8, 5), f32),
                        pad=[1] * 4, stride=[1, 1], dilation=[1, 1], acc_type="FP32"),
     [T((1, 8, 8, 3), f32)], "tosa.depthwise_conv2d", "expected 6", {}),
    # TRANSPOSE_CONV2D: OH = (IH - 1) * stride + out_pad_top + out_pad_bottom + KH = 3*2+0+0+3 = 9
    ("transpose_conv2d_output",
     lambda b, x: tb.op(b, "tosa.transpose_conv2d",
                        [x, tb.const(b, np.zeros((2, 3, 3, 3), np.float32)),
                         tb.const(b, np.zeros(2, np.float32)), tb.zero_point(b, 0, f32),
                         tb.zero_point(b, 0, f32)], T((1, 8, 9, 2), f32),
                        out_pad=[0] * 4, stride=[2, 2], acc_type="FP32"),
     [T((1, 4, 4, 3), f32)], "tosa.transpose_conv2d", "output dimension 1 must be 9", {}),
    ("avg_pool_pad_not_below_kernel",
     lambda b, x: tb.op(b, "tosa.avg_pool2d", [x, tb.zero_point(b, 0, i8),
                                               tb.zero_point(b, 0, i8)], T((1, 5, 5, 3), i8),
                        kernel=[2, 2], stride=[1, 1], pad=[2, 0, 0, 0], acc_type="INT32"),
     [T((1, 4, 4, 3), i8)], "tosa.avg_pool2d", "smaller than the kernel", {}),
    ("avg_pool_float_zero_point",
     lambda b, x: tb.op(b, "tosa.avg_pool2d", [x, tb.zero_point(b, 1.0, f32),
                                               tb.zero_point(b, 0, f32)], T((1, 3, 3, 3), f32),
                        kernel=[2, 2], stride=[1, 1], pad=[0] * 4, acc_type="FP32"),
     [T((1, 4, 4, 3), f32)], "tosa.avg_pool2d", "input_zp must be 0 for f32", {}),
    # MAX_POOL2D: OH = (IH + pads - kernel) / stride + 1 = (4 - 2) / 2 + 1 = 2
    ("max_pool_output",
     lambda b, x: tb.op(b, "tosa.max_pool2d", [x], T((1, 3, 2, 3), i8), kernel=[2, 2],
                        stride=[2, 2], pad=[0] * 4),
     [T((1, 4, 4, 3), i8)], "tosa.max_pool2d", "output dimension 1 must be 2", {}),
    ("add_i8_no_mode",
     lambda b, x: tb.op(b, "tosa.add", [x, x], x.type),
     [T((2, 3), i8)], "tosa.add", "match no TOSA 1.0 type mode", {}),
    ("add_operand_types_differ",
     lambda b, x, y: tb.op(b, "tosa.add", [x, y], x.type),
     [T((2, 3), i32), T((2, 3), f32)], "tosa.add", "both are in_out_t", {}),
    ("add_rank_mismatch",
     lambda b, x, y: tb.op(b, "tosa.add", [x, y], x.type),
     [T((2, 3), f32), T((3,), f32)], "tosa.add", "equal ranks", {}),
    ("add_no_broadcast",
     lambda b, x, y: tb.op(b, "tosa.add", [x, y], x.type),
     [T((2, 3), f32), T((2, 4), f32)], "tosa.add", "do not broadcast", {}),
    ("add_wrong_output",
     lambda b, x, y: tb.op(b, "tosa.add", [x, y], T((2, 1), f32)),
     [T((2, 3), f32), T((1, 3), f32)], "tosa.add", "output shape must be [2, 3]", {}),
    ("bf16_without_extension",
     lambda b, x: tb.op(b, "tosa.add", [x, x], x.type),
     [T((2,), bf16)], "tosa.add", "needs EXT-BF16", {"extensions": ("EXT-INT16",)}),
    ("mul_shift_with_i8_inputs",
     lambda b, x: tb.mul(b, x, x, shift=3),
     [T((2,), i8)], "tosa.mul", "shift must be 0 unless the inputs are i32", {}),
    ("select_condition_not_bool",
     lambda b, x: tb.op(b, "tosa.select", [x, x, x], x.type),
     [T((2,), f32)], "tosa.select", "'input1' must be i1", {}),
    ("equal_output_not_bool",
     lambda b, x: tb.op(b, "tosa.equal", [x, x], T((2,), i32)),
     [T((2,), i32)], "tosa.equal", "match no TOSA 1.0 type mode", {}),
    ("clamp_min_above_max",
     lambda b, x: tb.clamp(b, x, 5, -5),
     [T((2,), i8)], "tosa.clamp", "smaller than min_val", {}),
    ("clamp_bound_outside_i8",
     lambda b, x: tb.clamp(b, x, -200, 5),
     [T((2,), i8)], "tosa.clamp", "not a value of i8", {}),
    ("clamp_bad_nan_mode",
     lambda b, x: tb.clamp(b, x, -1.0, 1.0, nan_mode="SOMETIMES"),
     [T((2,), f32)], "tosa.clamp", "must be one of PROPAGATE, IGNORE", {}),
    ("table_i8_with_513_entries",
     lambda b, x: tb.op(b, "tosa.table", [x, tb.const(b, np.zeros(513, np.int8))], x.type),
     [T((4,), i8)], "tosa.table", "must have 256 entries", {}),
    ("table_i16_output_not_i32",
     lambda b, x: tb.op(b, "tosa.table", [x, tb.const(b, np.zeros(513, np.int16))], x.type),
     [T((4,), i16)], "tosa.table", "match no TOSA 1.0 type mode", {}),
    ("reduce_drops_axis",
     lambda b, x: tb.op(b, "tosa.reduce_sum", [x], T((2,), f32), axis=1),
     [T((2, 3), f32)], "tosa.reduce_sum", "output shape must be [2, 1]", {}),
    ("reduce_axis_out_of_range",
     lambda b, x: tb.op(b, "tosa.reduce_max", [x], x.type, axis=2),
     [T((2, 3), f32)], "tosa.reduce_max", "axis 2 is out of range", {}),
    ("argmax_output_shape",
     lambda b, x: tb.op(b, "tosa.argmax", [x], T((2, 1), i32), axis=1),
     [T((2, 3), f32)], "tosa.argmax", "output shape must be [2]", {}),
    ("matmul_inner_dims",
     lambda b, x, y: tb.op(b, "tosa.matmul", [x, y, tb.zero_point(b, 0, f32),
                                             tb.zero_point(b, 0, f32)], T((1, 2, 5), f32)),
     [T((1, 2, 3), f32), T((1, 4, 5), f32)], "tosa.matmul", "C = 3", {}),
    ("concat_mismatch",
     lambda b, x, y: tb.op(b, "tosa.concat", [x, y], T((2, 7), f32), axis=1),
     [T((2, 3), f32), T((3, 4), f32)], "tosa.concat", "outside axis 1", {}),
    ("concat_sum",
     lambda b, x, y: tb.op(b, "tosa.concat", [x, y], T((2, 8), f32), axis=1),
     [T((2, 3), f32), T((2, 4), f32)], "tosa.concat", "output shape must be [2, 7]", {}),
    ("pad_negative",
     lambda b, x: b.op("tosa.pad", [x, tb.const_shape(b, [0, -1, 0, 0]),
                                    tb.zero_point(b, 0, f32)], T((1, 3), f32)),
     [T((2, 3), f32)], "tosa.pad", "padding must be >= 0", {}),
    ("pad_output",
     lambda b, x: b.op("tosa.pad", [x, tb.const_shape(b, [1, 0, 0, 2]),
                                    tb.zero_point(b, 0, f32)], T((3, 3), f32)),
     [T((2, 3), f32)], "tosa.pad", "output shape must be [3, 5]", {}),
    ("reshape_element_count",
     lambda b, x: b.op("tosa.reshape", [x, tb.const_shape(b, [4, 2])], T((4, 2), f32)),
     [T((2, 3), f32)], "tosa.reshape", "element count changes", {}),
    ("reshape_shape_operand_differs",
     lambda b, x: b.op("tosa.reshape", [x, tb.const_shape(b, [3, 2])], T((6,), f32)),
     [T((2, 3), f32)], "tosa.reshape", "from the shape operand", {}),
    ("slice_out_of_bounds",
     lambda b, x: tb.slice(b, x, [1, 0], [2, 3]),
     [T((2, 3), f32)], "tosa.slice", "does not fit the input", {}),
    ("tile_output",
     lambda b, x: b.op("tosa.tile", [x, tb.const_shape(b, [2, 1])], T((2, 3), f32)),
     [T((2, 3), f32)], "tosa.tile", "output shape must be [4, 3]", {}),
    ("transpose_not_permutation",
     lambda b, x: tb.op(b, "tosa.transpose", [x], T((3, 3), f32), perms=[1, 1]),
     [T((2, 3), f32)], "tosa.transpose", "not a permutation", {}),
    ("transpose_output",
     lambda b, x: tb.op(b, "tosa.transpose", [x], T((2, 3), f32), perms=[1, 0]),
     [T((2, 3), f32)], "tosa.transpose", "output shape must be [3, 2]", {}),
    ("gather_output",
     lambda b, x, idx: tb.op(b, "tosa.gather", [x, idx], T((1, 5, 4), f32)),
     [T((1, 5, 3), f32), T((1, 2), i32)], "tosa.gather", "output shape must be [1, 2, 3]", {}),
    ("gather_index_type",
     lambda b, x, idx: tb.op(b, "tosa.gather", [x, idx], T((1, 2, 3), f32)),
     [T((1, 5, 3), f32), T((1, 2), i16)], "tosa.gather", "match no TOSA 1.0 type mode", {}),
    ("scatter_input_shape",
     lambda b, v, idx, u: tb.op(b, "tosa.scatter", [v, idx, u], v.type),
     [T((1, 5, 3), f32), T((1, 2), i32), T((1, 3, 3), f32)], "tosa.scatter",
     "input shape must be [1, 2, 3]", {}),
    # RESIZE: OH = ((IH - 1) * n - offset + border) / d + 1 = (3 * 2 - 0 + 0) / 1 + 1 = 7
    ("resize_output",
     lambda b, x: tb.op(b, "tosa.resize", [x, tb.const_shape(b, [2, 1, 2, 1]),
                                           tb.const_shape(b, [0, 0]),
                                           tb.const_shape(b, [0, 0])], T((1, 8, 7, 3), f32),
                        mode="BILINEAR"),
     [T((1, 4, 4, 3), f32)], "tosa.resize", "output dimension 1 must be 7", {}),
    ("resize_downscale_limit",
     lambda b, x: tb.op(b, "tosa.resize", [x, tb.const_shape(b, [1, 16, 1, 1]),
                                           tb.const_shape(b, [0, 0]),
                                           tb.const_shape(b, [0, 0])], T((1, 1, 32, 3), f32),
                        mode="NEAREST"),
     [T((1, 32, 32, 3), f32)], "tosa.resize", "1/16 downscale limit", {}),
    ("resize_nearest_widening",
     lambda b, x: tb.op(b, "tosa.resize", [x, tb.const_shape(b, [2, 1, 2, 1]),
                                           tb.const_shape(b, [0, 0]),
                                           tb.const_shape(b, [0, 0])], T((1, 7, 7, 3), i32),
                        mode="NEAREST"),
     [T((1, 4, 4, 3), i8)], "tosa.resize", "NEAREST resize cannot produce i32", {}),
    ("rescale_scale32_with_i48",
     lambda b, x: rescale(b, x, scale32=True),
     [T((4,), i48)], "tosa.rescale", "scale32 must be false for a 48-bit input", {}),
    ("rescale_double_round_without_scale32",
     lambda b, x: rescale(b, x, multiplier=1 << 14, shift=14, scale32=False,
                          rounding_mode="DOUBLE_ROUND"),
     [T((4,), i32)], "tosa.rescale", "DOUBLE_ROUND needs scale32", {}),
    ("rescale_double_round_without_extension",
     lambda b, x: rescale(b, x, rounding_mode="DOUBLE_ROUND"),
     [T((4,), i32)], "tosa.rescale", "needs EXT-DOUBLEROUND", {"extensions": ("EXT-INT16",)}),
    ("rescale_i32_input_zero_point",
     lambda b, x: rescale(b, x, in_zp=3),
     [T((4,), i32)], "tosa.rescale", "input_zp must be 0 for i32", {}),
    ("rescale_u16_zero_point",
     lambda b, x: rescale(b, x, out_element=i16, out_zp=1000, output_unsigned=True),
     [T((4,), i8)], "tosa.rescale", "must be 0 or 32768", {}),
    ("rescale_both_unsigned",
     lambda b, x: rescale(b, x, input_unsigned=True, output_unsigned=True),
     [T((4,), i8)], "tosa.rescale", "cannot both be true", {}),
    ("rescale_i32_to_unsigned",
     lambda b, x: rescale(b, x, out_zp=128, output_unsigned=True),
     [T((4,), i32)], "tosa.rescale", "output_unsigned is not allowed for i32 -> i8", {}),
    ("rescale_unsigned_to_i32",
     lambda b, x: rescale(b, x, out_element=i32, input_unsigned=True),
     [T((4,), i8)], "tosa.rescale", "input_unsigned is not allowed for i8 -> i32", {}),
    ("rescale_per_channel_length",
     lambda b, x: rescale(b, x, multiplier=[1 << 30] * 3, shift=[30] * 3),
     [T((2, 4), i32)], "tosa.rescale", "needs 4", {}),
    ("rescale_multiplier_length_per_tensor",
     lambda b, x: rescale(b, x, multiplier=[1 << 30] * 4, shift=[30] * 4, per_channel=False),
     [T((2, 4), i32)], "tosa.rescale", "needs 1", {}),
    ("rescale_shift_too_small",
     lambda b, x: rescale(b, x, shift=1),
     [T((4,), i32)], "tosa.rescale", "shift values must be in 2..62", {}),
    ("rescale_shift_too_large",
     lambda b, x: rescale(b, x, shift=63),
     [T((4,), i32)], "tosa.rescale", "shift values must be in 2..62", {}),
    ("rescale_i16_multiplier_with_scale32",
     lambda b, x: b.op("tosa.rescale", [x, tb.const(b, np.array([1 << 14], np.int16)),
                                        tb.const(b, np.array([14], np.int8)),
                                        tb.zero_point(b, 0, i32), tb.zero_point(b, 0, i8)],
                       T((4,), i8), scale32=True, rounding_mode="SINGLE_ROUND",
                       per_channel=False, input_unsigned=False, output_unsigned=False),
     [T((4,), i32)], "tosa.rescale", "multiplier must be i32 when scale32 is True", {}),
    ("cast_bool_to_float",
     lambda b, x: tb.cast(b, x, f32),
     [T((4,), i1)], "tosa.cast", "match no TOSA 1.0 type mode", {}),
    ("unknown_attribute",
     lambda b, x: b.op("tosa.add", [x, x], x.type, fused="RELU"),
     [T((4,), f32)], "tosa.add", "unknown attribute 'fused'", {}),
    ("attribute_wrong_type",
     lambda b, x: b.op("tosa.reduce_sum", [x], T((1,), f32), axis="0"),
     [T((4,), f32)], "tosa.reduce_sum", "must be an i32", {}),
    ("shape_operand_not_constant",
     shape_input, [T((2, 3), i8), ShapeType(1)], "tosa.reshape",
     "compile-time constant (tosa.const_shape)", {}),
    ("zero_point_from_graph_input",
     lambda b, x, zp: tb.op(b, "tosa.negate", [x, zp, tb.zero_point(b, 0, i8)], x.type),
     [T((4,), i8), T((1,), i8)], "tosa.negate", "compile-time constant (tosa.const)", {}),
    ("zero_point_shape",
     lambda b, x: tb.op(b, "tosa.negate", [x, tb.const(b, np.zeros(2, np.int8)),
                                           tb.zero_point(b, 0, i8)], x.type),
     [T((4,), i8)], "tosa.negate", "must have shape [1]", {}),
    ("const_values_shape",
     lambda b: b.op("tosa.const", [], T((2, 2), f32), values=np.zeros(3, np.float32)),
     [], "tosa.const", "values shape must be [2, 2]", {}),
    # TOSA's int4_t is [-7, 7] (number formats); -8 fits the bits but not the type.
    ("const_int4_minus_eight",
     lambda b, x: conv2d(b, x, T((1, 4, 4, 4), i32), weight_element=i4, weight_values=-8),
     [T((1, 4, 4, 3), i8)], "tosa.const", "int4 values must be in -7..7", {}),
    ("const_shape_rank",
     lambda b, x: b.op("tosa.reshape", [x, b.op("tosa.const_shape", [], ShapeType(2),
                                                 values=[6])], T((6,), f32)),
     [T((2, 3), f32)], "tosa.const_shape", "cannot hold 1 values", {}),
    ("variable_not_declared",
     lambda b: tb.op(b, "tosa.variable_read", [], T((2,), f32), name="state"),
     [], "tosa.variable_read", "not declared", {}),
    ("fft_size_not_power_of_two",
     lambda b, x, y: tb.op_results(b, "tosa.fft2d", [x, y], [x.type, x.type], inverse=False),
     [T((1, 4, 6), f32), T((1, 4, 6), f32)], "tosa.fft2d", "W = 6 must be a power of two", {}),
]


@pytest.mark.parametrize("build, inputs, op_name, text, kwargs",
                         [pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_violation_is_reported_with_op_and_location(build, inputs, op_name, text, kwargs):
    module = make(build, *inputs)
    violations = verify(module, raise_on_error=False, **kwargs)
    hits = [v for v in violations if v.op is not None and v.op.name == op_name
            and text in v.message]
    assert hits, [str(v) for v in violations]
    assert hits[0].loc == LOC and hits[0].graph == "main"
    assert str(hits[0]).startswith(f"{op_name} @ {LOC}: ")
    with pytest.raises(VerificationError):
        verify(module, **kwargs)


def test_dynamic_extension_allows_shape_from_graph_input():
    module = make(shape_input, T((2, 3), i8), ShapeType(1))
    assert verify(module, raise_on_error=False)
    assert verify(module, extensions=("EXT-DYNAMIC",)) == []


def test_undefined_graph_output_is_reported():
    module = make(lambda b, x: tb.op(b, "tosa.abs", [x], x.type), T((2,), f32))
    stray = Graph("other").add_input("stray", T((2,), f32))
    module.main.outputs.append(stray)
    violations = verify(module, raise_on_error=False)
    assert [v.op for v in violations] == [None]
    assert "output 'stray' is not defined" in violations[0].message


def test_error_message_counts_and_lists_violations():
    def many(b, x):
        return [tb.op(b, "tosa.add", [x, x], x.type) for _ in range(7)]
    module = make(many, T((2,), i8))
    with pytest.raises(VerificationError) as info:
        verify(module)
    message = str(info.value)
    assert message.startswith("7 TOSA violation(s):")
    assert f"tosa.add @ {LOC}: element types" in message
    assert "... and 2 more" in message
    assert len(info.value.violations) == 7


# ---------------------------------------------------------------------------
# Correct graphs


def _int8_model(b: Builder, x: Value) -> Value:
    """conv -> rescale -> clamp -> pool -> reshape -> table -> concat/pad/slice/... (int8)."""
    acc = conv2d(b, x, T((1, 8, 8, 4), i32))
    y = rescale(b, acc, multiplier=[1 << 30] * 4, shift=[31] * 4, out_zp=-5,
                rounding_mode="DOUBLE_ROUND")
    y = tb.clamp(b, y, -5, 127)
    y = tb.op(b, "tosa.max_pool2d", [y], T((1, 4, 4, 4), i8), kernel=[2, 2], stride=[2, 2],
              pad=[0, 0, 0, 0])
    z = tb.op(b, "tosa.avg_pool2d", [y, tb.zero_point(b, -5, i8), tb.zero_point(b, -5, i8)],
              T((1, 2, 2, 4), i8), kernel=[3, 3], stride=[1, 1], pad=[0, 0, 0, 0],
              acc_type="INT32")
    z = tb.reshape(b, z, [1, 16])
    z = tb.op(b, "tosa.table", [z, tb.const(b, np.arange(-128, 128, dtype=np.int8))], z.type)
    z = tb.op(b, "tosa.concat", [z, z], T((1, 32), i8), axis=1)
    z = tb.pad(b, z, [0, 1, 2, 2], pad_const=-5)
    z = tb.slice(b, z, [1, 0], [1, 36])
    z = tb.transpose(b, tb.reshape(b, z, [1, 6, 6]), [0, 2, 1])
    z = b.op("tosa.tile", [z, tb.const_shape(b, [2, 1, 1])], T((2, 6, 6), i8))
    idx = tb.const(b, np.zeros((2, 3), np.int32))
    z = tb.op(b, "tosa.gather", [z, idx], T((2, 3, 6), i8))
    z = tb.op(b, "tosa.reduce_max", [z], T((2, 1, 6), i8), axis=1)
    m = tb.op(b, "tosa.matmul", [z, tb.const(b, np.ones((2, 6, 5), np.int8)),
                                 tb.zero_point(b, 1, i8), tb.zero_point(b, 0, i8)],
              T((2, 1, 5), i32))
    m = tb.op(b, "tosa.add", [m, tb.const(b, np.ones((1, 1, 5), np.int32))], m.type)
    q = rescale(b, m, multiplier=1 << 30, shift=33, out_zp=3)
    # i8 -> u8 (zero point 128 + 3): TFLite's uint8 output path.
    return rescale(b, q, in_zp=3, out_zp=131, output_unsigned=True)


def test_correct_int8_graph_passes_with_integer_profile():
    module = make(_int8_model, T((1, 8, 8, 3), i8))
    assert verify(module, profile="PRO-INT", extensions=("EXT-DOUBLEROUND",)) == []


def _float_model(b: Builder, x: Value, y: Value) -> list[Value]:
    w = tb.const(b, np.zeros((2, 3, 3, 3), np.float16))
    t = tb.op(b, "tosa.transpose_conv2d", [x, w, tb.const(b, np.zeros(1, np.float16)),
                                           tb.zero_point(b, 0, f16), tb.zero_point(b, 0, f16)],
              T((1, 9, 9, 2), f16), out_pad=[0, 0, 0, 0], stride=[2, 2], acc_type="FP32")
    t = tb.cast(b, t, f32)
    r = tb.op(b, "tosa.resize", [t, tb.const_shape(b, [2, 1, 2, 1]), tb.const_shape(b, [0, 0]),
                                 tb.const_shape(b, [0, 0])], T((1, 17, 17, 2), f32),
              mode="BILINEAR")
    s = tb.op(b, "tosa.sigmoid", [r], r.type)
    g = tb.op(b, "tosa.greater", [s, tb.const(b, np.full((1, 1, 1, 1), 0.5, np.float32))],
              T((1, 17, 17, 2), i1))
    sel = tb.op(b, "tosa.select", [g, s, tb.const(b, np.zeros((1, 1, 1, 2), np.float32))],
                s.type)
    real, imag = tb.op_results(b, "tosa.rfft2d", [y], [T((1, 4, 5), f32)] * 2)
    arg = tb.op(b, "tosa.argmax", [real], T((1, 4), i32), axis=2, nan_mode="IGNORE")
    return [sel, imag, arg]


def test_correct_float_graph_passes():
    module = make(_float_model, T((1, 4, 4, 3), f16), T((1, 4, 8), f32))
    assert verify(module) == []


def _control_flow_module() -> Module:
    module = Module()
    main = module.add_graph(Graph("main"))
    x = main.add_input("x", T((2,), f32))
    flag = main.add_input("flag", T((1,), i1))
    for name, op_name in (("then", "tosa.abs"), ("else", "tosa.negate")):
        g = module.add_graph(Graph(name))
        v = g.add_input("v", T((2,), f32))
        b = Builder(g)
        operands = [v] + ([tb.zero_point(b, 0, f32)] * 2 if op_name == "tosa.negate" else [])
        g.set_outputs([tb.op(b, op_name, operands, v.type)])
    cond = module.add_graph(Graph("cond"))
    cv = cond.add_input("v", T((2,), f32))
    b = Builder(cond)
    total = tb.op(b, "tosa.reduce_sum", [cv], T((1,), f32), axis=0)
    cond.set_outputs([tb.op(b, "tosa.greater", [tb.const(b, np.array([10.0], np.float32)),
                                                 total], T((1,), i1))])
    body = module.add_graph(Graph("body"))
    bv = body.add_input("v", T((2,), f32))
    b = Builder(body)
    body.set_outputs([tb.op(b, "tosa.add", [bv, tb.const(b, np.ones(2, np.float32))],
                            bv.type)])
    b = Builder(main, loc="if")
    (chosen,) = tb.op_results(b, "tosa.cond_if", [flag, x], [x.type], then_graph="then",
                              else_graph="else")
    (looped,) = tb.op_results(b, "tosa.while_loop", [chosen], [x.type], cond_graph="cond",
                              body_graph="body")
    main.set_outputs([looped])
    return module


def test_correct_control_flow_passes():
    assert verify(_control_flow_module()) == []


def test_control_flow_needs_its_extension():
    violations = verify(_control_flow_module(), extensions=(), raise_on_error=False)
    assert {v.op.name for v in violations} == {"tosa.cond_if", "tosa.while_loop"}
    assert all("needs EXT-CONTROLFLOW" in v.message for v in violations)


def test_cond_if_graph_signature_mismatch():
    module = _control_flow_module()
    then = module.graphs["then"]
    then.inputs[0].type = T((3,), f32)
    violations = verify(module, raise_on_error=False)
    assert any(v.op is not None and v.op.name == "tosa.cond_if" and v.loc == "if"
               and "then_graph 'then' takes (tensor<3xf32>)" in v.message for v in violations)


def test_cond_if_missing_graph():
    module = _control_flow_module()
    cond_if = module.main.ops[0]
    cond_if.attrs["else_graph"] = "nowhere"
    violations = verify(module, raise_on_error=False)
    assert any(v.op is cond_if and "must name a graph of the module" in v.message
               for v in violations)


def test_while_body_signature_mismatch():
    module = _control_flow_module()
    body = module.graphs["body"]
    body.outputs[0].type = T((2,), i32)
    violations = verify(module, raise_on_error=False)
    assert any(v.op is not None and v.op.name == "tosa.while_loop"
               and "body_graph 'body' returns (tensor<2xi32>)" in v.message
               for v in violations)


def test_variables():
    def build(b: Builder, x: Value) -> Value:
        tb.op_results(b, "tosa.variable", [], [], name="state", var_shape=[2], type="f32",
                      initial_value=np.zeros(2, np.float32))
        return x
    module = make(build, T((2,), f32))
    graph = module.main
    b = Builder(graph, loc="var")
    read = tb.op(b, "tosa.variable_read", [], T((2,), f32), name="state")
    tb.op_results(b, "tosa.variable_write", [tb.op(b, "tosa.abs", [read], read.type)], [],
                  name="state")
    graph.set_outputs([read])
    assert verify(module) == []
    wrong = tb.op(b, "tosa.variable_read", [], T((3,), f32), name="state")
    graph.set_outputs([read, wrong])
    violations = verify(module, raise_on_error=False)
    assert [str(v) for v in violations] == [
        "tosa.variable_read @ var: variable 'state' shape must be [2], got [3]"]


# ---------------------------------------------------------------------------
# Arm's reference model as a second judge: it validates a graph (type support
# and ERROR_IFs) before running it. It does not check profiles, extensions or
# compile-time constants, and aborts on some malformed graphs, so only cases it
# is known to judge are run through it.

ARM_REJECTS = [
    "conv2d_three_operands", "conv2d_acc_type_mismatch", "conv2d_output_height",
    "conv2d_inexact_stride", "conv2d_negative_pad", "conv2d_zero_dilation",
    "conv2d_channel_mismatch", "conv2d_i16_input_zero_point", "depthwise_output_channels",
    "transpose_conv2d_output", "avg_pool_pad_not_below_kernel", "avg_pool_float_zero_point",
    "max_pool_output", "add_i8_no_mode", "add_operand_types_differ", "add_rank_mismatch",
    "add_no_broadcast", "add_wrong_output", "equal_output_not_bool", "clamp_min_above_max",
    "table_i8_with_513_entries", "table_i16_output_not_i32", "reduce_drops_axis",
    "reduce_axis_out_of_range", "argmax_output_shape", "matmul_inner_dims", "concat_mismatch",
    "concat_sum", "pad_negative", "pad_output", "reshape_element_count",
    "reshape_shape_operand_differs", "slice_out_of_bounds", "tile_output",
    "transpose_not_permutation", "transpose_output", "gather_output", "gather_index_type",
    "scatter_input_shape", "resize_output", "resize_downscale_limit", "resize_nearest_widening",
    "rescale_scale32_with_i48", "rescale_double_round_without_scale32",
    "rescale_i32_input_zero_point", "rescale_u16_zero_point", "rescale_both_unsigned",
    "rescale_i32_to_unsigned", "rescale_unsigned_to_i32", "rescale_per_channel_length",
    "rescale_multiplier_length_per_tensor", "rescale_shift_too_small",
    "rescale_shift_too_large", "zero_point_shape", "fft_size_not_power_of_two",
]


def arm_judges_valid(module: Module, input_types: list[TensorType]) -> bool:
    """True if Arm's reference model accepts and runs the graph (its logging silenced)."""
    import os

    import tosa_reference_model

    from tfl2tosa.ir.types import numpy_dtype
    from tfl2tosa.tosa.writer import write_tosa

    data = write_tosa(module)
    inputs = [np.zeros(t.shape, numpy_dtype(t.element)) for t in input_types]
    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    path = os.environ.get("PATH", "")
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        # On a failed check the model prints a backtrace with gdb, found on PATH;
        # that takes seconds per graph and tells us nothing here.
        os.environ["PATH"] = ""
        _, status = tosa_reference_model.run(data, inputs)
    except ValueError as error:  # "Invalid TOSA graph": rejected while validating
        assert "Invalid TOSA graph" in str(error)
        return False
    finally:
        os.environ["PATH"] = path
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (null, *saved):
            os.close(fd)
    return status == tosa_reference_model.GraphStatus.TOSA_VALID


@pytest.mark.parametrize("case", ARM_REJECTS)
def test_arm_reference_model_rejects_the_same_graphs(case):
    _, build, inputs, _, _, kwargs = next(c for c in CASES if c[0] == case)
    module = make(build, *inputs)
    assert verify(module, raise_on_error=False, **kwargs)
    assert not arm_judges_valid(module, inputs)


def test_arm_reference_model_accepts_the_correct_graphs():
    cases = [(make(_int8_model, T((1, 8, 8, 3), i8)), [T((1, 8, 8, 3), i8)]),
             (make(_float_model, T((1, 4, 4, 3), f16), T((1, 4, 8), f32)),
              [T((1, 4, 4, 3), f16), T((1, 4, 8), f32)]),
             (_control_flow_module(), [T((2,), f32), T((1,), i1)])]
    for module, inputs in cases:
        assert verify(module) == []
        assert arm_judges_valid(module, inputs)


# ---------------------------------------------------------------------------
# Ops that share a signature
#
# The verifier judges an op signature (name, operand and result types,
# attributes) once and hands the verdict to every op that has it; what a rule
# reads of a constant operand's value, and which op makes a constant operand,
# it reads again for each op. Each case builds ops of one signature in two
# graphs, at locations of their own, some of them wrong.

GRAPH_LOCS = (("main", "main/op#1"), ("main", "main/op#2"), ("other", "other/op#1"),
              ("other", "other/op#2"))


def shared_signature_module(build: Callable[..., Value], input_types: list[Any],
                            variants: list[dict[str, Any]]) -> Module:
    """One op per variant, built by build(b, *inputs, **variant) at GRAPH_LOCS in turn."""
    module = Module()
    graphs: dict[str, Graph] = {}
    for (graph_name, loc), variant in zip(GRAPH_LOCS, variants):
        graph = graphs.get(graph_name)
        if graph is None:
            graph = graphs[graph_name] = module.add_graph(Graph(graph_name))
        inputs = [graph.add_input(f"x{len(graph.inputs)}", t) for t in input_types]
        graph.outputs.append(build(Builder(graph, loc=loc), *inputs, **variant))
    return module


def reported(module: Module, **kwargs: Any) -> list[tuple[str, str, str]]:
    return [(v.graph, v.loc, v.message)
            for v in verify(module, raise_on_error=False, **kwargs)]


def test_shared_signature_reports_each_wrong_op_at_its_location():
    # OH = (8 - 1 + 1 + 1 - (3 - 1) * 1) / 1 + 1 = 8, declared 7 in every variant.
    module = shared_signature_module(lambda b, x: conv2d(b, x, T((1, 7, 8, 4), i32)),
                                     [T((1, 8, 8, 3), i8)], [{}] * 4)
    message = "output dimension 1 must be 8, got 7"
    assert reported(module) == [(graph, loc, message) for graph, loc in GRAPH_LOCS]


def test_shared_signature_reads_each_zero_point():
    # ERROR_IF(in_t != i8 && input_zp != 0): a 16x8 convolution's input_zp must be 0.
    def conv16(b, x, zp):
        return conv2d(b, x, T((1, 8, 8, 4), i48), element=i16, acc="INT48", zp=zp)
    module = shared_signature_module(conv16, [T((1, 8, 8, 3), i16)],
                                     [{"zp": 0}, {"zp": 3}, {"zp": 0}, {"zp": -2}])
    assert reported(module) == [
        ("main", "main/op#2", "zero point input_zp must be 0 for i16, got 3"),
        ("other", "other/op#2", "zero point input_zp must be 0 for i16, got -2")]


def test_shared_signature_reads_each_rescale_shift_and_zero_point():
    # i32 -> i16: ERROR_IF(out_t != i8 && output_zp != 0); REQUIRE(2 <= shift <= 62).
    def rescale16(b, x, shift, out_zp):
        return rescale(b, x, i16, shift=shift, out_zp=out_zp)
    module = shared_signature_module(
        rescale16, [T((2, 3), i32)],
        [{"shift": 30, "out_zp": 0}, {"shift": 1, "out_zp": 0}, {"shift": 30, "out_zp": 5},
         {"shift": 63, "out_zp": 5}])
    assert reported(module) == [
        ("main", "main/op#2", "shift values must be in 2..62, got 1..1 (REQUIRE)"),
        ("other", "other/op#1", "output_zp must be 0 for i16, got 5"),
        ("other", "other/op#2", "output_zp must be 0 for i16, got 5"),
        ("other", "other/op#2", "shift values must be in 2..62, got 63..63 (REQUIRE)")]


def test_shared_signature_reads_each_shape_operand_and_its_producer():
    # RESHAPE [2, 3] -> [6]: the shape operand is a <ctc> made by tosa.const_shape
    # (without EXT-DYNAMIC) and must equal the output shape, keeping 6 elements.
    def reshape6(b, x, s, shape):
        shape_arg = s if shape is None else tb.const_shape(b, shape)
        return b.op("tosa.reshape", [x, shape_arg], T((6,), i8))
    module = shared_signature_module(reshape6, [T((2, 3), i8), ShapeType(1)],
                                     [{"shape": [6]}, {"shape": None}, {"shape": [7]},
                                      {"shape": [6]}])
    assert reported(module) == [
        ("main", "main/op#2", "operand 'shape' must be a compile-time constant "
                              "(tosa.const_shape) without EXT-DYNAMIC; it comes from a graph "
                              "input"),
        ("other", "other/op#1", "output (from the shape operand) shape must be [7], got [6]"),
        ("other", "other/op#1", "element count changes from [2, 3] (6 elements) to [7] "
                                "(7 elements)")]
    assert reported(module, extensions=("EXT-DYNAMIC",))[0][1] == "other/op#1"


def test_ops_sharing_a_shape_operand_are_each_reported():
    # SLICE [2, 3] at start [1, 0] of size [2, 3]: start + size = [3, 3] does not fit
    # [2, 3]. Both ops of a graph read one tosa.const_shape per list of values (the
    # builder shares it), so the second meets what the first found: both are reported.
    module = shared_signature_module(lambda b, x, start: tb.slice(b, x, start, [2, 3]),
                                     [T((2, 3), f32)],
                                     [{"start": [1, 0]}, {"start": [1, 0]}, {"start": [0, 0]},
                                      {"start": [1, 0]}])
    first, second = [op for op in module.graphs["main"].ops if op.name == "tosa.slice"]
    assert first.operands[1] is second.operands[1]
    found = reported(module)
    assert [loc for _, loc, _ in found] == ["main/op#1", "main/op#2", "other/op#2"]
    assert len({message for _, _, message in found}) == 1
    assert "does not fit the input" in found[0][2]


def test_shared_signature_reads_each_mul_shift():
    # REQUIRE(in_t == i32 || shift == 0).
    def mul8(b, x, shift):
        return tb.op(b, "tosa.mul", [x, x, tb.const(b, np.array([shift], np.int8))],
                     T((4,), i32))
    module = shared_signature_module(mul8, [T((4,), i8)],
                                     [{"shift": 0}, {"shift": 0}, {"shift": 1}, {"shift": 0}])
    assert reported(module) == [
        ("other", "other/op#1", "shift must be 0 unless the inputs are i32, got 1 (REQUIRE)")]
