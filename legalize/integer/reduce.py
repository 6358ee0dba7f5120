"""Integer patterns for MEAN, SUM and REDUCE_PROD.

MEAN (int8, int16): TFLite 2.20's reference kernels compute every quantized
mean the same way (reference_ops::QuantizedMeanOrSum,
kernels/internal/reference/reduce.h): `zp_out + MBQM(sum(x - zp_in), m', s')`
where (m', s') is QuantizeMultiplier(s_in / s_out) with 1/N folded in
(legalize.quantized.mean_multiplier), then clamped. TOSA: RESCALE to i32
without the zero point, REDUCE_SUM over each axis, one RESCALE, RESHAPE to the
result shape. A multiplier above 1 whose `sum << left_shift` can leave int32
goes through legalize.quantized.left_shifted_as_tflite first (TFLite wraps).

SUM (int8, int16, uint8): TFLite's reference SUM is broken for quantized data,
so validation judges SUM on the optimized kernels (tfl2tosa/validation.py),
which compute in float32: `clamp(round(sum(x) * scale + bias) + zp_out)` with
`scale = s_in / s_out`, `bias = -zp_in * scale * N` (sum_scale_and_bias) and
rounding half away from zero. TOSA: RESCALE to i32, REDUCE_SUM per axis, that
float32 arithmetic op by op, CAST to i32 and a unit RESCALE adding zp_out
(saturating).

REDUCE_PROD (int8, int16): TFLite's reference_ops::QuantizedReduceProd, a
chain of 48-bit products each scaled back to int32, see reduce_prod_int.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from legalize.common import constant_value
from legalize.integer.support import integer_pattern, require_per_tensor, tensor_type
from legalize.quantized import (
    left_shifted_as_tflite,
    mean_multiplier,
    quantize_multiplier_16,
    rescale_by_multiplier,
    rescale_to_i32,
    rounding_mode,
)
from legalize.registry import pattern
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import UniformQuantized, f32, i32
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise


def reduced_axes(op: Op, rank: int) -> list[int] | Failure:
    """The constant axis operand as sorted, distinct, non-negative axes."""
    array = constant_value(op.operands[1])
    if array is None:
        return Failure(f"{op.name}: the axes are not a constant")
    axes = sorted({int(a) % rank for a in array.reshape(-1)}) if rank else []
    if any(not -rank <= int(a) < rank for a in array.reshape(-1)):
        return Failure(f"{op.name}: axis out of range for rank {rank}")
    return axes


class Reduction(NamedTuple):
    """What every quantized reduction checks first: per-tensor input and output
    of one storage type, the reduced axes and how many elements each output sums."""

    x_type: UniformQuantized
    out_type: UniformQuantized
    shape: tuple[int, ...]
    axes: list[int]
    count: int


def reduction(op: Op, *storages: str) -> Reduction | Failure:
    elements = require_per_tensor(op, [op.operands[0], op.results[0]], *storages)
    if isinstance(elements, Failure):
        return elements
    x_type, out_type = elements
    if x_type.storage != out_type.storage:
        return Failure(f"{op.name}: input and output storage types differ")
    shape = tuple(tensor_type(op.operands[0]).shape)
    axes = reduced_axes(op, len(shape))
    if isinstance(axes, Failure):
        return axes
    return Reduction(x_type, out_type, shape, axes, math.prod(shape[a] for a in axes))


@pattern("tfl.mean", kind="integer", label="mean_int", types=("i8", "i16"))
@integer_pattern
def mean_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """RESCALE(-zp) -> REDUCE_SUM per axis -> RESCALE(s_in / (N s_out)) -> RESHAPE."""
    r = reduction(op, "i8", "i16")
    if isinstance(r, Failure):
        return r
    x_type, out_type, shape, axes, count = r
    if count == 0:
        return Failure(f"{op.name}: mean over no elements")
    multiplier, shift = mean_multiplier(x_type.scale / out_type.scale, count)
    total = rescale_to_i32(rw, op.operands[0])
    kept = list(shape)
    for axis in axes:
        kept[axis] = 1
        total = build.op(rw, "tosa.reduce_sum", [total], tensor_type(total).with_shape(
            tuple(kept)), axis=axis)
    largest_sum = count * (x_type.storage_max - x_type.storage_min)
    if shift < 31 and largest_sum >= 1 << (shift - 1):
        # sum * 2^left_shift wraps in TFLite's int32 arithmetic for large sums.
        total, shift = left_shifted_as_tflite(rw, total, 31 - shift), 31
    scaled = rescale_by_multiplier(rw, total, [multiplier], [shift], out_type, input_zp=0,
                                   rounding=rounding_mode(op.name))
    result_shape = tensor_type(op.results[0]).shape
    if tuple(kept) != tuple(result_shape):
        scaled = build.reshape(rw, scaled, result_shape)
    return [scaled]


# The rounded float sum is clamped to +-2^20 before it becomes an integer: far
# outside any int8/int16 result even after the zero point, and small enough for
# the unit RESCALE that adds the zero point (apply_scale_32 with shift 30 needs
# |value| < 2^29; TOSA spec, RESCALE).
_SUM_BOUND = float(1 << 20)
_UNIT_MULTIPLIER, _UNIT_SHIFT = 1 << 30, 30


def sum_scale_and_bias(in_scale: float, in_zero_point: int, out_scale: float,
                       count: int) -> tuple[np.float32, np.float32]:
    """TFLite's float32 `scale` and `bias` of the quantized SUM (see module doc)."""
    scale = np.float32(in_scale) / np.float32(out_scale)
    bias = np.float32(np.float32(-in_zero_point) * scale) * np.float32(count)
    return np.float32(scale), np.float32(bias)


