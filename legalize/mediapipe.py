"""MediaPipe's custom ops (mediapipe/util/tflite/operations/*.cc), lowered from
their definitions there. TFLite cannot run them without MediaPipe's op
resolver, so their tests judge against numpy transcriptions of those
definitions (tests/mediapipe_ref.py) and against Arm's reference model.

Options: Convolution2DTransposeBias, MaxPoolingWithArgmax2D and
MaxUnpooling2D carry a raw C struct as their custom options
(TfLiteTransposeConvParams: padding, stride_width, stride_height;
TfLitePoolParams: padding, stride_width, stride_height, filter_width,
filter_height, activation), read as little-endian int32 fields; padding 1 is
SAME, 2 VALID. The landmark ops carry flexbuffer maps.
"""

from __future__ import annotations

import struct
import numpy as np

from legalize.common import fused_activation, require_float, require_static, tensor_type
from legalize.conv import FLOAT_ACC_TYPE, zero_points
from legalize.elementwise import Elementwise, first_failure
from legalize.registry import custom_op, pattern
from legalize.shape import concat, fresh, pad_with, reshape_to, shape_of, slice_of, take_every
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import TensorType, f32, i32
from tfl2tosa.tosa import build

PADDINGS = {1: "SAME", 2: "VALID"}
# TfLiteFusedActivation values that a pool's activation field may hold.
ACTIVATIONS = {0: None, 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6"}


def struct_fields(op: Op, names: tuple[str, ...]) -> dict[str, int] | Failure:
    """The leading int32 fields of the op's raw-struct custom options."""
    raw = bytes(op.attrs.get("custom_options", b""))
    code = op.attrs.get("custom_code")
    if len(raw) < 4 * len(names):
        return Failure(f"{code}: custom options of {len(raw)} bytes, its parameter struct "
                       f"({', '.join(names)}) needs {4 * len(names)}")
    fields = dict(zip(names, struct.unpack_from(f"<{len(names)}i", raw)))
    if fields["padding"] not in PADDINGS:
        return Failure(f"{code}: padding {fields['padding']} is neither SAME (1) nor VALID (2)")
    if any(fields[k] < 1 for k in names if k.startswith(("stride", "filter"))):
        return Failure(f"{code}: strides and filter sizes must be positive")
    return fields


def pool_padding(size: int, stride: int, filter_size: int, padding: str) -> tuple[int, int]:
    """(pooled size, leading pad) of a pooling window over `size`, as TFLite's
    ComputePaddingHeightWidth: SAME pools ceil(size / stride), VALID
    (size - filter + stride) / stride; the total pad, max((out - 1) * stride +
    filter - size, 0), is split with the smaller half first."""
    out = (size + stride - 1) // stride if padding == "SAME" \
        else (size - filter_size + stride) // stride
    return out, max((out - 1) * stride + filter_size - size, 0) // 2


def _check_float(op: Op, ranks: tuple[int, ...]) -> Failure | None:
    failure = first_failure(require_float(op), require_static(op))
    if failure is not None:
        return failure
    shapes = [shape_of(v) for v in op.operands]
    if [len(s) for s in shapes] != list(ranks):
        return Failure(f"{op.attrs.get('custom_code')}: operands of shapes "
                       f"{[list(s) for s in shapes]}, not of ranks {list(ranks)}")
    return None


# ---------------------------------------------------------------------------
# Convolution2DTransposeBias


@pattern(custom_op("Convolution2DTransposeBias"), types=("f32",))
def convolution_2d_transpose_bias(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TRANSPOSE_CONV2D with the bias (weights OHWI as TOSA's).

    The kernel (transpose_conv_bias.cc) sizes the output stride * (in - 1) +
    filter - pad, pad = max(0, filter - (in - 1) % stride - 1) for SAME, 0 for
    VALID, and writes input (y, ky) to output y * stride - pad / 2 + ky (the
    smaller half of the pad first), dropping what falls outside; here out_pad
    = -(that leading pad) before and what gives the result's size after.
    """
    failure = _check_float(op, (4, 4, 1))
    if failure is not None:
        return failure
    fields = struct_fields(op, ("padding", "stride_width", "stride_height"))
    if isinstance(fields, Failure):
        return fields
    x, weights, bias = op.operands
    result = tensor_type(op.results[0])
    _, ih, iw, channels = shape_of(x)
    oc, kh, kw, ic = shape_of(weights)
    if ic != channels or shape_of(bias) != (oc,) or result.shape[3] != oc:
        return Failure(f"Convolution2DTransposeBias: weights {list(shape_of(weights))}, bias "
                       f"{list(shape_of(bias))} do not fit input {list(shape_of(x))} and "
                       f"output {list(result.shape)}")
    padding = PADDINGS[fields["padding"]]
    out_pad = []
    for size, out, stride, k in ((ih, result.shape[1], fields["stride_height"], kh),
                                 (iw, result.shape[2], fields["stride_width"], kw)):
        total = max(0, k - (size - 1) % stride - 1) if padding == "SAME" else 0
        if out != stride * (size - 1) + k - total:
            return Failure(f"Convolution2DTransposeBias: output {list(result.shape)} is not the "
                           f"size the kernel gives ({padding}, stride {stride}, filter {k})")
        out_pad += [-(total // 2), -(total - total // 2)]
    conv = build.op(rw, "tosa.transpose_conv2d", [x, weights, bias, *zero_points(rw, f32)],
                    result, acc_type=FLOAT_ACC_TYPE, out_pad=out_pad,
                    stride=[fields["stride_height"], fields["stride_width"]])
    return [conv]


# ---------------------------------------------------------------------------
# MaxPoolingWithArgmax2D and MaxUnpooling2D

POOL_FIELDS = ("padding", "stride_width", "stride_height", "filter_width", "filter_height",
               "activation")


@pattern(custom_op("MaxPoolingWithArgmax2D"), types=("f32",))
def max_pooling_with_argmax_2d(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Max pooling and, per output, the window-local position of its maximum,
    filter_y * filter_width + filter_x (max_pool_argmax.cc).

    The kernel starts each window at the lowest float and takes a value only
    when strictly greater, in row-major window order (the first maximum wins;
    padding never counts). Here: each window offset (fy, fx) is a strided view
    of the input padded with -inf, folded in that order with GREATER and
    SELECT; the activation clamps the pooled values, not the indices.
    """
    failure = _check_float(op, (4,))
    if failure is not None:
        return failure
    fields = struct_fields(op, POOL_FIELDS)
    if isinstance(fields, Failure):
        return fields
    if fields["activation"] not in ACTIVATIONS or len(op.results) != 2:
        return Failure("MaxPoolingWithArgmax2D: an activation other than none/RELU/RELU_N1_TO_1"
                       "/RELU6, or not two results")
    x = op.operands[0]
    n, h, w, c = shape_of(x)
    padding = PADDINGS[fields["padding"]]
    fh, fw = fields["filter_height"], fields["filter_width"]
    sh, sw = fields["stride_height"], fields["stride_width"]
    oh, top = pool_padding(h, sh, fh, padding)
    ow, left = pool_padding(w, sw, fw, padding)
    index_type = tensor_type(op.results[1])
    if (oh, ow) != tuple(tensor_type(op.results[0]).shape[1:3]) or index_type.shape != (
            n, oh, ow, c) or index_type.element not in (f32, i32):
        return Failure(f"MaxPoolingWithArgmax2D: results {[str(v.type) for v in op.results]} "
                       f"are not [{n}, {oh}, {ow}, {c}] values and float32 or int32 indices")
    # Enough -inf padding that every window offset has oh x ow strided positions.
    rows, cols = (oh - 1) * sh + fh, (ow - 1) * sw + fw
    padded = pad_with(rw, x, [0, 0, top, max(rows - h - top, 0), left,
                              max(cols - w - left, 0), 0, 0], -np.inf)
    e = Elementwise(rw, 4)
    best = e.const(float(np.finfo(np.float32).min), f32)
    index = e.const(0, index_type.element) if index_type.element == i32 else e.const(0.0, f32)
    for fy in range(fh):
        for fx in range(fw):
            window = slice_of(rw, padded, (0, fy, fx, 0), (n, rows - fy, cols - fx, c))
            view = take_every(rw, take_every(rw, window, 1, sh, oh), 2, sw, ow)
            greater = e.greater(view, best)
            best = e.select(greater, view, best)
            position = fy * fw + fx
            here = e.const(position, i32) if index_type.element == i32 \
                else e.const(float(position), f32)
            index = e.select(greater, here, index)
    pooled = fused_activation(rw, best, ACTIVATIONS[fields["activation"]])
    if isinstance(pooled, Failure):
        return pooled
    return [fresh(rw, pooled), fresh(rw, index)]


@pattern(custom_op("MaxUnpooling2D"), types=("f32",))
def max_unpooling_2d(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """The inverse of MaxPoolingWithArgmax2D (max_unpooling.cc): a zero output
    where each input value goes to in_y * stride - pad + index / filter_width,
    in_x * stride - pad + index % filter_width, pad the pooling's leading pad
    for this output size.

    Lowered for windows that do not overlap (filter <= stride): each window
    offset (fy, fx) gets SELECT(index == fy * filter_width + fx, value, 0);
    the offsets interleave (RESHAPE/TRANSPOSE) into the output grid, which is
    cropped by the pad. Overlapping windows, where a later value may
    overwrite an earlier one, are refused.
    """
    failure = _check_float(op, (4, 4))
    if failure is not None:
        return failure
    fields = struct_fields(op, POOL_FIELDS)
    if isinstance(fields, Failure):
        return fields
    x, indices = op.operands
    n, h, w, c = shape_of(x)
    result = tensor_type(op.results[0])
    fh, fw = fields["filter_height"], fields["filter_width"]
    sh, sw = fields["stride_height"], fields["stride_width"]
    if fh > sh or fw > sw:
        return Failure(f"MaxUnpooling2D: overlapping windows (filter {fh}x{fw}, stride "
                       f"{sh}x{sw}) are not lowered")
    if shape_of(indices) != (n, h, w, c) or tensor_type(indices).element not in (f32, i32) \
            or result.element != f32:
        return Failure("MaxUnpooling2D: needs float32 values and float32 or int32 indices of "
                       "the same shape")
    padding = PADDINGS[fields["padding"]]
    _, oh, ow, _ = result.shape
    pooled_h, top = pool_padding(oh, sh, fh, padding)
    pooled_w, left = pool_padding(ow, sw, fw, padding)
    if (pooled_h, pooled_w) != (h, w):
        return Failure(f"MaxUnpooling2D: output {list(result.shape)} does not pool back to the "
                       f"input's {h}x{w}")
    e = Elementwise(rw, 4)
    zero = e.const(0.0, f32)
    index_element = tensor_type(indices).element
    parts = []
    for fy in range(sh):
        for fx in range(sw):
            if fy < fh and fx < fw:
                k = fy * fw + fx
                here = e.const(k, i32) if index_element == i32 else e.const(float(k), f32)
                parts.append(e.select(e.equal(indices, here), x, zero))
            else:  # a gap between windows: never written
                parts.append(build.const(rw, np.zeros((n, h, w, c), np.float32), f32))
    stacked = reshape_to(rw, concat(rw, [reshape_to(rw, p, (n, h, w, 1, c)) for p in parts], 3),
                         (n, h, w, sh, sw, c))
    grid = reshape_to(rw, build.transpose(rw, stacked, (0, 1, 3, 2, 4, 5)),
                      (n, h * sh, w * sw, c))
    need_h, need_w = top + oh, left + ow
    if need_h > h * sh or need_w > w * sw:
        grid = pad_with(rw, grid, [0, 0, 0, max(need_h - h * sh, 0), 0,
                                   max(need_w - w * sw, 0), 0, 0], 0.0)
    return [fresh(rw, slice_of(rw, grid, (0, top, left, 0), (n, oh, ow, c)))]

