"""`quant.dcast` / `quant.qcast` lowered to TOSA 1.0 arithmetic plus `quant.scast`.

Both follow TFLite's reference kernels (tensorflow/lite/kernels/internal/
reference/dequantize.h and quantize.h) as closely as TOSA's float ops allow.

dcast, TFLite DEQUANTIZE `float(double(scale) * (q - zp))`:

    scast to storage -> CAST to float -> SUB zp -> MUL scale

For 8- and 16-bit storage this is bit exact: `q - zp` is an exact small
integer in float, and a float MUL of two exact operands rounds the exact
product once, as TFLite's double product (exact in 53 bits) rounded to float
does. Unsigned storage (u8, u16) sits in a signless integer: CAST to i32,
BITWISE_AND 0xFF/0xFFFF recovers the unsigned value, then CAST to float.

qcast, TFLite QUANTIZE `clamp(round_half_away(fl32(x / scale)) + zp)`:

TOSA has no float division. Per tensor, for 8- and 16-bit storage and a static
shape, the rounding is decided exactly by the float thresholds of the quotient
(`quantize_thresholds`): C(j) is the least float a >= 0 whose float32 quotient
a / scale reaches j + 0.5, computed at conversion time for every j the storage
range needs. Then, with a = |x|:

    n0 = floor(a * fl(1/scale) + 0.5)      a candidate within one of the answer
    n  = n0 + [a >= C(n0)] - [a < C(n0 - 1)]   two GATHERs from the table
    r  = x >= 0 ? n : -n;  z = r + zp;  CLAMP, CAST to the storage integer, scast

so near-ties round as TFLite's float32 division does (19.55f / 0.1f is
195.49998f: 195, where 19.55f * 10.0f = 195.5f would give 196). Per-channel types
and dynamic shapes keep the reciprocal product, exact when the scale is a power
of two and otherwise one LSB off near half-integers:

    y = x * fl(1/scale)                    MUL by a constant
    n = floor(|y|); n += (|y| - n >= 0.5)  ABS, FLOOR, SUB, GREATER_EQUAL, ADD, SELECT
    r = y < 0 ? -n : n                     round half away from zero, exact

TOSA CAST rounds half to even; it only ever sees integer values here, so its
rounding mode does not matter. Values are saturated to the storage range (and
the type's narrower storage bounds, e.g. `i8<-127:127>`) before the CAST;
unsigned storage is clamped, converted to i32, then narrowed to the signless
storage integer with CAST (which truncates: the bits of the unsigned value).
NaN inputs give an unspecified result, as in TFLite.

Per-channel types use scale/zero-point constants of shape [1, .., C, .., 1]
(TOSA broadcasting needs equal ranks); static and dynamic dimensions work
alike, unranked tensors and bare scalars cannot be lowered.
"""

from __future__ import annotations

import functools
from typing import cast

import numpy as np

from tfl2tosa import kernels
from tfl2tosa.errors import ConversionError
from tfl2tosa.ir.core import Module, Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter, rewrite_module
from tfl2tosa.ir.types import (
    QuantizedType,
    TensorType,
    UniformQuantizedPerAxis,
    f32,
    i32,
)
from tfl2tosa.quant.ops import DCAST, QCAST, scast, storage_integer
from tfl2tosa.tosa import build as tosa
from tfl2tosa.tosa.build import Elementwise

# Storage widths with a TOSA CAST to and from float: i8, i16, i32 (u8, u16 via i32).
_CASTABLE_BITS = (8, 16, 32)


def _check_lowerable(op: Op, quantized_type: object) -> Failure | None:
    if not isinstance(quantized_type, TensorType) or quantized_type.shape is None:
        return Failure(f"{op.name}: cannot lower {quantized_type}: a ranked tensor is needed")
    storage = cast(QuantizedType, quantized_type.element).storage
    if storage.bits not in _CASTABLE_BITS or (not storage.is_signed and storage.bits == 32):
        return Failure(f"{op.name}: no TOSA conversion for storage type {storage}")
    return None


def _params(q: QuantizedType) -> tuple[tuple[float, ...], tuple[int, ...], int | None]:
    if isinstance(q, UniformQuantizedPerAxis):
        return q.scales, q.zero_points, q.axis
    return (q.scale,), (q.zero_point,), None


