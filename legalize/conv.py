"""Patterns for the TFL convolution family: CONV_2D, DEPTHWISE_CONV_2D,
TRANSPOSE_CONV, CONV_3D, CONV_3D_TRANSPOSE, FULLY_CONNECTED, BATCH_MATMUL on
float data, and in integer arithmetic, bit exact with TFLite, CONV_2D,
DEPTHWISE_CONV_2D, FULLY_CONNECTED, BATCH_MATMUL and TRANSPOSE_CONV.

Float data: f32, f16 (f16 accumulates in f32). Hybrid ("dynamic range")
ops, float activations with int8 constant weights, take legalize/hybrid.py's
patterns, which compute what TFLite's hybrid kernels compute (activations
quantized per batch row at run time, int32 products). With `--hybrid float`
they come here instead: the weights are dequantized at conversion time,
`(q - zp) * scale` per channel, in float64 rounded once to float32, the exact
value the hybrid kernels approximate without the activations' int8 rounding.

Window geometry (TFLite's SAME/VALID padding made exact for TOSA) is
`legalize.window`'s.

Integer: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED with int8 weights and int8 activations (int32 bias) or int16
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

import math
from collections.abc import Callable, Sequence

import numpy as np

from legalize.common import (
    constant_value,
    fused_activation,
    is_none,
    require_static,
    tensor_type,
    with_fused_activation,
)
from legalize.integer.support import (
    ACC_TYPE,
    accumulator_bias,
    accumulator_type,
    integer_pattern,
    require_one_storage,
    static_shape,
    weight_operand,
    weight_scales,
    weight_zero_point,
)
from legalize.integer.support import tensor_type as maybe_tensor_type
from legalize.quantized import (
    ROUNDING_POLICY,
    SINGLE_ROUND,
    dequantized_values,
    quantize_multiplier,
    rescale_by_multiplier,
    rescale_from_i32,
    rescale_per_channel,
    rounding_mode,
)
from legalize.registry import pattern
from legalize.window import (
    conv_window,
    per_axis_attribute,
    transposed_pad_before,
    transposed_window,
    trimmed_input,
)
from tfl2tosa import kernels
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import (
    ElementType,
    ScalarType,
    TensorType,
    UniformQuantized,
    UniformQuantizedPerAxis,
    f32,
    i1,
    i4,
    i8,
    i32,
    i48,
    is_quantized,
    numpy_dtype,
    storage_type,
)
from tfl2tosa.tosa import build

# ---------------------------------------------------------------------------
# Operands: float activations, float (or dequantized) weights


def require_float_activations(op: Op, weights: Sequence[int] = ()) -> Failure | None:
    """Failure unless every tensor except the constant weight operands is float.

    Quantized weights are allowed only as constants (hybrid models); a quantized
    activation means the op belongs to the integer path or the fallback.
    """
    for index, value in enumerate(op.operands):
        if not isinstance(value.type, TensorType) or not is_quantized(value.type.element):
            continue
        if index not in weights:
            return Failure(f"{op.name}: quantized operand {index} needs the integer path")
        if constant_value(value) is None:
            return Failure(f"{op.name}: quantized weights that are not constants")
    for value in op.results:
        if is_quantized(tensor_type(value).element):
            return Failure(f"{op.name}: quantized result needs the integer path")
    return require_static(op)


def float_weights(rw: Rewriter, value: Value, element: ElementType) -> Value | Failure:
    """`value` as a float tensor of `element`: quantized constants are dequantized
    here (hybrid models), other constants converted, run-time values CAST."""
    t = tensor_type(value)
    array = constant_value(value)
    if array is not None and array.size != t.num_elements:
        # The importer keeps sparse constants as their stored values and int4
        # constants packed two to a byte.
        return Failure(f"{value.name}: {array.size} stored values for {t}: sparse or packed "
                       "int4 weights are not supported")
    if is_quantized(t.element):
        if array is None or not isinstance(t.element, (UniformQuantized,
                                                       UniformQuantizedPerAxis)):
            return Failure(f"{value.name}: quantized weights must be constants")
        return build.const(rw, dequantized_values(array, t.element).astype(numpy_dtype(element)),
                           element)
    if t.element == element:
        return value
    if array is not None:
        return build.const(rw, array.astype(numpy_dtype(element)), element)
    return build.cast(rw, value, element)


def folded(rw: Rewriter, value: Value, fold: Callable[[np.ndarray], np.ndarray],
           emit: Callable[[], Value]) -> Value:
    """`fold` applied to a constant at conversion time, else the op `emit` builds."""
    array = constant_value(value)
    if array is None:
        return emit()
    return build.const(rw, np.ascontiguousarray(fold(array)), tensor_type(value).element)


def reshaped(rw: Rewriter, value: Value, shape: Sequence[int]) -> Value:
    return folded(rw, value, lambda a: a.reshape(shape), lambda: build.reshape(rw, value, shape))


def transposed(rw: Rewriter, value: Value, perms: Sequence[int]) -> Value:
    return folded(rw, value, lambda a: a.transpose(perms),
                  lambda: build.transpose(rw, value, perms))


def sliced(rw: Rewriter, value: Value, axis: int, start: int, size: int) -> Value:
    """`value[..., start:start + size, ...]` along `axis` (no-op for the whole axis)."""
    shape = list(tensor_type(value).shape)
    if start == 0 and size == shape[axis]:
        return value
    begin = [0] * len(shape)
    begin[axis] = start
    shape[axis] = size
    index = tuple(slice(b, b + s) for b, s in zip(begin, shape))
    return folded(rw, value, lambda a: a[index], lambda: build.slice(rw, value, begin, shape))


def reversed_axes(rw: Rewriter, value: Value, axes: Sequence[int]) -> Value:
    """`value` flipped along each of `axes` (REVERSE ops, or numpy for constants)."""
    array = constant_value(value)
    if array is not None:
        return build.const(rw, np.ascontiguousarray(np.flip(array, tuple(axes))),
                           tensor_type(value).element)
    for axis in axes:
        value = build.op(rw, "tosa.reverse", [value], tensor_type(value), axis=axis)
    return value


def weights_and_bias(rw: Rewriter, op: Op, bias_index: int, channels: int,
                     element: ElementType) -> tuple[Value, Value] | Failure:
    """Operand 1 (the weights) and the bias at `bias_index` as float `element` tensors."""
    weights = float_weights(rw, op.operands[1], element)
    bias = bias_operand(rw, op, bias_index, channels, element)
    for value in (weights, bias):
        if isinstance(value, Failure):
            return value
    return weights, bias


def bias_operand(rw: Rewriter, op: Op, index: int, channels: int,
                 element: ElementType) -> Value | Failure:
    """The bias as a float [channels] tensor, or a [1] zero (TOSA broadcasts a
    one-element bias) when the optional operand is absent."""
    if index >= len(op.operands) or is_none(op.operands[index]):
        return build.const(rw, np.zeros((1,), dtype=numpy_dtype(element)), element)
    bias = float_weights(rw, op.operands[index], element)
    if isinstance(bias, Failure):
        return bias
    shape = tensor_type(bias).shape
    if math.prod(shape) != channels:
        return Failure(f"{op.name}: bias has shape {list(shape)} for {channels} channels")
    return reshaped(rw, bias, (channels,)) if len(shape) != 1 else bias


# f32 accumulation for f32 and f16 alike (TFLite computes f16 models in f32).
FLOAT_ACC_TYPE = "FP32"


def zero_points(rw: Rewriter, element: ElementType) -> list[Value]:
    """The input and weight zero-point operands: 0 for float."""
    return [build.zero_point(rw, 0.0, element), build.zero_point(rw, 0.0, element)]


# ---------------------------------------------------------------------------
# Convolutions


def _forward_operands(rw: Rewriter, op: Op, channels_out: int, kernel: Sequence[int],
                      axes: str = "hw"
                      ) -> tuple[Value, Value, tuple[list[int], ...]] | Failure:
    """A forward convolution's float weights, bias (operand 2) and window
    (`conv_window`: pad, stride, dilation, used input sizes)."""
    result = tensor_type(op.results[0])
    operands = weights_and_bias(rw, op, 2, channels_out, result.element)
    window = conv_window(op, tensor_type(op.operands[0]).shape[1:-1], result.shape[1:-1],
                         kernel, axes)
    for checked in (operands, window):
        if isinstance(checked, Failure):
            return checked
    return (*operands, window)


def _conv(rw: Rewriter, name: str, x: Value, weights: Value, bias: Value, result: TensorType,
          **attrs: object) -> Value:
    element = result.element
    return build.op(rw, name, [x, weights, bias, *zero_points(rw, element)], result,
                    acc_type=FLOAT_ACC_TYPE, **attrs)


@pattern("tfl.conv_2d", weights=(1,))
def conv_2d(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """CONV2D (filter OHWI as TOSA), SAME/VALID pads, bias zeros when absent.

    A filter with fewer input channels than the input is a grouped
    convolution: one SLICE + CONV2D per group, then CONCAT on channels.
    """
    if (failure := require_float_activations(op, weights=(1,))) is not None:
        return failure
    x = op.operands[0]
    result = tensor_type(op.results[0])
    channels = tensor_type(x).shape[3]
    oc, kh, kw, group_channels = tensor_type(op.operands[1]).shape
    if channels % group_channels or oc % (channels // group_channels):
        return Failure(f"tfl.conv_2d: {channels} input channels do not split into groups "
                       f"of {group_channels} for {oc} filters")
    prepared = _forward_operands(rw, op, oc, (kh, kw))
    if isinstance(prepared, Failure):
        return prepared
    weights, bias, (pads, stride, dilation, used) = prepared
    x = trimmed_input(rw, x, used)
    groups = channels // group_channels
    group_oc = oc // groups
    outputs = []
    for g in range(groups):
        group_bias = bias if tensor_type(bias).shape == (1,) else sliced(
            rw, bias, 0, g * group_oc, group_oc)
        outputs.append(_conv(
            rw, "tosa.conv2d", sliced(rw, x, 3, g * group_channels, group_channels),
            sliced(rw, weights, 0, g * group_oc, group_oc), group_bias,
            result.with_shape((*result.shape[:3], group_oc)),
            pad=pads, stride=stride, dilation=dilation))
    conv = outputs[0] if groups == 1 else build.op(rw, "tosa.concat", outputs, result, axis=3)
    return with_fused_activation(rw, op, conv)


@pattern("tfl.depthwise_conv_2d", weights=(1,))
def depthwise_conv_2d(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """DEPTHWISE_CONV2D; the TFLite filter [1, KH, KW, C*M] is the TOSA weight
    [KH, KW, C, M] reshaped (output channel c*M + m in both)."""
    if (failure := require_float_activations(op, weights=(1,))) is not None:
        return failure
    channels = tensor_type(op.operands[0]).shape[3]
    one, kh, kw, oc = tensor_type(op.operands[1]).shape
    if one != 1 or oc % channels:
        return Failure(f"tfl.depthwise_conv_2d: filter {[one, kh, kw, oc]} does not fit "
                       f"{channels} input channels")
    prepared = _forward_operands(rw, op, oc, (kh, kw))
    if isinstance(prepared, Failure):
        return prepared
    weights, bias, (pads, stride, dilation, used) = prepared
    conv = _conv(rw, "tosa.depthwise_conv2d", trimmed_input(rw, op.operands[0], used),
                 reshaped(rw, weights, (kh, kw, channels, oc // channels)), bias,
                 tensor_type(op.results[0]), pad=pads, stride=stride, dilation=dilation)
    return with_fused_activation(rw, op, conv)


def _transposed_operands(rw: Rewriter, op: Op, channels_out: int, channels_in: int
                         ) -> tuple[Value, Value] | Failure:
    """A transposed convolution's float weights and bias (operands 1 and 3),
    once the weights' channels fit the input (operand 2) and the result."""
    if (refused := transposed_channels_refusal(op, channels_out, channels_in)) is not None:
        return refused
    return weights_and_bias(rw, op, 3, channels_out, tensor_type(op.results[0]).element)


