"""Patterns for TFL resize ops: RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR.

TOSA RESIZE samples output row oy at y = oy * scale_d + offset in units of
1/scale_n of an input row (TOSA 1.0 spec, RESIZE pseudocode): iy = floor(y /
n), fraction dy = (y mod n) / n, neighbours clamped to [0, IH - 1]; BILINEAR
weighs rows iy and iy + 1 by 1 - dy and dy, NEAREST takes iy + 1 when dy >= 1/2
(round half up). TFLite's source coordinate per mode (reference
resize_bilinear.h / resize_nearest_neighbor.h), with scale = IH / OH, or
(IH - 1) / (OH - 1) with align_corners:

- align_corners:      oy * scale
- half_pixel_centers: (oy + 0.5) * scale - 0.5 (bilinear; nearest floors (oy + 0.5) * scale)
- neither:            oy * scale

so with n = 2 * OH, d = 2 * IH the offsets are 0, IH - OH and 0 (align: n = 2 *
(OH - 1), d = 2 * (IH - 1)), and the border follows from the output size.

Nearest neighbour without align_corners FLOORS the coordinate, which TOSA's
round-half-up reproduces when the coordinate is shifted down by half a pixel:
offset -n / 2 (the known lowering with offset 0 picks the next row whenever
the fraction is >= 1/2). TFLite evaluates the coordinate in float32, which now
and then lands just below an integer the exact ratio reaches; the index table
TFLite computes is therefore built here in float32 and compared with TOSA's
exact one. When they differ, or the parameters break RESIZE's limits, nearest
neighbour becomes two GATHERs with that constant table (rows, then columns).
Bilinear beyond RESIZE's limits (more than 16x down, n > 2048) interpolates
gathered rows, then columns, with TFLite's float32 weights (MUL, ADD).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import gcd

import numpy as np

from legalize.common import element, tensor_type
from legalize.registry import pattern
from legalize.shape import fresh, int_list, require_move, reshape_to, shape_of
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import TensorType, numpy_dtype, storage_type
from tfl2tosa.tosa import build

# TOSA RESIZE modes: f16/f32 (BILINEAR and NEAREST), i8/i16 NEAREST (a move);
# TFLite has no int32 or bool resize.
NEAREST_TYPES = ("f32", "f16", "i8", "u8", "i16")
_RESIZE_STORAGE = frozenset({"f32", "f16", "bf16", "i8", "ui8", "i16"})


@dataclass(frozen=True)
class AxisScale:
    """One axis of TOSA RESIZE: y = o * d + offset, in units of 1/n input pixels."""

    n: int
    d: int
    offset: int
    border: int


def _axis_scale(in_size: int, out_size: int, align_corners: bool, offset_kind: str
                ) -> AxisScale:
    """The RESIZE parameters for one axis (reduced by their common divisor).

    `offset_kind`: "zero"; "half_pixel" (IH - OH, with n = 2 OH: the
    coordinate (o + 0.5) * IH / OH - 0.5); or "floor" (-n / 2: half a pixel
    down, so that NEAREST's round-half-up gives the floor of o * IH / OH).
    """
    if align_corners and out_size > 1 and in_size > 1:
        n, d = 2 * (out_size - 1), 2 * (in_size - 1)
    else:
        n, d = 2 * out_size, 2 * in_size
    offset = {"zero": 0, "half_pixel": in_size - out_size, "floor": -n // 2}[offset_kind]
    border = (out_size - 1) * d - (in_size - 1) * n + offset
    g = gcd(gcd(n, d), gcd(offset, border))
    return AxisScale(n // g, d // g, offset // g, border // g)


def _legal(axis: AxisScale, in_size: int, out_size: int) -> bool:
    """RESIZE's ERROR_IF limits (TOSA 1.0 RESIZE) for one axis."""
    n, d = axis.n, axis.d
    return (0 < n <= 2048 and 0 < d < 16 * n and -n <= axis.offset < 16 * n
            and -16 * n <= axis.border < n and max(in_size, out_size) < 16384
            and ((in_size - 1) * n - axis.offset + axis.border) == (out_size - 1) * d)


def _tosa_nearest(axis: AxisScale, in_size: int, out_size: int) -> np.ndarray:
    """The input index TOSA RESIZE NEAREST reads for each output index (exact)."""
    y = np.arange(out_size, dtype=np.int64) * axis.d + axis.offset
    iy = y // axis.n
    upper = 2 * (y - iy * axis.n) >= axis.n
    return np.where(upper, np.minimum(iy + 1, in_size - 1), np.maximum(iy, 0))


def tflite_nearest(in_size: int, out_size: int, align_corners: bool, half_pixel: bool
                   ) -> np.ndarray:
    """TFLite's GetNearestNeighbor table, evaluated in float32 as the kernel does."""
    f32 = np.float32
    if align_corners and out_size > 1:
        scale = f32(in_size - 1) / f32(out_size - 1)
    else:
        scale = f32(in_size) / f32(out_size)
    position = (np.arange(out_size, dtype=f32) + f32(0.5 if half_pixel else 0.0)) * scale
    if align_corners:  # TfLiteRound: half away from zero (positions are >= 0)
        index = np.floor(position + f32(0.5))
    else:
        index = np.floor(position)
    index = np.minimum(index.astype(np.int64), in_size - 1)
    return np.maximum(index, 0) if half_pixel else index


def _sizes(op: Op) -> tuple[tuple[int, int], tuple[int, int]] | Failure:
    """((in_h, out_h), (in_w, out_w)) of a resize of [N,H,W,C] data that only
    moves values (`require_move`)."""
    failed = require_move(op)
    if failed is not None:
        return failed
    out = shape_of(op.result)
    size = int_list(op.operands[1])
    if size is not None and tuple(size) != out[1:3]:
        return Failure(f"{op.name}: size {size} differs from the result {out}")
    _, in_h, in_w, _ = shape_of(op.operands[0])
    return (in_h, out[1]), (in_w, out[2])


def _axis_scales(sizes: tuple[tuple[int, int], tuple[int, int]], align_corners: bool,
                 offset_kind: str) -> tuple[AxisScale, AxisScale]:
    """`_axis_scale` of the rows and of the columns."""
    (in_h, out_h), (in_w, out_w) = sizes
    return (_axis_scale(in_h, out_h, align_corners, offset_kind),
            _axis_scale(in_w, out_w, align_corners, offset_kind))


def _resize(rw: Rewriter, op: Op, mode: str, rows: AxisScale, cols: AxisScale) -> Value:
    scale = build.const_shape(rw, [rows.n, rows.d, cols.n, cols.d])
    offset = build.const_shape(rw, [rows.offset, cols.offset])
    border = build.const_shape(rw, [rows.border, cols.border])
    return build.op(rw, "tosa.resize", [op.operands[0], scale, offset, border],
                    tensor_type(op.result), mode=mode)


@pattern("tfl.resize_nearest_neighbor", kind="any", types=NEAREST_TYPES)
def resize_nearest_neighbor(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """RESIZE NEAREST when its exact index table equals TFLite's float32 one
    (offset -n/2 for the flooring modes), else GATHER rows and columns with
    TFLite's table. Values are only moved, so quantized data passes unchanged."""
    sizes = _sizes(op)
    if isinstance(sizes, Failure):
        return sizes
    (in_h, out_h), (in_w, out_w) = sizes
    align = bool(op.attrs.get("align_corners", False))
    half_pixel = bool(op.attrs.get("half_pixel_centers", False))
    # align_corners rounds o * scale (half up = TfLiteRound for positions >= 0);
    # half-pixel floors (o + 0.5) * scale = round_half_up((o + 0.5) * scale - 0.5);
    # otherwise floor(o * scale) = round_half_up(o * scale - 0.5).
    offset_kind = "zero" if align else "half_pixel" if half_pixel else "floor"
    rows, cols = _axis_scales(sizes, align, offset_kind)
    table_y = tflite_nearest(in_h, out_h, align, half_pixel)
    table_x = tflite_nearest(in_w, out_w, align, half_pixel)
    resizable = storage_type(element(op.operands[0])).name in _RESIZE_STORAGE
    if (resizable and _legal(rows, in_h, out_h) and _legal(cols, in_w, out_w)
            and np.array_equal(_tosa_nearest(rows, in_h, out_h), table_y)
            and np.array_equal(_tosa_nearest(cols, in_w, out_w), table_x)):
        return [_resize(rw, op, "NEAREST", rows, cols)]
    return [fresh(rw, _gather_rows_and_columns(rw, op.operands[0], table_y, table_x))]


def _take(rw: Rewriter, x: Value, axis: int, index: np.ndarray) -> Value:
    """x[:, index] (axis 1) or x[:, :, index] (axis 2) of [N,H,W,C], by one TOSA GATHER
    with constant indices; `x` itself when `index` is the identity."""
    n, h, w, c = shape_of(x)
    size = (h, w)[axis - 1]
    if len(index) == size and np.array_equal(index, np.arange(size)):
        return x
    batch = n if axis == 1 else n * h
    values = reshape_to(rw, x, [batch, size, (w * c) if axis == 1 else c])
    indices = build.const(rw, np.tile(index.astype(np.int32), (batch, 1)))
    out_type = TensorType((batch, len(index), shape_of(values)[2]), element(x))
    gathered = build.op(rw, "tosa.gather", [values, indices], out_type)
    shape = [n, len(index), w, c] if axis == 1 else [n, h, len(index), c]
    return reshape_to(rw, gathered, shape)


def _gather_rows_and_columns(rw: Rewriter, x: Value, rows: np.ndarray, cols: np.ndarray
                             ) -> Value:
    """x[:, rows][:, :, cols] with two TOSA GATHERs over constant indices."""
    return _take(rw, _take(rw, x, 1, rows), 2, cols)


def tflite_bilinear(in_size: int, out_size: int, align_corners: bool, half_pixel: bool
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """TFLite's ComputeInterpolationValues in float32: the lower and upper source
    index of each output index and their weights 1 - (y - y0) and y - y0."""
    f32 = np.float32
    if align_corners and out_size > 1:
        scale = f32(in_size - 1) / f32(out_size - 1)
    else:
        scale = f32(in_size) / f32(out_size)
    o = np.arange(out_size, dtype=f32)
    position = (o + f32(0.5)) * scale - f32(0.5) if half_pixel else o * scale
    lower = np.maximum(np.floor(position).astype(np.int64), 0)
    upper = np.minimum(np.ceil(position).astype(np.int64), in_size - 1)
    fraction = position - lower.astype(f32)
    return lower, upper, f32(1) - fraction, fraction


def _interpolate(rw: Rewriter, x: Value, axis: int, table: tuple[np.ndarray, ...]) -> Value:
    """x[lower] * w_lower + x[upper] * w_upper along `axis` (1 = H, 2 = W)."""
    lower, upper, w_lower, w_upper = table
    dtype = numpy_dtype(element(x))
    shape = [1, 1, 1, 1]
    shape[axis] = len(lower)
    low = build.mul(rw, _take(rw, x, axis, lower),
                    build.const(rw, w_lower.astype(dtype).reshape(shape)))
    high = build.mul(rw, _take(rw, x, axis, upper),
                     build.const(rw, w_upper.astype(dtype).reshape(shape)))
    return build.op(rw, "tosa.add", [low, high], tensor_type(low))


@pattern("tfl.resize_bilinear", kind="float", types=("f32", "f16"))
def resize_bilinear(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """RESIZE BILINEAR with TFLite's coordinate mode as scale/offset/border.

    TFLite clamps the two neighbours of a source coordinate to [0, IH - 1]
    (negative half-pixel coordinates read row 0 twice), as TOSA's iy0 = max(iy,
    0), iy1 = min(iy + 1, IH - 1) does, so the results agree up to float
    rounding of the coordinate (TFLite computes it in float32, TOSA exactly).
    """
    sizes = _sizes(op)
    if isinstance(sizes, Failure):
        return sizes
    (in_h, out_h), (in_w, out_w) = sizes
    align = bool(op.attrs.get("align_corners", False))
    offset_kind = "half_pixel" if op.attrs.get("half_pixel_centers", False) else "zero"
    rows, cols = _axis_scales(sizes, align, offset_kind)
    if _legal(rows, in_h, out_h) and _legal(cols, in_w, out_w):
        return [_resize(rw, op, "BILINEAR", rows, cols)]
    # Outside RESIZE's limits (e.g. more than 16x down): the same interpolation,
    # one axis at a time, from gathered rows/columns and TFLite's float32 weights.
    half_pixel = bool(op.attrs.get("half_pixel_centers", False))
    x = _interpolate(rw, op.operands[0], 1, tflite_bilinear(in_h, out_h, align, half_pixel))
    x = _interpolate(rw, x, 2, tflite_bilinear(in_w, out_w, align, half_pixel))
    return [fresh(rw, x)]
