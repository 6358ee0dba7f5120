"""Patterns for TFL reductions: MEAN, SUM, REDUCE_MAX/MIN/PROD/ANY/ALL,
ARG_MAX/ARG_MIN, CUMSUM and TOPK_V2 (float data; int32 and bool where TOSA has
the operation), and MEAN, SUM, REDUCE_PROD, REDUCE_MAX/MIN and ARG_MAX/ARG_MIN
on quantized data.

TOSA reduces one axis at a time and keeps it with size 1; TFLite reduces a
constant list of axes (negative ones count from the end, duplicates are
allowed) and drops them unless `keep_dims`. Order-insensitive reductions
(max, min, any, all) chain one TOSA reduction per axis. SUM, PROD and MEAN
bring the reduced axes together and reduce them in one step, because TFLite's
reference kernel (`reference_ops::ReduceGeneric`, `MeanGeneral`) accumulates
every output element sequentially over the reduced elements in memory order:
one reduction rounds once, as TFLite's does at the end, where a chain would
round between axes.

Integer path (MEAN, SUM, REDUCE_PROD, REDUCE_MAX/MIN, ARG_MAX/ARG_MIN on
quantized data):

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

ARG_MAX / ARG_MIN (int8, uint8; TFLite has no int16 kernel) compare stored
values; the first index wins ties. REDUCE_MAX / REDUCE_MIN work on stored
values and refuse differing input/output quantization at run time, so only
equal quantization is lowered; other cases are left to the fallback
(tests/test_legalize_integer_data.py pins both against the interpreter).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from legalize.common import constant_value, element, require_static, scalar, tensor_type
from legalize.integer.data import UINT8_OFFSET, from_int8, int8_twin, restore_uint8, to_int8
from legalize.integer.support import integer_pattern, require_per_tensor, same_quantization
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
from tfl2tosa.ir.types import TensorType, UniformQuantized, f32, i1, i8, i32, storage_type
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise

# ---------------------------------------------------------------------------
# Helpers (candidates for legalize/common.py)


def reshape_to(rw: Rewriter, value: Value, shape: Sequence[int]) -> Value:
    """RESHAPE unless `value` already has `shape`."""
    if tensor_type(value).shape == tuple(shape):
        return value
    return build.reshape(rw, value, shape)


def constant_axes(op: Op, index: int, rank: int) -> list[int] | Failure:
    """The constant axis operand `index` of `op`, normalized to [0, rank), sorted, unique."""
    array = constant_value(op.operands[index])
    if array is None:
        return Failure(f"{op.name}: the axis operand must be a constant")
    axes = sorted({int(a) + rank if int(a) < 0 else int(a) for a in np.ravel(array)})
    if any(not 0 <= a < rank for a in axes):
        return Failure(f"{op.name}: axis {np.ravel(array).tolist()} out of range for rank {rank}")
    return axes


def _element_name(value: Value) -> str:
    return storage_type(element(value)).name


def _check_elements(op: Op, allowed: Sequence[str]) -> Failure | None:
    """Failure unless the op is static and its input is one of `allowed`."""
    if failure := require_static(op):
        return failure
    name = _element_name(op.operands[0])
    if name not in allowed:
        return Failure(f"{op.name} on {name} data: TOSA has no matching operation")
    return None


def reduce_each(rw: Rewriter, name: str, x: Value, axes: Sequence[int],
                **attrs: object) -> Value:
    """One TOSA reduction per axis; every reduced axis stays with size 1."""
    for axis in axes:
        shape = list(tensor_type(x).shape)
        shape[axis] = 1
        x = build.op(rw, name, [x], tensor_type(x).with_shape(tuple(shape)), axis=axis, **attrs)
    return x


def gather_axes(rw: Rewriter, x: Value, axes: Sequence[int]) -> tuple[Value, int]:
    """`x` reshaped (and transposed if the axes are not adjacent) so that `axes`
    form one axis, in row-major order; returns it and that axis' position."""
    shape = tensor_type(x).shape
    first, last = axes[0], axes[-1]
    if list(axes) != list(range(first, last + 1)):
        kept = [d for d in range(len(shape)) if d not in axes]
        x = build.transpose(rw, x, kept + list(axes))
        shape = tensor_type(x).shape
        first, last = len(kept), len(shape) - 1
    merged = math.prod(shape[first:last + 1])
    return reshape_to(rw, x, (*shape[:first], merged, *shape[last + 1:])), first


def reduce_at_once(rw: Rewriter, name: str, x: Value, axes: Sequence[int]) -> Value:
    """Reduce `axes` in one TOSA reduction over their row-major flattening."""
    merged, axis = gather_axes(rw, x, axes)
    return reduce_each(rw, name, merged, [axis])