def _sum_parameters(op: Op, *storages: str
                    ) -> tuple[UniformQuantized, list[int], np.float32, np.float32] | Failure:
    """The output type, reduced axes and TFLite's float32 scale and bias of a
    quantized SUM whose input and output are per-tensor `storages`."""
    r = reduction(op, *storages)
    if isinstance(r, Failure):
        return r
    x_type, out_type, shape, axes, count = r
    if count == 0 or math.prod(shape) == 0:
        return Failure(f"{op.name}: sum over an empty tensor")
    scale, bias = sum_scale_and_bias(x_type.scale, x_type.zero_point, out_type.scale, count)
    if not (np.isfinite(scale) and np.isfinite(bias)):
        return Failure(f"{op.name}: scale {scale} / bias {bias} not finite")
    return out_type, axes, scale, bias


def _rounded_sum(rw: Rewriter, stored: Value, axes: list[int], scale: np.float32,
                 bias: np.float32) -> Value:
    """REDUCE_SUM of the stored values (i32) per axis, then `round(sum * scale +
    bias)` in f32, clamped to +-_SUM_BOUND, as i32 (reduced axes kept as 1)."""
    total = stored
    kept = list(tensor_type(stored).shape)
    for axis in axes:
        kept[axis] = 1
        total = build.op(rw, "tosa.reduce_sum", [total], tensor_type(total).with_shape(
            tuple(kept)), axis=axis)
    e = Elementwise(rw, len(kept))
    real = e.cast(total, f32)
    real = e.mul(real, e.const(float(scale), f32))
    real = e.add(real, e.const(float(bias), f32))
    rounded = build.clamp(rw, e.round_half_away(real), -_SUM_BOUND, _SUM_BOUND)
    return e.cast(rounded, i32)


def _with_zero_point(rw: Rewriter, integral: Value, out: UniformQuantized,
                     result_shape: tuple[int, ...]) -> Value:
    """`integral + zp_out` saturated to `out` (a unit RESCALE), in `result_shape`."""
    scaled = rescale_by_multiplier(rw, integral, [_UNIT_MULTIPLIER], [_UNIT_SHIFT], out,
                                   input_zp=0, rounding="SINGLE_ROUND")
    if tuple(tensor_type(scaled).shape) != tuple(result_shape):
        scaled = build.reshape(rw, scaled, result_shape)
    return scaled


@pattern("tfl.sum", kind="integer", label="sum_int", types=("i8", "i16"))
@integer_pattern
def sum_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """RESCALE to i32 (raw values) -> REDUCE_SUM per axis -> f32 `sum * scale +
    bias`, rounded half away -> i32 -> RESCALE adding zp_out (saturates) -> RESHAPE."""
    parameters = _sum_parameters(op, "i8", "i16")
    if isinstance(parameters, Failure):
        return parameters
    out_type, axes, scale, bias = parameters
    stored = rescale_to_i32(rw, op.operands[0], input_zp=0)
    integral = _rounded_sum(rw, stored, axes, scale, bias)
    return [_with_zero_point(rw, integral, out_type, tensor_type(op.results[0]).shape)]


