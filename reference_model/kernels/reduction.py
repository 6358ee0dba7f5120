"""Reduction operators (TOSA 1.0 chapter "Reduction Operators").

Each reduces one `axis` and keeps it with size 1. Integer sums REQUIRE that
every partial sum fits the type. Float MAX/MIN give the result of the
pseudocode's sequential `apply_max_s`/`apply_min_s` fold (the sign of equal
zeros and the NaN handling included), worked out with whole-array reductions. Float PRODUCT follows the pseudocode's order: a
sequential accumulation in in_out_t, each step rounded (numpy's cumulative
product is sequential), so an intermediate overflow gives infinity just as the
pseudocode does.

Float SUM is held to the specification's accuracy requirement instead of one
accumulation order: each output is a dot product of the input vector with a
vector of ones and must meet the dot-product accuracy requirement against the
fp64 sum (any order of additions in acc_t is allowed, so an implementation may
not be judged by where a particular order overflows). The fp64 sum rounded once
to in_out_t meets it for every order-independent bound, and overflows to
infinity only when the sum itself does not fit.
"""

from __future__ import annotations

import numpy as np

from reference_model import numerics
from reference_model.kernels import (
    KernelContext,
    KernelNeeded,
    Prepared,
    StaticOp,
    is_float_dtype,
    kernel,
    prepared,
)
from tfl2tosa.tosa import rules


def _axis(ctx: KernelContext) -> int:
    x = ctx.inputs[0]
    axis = int(ctx.attrs["axis"])
    ctx.check(rules.reduce_problems(x.shape, axis, ctx.output_shape()))
    return axis


@kernel("REDUCE_ALL")
def reduce_all(ctx: KernelContext) -> list[np.ndarray]:
    axis = _axis(ctx)
    return [np.all(ctx.inputs[0], axis=axis, keepdims=True)]


@kernel("REDUCE_ANY")
def reduce_any(ctx: KernelContext) -> list[np.ndarray]:
    axis = _axis(ctx)
    return [np.any(ctx.inputs[0], axis=axis, keepdims=True)]


def _float_extreme(ctx: KernelContext, largest: bool) -> np.ndarray:
    """Float REDUCE_MAX (largest) / REDUCE_MIN with the pseudocode's sequential result.

    The pseudocode folds `acc = apply_max_s(acc, v)` (`acc >= v ? acc : v`) or
    `apply_min_s` (`acc < v ? acc : v`) along the axis from minimum_s/maximum_s
    (-inf/+inf) or, with nan_mode IGNORE, from NaN. Worked out per slice:
    PROPAGATE: any NaN makes every later step return NaN, else the extreme value.
    IGNORE: compare_nan returns the operand that is not NaN, so NaNs are skipped;
    an all-NaN slice returns its last element (compare_nan(NaN, v) is v).
    Ties only differ for zeros: max keeps acc on a tie, so the FIRST zero's sign
    wins; min takes v on a tie, so the LAST zero's sign wins.
    """
    x, axis = ctx.inputs[0], _axis(ctx)
    ignore = ctx.attrs.get("nan_mode", "PROPAGATE") == "IGNORE"
    if x.shape[axis] == 0:
        start = np.nan if ignore else (-np.inf if largest else np.inf)
        return np.full(x.shape[:axis] + (1,) + x.shape[axis + 1:], start, dtype=x.dtype)
    return _nonempty_float_extreme(x, axis, largest, ignore)


def _nonempty_float_extreme(x: np.ndarray, axis: int, largest: bool,
                            ignore: bool) -> np.ndarray:
    """_float_extreme along an axis of nonzero length."""
    with np.errstate(invalid="ignore"):
        if ignore:
            reduce = np.fmax.reduce if largest else np.fmin.reduce
        else:
            reduce = np.maximum.reduce if largest else np.minimum.reduce
        result = reduce(x, axis=axis, keepdims=True)
    nan = np.isnan(result)
    if nan.any():
        # PROPAGATE returns compare_nan's fresh NaN; IGNORE the slice's last NaN.
        fill = np.take(x, [-1], axis=axis) if ignore else np.asarray(np.nan, x.dtype)
        result = np.where(nan, fill, result)
    zero = result == 0
    if zero.any():
        result = np.where(zero, _zero_that_wins(x, axis, first=largest), result)
    return result


def _zero_that_wins(x: np.ndarray, axis: int, first: bool) -> np.ndarray:
    """The first (or last) zero of each slice along axis, with its sign (0 if none)."""
    zeros = x == 0
    if first:
        index = np.argmax(zeros, axis=axis, keepdims=True)
    else:
        index = x.shape[axis] - 1 - np.argmax(np.flip(zeros, axis=axis), axis=axis,
                                              keepdims=True)
    return np.take_along_axis(x, index, axis=axis)


