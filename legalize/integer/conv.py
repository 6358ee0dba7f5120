"""Integer patterns for the convolution family: CONV_2D, DEPTHWISE_CONV_2D,
FULLY_CONNECTED with int8 weights and int8 activations (int32 bias) or int16
activations ("16x8", int64 or int32 bias), and int4 weights (TFLite unpacks
them to int8 and runs the same kernels; TOSA's EXT-INT4 convolutions take them
as i4 with int8 activations, `weight_storage`).

TFLite's kernels (reference_integer_ops::ConvPerChannel, DepthwiseConvPerChannel,
FullyConnected[PerChannel]) accumulate `(x - zp_in) * (w - zp_w)` (int32 for
8-bit activations, int64 for 16-bit), add the bias, scale each output channel
by `s_in * s_w[c] / s_out` (computed in double,
tflite::PopulateConvolutionQuantizationParams) with MultiplyByQuantizedMultiplier,
add zp_out and clamp to the fused activation range. TOSA: the convolution with
input_zp / weight_zp operands gives the same accumulator (i32, or i48 for
16x8; padding contributes 0 after zp subtraction, like TFLite's zero-point
padding), then a per-channel RESCALE to the output type and a CLAMP. The
int64 accumulator of 16x8 is scaled by the 64-bit MultiplyByQuantizedMultiplier,
whose 15-bit multiplier and single rounding are exactly RESCALE from i48 with
16-bit multipliers (legalize.quantized.quantize_multiplier_16) — for CONV_2D and
DEPTHWISE_CONV_2D. The reference FULLY_CONNECTED kernels (int8 and 16x8)
requantize with one rounding in double instead, ties away from zero, which the
32-bit multiplier with a single rounding reproduces once negative ties are moved
(_ties_away_from_zero), but for products within |result| * 2^-31 of a tie
(measured against TF 2.20's interpreter; see ROUNDING_POLICY). The optimized 16x8
FULLY_CONNECTED runs ruy's GEMM on an int32 accumulator unless the bias is int64
(_runs_optimized_kernel).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from legalize.common import constant_value, is_none, with_fused_activation
from legalize.integer.support import (
    ACC_TYPE,
    accumulator_bias,
    accumulator_type,
    integer_pattern,
    require_one_storage,
    static_shape,
    tensor_type,
    weight_operand,
    weight_scales,
    weight_zero_point,
)
from legalize.quantized import (
    ROUNDING_POLICY,
    SINGLE_ROUND,
    quantize_multiplier,
    rescale_by_multiplier,
    rescale_per_channel,
    rounding_mode,
)
from legalize.registry import pattern
from legalize.window import conv_window, trimmed_input
from tfl2tosa import kernels
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import (
    ScalarType,
    TensorType,
    UniformQuantized,
    i1,
    i4,
    i8,
    i32,
    i48,
    storage_type,
)
from tfl2tosa.tosa import build

# Input type, output type, weight tensor type, accumulator type.
ConvOperands = tuple[UniformQuantized, UniformQuantized, TensorType, ScalarType]


def conv_operands(op: Op, weight_index: int, input_index: int = 0) -> ConvOperands | Failure:
    """Input and output per-tensor types (both int8 or both int16), the int8 or
    int4 weight tensor type, and the accumulator type (i32 or i48)."""
    elements = require_one_storage(op, [op.operands[input_index], op.results[0]], "i8", "i16")
    if isinstance(elements, Failure):
        return elements
    weights = tensor_type(op.operands[weight_index])
    if weights is None or storage_type(weights.element).name not in ("i8", "i4") or \
            static_shape(op.operands[weight_index]) is None:
        return Failure(f"{op.name}: weights are not a static int8 or int4 quantized tensor")
    return elements[0], elements[1], weights, accumulator_type(elements[0])


def weight_storage(value: Value, weights: TensorType, x: UniformQuantized) -> ScalarType:
    """The TOSA element type of the weights: int4 constants stay i4 with int8
    activations (EXT-INT4's "signed 8x4" convolutions) unless one of them is -8,
    which TOSA's int4_t excludes (its range is [-7, 7]). Otherwise, and with
    int16 activations (TOSA has no 16x4 mode), they are widened to i8: the same
    integers, so the same accumulator."""
    storage = storage_type(weights.element)
    if storage != i4:
        return storage
    array = constant_value(value)
    if x.storage.bits != 8 or array is None or (array.size and int(array.min()) < -7):
        return i8
    return i4


def _channel_scales(op: Op, x: UniformQuantized, out: UniformQuantized,
                    weights: TensorType, channels: int) -> list[float] | Failure:
    """`s_in * s_w[c] / s_out` per output channel, in double as TFLite computes it."""
    scales = weight_scales(weights.element, channels)
    if isinstance(scales, Failure):
        return Failure(f"{op.name}: {scales.reason}")
    return [x.scale * s / out.scale for s in scales]


def _zero_points(rw: Rewriter, x: UniformQuantized, weights: TensorType,
                 storage: ScalarType) -> list[Value] | Failure:
    w_zp = weight_zero_point(weights.element)
    if isinstance(w_zp, Failure):
        return w_zp
    if storage == i4 and w_zp != 0:
        return Failure(f"int4 weights with zero point {w_zp} (TOSA's int4 weight_zp is 0)")
    return [build.zero_point(rw, x.zero_point, x), build.zero_point(rw, w_zp, storage)]


def accumulate(rw: Rewriter, op: Op, operands: ConvOperands, tosa_name: str, x: Value,
               filter_shape: tuple[int, ...] | None, acc_shape: tuple[int, ...],
               bias_index: int = 2, filter_perm: tuple[int, ...] | None = None,
               **attrs: object) -> tuple[Value, list[float]] | Failure:
    """The convolution `tosa_name` of `x` with op's weights (operand 1, transposed
    by `filter_perm` and reshaped to `filter_shape`), bias and zero points into the
    accumulator, and the per-channel scales that take the accumulator to the output."""
    x_type, out_type, weights, acc_element = operands
    channels = acc_shape[-1]
    scales = _channel_scales(op, x_type, out_type, weights, channels)
    bias = accumulator_bias(rw, op, bias_index, channels, acc_element)
    storage = weight_storage(op.operands[1], weights, x_type)
    zero_points = _zero_points(rw, x_type, weights, storage)
    for checked in (scales, bias, zero_points):
        if isinstance(checked, Failure):
            return checked
    filter_ = weight_operand(rw, op.operands[1], filter_shape, filter_perm, storage)
    if isinstance(filter_, Failure):
        return filter_
    acc = build.op(rw, tosa_name, [x, filter_, bias, *zero_points],
                   TensorType(acc_shape, acc_element), acc_type=ACC_TYPE[acc_element.bits],
                   **attrs)
    return acc, scales


def scaled_output(rw: Rewriter, op: Op, acc: Value, scales: list[float],
                   out: UniformQuantized, rounding: str | None = None) -> list[Value] | Failure:
    """RESCALE the accumulator per channel (with op's rounding_mode unless `rounding`
    is given), then the fused activation's CLAMP."""
    result = tensor_type(op.results[0])
    scaled = rescale_per_channel(rw, acc, scales, out,
                                 rounding or rounding_mode(op.name, out.storage.bits))
    if tensor_type(scaled).shape != result.shape:
        scaled = build.reshape(rw, scaled, result.shape)
    return with_fused_activation(rw, op, scaled)


