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

RESIZE_BILINEAR on int8 and int16 data: TFLite's integer kernel, bit exact.

reference_ops::ResizeBilinearInteger (kernels/internal/reference/
resize_bilinear.h), per axis, works on a grid of 1/1024 input pixels:

- `scale_10 = (1024 * in + out / 2) / out`, or with align_corners (and out > 1)
  `(1024 * (in - 1) + (out - 1) / 2) / (out - 1)`: the ratio rounded to the grid;
- the source coordinate of output o is `y = o * scale_10`, or with
  half_pixel_centers `o * scale_10 + scale_10 / 2 - 512` (C division);
- rows `y0 = max(y / 1024, 0)`, `y1 = min(ceil(y / 1024), in - 1)` with
  weights `1024 - (y - 1024 * y0)` and `y - 1024 * y0`;
- the four products of stored values and weights are summed (a value times
  2^20) and divided by 2^20 rounding half away from zero (default build).

TOSA RESIZE BILINEAR with scale_n = 1024, scale_d = scale_10, offset = the
half-pixel term and border = whatever makes the output size exact samples the
same coordinates, clamps the same neighbours (a negative coordinate reads row
0 with all its weight, as TFLite's y0 = y1 = 0 does) and returns the same sum,
`Σ v * (1024 - dy or dy) * (1024 - dx or dx)` (TOSA 1.0 spec, RESIZE).

The division: RESCALE rounds half up, `(A * m + 2^(s-1)) >> s`. With m =
2^30 + 1, s = 50 it computes `floor(A / 2^20 + 1/2 + A / 2^50)`: |A| < 2^27
for int8, so the extra `A / 2^50` is below 2^-23, too small to move a value
that is not a tie (those lie at least 2^-20 from a rounding boundary), and it
pushes every tie away from zero, as TFLite rounds (the trick TOSA's AVG_POOL2D
uses for its reciprocal).

int16: TOSA's 16-bit RESIZE accumulates in i48, which only RESCALE with a
15-bit multiplier can read, too coarse for the same trick (|A| < 2^35). So the
int16 values are split into two int8 planes, `x = 256 * h + m + 128` (h the
high byte, m the low byte minus 128), each resized in the int8 mode (i32
sums Ah, Am), and the rounding is done in i32 arithmetic:
`A = 256 * Ah + Am + 2^27 = 2^20 * q + B` with `q = Ah >> 12` and
`B = 256 * (Ah & 4095) + Am + 2^27` (0 <= B < 2^28), `floor(A / 2^20) =
q + (B >> 20)` gives the sign of A, and the result is `q + ((B + 2^19 -
[A < 0]) >> 20)`, i.e. round half away from zero.

TFLite's kernel never looks at the scales: the pattern requires the input and
the output to share their quantization (the converter always emits that).
"""

from __future__ import annotations

from math import gcd

import numpy as np

from legalize.common import constant_value, element, tensor_type
from legalize.integer.support import integer_pattern, require_per_tensor
from legalize.quantized import SINGLE_ROUND, rescale_by_multiplier
from legalize.registry import pattern
from legalize.shape import fresh, int_list, require_move, reshape_to, shape_of
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import (
    Frozen,
    TensorType,
    UniformQuantized,
    i8,
    i16,
    i32,
    numpy_dtype,
    storage_type,
)
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise

# TOSA RESIZE modes: f16/f32 (BILINEAR and NEAREST), i8/i16 NEAREST (a move);
# TFLite has no int32 or bool resize.
NEAREST_TYPES = ("f32", "f16", "i8", "u8", "i16")
_RESIZE_STORAGE = frozenset({"f32", "f16", "bf16", "i8", "ui8", "i16"})


class AxisScale(Frozen):
    """One axis of TOSA RESIZE: y = o * d + offset, in units of 1/n input pixels."""

    n: int
    d: int
    offset: int
    border: int

    _fields = ("n", "d", "offset", "border")

    def __init__(self, n: int, d: int, offset: int, border: int) -> None:
        self._set(n, d, offset, border)


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


# ---------------------------------------------------------------------------
# Integer path: RESIZE_BILINEAR on int8 and int16

# TFLite's source-coordinate grid: 1/1024 of an input pixel (10 fraction bits).
GRID = 1 << 10
# apply_scale_32 parameters of round_half_away(A / 2^20) (see the module docstring).
HALF_AWAY_MULTIPLIER, HALF_AWAY_SHIFT = (1 << 30) + 1, 50
# Scales equal as TFLite's other quantized kernels check them (pooling.cc).
_SCALE_TOLERANCE = 1.0e-6


class GridAxis(Frozen):
    """One axis of TOSA RESIZE with n = GRID: y = o * d + offset."""

    d: int
    offset: int
    border: int

    _fields = ("d", "offset", "border")

    def __init__(self, d: int, offset: int, border: int) -> None:
        self._set(d, offset, border)


def tflite_scale_10(in_size: int, out_size: int, align_corners: bool) -> int:
    """TFLite's `height_scale_10` / `width_scale_10`."""
    if align_corners and out_size > 1:
        return (GRID * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    return (GRID * in_size + out_size // 2) // out_size


def grid_axis(in_size: int, out_size: int, align_corners: bool, half_pixel: bool) -> GridAxis:
    """RESIZE parameters reproducing ComputeInterpolationValuesInteger on one axis."""
    d = tflite_scale_10(in_size, out_size, align_corners)
    offset = d // 2 - GRID // 2 if half_pixel else 0
    border = (out_size - 1) * d + offset - (in_size - 1) * GRID
    return GridAxis(d, offset, border)


def within_limits(axis: GridAxis, in_size: int, out_size: int) -> bool:
    """TOSA 1.0 RESIZE's ERROR_IF limits for one axis with scale_n = GRID."""
    n = GRID
    return (0 < axis.d < 16 * n and -n <= axis.offset < 16 * n
            and -16 * n <= axis.border < n and max(in_size, out_size) < 16384)


def _check(op: Op) -> tuple[UniformQuantized, GridAxis, GridAxis] | Failure:
    """The shared quantization and both axes' parameters, or why not."""
    elements = require_per_tensor(op, [op.operands[0], op.results[0]], "i8", "i16")
    if isinstance(elements, Failure):
        return elements
    q_in, q_out = elements
    if q_in.storage != q_out.storage or q_in.zero_point != q_out.zero_point or \
            abs(q_in.scale - q_out.scale) > _SCALE_TOLERANCE:
        return Failure(f"{op.name}: input {q_in} and output {q_out} are quantized "
                       "differently (TFLite's kernel ignores the parameters)")
    in_shape, out_shape = tensor_type(op.operands[0]).shape, tensor_type(op.results[0]).shape
    size = constant_value(op.operands[1])
    if size is not None and [int(v) for v in np.ravel(size)] != list(out_shape[1:3]):
        return Failure(f"{op.name}: size {np.ravel(size).tolist()} differs from the result")
    align = bool(op.attrs.get("align_corners", False))
    half_pixel = bool(op.attrs.get("half_pixel_centers", False))
    if align and half_pixel:
        return Failure(f"{op.name}: align_corners with half_pixel_centers")
    axes = [grid_axis(i, o, align, half_pixel) for i, o in zip(in_shape[1:3], out_shape[1:3])]
    if not all(within_limits(a, i, o) for a, i, o in zip(axes, in_shape[1:3], out_shape[1:3])):
        return Failure(f"{op.name}: {in_shape[1:3]} -> {out_shape[1:3]} is beyond RESIZE's "
                       "limits (more than 16x down, or a sample past the last pixel)")
    return q_out, axes[0], axes[1]


def _resize_sum(rw: Rewriter, x: Value, out_shape: tuple[int, ...], rows: GridAxis,
                cols: GridAxis) -> Value:
    """RESIZE BILINEAR of int8 `x`: the i32 sum of values times 2^20 weights."""
    scale = build.const_shape(rw, [GRID, rows.d, GRID, cols.d])
    offset = build.const_shape(rw, [rows.offset, cols.offset])
    border = build.const_shape(rw, [rows.border, cols.border])
    return build.op(rw, "tosa.resize", [x, scale, offset, border], TensorType(out_shape, i32),
                    mode="BILINEAR")


def _int16_planes(e: Elementwise, x: Value) -> tuple[Value, Value]:
    """int16 `x` as int8 planes (h, m) with x = 256 * h + m + 128."""
    high = e.binary("tosa.arithmetic_right_shift", x, e.const(8, i16), i16, round=False)
    # CAST to int8 keeps the low byte (integer narrowing truncates): the low
    # byte of x ^ 0x80 read as signed is (x & 255) - 128.
    flipped = e.binary("tosa.bitwise_xor", x, e.const(0x80, i16), i16)
    return e.cast(high, i8), e.cast(flipped, i8)


def _round_int16_sum(e: Elementwise, high_sum: Value, low_sum: Value) -> Value:
    """round_half_away((256 * Ah + Am + 2^27) / 2^20) in i32 (module docstring)."""
    q = e.shift_right(high_sum, 12)
    r = e.bitwise_and(high_sum, (1 << 12) - 1)
    b = e.add(e.shift_left(r, 8), low_sum)
    b = e.add(b, 1 << 27)
    floor = e.add(q, e.shift_right(b, 20))
    negative = e.shift_right(floor, 31)  # 0 or -1
    nudged = e.add(e.add(b, 1 << 19), negative)
    return e.add(q, e.shift_right(nudged, 20))


@pattern("tfl.resize_bilinear", kind="integer", label="resize_bilinear_int",
         types=("i8", "i16"))
@integer_pattern
def resize_bilinear_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """RESIZE BILINEAR on TFLite's 1/1024 grid (scale 1024 / scale_10), then
    the division by 2^20 rounding half away from zero: one RESCALE for int8,
    two int8 RESIZEs and i32 arithmetic for int16 (module docstring)."""
    checked = _check(op)
    if isinstance(checked, Failure):
        return checked
    q_out, rows, cols = checked
    x = op.operands[0]
    out_shape = tensor_type(op.results[0]).shape
    if q_out.storage.bits == 8:
        total = _resize_sum(rw, x, out_shape, rows, cols)
        return [rescale_by_multiplier(rw, total, [HALF_AWAY_MULTIPLIER], [HALF_AWAY_SHIFT],
                                      q_out, input_zp=0, output_zp=0, rounding=SINGLE_ROUND)]
    e = Elementwise(rw, 4)
    high, low = _int16_planes(e, x)
    rounded = _round_int16_sum(e, _resize_sum(rw, high, out_shape, rows, cols),
                               _resize_sum(rw, low, out_shape, rows, cols))
    return [rescale_by_multiplier(rw, rounded, [1 << 30], [30], q_out, input_zp=0,
                                  output_zp=0, rounding=SINGLE_ROUND)]