@kernel("REDUCE_MAX")
def reduce_max(ctx: KernelContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if is_float_dtype(x.dtype):
        return [_float_extreme(ctx, largest=True)]
    return [np.max(x, axis=_axis(ctx), keepdims=True)]


@kernel("REDUCE_MIN")
def reduce_min(ctx: KernelContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if is_float_dtype(x.dtype):
        return [_float_extreme(ctx, largest=False)]
    return [np.min(x, axis=_axis(ctx), keepdims=True)]


def _last(cumulative: np.ndarray, axis: int) -> np.ndarray:
    return np.take(cumulative, [-1], axis=axis)


@kernel("REDUCE_SUM")
def reduce_sum(ctx: KernelContext) -> list[np.ndarray]:
    x, axis = ctx.inputs[0], _axis(ctx)
    if is_float_dtype(x.dtype):
        # The fp64 sum's error, at most (n - 1) * 2^-53 * sum|x| (Higham, Accuracy and
        # Stability of Numerical Algorithms, eq. 4.4), is far inside the bound for any
        # acc_t (fp16, fp32); the final rounding to in_out_t is the only visible one.
        with np.errstate(all="ignore"):
            total = np.sum(x.astype(np.float64), axis=axis, keepdims=True)
        return [numerics.round_to_float(total, x.dtype)]
    # apply_add_s on every partial sum: each must fit the type.
    return [numerics.checked_sum(x, axis, x.dtype.itemsize * 8).astype(x.dtype)]


@kernel("REDUCE_PRODUCT")
def reduce_product(ctx: KernelContext) -> list[np.ndarray]:
    # acc = apply_mul_s<in_out_t>(acc, value): every partial product rounds to in_out_t.
    x, axis = ctx.inputs[0], _axis(ctx)
    with np.errstate(all="ignore"):
        return [_last(np.cumprod(x, axis=axis, dtype=x.dtype), axis)]


# ---------------------------------------------------------------------------
# Prepared forms: the axis and the static shapes checked once


def _static_axis(op: StaticOp) -> int | None:
    """The axis, when the input shape is static and the declared result keeps the
    axis with size 1 (else the kernel reports the ERROR_IF)."""
    shape, out = op.static_shape(0), op.static_shape(0, output=True)
    axis = op.attrs.get("axis")
    if shape is None or out is None or axis.__class__ is not int \
            or not 0 <= axis < len(shape) or 0 in shape:
        return None
    if out != shape[:axis] + (1,) + shape[axis + 1:]:
        return None
    return axis


_INT32 = np.dtype(np.int32)


@prepared("REDUCE_SUM")
def prepare_reduce_sum(op: StaticOp) -> Prepared | None:
    """int32: the int64 running sums along the axis (exact: fewer than 2^32 terms
    below 2^31), every one REQUIREd to fit int32 by min/max, the last kept."""
    axis = _static_axis(op)
    element = op.element(0)
    if axis is None or element is None or element.name != "i32":
        return None
    last = (slice(None),) * axis + (slice(-1, None),)
    low, high = numerics.int_min(32), numerics.int_max(32)
    smallest, largest = np.minimum.reduce, np.maximum.reduce

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        # The running sums in place in an int64 copy (np.cumsum's wrapper and a
        # casting loop cost more on small tensors).
        prefix = operands[0].astype(np.int64)
        np.add.accumulate(prefix, axis=axis, out=prefix)
        flat = prefix.reshape(-1)
        if smallest(flat) < low or largest(flat) > high:
            raise KernelNeeded  # reports the partial-sum REQUIRE
        return [prefix[last].astype(_INT32)]
    return run


@prepared("REDUCE_MAX", "REDUCE_MIN")
def prepare_reduce_extreme(op: StaticOp) -> Prepared | None:
    """Integer REDUCE_MAX / REDUCE_MIN: one ufunc reduction, as the kernel's np.max.
    fp32: the kernel's own _nonempty_float_extreme, its axis and mode checked once."""
    axis = _static_axis(op)
    element = op.element(0)
    if axis is None or element is None:
        return None
    largest = op.op_name == "REDUCE_MAX"
    if element.name == "f32":
        nan_mode = op.attrs.get("nan_mode", "PROPAGATE")
        if nan_mode not in ("PROPAGATE", "IGNORE"):
            return None
        ignore = nan_mode == "IGNORE"

        def run_fp32(operands: list[np.ndarray]) -> list[np.ndarray]:
            return [_nonempty_float_extreme(operands[0], axis, largest, ignore)]
        return run_fp32
    if not element.is_integer:
        return None
    reduce = np.maximum.reduce if largest else np.minimum.reduce

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        return [reduce(operands[0], axis=axis, keepdims=True)]
    return run