def lower_dcast(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """dcast -> scast, CAST, (BITWISE_AND), SUB zp, MUL scale."""
    source = op.operands[0]
    failure = _check_lowerable(op, source.type)
    if failure is not None:  # a Failure is falsy
        return failure
    source_type = cast(TensorType, source.type)
    q = cast(QuantizedType, source_type.element)
    expressed = q.expressed
    e = Elementwise(rw, len(cast(tuple[int, ...], source_type.shape)))
    stored = scast(rw, source, storage_integer(q))
    if q.storage.is_signed:
        real = e.cast(stored, expressed)
    else:
        wide = e.cast(stored, i32)
        mask = e.const((1 << q.storage.bits) - 1, i32)
        real = e.cast(e.bitwise_and(wide, mask), expressed)
    scales, zero_points, axis = _params(q)
    if any(zero_points):
        real = e.sub(real, e.per_axis(zero_points, axis, expressed))
    return [e.mul(real, e.per_axis(scales, axis, expressed))]


@functools.cache
def quantize_thresholds(scale: float, count: int) -> np.ndarray | None:
    """[count] float32: entry j is the least float a >= 0 with `a / scale`, divided in
    float32 as TFLite's QUANTIZE does, at least j + 0.5 (so it rounds to j + 1 or more).

    Found from the product (j + 0.5) * scale, then moved float by float while the
    predicate allows: the predicate is monotone in a, and the product lies within
    a few floats of the answer. None where that fails (a scale so small or large
    that the products leave the float range).
    """
    s = np.float32(scale)
    halves = np.arange(count, dtype=np.float64) + 0.5
    target = halves.astype(np.float32)
    with np.errstate(over="ignore"):  # products beyond float32: the None case below
        found = (halves * np.float64(s)).astype(np.float32)

    def reaches(a: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return (a / s) >= target

    for _ in range(_THRESHOLD_STEPS):
        lower = np.nextafter(found, np.float32(0))
        found = np.where(reaches(lower), lower, found)
    for _ in range(_THRESHOLD_STEPS):
        found = np.where(reaches(found), found, np.nextafter(found, np.float32(np.inf)))
    if not (np.isfinite(found).all() and reaches(found).all()) or \
            reaches(np.nextafter(found, np.float32(0))).any():
        return None
    found.flags.writeable = False  # cached: shared by every qcast of this scale
    return found


# Floats between (j + 0.5) * scale, rounded, and the threshold it estimates.
_THRESHOLD_STEPS = 8


def _magnitude_by_thresholds(e: Elementwise, x: Value, scale: float,
                             thresholds: np.ndarray) -> Value:
    """round_half_away(fl(|x| / scale)) for magnitudes up to `count` (larger ones give
    `count` or more), as f32: the candidate n0 = floor(|x| * (1/scale) + 0.5), then
    n0 + [|x| >= C(n0)] - [|x| < C(n0 - 1)] with C = `thresholds` (count + 1 of
    quantize_thresholds; C(-1) = 0): the reciprocal's product is within one of the
    quotient's rounding."""
    rw, shape = e.rw, cast(TensorType, x.type).shape
    size = int(np.prod(shape))
    count = thresholds.size - 1
    below = np.concatenate([[np.float32(0)], thresholds[:-1]]).astype(np.float32)
    magnitude = e.abs(x)
    reciprocal = e.const(1.0 / scale, f32)
    estimate = e.floor(e.add(e.mul(magnitude, reciprocal), e.const(0.5, f32)))
    estimate = tosa.clamp(rw, estimate, 0.0, float(count))
    index = tosa.reshape(rw, e.cast(estimate, i32), (1, size))

    def lookup(table: np.ndarray) -> Value:
        values = tosa.const(rw, table.reshape(1, -1, 1), f32)
        found = tosa.op(rw, "tosa.gather", [values, index], TensorType((1, size, 1), f32))
        return tosa.reshape(rw, found, shape)

    zero, one = e.const(0.0, f32), e.const(1.0, f32)
    up = e.select(e.greater_equal(magnitude, lookup(thresholds)), one, zero)
    down = e.select(e.greater(lookup(below), magnitude), one, zero)
    return e.sub(e.add(estimate, up), down)


def _optimized_rounding(e: Elementwise, x: Value, q: QuantizedType, scale: float,
                        zero_point: int) -> Value:
    """rint(x * fl(1/scale)) as f32: TFLite's optimized per-tensor float -> int8/int16
    QUANTIZE multiplies by the float reciprocal and rounds half to even (measured on
    TF 2.20, x86), which TOSA's CAST to i32 does; clamped first to a range the
    storage's saturation covers, so the CAST cannot overflow."""
    scaled = e.mul(x, e.const(1.0 / scale, f32))
    bounded = tosa.clamp(e.rw, scaled, float(q.storage_min - zero_point - 1),
                         float(q.storage_max - zero_point + 1))
    return e.cast(e.cast(bounded, i32), f32)


def _exact_by_thresholds(q: QuantizedType, target: TensorType) -> bool:
    """Per-tensor, 8 or 16 bits, f32, static shape: where quantize_thresholds apply."""
    return (not isinstance(q, UniformQuantizedPerAxis) and q.storage.bits <= 16
            and q.expressed == f32 and all(isinstance(d, int) and d > 0
                                           for d in cast(tuple, target.shape)))


def _rounded(e: Elementwise, x: Value, q: QuantizedType, target: TensorType) -> Value:
    """x / scale rounded to an integer (as f32) the way the chosen TFLite kernel
    rounds: the optimized kernel's rint of the reciprocal product, the reference
    kernel's float32 quotient rounded half away (exactly by thresholds where they
    apply, else by the reciprocal product)."""
    scales, zero_points, axis = _params(q)
    if kernels.current() == "optimized" and axis is None and q.expressed == f32 \
            and q.storage.is_signed and q.storage.bits <= 16:
        return _optimized_rounding(e, x, q, scales[0], zero_points[0])
    if _exact_by_thresholds(q, target):
        reach = max(q.storage_max - zero_points[0], zero_points[0] - q.storage_min) + 1
        thresholds = quantize_thresholds(scales[0], reach + 1)
        if thresholds is not None:
            magnitude = _magnitude_by_thresholds(e, x, scales[0], thresholds)
            non_negative = e.greater_equal(x, e.const(0.0, f32))
            return e.select(non_negative, magnitude, e.sub(e.const(0.0, f32), magnitude))
    reciprocals = tuple(1.0 / s for s in scales)
    return e.round_half_away(e.mul(x, e.per_axis(reciprocals, axis, q.expressed)))


def lower_qcast(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """qcast -> x / scale rounded (`_rounded`), ADD zp, CLAMP, CAST, scast."""
    target = op.result.type
    failure = _check_lowerable(op, target)
    if failure is not None:  # a Failure is falsy
        return failure
    target_type = cast(TensorType, target)
    q = cast(QuantizedType, target_type.element)
    e = Elementwise(rw, len(cast(tuple[int, ...], target_type.shape)))
    _, zero_points, axis = _params(q)
    value = _rounded(e, op.operands[0], q, target_type)
    if any(zero_points):
        value = e.add(value, e.per_axis(zero_points, axis, q.expressed))
    clamped = tosa.clamp(rw, value, float(q.storage_min), float(q.storage_max))
    storage = storage_integer(q)
    if q.storage.is_signed:
        stored = e.cast(clamped, storage)
    else:
        stored = e.cast(e.cast(clamped, i32), storage)
    return [scast(rw, stored, q)]


LOWERINGS = {DCAST: lower_dcast, QCAST: lower_qcast}


def lower_quant_ops(module: Module) -> int:
    """Rewrite every qcast/dcast into TOSA ops + scast; returns the number lowered.

    Raises ConversionError naming every cast that cannot be lowered.
    """
    record = rewrite_module(module, LOWERINGS)
    if record.failures:
        lines = [f"{op.name} at {op.loc or '?'}: {reason}" for op, reason in record.failures]
        raise ConversionError(f"{len(lines)} quant cast(s) cannot be lowered to TOSA: "
                              + "; ".join(lines), failures=lines)
    return len(record.applied)
