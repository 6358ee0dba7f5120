"""Patterns for the TFL convolution family (float path): CONV_2D, DEPTHWISE_CONV_2D,
TRANSPOSE_CONV, CONV_3D, CONV_3D_TRANSPOSE, FULLY_CONNECTED, BATCH_MATMUL.

Float data only (f32, f16; f16 accumulates in f32). Hybrid ("dynamic range")
models, float activations with int8 constant weights, are lowered by
dequantizing the weights at conversion time: `(q - zp) * scale` per channel,
in float64 rounded once to float32. TFLite's hybrid kernels instead quantize
the activations too (per batch row, at run time) and accumulate in int32, so
their answer carries the activations' int8 rounding error; the float lowering
is the exact value those kernels approximate (see tests/test_legalize_conv.py
for the measured gap).

Window geometry (TFLite's SAME/VALID padding made exact for TOSA) is
`legalize.window`'s.
"""

from __future__ import annotations

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
from legalize.quantized import dequantized_values
from legalize.registry import pattern
from legalize.window import (
    conv_window,
    per_axis_attribute,
    transposed_pad_before,
    transposed_window,
    trimmed_input,
)
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import (
    ElementType,
    TensorType,
    UniformQuantized,
    UniformQuantizedPerAxis,
    f32,
    is_quantized,
    numpy_dtype,
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
    if int(np.prod(shape)) != channels:
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
    outer = int(np.prod(shape[:axis + 1]))
    inner = int(np.prod(shape[axis + 1:]))
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
    return reshaped(rw, value, (int(np.prod(batch, dtype=np.int64)), rows, cols))


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
        rows = int(np.prod(x_shape[:-1], dtype=np.int64))
        lhs = reshaped(rw, x, (1, rows, k))
        rhs = reshaped(rw, y, (1, *y_shape[-2:]))
        batch_size, m_rows = 1, rows
    else:
        lhs, rhs = _to_batch(rw, x, batch), _to_batch(rw, y, batch)
        if adj_x:
            lhs = _swap_last(rw, lhs)
        batch_size, m_rows = int(np.prod(batch, dtype=np.int64)), m
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
