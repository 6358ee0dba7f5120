"""Patterns for TFL reductions: MEAN, SUM, REDUCE_MAX/MIN/PROD/ANY/ALL,
ARG_MAX/ARG_MIN, CUMSUM and TOPK_V2 (float path; int32 and bool where TOSA has
the operation).

TOSA reduces one axis at a time and keeps it with size 1; TFLite reduces a
constant list of axes (negative ones count from the end, duplicates are
allowed) and drops them unless `keep_dims`. Order-insensitive reductions
(max, min, any, all) chain one TOSA reduction per axis. SUM, PROD and MEAN
bring the reduced axes together and reduce them in one step, because TFLite's
reference kernel (`reference_ops::ReduceGeneric`, `MeanGeneral`) accumulates
every output element sequentially over the reduced elements in memory order:
one reduction rounds once, as TFLite's does at the end, where a chain would
round between axes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from legalize.common import (
    constant_value,
    element,
    require_static,
    scalar,
    tensor_type,
)
from legalize.registry import pattern
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import TensorType, i1, i32, storage_type
from tfl2tosa.tosa import build

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
