"""Integer patterns for matrix products and the transposed convolution:
BATCH_MATMUL (int8, int16) and TRANSPOSE_CONV (int8, int16x8).

BATCH_MATMUL (reference_ops::BatchMatMul<T, AccumT>, kernels/internal/reference/
batch_matmul.h) accumulates `(x - zp_x) * (y - zp_y)` (int32 for int8, int64
for int16) and scales it with MultiplyByQuantizedMultiplier by `s_x * s_y /
s_out`, the product of the scales taken in float32 and the division in double
(kernel_util.cc GetQuantizedConvolutionMultipler without a bias), then adds
zp_out and clamps. TOSA: MATMUL with A_zp / B_zp on rank 3 (i8 x i8 -> i32,
i16 x i16 -> i48), RESCALE to the output type, then RESHAPE to the result
shape. The int64 accumulator is scaled by TFLite's 64-bit
MultiplyByQuantizedMultiplier, which is RESCALE from i48 with the 15-bit
multiplier and single rounding (legalize.quantized.quantize_multiplier_16);
the RESCALE comes first because RESHAPE has no i48 mode.

TRANSPOSE_CONV (reference_integer_ops::TransposeConv, kernels/internal/reference/
integer_ops/transpose_conv.h) scatters `(x - zp_in) * w` (the weights' zero
point is not used: TFLite's weights are symmetric) into an int32 (int8) or
int64 (int16x8) accumulator, adds the bias, scales each output channel by
`s_in * s_w[c] / s_out` (double) and adds zp_out. TOSA TRANSPOSE_CONV2D with
out_pad = -(TFLite's padding) gives the same accumulator (geometry from the
float pattern, legalize.window.transposed_window), then a per-channel RESCALE
(i48 with the 15-bit multipliers for int16x8) and the fused activation's CLAMP.
"""

from __future__ import annotations

import numpy as np

from legalize.conv import matmul_operands, transposed_channels_refusal
from legalize.integer.conv import accumulate, conv_operands, scaled_output
from legalize.integer.support import (
    accumulator_type,
    integer_pattern,
    require_one_storage,
    tensor_type,
    weight_operand,
    weight_zero_point,
)
from legalize.quantized import rescale_from_i32, rounding_mode
from legalize.registry import pattern
from legalize.window import transposed_window, trimmed_input
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import (
    TensorType,
    UniformQuantized,
    UniformQuantizedPerAxis,
    i48,
    storage_type,
)
from tfl2tosa.tosa import build

# ---------------------------------------------------------------------------
# BATCH_MATMUL


def _matmul_scale(x: UniformQuantized, y: UniformQuantized, out: UniformQuantized) -> float:
    """`double(float(s_x * s_y)) / double(s_out)`, as GetQuantizedConvolutionMultipler
    computes it for an op without a bias."""
    return float(np.float32(x.scale) * np.float32(y.scale)) / float(np.float32(out.scale))


@pattern("tfl.batch_matmul", kind="integer", label="batch_matmul_int", types=("i8", "i16"))
@integer_pattern
def batch_matmul_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """MATMUL (A_zp, B_zp; i32 or i48 accumulator) on the operands flattened to
    rank 3 (batch dims broadcast by TILE, adj_x / adj_y by TRANSPOSE), RESCALE to
    the output type, RESHAPE to the result."""
    elements = require_one_storage(op, [*op.operands[:2], op.results[0]], "i8", "i16")
    if isinstance(elements, Failure):
        return elements
    q_x, q_y, q_out = elements
    acc_element = accumulator_type(q_out)
    if acc_element == i48 and (q_x.zero_point or q_y.zero_point):
        return Failure(f"{op.name}: int16 operands with a non-zero zero point (TOSA's "
                       "16-bit MATMUL has none)")
    # The operands' quantization lives in the RESCALE: constants become plain
    # storage-typed constants.
    x, y = weight_operand(rw, op.operands[0]), weight_operand(rw, op.operands[1])
    for stored in (x, y):
        if isinstance(stored, Failure):
            return stored
    operands = matmul_operands(rw, op, x, y)
    if isinstance(operands, Failure):
        return operands
    lhs, rhs, shape = operands
    zero_points = [build.zero_point(rw, q_x.zero_point, q_x),
                   build.zero_point(rw, q_y.zero_point, q_y)]
    acc = build.op(rw, "tosa.matmul", [lhs, rhs, *zero_points],
                   TensorType(shape, acc_element))
    scaled = rescale_from_i32(rw, acc, _matmul_scale(q_x, q_y, q_out), q_out,
                              rounding_mode(op.name, q_out.storage.bits))
    return [build.reshape(rw, scaled, tensor_type(op.results[0]).shape)]


# ---------------------------------------------------------------------------
# TRANSPOSE_CONV


def _bias_refusal(op: Op, q_in: UniformQuantized) -> Failure | None:
    """TFLite's int16x8 kernel reads the bias as int64 whatever its type (TF 2.20
    answers garbage for an int32 bias), so only an int64 bias (or none) matches."""
    if q_in.storage.bits == 16 and len(op.operands) > 3 and \
            isinstance(op.operands[3].type, TensorType) and \
            storage_type(tensor_type(op.operands[3]).element).bits != 64:
        return Failure(f"{op.name}: int16x8 with a {tensor_type(op.operands[3]).element} bias "
                       "(TFLite's kernel reads an int64 bias)")
    return None


@pattern("tfl.transpose_conv", kind="integer", label="transpose_conv_int",
         types=("i8", "i16"))
@integer_pattern
def transpose_conv_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TRANSPOSE_CONV2D (i8 x i8 -> i32 or i16 x i8 -> i48, out_pad = -TFLite's
    padding) + per-channel RESCALE + CLAMP."""
    operands = conv_operands(op, 1, input_index=2)
    if isinstance(operands, Failure):
        return operands
    q_in, q_out, weights, _ = operands
    if isinstance(weights.element, UniformQuantizedPerAxis) and weights.element.axis != 0:
        return Failure(f"{op.name}: weights quantized along axis {weights.element.axis}, "
                       "not the output channels")
    if weight_zero_point(weights.element) != 0:
        return Failure(f"{op.name}: weights with a non-zero zero point (TFLite ignores it)")
    if refused := _bias_refusal(op, q_in):
        return refused
    result = tensor_type(op.results[0])
    _, ih, iw, _ = tensor_type(op.operands[2]).shape
    oc, kh, kw, ic = weights.shape
    if (refused := transposed_channels_refusal(op, oc, ic)) is not None:
        return refused
    window = transposed_window(op, (ih, iw), result.shape[1:3], (kh, kw))
    if isinstance(window, Failure):
        return window
    out_pad, stride, used = window
    accumulated = accumulate(rw, op, operands, "tosa.transpose_conv2d",
                             trimmed_input(rw, op.operands[2], used), None, result.shape,
                             bias_index=3, out_pad=out_pad, stride=stride)
    if isinstance(accumulated, Failure):
        return accumulated
    acc, scales = accumulated
    return scaled_output(rw, op, acc, scales, q_out)
