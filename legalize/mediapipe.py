"""MediaPipe's custom ops (mediapipe/util/tflite/operations/*.cc), lowered from
their definitions there. TFLite cannot run them without MediaPipe's op
resolver; their tests judge against MediaPipe's own runtime (outputs it
computed, tests/fixtures/mediapipe/judged/), numpy transcriptions of the
definitions (tests/mediapipe_ref.py) and Arm's reference model.

Options: Convolution2DTransposeBias, MaxPoolingWithArgmax2D and
MaxUnpooling2D carry a raw C struct as their custom options
(TfLiteTransposeConvParams: padding, stride_width, stride_height;
TfLitePoolParams: padding, stride_width, stride_height, filter_width,
filter_height, activation), read as little-endian int32 fields; padding 1 is
SAME, 2 VALID. The landmark ops carry flexbuffer maps.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from legalize.common import fused_activation, require_static, tensor_type
from legalize.conv import FLOAT_ACC_TYPE, zero_points
from legalize.registry import custom_op, pattern
from legalize.shape import concat, fresh, pad_with, reshape_to, shape_of, slice_of, take_every
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import TensorType, f32, i32
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise

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


# The operator-code version of each op's definition lowered here: MediaPipe
# registers the landmark ops' second definitions (the "v2" kernels) as version 2.
VERSIONS = {"Convolution2DTransposeBias": 1, "MaxPoolingWithArgmax2D": 1, "MaxUnpooling2D": 1,
            "Landmarks2TransformMatrix": 2, "TransformTensorBilinear": 2,
            "TransformLandmarks": 2}


def _check_float(op: Op, rw: Rewriter, ranks: tuple[int, ...]) -> Failure | None:
    """The version lowered, float32 static operands of `ranks`. MediaPipe's
    kernels take float32 only, so a quantized one is not lowered through the
    dequantize/float fallback either (its float stand-in is not rw.matched)."""
    code = op.attrs.get("custom_code")
    if op is not rw.matched:
        return Failure(f"{code}: MediaPipe's kernel takes float32 tensors only")
    version = op.attrs.get("custom_version", 1)
    if version != VERSIONS[code]:
        return Failure(f"{code} version {version}: only MediaPipe's version "
                       f"{VERSIONS[code]} definition is lowered")
    failure = require_static(op)
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
    failure = _check_float(op, rw, (4, 4, 1))
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


def _stored_index(position: int) -> np.float32:
    """The float the kernel stores for window position `position`: float + 0.1f."""
    return np.float32(position) + np.float32(0.1)


@pattern(custom_op("MaxPoolingWithArgmax2D"), types=("f32",))
def max_pooling_with_argmax_2d(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Max pooling and, per output, the window-local position of its maximum,
    filter_y * filter_width + filter_x, as a float32 plus 0.1 (so that the
    unpooling's truncation to int reads it back safely) (max_pool_argmax.cc).

    The kernel starts each window at the lowest float and takes a value only
    when strictly greater, in row-major window order (the first maximum wins;
    padding never counts). Here: each window offset (fy, fx) is a strided view
    of the input padded with -inf, folded in that order with GREATER and
    SELECT; the activation clamps the pooled values, not the indices.
    """
    failure = _check_float(op, rw, (4,))
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
            n, oh, ow, c) or index_type.element != f32:
        return Failure(f"MaxPoolingWithArgmax2D: results {[str(v.type) for v in op.results]} "
                       f"are not [{n}, {oh}, {ow}, {c}] values and float32 indices")
    # Enough -inf padding that every window offset has oh x ow strided positions.
    rows, cols = (oh - 1) * sh + fh, (ow - 1) * sw + fw
    padded = pad_with(rw, x, [0, 0, top, max(rows - h - top, 0), left,
                              max(cols - w - left, 0), 0, 0], -np.inf)
    e = Elementwise(rw, 4)
    best = e.const(float(np.finfo(np.float32).min), f32)
    index = e.const(float(_stored_index(0)), f32)
    for fy in range(fh):
        for fx in range(fw):
            window = slice_of(rw, padded, (0, fy, fx, 0), (n, rows - fy, cols - fx, c))
            view = take_every(rw, take_every(rw, window, 1, sh, oh), 2, sw, ow)
            greater = e.greater(view, best)
            best = e.select(greater, view, best)
            here = e.const(float(_stored_index(fy * fw + fx)), f32)
            index = e.select(greater, here, index)
    pooled = fused_activation(rw, best, ACTIVATIONS[fields["activation"]])
    if isinstance(pooled, Failure):
        return pooled
    return [fresh(rw, pooled), fresh(rw, index)]