def _reduction_input(op: Op, allowed: Sequence[str]) -> tuple[Value, list[int]] | Failure:
    failure = _check_elements(op, allowed)
    if failure is not None:
        return failure
    x = op.operands[0]
    axes = constant_axes(op, 1, len(tensor_type(x).shape))
    if isinstance(axes, Failure):
        return axes
    return x, axes


def _finish(rw: Rewriter, op: Op, value: Value) -> list[Value]:
    """The reduced value in the op's result shape (keep_dims or not); an empty
    axis list leaves the input unchanged, passed through IDENTITY."""
    result = tensor_type(op.results[0])
    if value is op.operands[0]:
        return [build.op(rw, "tosa.identity", [value], result)]
    return [reshape_to(rw, value, result.shape)]


# ---------------------------------------------------------------------------
# Reductions

_FLOATS = ("f32", "f16", "bf16")
_ONE_STEP = {"tfl.sum": "tosa.reduce_sum", "tfl.reduce_prod": "tosa.reduce_product"}
_PER_AXIS = {"tfl.reduce_max": "tosa.reduce_max", "tfl.reduce_min": "tosa.reduce_min",
             "tfl.reduce_any": "tosa.reduce_any", "tfl.reduce_all": "tosa.reduce_all"}


@pattern("tfl.sum", types=("f32", "f16", "i32"))
def sum_(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """REDUCE_SUM over the flattened reduced axes (i32 wraps in TFLite; TOSA
    requires that no partial sum overflows)."""
    found = _reduction_input(op, (*_FLOATS, "i32"))
    if isinstance(found, Failure):
        return found
    x, axes = found
    return _finish(rw, op, reduce_at_once(rw, "tosa.reduce_sum", x, axes) if axes else x)


@pattern("tfl.reduce_prod", types=("f32", "f16"))
def reduce_prod(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """REDUCE_PRODUCT over the flattened reduced axes (TOSA has no integer product)."""
    found = _reduction_input(op, _FLOATS)
    if isinstance(found, Failure):
        return found
    x, axes = found
    return _finish(rw, op, reduce_at_once(rw, "tosa.reduce_product", x, axes) if axes else x)


@pattern("tfl.reduce_max", "tfl.reduce_min", types=("f32", "f16", "i32"))
def reduce_max_min(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """REDUCE_MAX / REDUCE_MIN per axis. TFLite's `in > current ? in : current`
    from the type's lowest value drops NaNs (nan_mode IGNORE), except that an
    all-NaN slice gives TFLite's starting value where TOSA gives NaN."""
    found = _reduction_input(op, (*_FLOATS, "i32"))
    if isinstance(found, Failure):
        return found
    x, axes = found
    attrs = {"nan_mode": "IGNORE"} if _element_name(x) in _FLOATS else {}
    return _finish(rw, op, reduce_each(rw, _PER_AXIS[op.name], x, axes, **attrs))


@pattern("tfl.reduce_any", "tfl.reduce_all", types=("bool",))
def reduce_any_all(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """REDUCE_ANY / REDUCE_ALL per axis."""
    found = _reduction_input(op, ("i1",))
    if isinstance(found, Failure):
        return found
    x, axes = found
    return _finish(rw, op, reduce_each(rw, _PER_AXIS[op.name], x, axes))


@pattern("tfl.mean", types=("f32", "f16", "i32"))
def mean(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """REDUCE_SUM over the flattened reduced axes, then MUL by 1/N (float) or
    INTDIV by N (i32: TFLite's `sum / N` truncates toward zero, as INTDIV does).

    TFLite divides the float sum by N; multiplying by the rounded 1/N differs
    from that division by at most one ulp (none when N is a power of two).
    TFLite accumulates an i32 sum in int64; TOSA's REDUCE_SUM requires that
    no partial sum overflows i32.
    """
    found = _reduction_input(op, (*_FLOATS, "i32"))
    if isinstance(found, Failure):
        return found
    x, axes = found
    if not axes:
        return _finish(rw, op, x)
    shape = tensor_type(x).shape
    count = math.prod(shape[a] for a in axes)
    total = reduce_at_once(rw, "tosa.reduce_sum", x, axes)
    rank = len(tensor_type(total).shape)
    if _element_name(x) == "i32":
        divided = build.op(rw, "tosa.intdiv", [total, scalar(rw, count, i32, rank)],
                           tensor_type(total))
        return _finish(rw, op, divided)
    scaled = build.mul(rw, total, scalar(rw, 1.0 / count, element(x), rank))
    return _finish(rw, op, scaled)


# ---------------------------------------------------------------------------
# ARG_MAX / ARG_MIN


def _arg_axis(op: Op) -> int | Failure:
    rank = len(tensor_type(op.operands[0]).shape)
    axes = constant_axes(op, 1, rank)
    if isinstance(axes, Failure):
        return axes
    if len(axes) != 1:
        return Failure(f"{op.name}: needs exactly one axis, got {axes}")
    return axes[0]


def iota(rw: Rewriter, size: int, axis: int, rank: int) -> Value:
    """The i32 constant 0, 1, ..., size - 1 along `axis`, shaped 1 elsewhere."""
    shape = [1] * rank
    shape[axis] = size
    return build.const(rw, np.arange(size, dtype=np.int32).reshape(shape), i32)


def first_index_of_extreme(rw: Rewriter, x: Value, axis: int, extreme: str) -> Value:
    """The first index along `axis` where i32 `x` equals its REDUCE_MAX or
    REDUCE_MIN (`extreme`): SELECT(x == extreme, index, size) then REDUCE_MIN.
    The axis is kept with size 1."""
    t = tensor_type(x)
    rank, size = len(t.shape), t.shape[axis]
    target = reduce_each(rw, extreme, x, [axis])
    hit = build.op(rw, "tosa.equal", [x, target], t.with_element(i1))
    indices = build.op(rw, "tosa.select",
                       [hit, iota(rw, size, axis, rank), scalar(rw, size, i32, rank)],
                       t.with_element(i32))
    return reduce_each(rw, "tosa.reduce_min", indices, [axis])


def negate(rw: Rewriter, x: Value) -> Value:
    elem = element(x)
    return build.op(rw, "tosa.negate", [x, build.zero_point(rw, 0, elem),
                                        build.zero_point(rw, 0, elem)], tensor_type(x))


@pattern("tfl.arg_max", "tfl.arg_min", types=("f32", "f16", "i32", "bool"))
def arg_max_min(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Index of the first maximum (minimum) along the axis, as TFLite's
    reference ArgMinMax (a strict comparison keeps the first of equal values).

    Float: ARGMAX, for ARG_MIN of the NEGATE (exact). nan_mode IGNORE skips
    NaNs as TFLite's comparisons do, unless the first element is NaN (TFLite
    then answers 0). i32 and bool (cast to i32): the first index equal to the
    REDUCE_MAX / REDUCE_MIN, since TOSA's ARGMAX has no i32 mode.
    """
    failure = _check_elements(op, (*_FLOATS, "i32", "i1"))
    if failure is not None:
        return failure
    result = tensor_type(op.results[0])
    if storage_type(result.element).name != "i32":
        return Failure(f"{op.name} with {result.element} output: TOSA has no 64-bit integers "
                       "(convert with output_type=tf.int32)")
    axis = _arg_axis(op)
    if isinstance(axis, Failure):
        return axis
    x = op.operands[0]
    is_max = op.name == "tfl.arg_max"
    if _element_name(x) in _FLOATS:
        keys = x if is_max else negate(rw, x)
        return [build.op(rw, "tosa.argmax", [keys], result, axis=axis, nan_mode="IGNORE")]
    if _element_name(x) == "i1":
        x = build.cast(rw, x, i32)
    index = first_index_of_extreme(rw, x, axis, "tosa.reduce_max" if is_max
                                   else "tosa.reduce_min")
    return [reshape_to(rw, index, result.shape)]


# ---------------------------------------------------------------------------
# CUMSUM


def shifted(rw: Rewriter, x: Value, axis: int, distance: int, reverse: bool) -> Value:
    """`x` moved `distance` places along `axis` (towards higher indices, or lower
    ones if `reverse`), zero-filled: PAD then SLICE."""
    shape = tensor_type(x).shape
    padding = [0] * (2 * len(shape))
    padding[2 * axis + (1 if reverse else 0)] = distance
    padded = build.pad(rw, x, padding)
    start = [0] * len(shape)
    start[axis] = distance if reverse else 0
    return build.slice(rw, padded, start, shape)


@pattern("tfl.cumsum", types=("f32", "f16", "i32"))
def cumsum(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Prefix sums by log-step shifted adds (Hillis & Steele 1986): after the
    steps of distance 1, 2, 4, ... each element holds the sum of its prefix.

    `exclusive` shifts the input by one first; `reverse` shifts the other way.
    The float sums are formed as a tree instead of TFLite's left-to-right
    loop, so they may differ by a few ulps of the partial sums (the
    "arithmetic" tolerance). Unlike a MATMUL with a triangular 0/1 matrix,
    infinities do not turn into NaN (inf * 0).
    """
    found = _reduction_input(op, (*_FLOATS, "i32"))
    if isinstance(found, Failure):
        return found
    x, axes = found
    if len(axes) != 1:
        return Failure(f"{op.name}: needs exactly one axis, got {axes}")
    axis = axes[0]
    reverse = bool(op.attrs.get("reverse", False))
    size = tensor_type(x).shape[axis]
    total = shifted(rw, x, axis, 1, reverse) if op.attrs.get("exclusive", False) else x
    distance = 1
    while distance < size:
        total = build.op(rw, "tosa.add", [total, shifted(rw, total, axis, distance, reverse)],
                         tensor_type(total))
        distance *= 2
    return _finish(rw, op, total)


# ---------------------------------------------------------------------------
# TOPK_V2


def _float_top_indices(rw: Rewriter, keys: Value, k: int) -> list[Value]:
    """k rounds of ARGMAX (nan_mode IGNORE), each overwriting its pick with NaN
    so that later rounds skip it; a -inf input is still found in index order."""
    rows, size = tensor_type(keys).shape
    positions = iota(rw, size, 1, 2)
    nan = scalar(rw, np.nan, element(keys), 2)
    picks = []
    for round_ in range(k):
        index = build.op(rw, "tosa.argmax", [keys], TensorType((rows,), i32), axis=1,
                         nan_mode="IGNORE")
        picks.append(build.reshape(rw, index, (rows, 1)))
        if round_ + 1 < k:
            chosen = build.op(rw, "tosa.equal", [positions, picks[-1]],
                              TensorType((rows, size), i1))
            keys = build.op(rw, "tosa.select", [chosen, nan, keys], tensor_type(keys))
    return picks


def _int32_top_indices(rw: Rewriter, keys: Value, k: int) -> list[Value]:
    """k rounds over i32 keys (TOSA's ARGMAX has no i32 mode): the first index
    not taken yet whose key equals the REDUCE_MAX of the keys not taken yet.
    A `taken` mask, not a sentinel value, marks the picks, so inputs equal to
    the smallest i32 are still found in index order."""
    rows, size = tensor_type(keys).shape
    t = tensor_type(keys)
    flags = t.with_element(i1)
    positions = iota(rw, size, 1, 2)
    lowest = scalar(rw, np.iinfo(np.int32).min, i32, 2)
    beyond = scalar(rw, size, i32, 2)
    taken = build.const(rw, np.zeros((rows, size), dtype=np.bool_), i1)
    picks = []
    for round_ in range(k):
        free = build.op(rw, "tosa.logical_not", [taken], flags)
        remaining = build.op(rw, "tosa.select", [taken, lowest, keys], t)
        largest = reduce_each(rw, "tosa.reduce_max", remaining, [1])
        equal = build.op(rw, "tosa.equal", [remaining, largest], flags)
        hit = build.op(rw, "tosa.logical_and", [equal, free], flags)
        candidates = build.op(rw, "tosa.select", [hit, positions, beyond], t)
        picks.append(reduce_each(rw, "tosa.reduce_min", candidates, [1]))
        if round_ + 1 < k:
            chosen = build.op(rw, "tosa.equal", [positions, picks[-1]], flags)
            taken = build.op(rw, "tosa.logical_or", [taken, chosen], flags)
    return picks


@pattern("tfl.topk_v2", types=("f32", "f16", "i32"))
def topk_v2(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """The k largest along the last axis, largest first, ties by lower index
    (TFLite's TopContainer order), by k rounds of "first index of the largest
    not taken yet"; the values are then gathered from the input by index.

    Float rounds use ARGMAX and NaN masking, i32 rounds REDUCE_MAX and a mask
    (see the helpers). Float inputs holding NaN are outside TFLite's ordering
    and not reproduced.
    """
    failure = _check_elements(op, (*_FLOATS, "i32"))
    if failure is not None:
        return failure
    k_array = constant_value(op.operands[1])
    if k_array is None or k_array.size != 1:
        return Failure(f"{op.name}: k must be a constant scalar")
    k = int(np.ravel(k_array)[0])
    x = op.operands[0]
    values_type, indices_type = (tensor_type(v) for v in op.results)
    if storage_type(indices_type.element).name != "i32":
        return Failure(f"{op.name} with {indices_type.element} indices: TOSA has no 64-bit "
                       "integers")
    shape = tensor_type(x).shape
    size = shape[-1]
    if not 0 < k <= size:
        return Failure(f"{op.name}: k = {k} is outside [1, {size}] (an empty output is not a "
                       "TOSA tensor)")
    rows = math.prod(shape[:-1])
    keys = reshape_to(rw, x, (rows, size))
    top = _int32_top_indices if _element_name(x) == "i32" else _float_top_indices
    picks = top(rw, keys, k)
    indices = picks[0] if k == 1 else build.op(rw, "tosa.concat", picks,
                                               TensorType((rows, k), i32), axis=1)
    table = build.reshape(rw, x, (rows, size, 1))
    values = build.op(rw, "tosa.gather", [table, indices],
                      TensorType((rows, k, 1), element(x)))
    return [reshape_to(rw, values, values_type.shape),
            reshape_to(rw, indices, indices_type.shape)]


# ---------------------------------------------------------------------------
# Integer path: MEAN, SUM and REDUCE_PROD on quantized data

def reduced_axes(op: Op, rank: int) -> list[int] | Failure:
    """The constant axis operand as sorted, distinct, non-negative axes."""
    array = constant_value(op.operands[1])
    if array is None:
        return Failure(f"{op.name}: the axes are not a constant")
    axes = sorted({int(a) % rank for a in array.reshape(-1)}) if rank else []
    if any(not -rank <= int(a) < rank for a in array.reshape(-1)):
        return Failure(f"{op.name}: axis out of range for rank {rank}")
    return axes


# (input type, output type, input shape, reduced axes, elements each output sums)
Reduction = tuple[UniformQuantized, UniformQuantized, tuple[int, ...], list[int], int]


def reduction(op: Op, *storages: str) -> Reduction | Failure:
    """What every quantized reduction checks first: per-tensor input and output
    of one storage type, the reduced axes and how many elements each output sums."""
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
    return x_type, out_type, shape, axes, math.prod(shape[a] for a in axes)


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


# ---------------------------------------------------------------------------
# Integer path: ARG_MAX / ARG_MIN


@pattern("tfl.arg_max", "tfl.arg_min", kind="integer", label="arg_max_min_int",
         types=("i8", "u8"))
@integer_pattern
def arg_max_min_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """ARGMAX of the stored int8 values (uint8 through the int8 twin, which keeps
    the order). ARG_MIN: ARGMAX of BITWISE_NOT x = -1 - x, which reverses the
    order without overflow (NEGATE would wrap -128) and keeps ties, so the first
    index still wins as in TFLite's ArgMinMax."""
    elements = require_per_tensor(op, op.operands[:1], "i8", "ui8")
    if isinstance(elements, Failure):
        return elements
    result = tensor_type(op.results[0])
    if storage_type(result.element) != i32:
        return Failure(f"{op.name} with {result.element} output: TOSA has no 64-bit integers")
    x = op.operands[0]
    axes = constant_axes(op, 1, len(tensor_type(x).shape))
    if isinstance(axes, Failure):
        return axes
    if len(axes) != 1:
        return Failure(f"{op.name}: needs exactly one axis, got {axes}")
    keys = to_int8(rw, x)
    if op.name == "tfl.arg_min":
        keys = build.op(rw, "tosa.bitwise_not", [keys], tensor_type(keys).with_element(i8))
    return [build.op(rw, "tosa.argmax", [keys], result, axis=axes[0], nan_mode="PROPAGATE")]


# ---------------------------------------------------------------------------
# Integer path: REDUCE_MAX / REDUCE_MIN

_REDUCTIONS = {"tfl.reduce_max": "tosa.reduce_max", "tfl.reduce_min": "tosa.reduce_min"}


@pattern(*_REDUCTIONS, kind="integer", label="reduce_max_min_int", types=("i8", "u8", "i16"))
@integer_pattern
def reduce_max_min_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """REDUCE_MAX / REDUCE_MIN per axis on the stored values (uint8 through the
    int8 twin), then RESHAPE to the result: input and output share their
    quantization, as TFLite's kernel requires."""
    x, result = op.operands[0], op.results[0]
    shared = same_quantization(op, [x, result], ("i8", "ui8", "i16"))
    if isinstance(shared, Failure):
        return shared
    shape = tensor_type(x).shape
    if 0 in shape:
        return Failure(f"{op.name}: empty input")
    axes = constant_axes(op, 1, len(shape))
    if isinstance(axes, Failure):
        return axes
    reduced = reduce_each(rw, _REDUCTIONS[op.name], to_int8(rw, x), axes)
    if tensor_type(reduced).shape != tensor_type(result).shape:
        reduced = build.reshape(rw, reduced, tensor_type(result).shape)
    elif reduced is x:
        reduced = build.op(rw, "tosa.identity", [x], tensor_type(x))
    return [restore_uint8(rw, reduced, result)]