def _windowed(rw: Rewriter, op: Op, operands: ConvOperands, tosa_name: str, kernel: tuple[int, int],
              filter_shape: tuple[int, ...] | None,
              filter_perm: tuple[int, ...] | None = None) -> list[Value] | Failure:
    """CONV2D or DEPTHWISE_CONV2D over op's input with TFLite's window, then
    the per-channel RESCALE and CLAMP."""
    x = op.operands[0]
    result = tensor_type(op.results[0])
    window = conv_window(op, tensor_type(x).shape[1:3], result.shape[1:3], kernel)
    if isinstance(window, Failure):
        return window
    pads, stride, dilation, used = window
    accumulated = accumulate(rw, op, operands, tosa_name, trimmed_input(rw, x, used),
                              filter_shape, result.shape, filter_perm=filter_perm, pad=pads,
                              stride=stride, dilation=dilation)
    if isinstance(accumulated, Failure):
        return accumulated
    acc, scales = accumulated
    return scaled_output(rw, op, acc, scales, operands[1])


@pattern("tfl.conv_2d", kind="integer", label="conv_2d_int", types=("i8", "i16", "i4"))
@integer_pattern
def conv_2d_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """CONV2D (i8 x i8 -> i32 or i16 x i8 -> i48, OHWI filter as TOSA) + per-channel
    RESCALE + CLAMP."""
    operands = conv_operands(op, 1)
    if isinstance(operands, Failure):
        return operands
    channels = tensor_type(op.operands[0]).shape[3]
    oc, kh, kw, ic = operands[2].shape
    if ic == 1 and channels > 1 and oc % channels == 0:
        # Groups of one input channel: reference_integer_ops::ConvPerChannel gives
        # output channel o the input channel o // (oc / channels), as a depthwise
        # convolution with multiplier oc / channels does; same accumulator, same
        # per-output-channel scaling.
        return _windowed(rw, op, operands, "tosa.depthwise_conv2d", (kh, kw),
                         (kh, kw, channels, oc // channels), filter_perm=(3, 1, 2, 0))
    if ic != channels:
        return Failure(f"{op.name}: grouped int8 convolution ({channels} input channels, "
                       f"filter {ic}) is not supported")
    return _windowed(rw, op, operands, "tosa.conv2d", (kh, kw), None)


@pattern("tfl.depthwise_conv_2d", kind="integer", label="depthwise_conv_2d_int",
         types=("i8", "i16", "i4"))
@integer_pattern
def depthwise_conv_2d_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """DEPTHWISE_CONV2D on the filter [1, KH, KW, C*M] reshaped to TOSA's
    [KH, KW, C, M] (output channel c*M + m in both) + per-channel RESCALE + CLAMP."""
    operands = conv_operands(op, 1)
    if isinstance(operands, Failure):
        return operands
    channels = tensor_type(op.operands[0]).shape[3]
    one, kh, kw, oc = operands[2].shape
    if one != 1 or oc % channels:
        return Failure(f"{op.name}: filter {list(operands[2].shape)} does not fit {channels} "
                       "input channels")
    return _windowed(rw, op, operands, "tosa.depthwise_conv2d", (kh, kw),
                     (kh, kw, channels, oc // channels))


def _wide_accumulator_refusal(op: Op, q_in: UniformQuantized) -> Failure | None:
    """Why a 16x8 FULLY_CONNECTED's int64 accumulator may not fit int32, if it may.

    TFLite's reference kernel multiplies that accumulator by the scale in double
    (`std::round(acc * scale)`, a 53-bit multiplier). TOSA has no such step: RESCALE
    from i48 takes 16-bit multipliers only, 15 bits of precision where TFLite has 53,
    so the pattern narrows the accumulator to i32 first, exactly while it fits, for
    the 32-bit multiplier. A large int64 bias (tiny weight scales make `bias / (s_in
    * s_w)` huge) or a long, full-range sum would not fit: the fallback takes those.
    An exact lowering would have to emulate a 48 x 53-bit product and its rounding
    with 32-bit integer limbs (no TOSA op multiplies an i48 value by more than 16
    bits, and RESCALE gives no remainder)."""
    weights = constant_value(op.operands[1])
    bias = constant_value(op.operands[2]) if len(op.operands) > 2 and \
        not is_none(op.operands[2]) else np.zeros(1, dtype=np.int64)
    if weights is None or bias is None:
        return Failure(f"{op.name}: 16x8 with run-time weights or bias (the int64 "
                       "accumulator's range is unknown)")
    inputs = 32768 + abs(q_in.zero_point)
    sums = np.abs(np.asarray(weights, dtype=np.int64)).sum(axis=1) * inputs + \
        np.abs(np.asarray(bias, dtype=np.int64).reshape(-1))
    if int(sums.max(initial=0)) >= 1 << 31:
        return Failure(f"{op.name}: the int64 accumulator may reach {int(sums.max())}, "
                       "beyond int32 (TFLite scales it in double; TOSA's 48-bit RESCALE "
                       "has only 16-bit multipliers)")
    return None


def _runs_optimized_kernel(op: Op, q_in: UniformQuantized, weights: TensorType) -> bool:
    """Whether TFLite runs its optimized FULLY_CONNECTED for op under tfl2tosa.kernels.

    fully_connected.cc (EvalQuantized): the builtin resolver runs int8 on
    cpu_backend_gemm, and 16x8 on ruy's int32 GEMM only when the zero points are 0
    (int16 inputs and outputs always have 0; per-channel weights count as 0, TFLite
    keeps no single zero point for them) and the bias is not int64, the reference
    kernel otherwise."""
    if kernels.current() != "optimized":
        return False
    if q_in.storage.bits != 16:
        return True
    per_tensor_zp = weights.element.zero_point \
        if isinstance(weights.element, UniformQuantized) else 0
    bias = op.operands[2] if len(op.operands) > 2 and not is_none(op.operands[2]) else None
    bias_type = tensor_type(bias) if bias is not None else None
    return per_tensor_zp == 0 and (
        bias_type is None or storage_type(bias_type.element).bits != 64)


def _optimized_scale(x: UniformQuantized, weights: UniformQuantized,
                     out: UniformQuantized) -> float:
    """The per-tensor scale of the optimized kernel: GetQuantizedConvolutionMultipler
    (kernel_util.cc) multiplies the input and weight scales in float32, then divides
    in double (the reference kernel and per-channel weights take all in double)."""
    product = np.float32(x.scale) * np.float32(weights.scale)
    return float(product) / float(np.float32(out.scale))


def _tie_masks(scales: list[float]) -> tuple[np.ndarray, np.ndarray] | None:
    """Per channel, (mask, half) such that `acc * scale` is a tie exactly when
    `acc & mask == half`, or (0, 1), which no accumulator meets, for a channel
    without ties; None when no channel has them.

    An int32 accumulator times `scale = n * 2^-E` (n odd) is a tie when acc mod 2^E
    is 2^(E-1), which needs 1 <= E <= 31; only a scale that the 32-bit multiplier
    holds exactly is taken (the RESCALE then computes `acc * scale` exactly too),
    and at most 1 (see _ties_away_from_zero)."""
    masks, halves = [], []
    for scale in scales:
        ratio = Fraction(scale)
        exponent = ratio.denominator.bit_length() - 1
        exact = 0 < scale <= 1 and 1 <= exponent <= 31 and \
            Fraction(*_multiplier_ratio(scale)) == ratio
        masks.append((1 << exponent) - 1 if exact else 0)
        halves.append(1 << (exponent - 1) if exact else 1)
    if not any(masks):
        return None
    return np.array(masks, dtype=np.int32), np.array(halves, dtype=np.int32)


def _multiplier_ratio(scale: float) -> tuple[int, int]:
    multiplier, shift = quantize_multiplier(scale)
    return multiplier, 1 << shift


def _ties_away_from_zero(rw: Rewriter, acc: Value, scales: list[float]) -> Value:
    """`acc - 1` where `acc * scale` is a negative tie, so that the RESCALE, which
    rounds ties up, gives what TFLite's reference FULLY_CONNECTED gives,
    `std::round(acc * scale)`, away from zero: `k + 1/2 - scale` rounds to k for
    0 < scale <= 1. `acc` as it is when no channel's scale makes ties (_tie_masks):
    arbitrary scales never do."""
    masks = _tie_masks(scales)
    if masks is None:
        return acc
    t = tensor_type(acc)
    rank = len(t.shape)
    boolean = t.with_element(i1)

    def per_channel(values: np.ndarray) -> Value:
        return build.const(rw, values.reshape((1,) * (rank - 1) + (-1,)), i32)

    low = build.op(rw, "tosa.bitwise_and", [acc, per_channel(masks[0])], t)
    tie = build.op(rw, "tosa.equal", [low, per_channel(masks[1])], boolean)
    zero = build.const(rw, np.zeros((1,) * rank, dtype=np.int32), i32)
    negative = build.op(rw, "tosa.greater", [zero, acc], boolean)
    negative_tie = build.op(rw, "tosa.logical_and", [tie, negative], boolean)
    return build.op(rw, "tosa.sub", [acc, build.cast(rw, negative_tie, i32)], t)


@pattern("tfl.fully_connected", kind="integer", label="fully_connected_int",
         types=("i8", "i16", "i4"))
@integer_pattern
def fully_connected_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """A 1x1 CONV2D over [rows, 1, 1, IC] with the [OC, IC] weights as [OC, 1, 1, IC]
    (CONV2D takes the bias, MATMUL would not), per-channel RESCALE with the
    FULLY_CONNECTED rounding (one rounding, ties away from zero, in TFLite's
    reference kernel; two in ruy's GEMM for the optimized ones), CLAMP, then the
    result shape."""
    if op.attrs.get("weights_format", "DEFAULT") != "DEFAULT" or len(op.results) != 1:
        return Failure(f"{op.name}: only DEFAULT weights and one result are supported")
    operands = conv_operands(op, 1)
    if isinstance(operands, Failure):
        return operands
    weights, acc_element = operands[2:]
    oc, ic = weights.shape
    x_shape = tensor_type(op.operands[0]).shape
    rows = math.prod(x_shape) // ic
    if acc_element == i48 and (refused := _wide_accumulator_refusal(op, operands[0])):
        return refused
    accumulated = accumulate(rw, op, operands, "tosa.conv2d",
                              build.reshape(rw, op.operands[0], (rows, 1, 1, ic)),
                              (oc, 1, 1, ic), (rows, 1, 1, oc), pad=[0, 0, 0, 0],
                              stride=[1, 1], dilation=[1, 1])
    if isinstance(accumulated, Failure):
        return accumulated
    acc, scales = accumulated
    q_in, q_out = operands[:2]
    optimized = _runs_optimized_kernel(op, q_in, weights)
    if optimized:
        rounding = rounding_mode(op.name, q_in.storage.bits)
        if isinstance(weights.element, UniformQuantized):
            scales = [_optimized_scale(q_in, weights.element, q_out)] * oc
    else:
        rounding = ROUNDING_POLICY[op.name]
    if acc_element == i48:
        # TFLite's reference FULLY_CONNECTED scales even the 16x8 int64 accumulator
        # with one rounding in double, and its optimized one an int32 accumulator
        # with the 32-bit multiplier; RESCALE applies 32-bit multipliers to 32-bit
        # inputs only: narrow the accumulator first (exact: it fits int32, as
        # _wide_accumulator_refusal checked).
        acc = rescale_by_multiplier(rw, acc, [1 << 14], [14], i32, input_zp=0, output_zp=0,
                                    rounding=SINGLE_ROUND)
    if not optimized:
        acc = _ties_away_from_zero(rw, acc, scales)
    return scaled_output(rw, op, acc, scales, q_out, rounding)