@pattern(custom_op("MaxUnpooling2D"), types=("f32",))
def max_unpooling_2d(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """The inverse of MaxPoolingWithArgmax2D (max_unpooling.cc): a zero output
    where each input value goes to in_y * stride - pad + k / filter_width,
    in_x * stride - pad + k % filter_width, k its float index truncated to an
    int, pad the pooling's leading pad for this output size.

    The output is input * stride in size. Lowered for windows that tile it
    (filter == stride, as MediaPipe's models use): each window offset (fy, fx)
    gets SELECT(k == fy * filter_width + fx, value, 0); the offsets
    interleave (RESHAPE/TRANSPOSE) into the output grid, cropped by the pad.
    Other windows are refused: there MediaPipe's kernel sizes its output
    input * filter, and where values land was not pinned down.
    """
    failure = _check_float(op, rw, (4, 4))
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
    if (fh, fw) != (sh, sw):
        return Failure(f"MaxUnpooling2D: only windows that tile the output (filter == stride) "
                       f"are lowered, not filter {fh}x{fw} with stride {sh}x{sw} (MediaPipe's "
                       "kernel then sizes its output input * filter)")
    if shape_of(indices) != (n, h, w, c) or tensor_type(indices).element != f32 \
            or result.element != f32:
        return Failure("MaxUnpooling2D: needs float32 values and float32 indices of the same "
                       "shape")
    padding = PADDINGS[fields["padding"]]
    _, oh, ow, _ = result.shape
    if (oh, ow) != (h * sh, w * sw):
        return Failure(f"MaxUnpooling2D: output {list(result.shape)} is not the size the kernel "
                       f"gives ({padding}, stride {sh}x{sw}, filter {fh}x{fw})")
    _, top = pool_padding(oh, sh, fh, padding)
    _, left = pool_padding(ow, sw, fw, padding)
    e = Elementwise(rw, 4)
    zero = e.const(0.0, f32)
    # The kernel reads an index as static_cast<int>: truncation toward zero.
    truncated = e.select(e.less(indices, zero), e.ceil(indices), e.floor(indices))
    parts = []
    for fy in range(sh):
        for fx in range(sw):
            if fy < fh and fx < fw:
                here = e.const(float(fy * fw + fx), f32)
                parts.append(e.select(e.equal(truncated, here), x, zero))
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



# ---------------------------------------------------------------------------
# Landmarks2TransformMatrix, TransformTensorBilinear, TransformLandmarks (v2)
#
# The transform matrix is a [1, 4, 4] tensor whose first two rows map an output
# point (x, y, 0, 1) to the input: x_in = m[0] * x + m[1] * y + m[3],
# y_in = m[4] * x + m[5] * y + m[7] (m[2], m[6] multiply the 0).


def flex_options(op: Op, required: tuple[str, ...]) -> dict[str, Any] | Failure:
    from flatbuffers import flexbuffers

    code = op.attrs.get("custom_code")
    raw = bytes(op.attrs.get("custom_options", b""))
    try:
        options = flexbuffers.Loads(raw) if raw else {}
    except Exception as exc:  # any malformed byte string: a named refusal
        return Failure(f"{code}: unreadable flexbuffer options ({exc})")
    if not isinstance(options, dict):
        return Failure(f"{code}: its options are not a flexbuffer map")
    missing = [k for k in required if k not in options]
    if missing:
        return Failure(f"{code}: options lack {', '.join(missing)}")
    return options


def _entry(rw: Rewriter, matrix: Value, k: int) -> Value:
    """Element k of the row-major [1, 4, 4] matrix as a [1, 1] tensor."""
    flat = reshape_to(rw, matrix, (1, 16))
    return slice_of(rw, flat, (0, k), (1, 1))


def _affine(e: Elementwise, rw: Rewriter, matrix: Value, row: int, x: Value, y: Value
            ) -> Value:
    """Row `row` of the matrix applied to (x, y, 0, 1), summed in the kernels'
    order (a float4 dot product: ((m0 * x + m1 * y) + m2 * 0) + m3)."""
    m = [_entry(rw, matrix, 4 * row + k) for k in range(4)]
    zero = e.const(0.0, f32)
    return e.add(e.add(e.add(e.mul(m[0], x), e.mul(m[1], y)), e.mul(m[2], zero)), m[3])


@pattern(custom_op("TransformLandmarks"), types=("f32",))
def transform_landmarks(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Each landmark's (x, y) of [1, N, 2 or 3] mapped through the matrix's
    first two rows as (x, y, 0, 1); a z is passed through unchanged
    (transform_landmarks.cc, v2)."""
    failure = _check_float(op, rw, (3, 3))
    if failure is not None:
        return failure
    landmarks, matrix = op.operands
    _, n, dims = shape_of(landmarks)
    if dims not in (2, 3) or shape_of(matrix) != (1, 4, 4) or \
            tensor_type(op.results[0]).shape != (1, n, dims):
        return Failure(f"TransformLandmarks: needs [1, N, 2 or 3] landmarks and a [1, 4, 4] "
                       f"matrix, not {list(shape_of(landmarks))} and {list(shape_of(matrix))}")
    e = Elementwise(rw, 2)
    points = reshape_to(rw, landmarks, (n, dims))
    x, y = (slice_of(rw, points, (0, k), (n, 1)) for k in range(2))
    columns = [_affine(e, rw, matrix, 0, x, y), _affine(e, rw, matrix, 1, x, y)]
    if dims == 3:
        columns.append(slice_of(rw, points, (0, 2), (n, 1)))
    return [fresh(rw, reshape_to(rw, concat(rw, columns, 1), (1, n, dims)))]


@pattern(custom_op("TransformTensorBilinear"), types=("f32",))
def transform_tensor_bilinear(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Samples the input [1, H, W, C] bilinearly at the matrix's image of each
    output pixel (transform_tensor_bilinear.cc, v2).

    The matrix is first corrected for pixel centres (its translation gains
    m0 * 0.5 + m1 * 0.5 - 0.5, per row); output (x, y) samples input (tx, ty);
    outside [0, W - 1] x [0, H - 1] the result is 0, and neighbours past the
    edge read 0. result = ly * lower + (1 - ly) * upper, each row
    (1 - rx) * left + rx * right, rx, ly the fractional parts. Here the four
    neighbours are GATHERs from [1, H * W, C] at clamped flat indices.
    """
    failure = _check_float(op, rw, (4, 3))
    if failure is not None:
        return failure
    x, matrix = op.operands
    _, h, w, c = shape_of(x)
    result = tensor_type(op.results[0])
    if shape_of(matrix) != (1, 4, 4) or result.shape[0] != 1 or result.shape[3] != c \
            or shape_of(x)[0] != 1:
        return Failure(f"TransformTensorBilinear: needs a [1, H, W, C] input, a [1, 4, 4] matrix "
                       f"and a [1, OH, OW, C] result, not {list(shape_of(x))}, "
                       f"{list(shape_of(matrix))}, {list(result.shape)}")
    options = flex_options(op, ())
    if isinstance(options, Failure):
        return options
    _, oh, ow, _ = result.shape
    if (options.get("output_height", oh), options.get("output_width", ow)) != (oh, ow):
        return Failure(f"TransformTensorBilinear: options ask for {options.get('output_height')}x"
                       f"{options.get('output_width')}, the result is {oh}x{ow}")
    e = Elementwise(rw, 2)
    half = e.const(0.5, f32)
    grid_y, grid_x = np.meshgrid(np.arange(oh, dtype=np.float32),
                                 np.arange(ow, dtype=np.float32), indexing="ij")
    out_x = build.const(rw, grid_x.reshape(-1, 1), f32)          # [OH * OW, 1]
    out_y = build.const(rw, grid_y.reshape(-1, 1), f32)
    coords = []
    for row in (0, 1):
        m = [_entry(rw, matrix, 4 * row + k) for k in range(4)]
        shift = e.sub(e.add(e.mul(m[0], half), e.mul(m[1], half)), half)
        corrected = e.add(m[3], shift)
        zero = e.const(0.0, f32)
        coords.append(e.add(e.add(e.add(e.mul(m[0], out_x), e.mul(m[1], out_y)),
                                  e.mul(m[2], zero)), corrected))
    tx, ty = coords
    zero, one = e.const(0.0, f32), e.const(1.0, f32)
    outside = e.logical_or(
        e.logical_or(e.less(tx, zero), e.greater(tx, e.const(float(w - 1), f32))),
        e.logical_or(e.less(ty, zero), e.greater(ty, e.const(float(h - 1), f32))))
    fx, fy = e.floor(tx), e.floor(ty)
    right, lower = e.sub(tx, fx), e.sub(ty, fy)
    table = reshape_to(rw, x, (1, h * w, c))

    def read(dy: int, dx: int) -> Value:
        """Input at (floor(ty) + dy, floor(tx) + dx), 0 past the edge: [OH * OW, C]."""
        yy, xx = e.add(fy, e.const(float(dy), f32)), e.add(fx, e.const(float(dx), f32))
        inside = e.logical_and(
            e.logical_and(e.greater_equal(yy, zero), e.less(yy, e.const(float(h), f32))),
            e.logical_and(e.greater_equal(xx, zero), e.less(xx, e.const(float(w), f32))))
        yi = e.cast(build.clamp(rw, yy, 0.0, float(h - 1)), i32)
        xi = e.cast(build.clamp(rw, xx, 0.0, float(w - 1)), i32)
        flat = e.add(e.mul(yi, e.const(w, i32)), xi)               # [OH * OW, 1]
        picked = build.op(rw, "tosa.gather", [table, reshape_to(rw, flat, (1, oh * ow))],
                          TensorType((1, oh * ow, c), f32))
        return e.select(inside, reshape_to(rw, picked, (oh * ow, c)), e.const(0.0, f32))

    q11, q21, q12, q22 = read(0, 0), read(0, 1), read(1, 0), read(1, 1)
    left_weight = e.sub(one, right)
    upper = e.add(e.mul(left_weight, q11), e.mul(right, q21))
    below = e.add(e.mul(left_weight, q12), e.mul(right, q22))
    value = e.add(e.mul(lower, below), e.mul(e.sub(one, lower), upper))
    value = e.select(outside, e.const(0.0, f32), value)
    return [fresh(rw, reshape_to(rw, value, (1, oh, ow, c)))]


LANDMARK_MATRIX_OPTIONS = ("left_rotation_idx", "right_rotation_idx", "subset_idxs",
                           "output_height", "output_width", "scale_x", "scale_y")


@pattern(custom_op("Landmarks2TransformMatrix"), types=("f32",))
def landmarks_to_transform_matrix(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """The matrix mapping a crop of output_width x output_height around a
    landmark subset into landmark space (landmarks_to_transform_matrix.cc, v2).

    r = target_rotation_radians - atan2(right.y - left.y, right.x - left.x)
    turns the left -> right landmark line to the target angle. The subset
    landmarks rotated by R(r) give a box: width, height, and a centre rotated
    back by R(-r). The matrix is T(centre) R(-r) S(scale_x * width /
    output_width, scale_y * height / output_height) T(-output_width / 2,
    -output_height / 2), products summed in the kernel's order; rows 0 and 1
    hold its first two rows (translation in column 3), rows 2 and 3 of the
    identity. cos r and sin r come from the normalized left -> right vector
    (exactly the angle's cosine and sine up to rounding).
    """
    failure = _check_float(op, rw, (3,))
    if failure is not None:
        return failure
    options = flex_options(op, LANDMARK_MATRIX_OPTIONS)
    if isinstance(options, Failure):
        return options
    landmarks = op.operands[0]
    _, n, dims = shape_of(landmarks)
    subset = [int(i) for i in options["subset_idxs"]]
    indices = [int(options["left_rotation_idx"]), int(options["right_rotation_idx"]), *subset]
    # The kernel reads landmark i at i * 3 (x, y, z): three values per landmark.
    if dims != 3 or not subset or min(indices) < 0 or max(indices) >= n or \
            tensor_type(op.results[0]).shape != (1, 4, 4):
        return Failure(f"Landmarks2TransformMatrix: landmarks {list(shape_of(landmarks))}, "
                       f"indices {min(indices)}..{max(indices)} or result "
                       f"{tensor_type(op.results[0])} out of the op's range")
    e = Elementwise(rw, 2)
    k = len(subset)
    points = reshape_to(rw, landmarks, (1, n, dims))
    picked = build.op(rw, "tosa.gather",
                      [points, build.const(rw, np.asarray([indices], np.int32), i32)],
                      TensorType((1, k + 2, dims), f32))
    picked = reshape_to(rw, picked, (k + 2, dims))
    xs = reshape_to(rw, slice_of(rw, picked, (0, 0), (k + 2, 1)), (1, k + 2))
    ys = reshape_to(rw, slice_of(rw, picked, (0, 1), (k + 2, 1)), (1, k + 2))

    def column(row: Value, start: int, size: int) -> Value:
        return slice_of(rw, row, (0, start), (1, size))

    dx = e.sub(column(xs, 1, 1), column(xs, 0, 1))
    dy = e.sub(column(ys, 1, 1), column(ys, 0, 1))
    length = e.reciprocal(e.rsqrt(e.add(e.mul(dx, dx), e.mul(dy, dy))))
    zero, one = e.const(0.0, f32), e.const(1.0, f32)
    degenerate = e.equal(length, zero)                      # atan2(0, 0) = 0
    cos_a = e.select(degenerate, one, e.divide(dx, length))
    sin_a = e.select(degenerate, zero, e.divide(dy, length))
    target = float(options.get("target_rotation_radians", 0.0))
    cos_t, sin_t = (e.const(float(np.float32(f(np.float32(target)))), f32)
                    for f in (np.cos, np.sin))
    # r = target - a: cos r = cos t cos a + sin t sin a, sin r = sin t cos a - cos t sin a.
    cos_r = e.add(e.mul(cos_t, cos_a), e.mul(sin_t, sin_a))
    sin_r = e.sub(e.mul(sin_t, cos_a), e.mul(cos_t, sin_a))
    sx, sy = column(xs, 2, k), column(ys, 2, k)
    rot_x = e.add(e.mul(cos_r, sx), e.mul(e.negate(sin_r), sy))
    rot_y = e.add(e.mul(sin_r, sx), e.mul(cos_r, sy))

    def reduce(name: str, row: Value) -> Value:
        return build.op(rw, name, [row], TensorType((1, 1), f32), axis=1, nan_mode="PROPAGATE")

    max_x, min_x = reduce("tosa.reduce_max", rot_x), reduce("tosa.reduce_min", rot_x)
    max_y, min_y = reduce("tosa.reduce_max", rot_y), reduce("tosa.reduce_min", rot_y)
    width, height = e.sub(max_x, min_x), e.sub(max_y, min_y)
    mid_x, mid_y = e.mul(e.add(min_x, max_x), e.const(0.5, f32)), \
        e.mul(e.add(min_y, max_y), e.const(0.5, f32))
    # Centre = R(-r) (mid_x, mid_y): cos(-r) = cos r, sin(-r) = -sin r.
    centre_x = e.add(e.mul(cos_r, mid_x), e.mul(sin_r, mid_y))
    centre_y = e.add(e.mul(e.negate(sin_r), mid_x), e.mul(cos_r, mid_y))
    out_w, out_h = int(options["output_width"]), int(options["output_height"])
    scale_w = e.divide(e.mul(e.const(float(options["scale_x"]), f32), width),
                       e.const(float(out_w), f32))
    scale_h = e.divide(e.mul(e.const(float(options["scale_y"]), f32), height),
                       e.const(float(out_h), f32))
    # The crop turns back by -r: R(-r) = [[cos r, sin r], [-sin r, cos r]].
    a00, a01 = e.mul(cos_r, scale_w), e.mul(sin_r, scale_h)
    a10, a11 = e.mul(e.negate(sin_r), scale_w), e.mul(cos_r, scale_h)
    shift_x, shift_y = e.const(-out_w / 2.0, f32), e.const(-out_h / 2.0, f32)
    a02 = e.add(e.add(e.mul(a00, shift_x), e.mul(a01, shift_y)), centre_x)
    a12 = e.add(e.add(e.mul(a10, shift_x), e.mul(a11, shift_y)), centre_y)
    row0 = concat(rw, [a00, a01, zero, a02], 1)
    row1 = concat(rw, [a10, a11, zero, a12], 1)
    rest = build.const(rw, np.array([[0, 0, 1, 0, 0, 0, 0, 1]], np.float32), f32)
    return [fresh(rw, reshape_to(rw, concat(rw, [row0, row1, rest], 1), (1, 4, 4)))]