@pattern("tfl.sum", kind="integer", label="sum_uint8", types=("u8",))
@integer_pattern
def sum_uint8(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """sum_int's recipe on the stored uint8 values: the int8 twin widened with
    zero point -128 (RESCALE cannot widen unsigned data to i32), and the result
    saturated into the output's int8 twin, then moved back to uint8.

    TFLite's optimized uint8 SUM runs the same float32 recipe as int8 on the
    unsigned stored values, clamped to [0, 255]; summing the twins instead
    would change the float32 rounding (TFLite's bias is `-zp * scale * N` of
    the uint8 zero point).
    """
    parameters = _sum_parameters(op, "ui8")
    if isinstance(parameters, Failure):
        return parameters
    out_type, axes, scale, bias = parameters
    # Imported here: importing legalize.integer.data at the top would register its
    # patterns out of the registry's module order (see pooling.py).
    from legalize.integer.data import UINT8_OFFSET, from_int8, int8_twin, to_int8

    # The twin holds stored - 128: widened with zero point -128 it is the stored value.
    stored = rescale_to_i32(rw, to_int8(rw, op.operands[0]), input_zp=-UINT8_OFFSET)
    integral = _rounded_sum(rw, stored, axes, scale, bias)
    result = tensor_type(op.results[0])
    twin = _with_zero_point(rw, integral, int8_twin(out_type), result.shape)
    return [from_int8(rw, twin, result)]


# ---------------------------------------------------------------------------
# REDUCE_PROD

# Longest product chain unrolled into TOSA ops (two per element); longer
# reductions take the fallback.
MAX_PRODUCT_STEPS = 256
_INT32_MAX = (1 << 31) - 1


def prod_scaling(in_scale: float, out_scale: float, count: int) -> float:
    """TFLite's per-step real scale `s_in / s_out^(1/N)` (reduce.cc GetQuantProdScaling,
    in double from the float32 scales): N scaled steps give s_in^N / s_out."""
    return float(in_scale) / math.pow(float(out_scale), 1.0 / count)


def product_chain_bound(largest_factor: int, multiplier: int, shift: int, count: int) -> int:
    """The largest |value| the chain can reach: the first factor, then each
    `(p * d * m + 2^(shift-1)) >> shift` step, and the final `(p * m + ...) >> shift`.

    Rounding half up keeps |result| <= (|p d m| + 2^(shift-1)) >> shift for
    either sign, so iterating that on the largest |d| bounds every step.
    """
    half = 1 << (shift - 1)
    bound = worst = largest_factor
    for _ in range(count - 1):
        bound = (bound * largest_factor * multiplier + half) >> shift
        worst = max(worst, bound)
    return max(worst, (bound * multiplier + half) >> shift)


def _product_rows(rw: Rewriter, x: Value, axes: list[int]) -> Value:
    """x as [kept elements, reduced elements], the reduced ones of each row in
    row-major order of the input (the order TFLite's Reduce visits them)."""
    shape = tensor_type(x).shape
    kept = [a for a in range(len(shape)) if a not in axes]
    perm = kept + axes
    if perm != sorted(perm):
        x = build.transpose(rw, x, perm)
    rows = math.prod(shape[a] for a in kept)
    return build.reshape(rw, x, (rows, math.prod(shape[a] for a in axes)))


@pattern("tfl.reduce_prod", kind="integer", label="reduce_prod_int", types=("i8", "i16"))
@integer_pattern
def reduce_prod_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TFLite's QuantizedReduceProd step by step: p = x_0 - zp, then for each next
    element p = MUL(p, (x_j - zp) * m, shift), finally RESCALE(p, m, shift) + zp_out,
    saturated.

    reference_ops::QuantizedReduceProd (kernels/internal/reference/reduce.h)
    scales every product with the int64 MultiplyByQuantizedMultiplier
    (kernels/internal/common.cc): the 15-bit multiplier m of
    legalize.quantized.quantize_multiplier_16 and one rounding,
    `(v * m + 2^(s-1)) >> s`. TOSA MUL with a shift computes exactly that in
    64 bits (`(a * b + 2^(s-1)) >> s`), with b = (x_j - zp) * m, which fits
    i32 (|x - zp| <= 2^16, m < 2^15). MUL requires the result to fit i32, as
    TFLite's int32 accumulator does (it wraps otherwise): chains that could
    leave int32 for some input are refused (product_chain_bound), and so are
    chains longer than MAX_PRODUCT_STEPS.
    """
    r = reduction(op, "i8", "i16")
    if isinstance(r, Failure):
        return r
    x_type, out_type, shape, axes, count = r
    if x_type.bits == 16 and (x_type.zero_point or out_type.zero_point):
        return Failure(f"{op.name}: TFLite's int16 REDUCE_PROD requires zero points 0")
    if count == 0 or math.prod(shape) == 0:
        return Failure(f"{op.name}: product over an empty tensor")
    if count > MAX_PRODUCT_STEPS:
        return Failure(f"{op.name}: {count} factors, more than {MAX_PRODUCT_STEPS} unrolled")
    multiplier, shift = quantize_multiplier_16(prod_scaling(x_type.scale, out_type.scale,
                                                            count))
    storage = x_type.storage
    largest_factor = max(storage.max_value - x_type.zero_point,
                         x_type.zero_point - storage.min_value)
    bound = product_chain_bound(largest_factor, multiplier, shift, count)
    if bound + abs(out_type.zero_point) > _INT32_MAX:
        return Failure(f"{op.name}: the scaled product can overflow TFLite's int32 "
                       "accumulator for some inputs")
    factors = rescale_to_i32(rw, _product_rows(rw, op.operands[0], axes))
    rows = tensor_type(factors).shape[0]
    m = build.const(rw, np.array([[multiplier]], dtype=np.int32))
    scaled_factors = build.mul(rw, factors, m)
    product = build.slice(rw, factors, (0, 0), (rows, 1))
    for j in range(1, count):
        product = build.mul(rw, product, build.slice(rw, scaled_factors, (0, j), (rows, 1)),
                            shift)
    # The last scaling and zp_out: RESCALE with the same 16-bit multiplier applies
    # `(p * m + 2^(s-1)) >> s` (apply_scale_16, any int48 input), adds zp_out
    # and saturates, as TFLite clamps.
    result = tensor_type(op.results[0])
    scaled = build.rescale(rw, product, multiplier, shift, 0, out_type.zero_point,
                           result.with_shape((rows, 1)), scale32=False,
                           rounding_mode="SINGLE_ROUND")
    return [build.reshape(rw, scaled, result.shape)]
