"""Integer pattern for RESIZE_BILINEAR (int8, int16): TFLite's integer kernel,
bit exact.

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

from dataclasses import dataclass

import numpy as np

from legalize.common import constant_value
from legalize.integer.support import integer_pattern, require_per_tensor, tensor_type
from legalize.quantized import SINGLE_ROUND, rescale_by_multiplier
from legalize.registry import pattern
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import TensorType, UniformQuantized, i8, i16, i32
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise

# TFLite's source-coordinate grid: 1/1024 of an input pixel (10 fraction bits).
GRID = 1 << 10
# apply_scale_32 parameters of round_half_away(A / 2^20) (see the module docstring).
HALF_AWAY_MULTIPLIER, HALF_AWAY_SHIFT = (1 << 30) + 1, 50
# Scales equal as TFLite's other quantized kernels check them (pooling.cc).
_SCALE_TOLERANCE = 1.0e-6


@dataclass(frozen=True)
class GridAxis:
    """One axis of TOSA RESIZE with n = GRID: y = o * d + offset."""

    d: int
    offset: int
    border: int


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