def transposed_channels_refusal(op: Op, channels_out: int, channels_in: int) -> Failure | None:
    """Why a transposed convolution's weights do not fit its input (operand 2)
    and result channels, if they do not."""
    channels = tensor_type(op.operands[2]).shape[-1]
    result = tensor_type(op.results[0])
    if channels_in != channels or result.shape[-1] != channels_out:
        return Failure(f"{op.name}: weights {list(tensor_type(op.operands[1]).shape)} do not "
                       f"fit input {channels} / output {result.shape[-1]} channels")
    return None


@pattern("tfl.transpose_conv", weights=(1,))
def transpose_conv(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TRANSPOSE_CONV2D with out_pad = -(TFLite's pad) before and whatever makes
    the requested output size after (reference_ops::TransposeConv writes input
    (y, ky) to output y * stride - pad + ky and drops what falls outside).

    Operands: output_shape (unused: the result type has it), weights OHWI
    (as TOSA), input, optional bias.
    """
    if (failure := require_float_activations(op, weights=(1,))) is not None:
        return failure
    x = op.operands[2]
    result = tensor_type(op.results[0])
    _, ih, iw, _ = tensor_type(x).shape
    oc, kh, kw, ic = tensor_type(op.operands[1]).shape
    operands = _transposed_operands(rw, op, oc, ic)
    if isinstance(operands, Failure):
        return operands
    weights, bias = operands
    window = transposed_window(op, (ih, iw), result.shape[1:3], (kh, kw))
    if isinstance(window, Failure):
        return window
    out_pad, stride, used = window
    conv = _conv(rw, "tosa.transpose_conv2d", trimmed_input(rw, x, used), weights, bias,
                 result, out_pad=out_pad, stride=stride)
    return with_fused_activation(rw, op, conv)


@pattern("tfl.conv_3d", weights=(1,))
def conv_3d(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """CONV3D; the TFLite filter DHWIO is transposed to TOSA's ODHWI."""
    if (failure := require_float_activations(op, weights=(1,))) is not None:
        return failure
    channels = tensor_type(op.operands[0]).shape[4]
    kd, kh, kw, ic, oc = tensor_type(op.operands[1]).shape
    if ic != channels:
        return Failure(f"tfl.conv_3d: filter has {ic} input channels, input has {channels}")
    prepared = _forward_operands(rw, op, oc, (kd, kh, kw), "dhw")
    if isinstance(prepared, Failure):
        return prepared
    weights, bias, (pads, stride, dilation, used) = prepared
    conv = _conv(rw, "tosa.conv3d", trimmed_input(rw, op.operands[0], used),
                 transposed(rw, weights, (4, 0, 1, 2, 3)), bias, tensor_type(op.results[0]),
                 pad=pads, stride=stride, dilation=dilation)
    return with_fused_activation(rw, op, conv)


def zero_inserted(rw: Rewriter, x: Value, axis: int, stride: int) -> Value:
    """`x` with stride - 1 zeros after every element along `axis` (length * stride).

    [.., L, ..] -> RESHAPE [outer, 1, inner] -> PAD the middle axis to `stride`
    -> RESHAPE [.., L * stride, ..]; the middle RESHAPE keeps the rank at 3.
    """
    if stride == 1:
        return x
    shape = list(tensor_type(x).shape)
    outer = math.prod(shape[:axis + 1])
    inner = math.prod(shape[axis + 1:])
    grouped = build.reshape(rw, x, (outer, 1, inner))
    spread = build.pad(rw, grouped, [0, 0, 0, stride - 1, 0, 0])
    shape[axis] *= stride
    return build.reshape(rw, spread, shape)


@pattern("tfl.conv_3d_transpose", weights=(1,))
def conv_3d_transpose(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """A transposed 3-D convolution as a forward CONV3D (TOSA has no
    TRANSPOSE_CONV3D): insert stride - 1 zeros between input elements, then
    convolve with the spatially flipped kernel, stride 1, the same dilation.

    reference_ops::Conv3DTranspose writes input i, tap k to output
    o = i * s - pad + k * d. On the zero-inserted input u (u[i * s] = x[i]) that
    is o = j - pad + k * d with j = i * s, i.e. a forward convolution of u
    padded by (K - 1) * d - pad in front with the kernel reversed. Operands:
    output_shape (unused), filter [KD, KH, KW, OC, IC], input, optional bias.
    """
    if (failure := require_float_activations(op, weights=(1,))) is not None:
        return failure
    x = op.operands[2]
    result = tensor_type(op.results[0])
    _, *in_sizes, _ = tensor_type(x).shape
    *kernel, oc, ic = tensor_type(op.operands[1]).shape
    operands = _transposed_operands(rw, op, oc, ic)
    if isinstance(operands, Failure):
        return operands
    weights, bias = operands
    stride = per_axis_attribute(op, "stride_{}", "dhw")
    dilation = per_axis_attribute(op, "dilation_{}_factor", "dhw")
    pads: list[int] = []
    keep: list[tuple[int, int]] = []
    for size, out, k, s, d in zip(in_sizes, result.shape[1:4], kernel, stride, dilation):
        removed = transposed_pad_before(op.attrs["padding"], out, k, s, d)
        if isinstance(removed, Failure):
            return removed
        before = (k - 1) * d - removed
        after = out + (k - 1) * d - before - size * s
        # Negative padding: cut zero-inserted rows instead.
        start, length = max(-before, 0), size * s - max(-before, 0) + min(after, 0)
        if length <= 0:
            return Failure(f"tfl.conv_3d_transpose: output {list(result.shape)} is not "
                           "reachable")
        keep.append((start, length))
        pads += [max(before, 0), max(after, 0)]
    for axis, s in enumerate(stride, start=1):
        x = zero_inserted(rw, x, axis, s)
    for axis, (start, length) in enumerate(keep, start=1):
        x = sliced(rw, x, axis, start, length)
    flipped = reversed_axes(rw, transposed(rw, weights, (3, 0, 1, 2, 4)), (1, 2, 3))
    conv = _conv(rw, "tosa.conv3d", x, flipped, bias, result, pad=pads, stride=[1, 1, 1],
                 dilation=dilation)
    return with_fused_activation(rw, op, conv)


# ---------------------------------------------------------------------------
# Matrix products


@pattern("tfl.fully_connected", weights=(1,))
def fully_connected(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """A 1x1 CONV2D: input [..., IC] -> [rows, 1, 1, IC], weights [OC, IC] ->
    [OC, 1, 1, IC] (CONV2D takes the bias, which MATMUL would not), then the
    result shape (keep_num_dims or [rows, OC], as the result type says)."""
    if (failure := require_float_activations(op, weights=(1,))) is not None:
        return failure
    if op.attrs.get("weights_format", "DEFAULT") != "DEFAULT":
        return Failure(f"tfl.fully_connected: weights_format {op.attrs['weights_format']}")
    if len(op.results) != 1:
        return Failure("tfl.fully_connected: more than one result")
    x = op.operands[0]
    result = tensor_type(op.results[0])
    element = result.element
    oc, ic = tensor_type(op.operands[1]).shape
    rows = tensor_type(x).num_elements // ic
    operands = weights_and_bias(rw, op, 2, oc, element)
    if isinstance(operands, Failure):
        return operands
    weights, bias = operands
    conv = _conv(rw, "tosa.conv2d", build.reshape(rw, x, (rows, 1, 1, ic)),
                 reshaped(rw, weights, (oc, 1, 1, ic)), bias,
                 result.with_shape((rows, 1, 1, oc)),
                 pad=[0, 0, 0, 0], stride=[1, 1], dilation=[1, 1])
    activated = fused_activation(rw, conv, op.attrs.get("fused_activation_function"))
    if isinstance(activated, Failure):
        return activated
    return [build.reshape(rw, activated, result.shape)]


def broadcast_batch(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    """numpy broadcasting of two batch shapes, None if they do not broadcast."""
    rank = max(len(a), len(b))
    a = (1,) * (rank - len(a)) + tuple(a)
    b = (1,) * (rank - len(b)) + tuple(b)
    if any(p != q and 1 not in (p, q) for p, q in zip(a, b)):
        return None
    return tuple(max(p, q) for p, q in zip(a, b))


def _to_batch(rw: Rewriter, value: Value, batch: tuple[int, ...]) -> Value:
    """[*b, R, C] -> [prod(batch), R, C], TILEing broadcast batch dims."""
    shape = tuple(tensor_type(value).shape)
    rows, cols = shape[-2:]
    own = (1,) * (len(batch) - len(shape) + 2) + shape[:-2]
    if own != batch:
        value = reshaped(rw, value, (*own, rows, cols))
        multiples = [b if o == 1 else 1 for o, b in zip(own, batch)] + [1, 1]
        value = build.op(rw, "tosa.tile", [value, build.const_shape(rw, multiples)],
                         tensor_type(value).with_shape((*batch, rows, cols)))
    return reshaped(rw, value, (math.prod(batch), rows, cols))


def _swap_last(rw: Rewriter, value: Value) -> Value:
    return transposed(rw, value, (0, 2, 1))


def matmul_operands(rw: Rewriter, op: Op, x: Value, y: Value
                    ) -> tuple[Value, Value, tuple[int, int, int]] | Failure:
    """BATCH_MATMUL's `x` [*Bx, M, K] and `y` [*By, K, N] as MATMUL's rank-3
    operands, and MATMUL's result shape.

    Batch dims broadcast (TILE) and are flattened; adj_x / adj_y TRANSPOSE the
    last two dims. A right operand without batch (a weight) is not tiled: the
    left batch folds into its rows instead.
    """
    x_shape, y_shape = tensor_type(x).shape, tensor_type(y).shape
    if len(x_shape) < 2 or len(y_shape) < 2:
        return Failure(f"{op.name}: operands need rank >= 2")
    batch = broadcast_batch(x_shape[:-2], y_shape[:-2])
    if batch is None:
        return Failure(f"{op.name}: batch dims {x_shape[:-2]} and {y_shape[:-2]} do not "
                       "broadcast")
    adj_x, adj_y = bool(op.attrs.get("adj_x")), bool(op.attrs.get("adj_y"))
    m, k = (x_shape[-1], x_shape[-2]) if adj_x else (x_shape[-2], x_shape[-1])
    y_depth, n = (y_shape[-1], y_shape[-2]) if adj_y else (y_shape[-2], y_shape[-1])
    if y_depth != k:
        return Failure(f"{op.name}: depths {k} and {y_depth} differ")
    if all(d == 1 for d in y_shape[:-2]) and not adj_x:
        # [*B, M, K] x [K, N] == [1, B*M, K] x [1, K, N]
        rows = math.prod(x_shape[:-1])
        lhs = reshaped(rw, x, (1, rows, k))
        rhs = reshaped(rw, y, (1, *y_shape[-2:]))
        batch_size, m_rows = 1, rows
    else:
        lhs, rhs = _to_batch(rw, x, batch), _to_batch(rw, y, batch)
        if adj_x:
            lhs = _swap_last(rw, lhs)
        batch_size, m_rows = math.prod(batch), m
    if adj_y:
        rhs = _swap_last(rw, rhs)
    return lhs, rhs, (batch_size, m_rows, n)


@pattern("tfl.batch_matmul", weights=(1,))
def batch_matmul(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """MATMUL on rank 3 (`matmul_operands`). f16 multiplies with f32
    accumulation (MATMUL's f16 x f16 -> f32 mode) and CASTs back."""
    if (failure := require_float_activations(op, weights=(1,))) is not None:
        return failure
    result = tensor_type(op.results[0])
    element = result.element
    y = float_weights(rw, op.operands[1], element)
    if isinstance(y, Failure):
        return y
    operands = matmul_operands(rw, op, op.operands[0], y)
    if isinstance(operands, Failure):
        return operands
    lhs, rhs, shape = operands
    product = build.op(rw, "tosa.matmul", [lhs, rhs, *zero_points(rw, element)],
                       TensorType(shape, f32))
    if element != f32:
        product = build.cast(rw, product, element)
    return [build.reshape(rw, product, result.shape)]


# ---------------------------------------------------------------------------
# Integer path: quantized activations

# Input type, output type, weight tensor type, accumulator type.
ConvOperands = tuple[UniformQuantized, UniformQuantized, TensorType, ScalarType]


def conv_operands(op: Op, weight_index: int, input_index: int = 0) -> ConvOperands | Failure:
    """Input and output per-tensor types (both int8 or both int16), the int8 or
    int4 weight tensor type, and the accumulator type (i32 or i48)."""
    elements = require_one_storage(op, [op.operands[input_index], op.results[0]], "i8", "i16")
    if isinstance(elements, Failure):
        return elements
    weights = maybe_tensor_type(op.operands[weight_index])
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
                    weights: TensorType, channels: int) -> np.ndarray | Failure:
    """`s_in * s_w[c] / s_out` per output channel, in double as TFLite computes it
    (numpy's float64 products and quotients are IEEE's, element by element)."""
    scales = weight_scales(weights.element, channels)
    if isinstance(scales, Failure):
        return Failure(f"{op.name}: {scales.reason}")
    return x.scale * np.asarray(scales, dtype=np.float64) / out.scale


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
               **attrs: object) -> tuple[Value, np.ndarray] | Failure:
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


def scaled_output(rw: Rewriter, op: Op, acc: Value, scales: Sequence[float] | np.ndarray,
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
    # |w| fits the integer type twice as wide as the weights' (int16 for int8),
    # the least memory to go through.
    wide = {1: np.int16, 2: np.int32}.get(weights.dtype.itemsize, np.int64)
    sums = np.abs(np.asarray(weights, dtype=wide)).sum(axis=1, dtype=np.int64) * inputs + \
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
    bias_type = maybe_tensor_type(bias) if bias is not None else None
    return per_tensor_zp == 0 and (
        bias_type is None or storage_type(bias_type.element).bits != 64)


def _optimized_scale(x: UniformQuantized, weights: UniformQuantized,
                     out: UniformQuantized) -> float:
    """The per-tensor scale of the optimized kernel: GetQuantizedConvolutionMultipler
    (kernel_util.cc) multiplies the input and weight scales in float32, then divides
    in double (the reference kernel and per-channel weights take all in double)."""
    product = np.float32(x.scale) * np.float32(weights.scale)
    return float(product) / float(np.float32(out.scale))


def _tie_masks(scales: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Per channel, (mask, half) such that `acc * scale` is a tie exactly when
    `acc & mask == half`, or (0, 1), which no accumulator meets, for a channel
    without ties; None when no channel has them.

    An int32 accumulator times `scale = n * 2^-E` (n odd) is a tie when acc mod 2^E
    is 2^(E-1), which needs 1 <= E <= 31; only a scale that the 32-bit multiplier
    holds exactly is taken (the RESCALE then computes `acc * scale` exactly too),
    and at most 1 (see _ties_away_from_zero)."""
    values = np.asarray(scales, dtype=np.float64)
    # 1 <= E <= 31 with 0 < scale <= 1: a scale below 1 that 2^31 makes an integer
    # (scaling by a power of two is exact); only those take the exact test.
    fixed = values * 2.0 ** 31
    candidates = np.flatnonzero((values > 0) & (values < 1) & (fixed == np.floor(fixed)))
    if not candidates.size:
        return None
    masks = np.zeros(values.shape, dtype=np.int32)
    halves = np.ones(values.shape, dtype=np.int32)
    for channel in candidates.tolist():
        scale = float(values[channel])
        numerator, denominator = scale.as_integer_ratio()  # lowest terms: 2^E below
        exponent = denominator.bit_length() - 1
        if _multiplier_equals(scale, numerator, denominator):
            masks[channel] = (1 << exponent) - 1
            halves[channel] = 1 << (exponent - 1)
    if not masks.any():
        return None
    return masks, halves


def _multiplier_equals(scale: float, numerator: int, denominator: int) -> bool:
    """Whether the RESCALE's multiplier / 2^shift for `scale` is numerator / denominator."""
    multiplier, shift = quantize_multiplier(scale)
    return multiplier * denominator == numerator << shift


def _ties_away_from_zero(rw: Rewriter, acc: Value, scales: Sequence[float] | np.ndarray
                         ) -> Value:
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
