"""Reduction operators (TOSA 1.0 chapter "Reduction Operators").

Each reduces one `axis` and keeps it with size 1. Integer sums REQUIRE that
every partial sum fits the type. Float MAX/MIN follow the pseudocode's
sequential `apply_max_s`/`apply_min_s` (so the sign of equal zeros and NaN
handling match it exactly). Float PRODUCT follows the pseudocode's order: a
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

from collections.abc import Callable

import numpy as np

from reference_model import numerics
from reference_model.kernels import KernelContext, is_float_dtype, kernel
from reference_model.kernels.elementwise_binary import float_max, float_min


def _axis(ctx: KernelContext) -> int:
    x = ctx.inputs[0]
    axis = int(ctx.attrs["axis"])
    ctx.error_if(axis < 0 or axis >= max(x.ndim, 1),
                 f"axis {axis} is out of range for rank {x.ndim}")
    ctx.expect_output_shape(x.shape[:axis] + (1,) + x.shape[axis + 1:])
    return axis


@kernel("REDUCE_ALL")
def reduce_all(ctx: KernelContext) -> list[np.ndarray]:
    axis = _axis(ctx)
    return [np.all(ctx.inputs[0], axis=axis, keepdims=True)]


@kernel("REDUCE_ANY")
def reduce_any(ctx: KernelContext) -> list[np.ndarray]:
    axis = _axis(ctx)
    return [np.any(ctx.inputs[0], axis=axis, keepdims=True)]


def _sequential(x: np.ndarray, axis: int, initial: np.ndarray,
                step: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """acc = initial; for each i along axis: acc = step(acc, x[..., i, ...])."""
    acc = np.broadcast_to(initial, np.take(x, [0], axis=axis).shape).astype(x.dtype)
    for i in range(x.shape[axis]):
        acc = step(acc, np.take(x, [i], axis=axis))
    return acc


def _float_extreme(ctx: KernelContext, pick: Callable, start: float) -> np.ndarray:
    x, axis = ctx.inputs[0], _axis(ctx)
    nan_mode = ctx.attrs.get("nan_mode", "PROPAGATE")
    # IGNORE starts from NaN so that an all-NaN slice stays NaN; PROPAGATE from -inf/+inf.
    initial = np.asarray(np.nan if nan_mode == "IGNORE" else start, dtype=x.dtype)
    return _sequential(x, axis, initial, lambda acc, v: pick(acc, v, nan_mode).astype(x.dtype))


@kernel("REDUCE_MAX")
def reduce_max(ctx: KernelContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if is_float_dtype(x.dtype):
        return [_float_extreme(ctx, float_max, -np.inf)]
    return [np.max(x, axis=_axis(ctx), keepdims=True)]


@kernel("REDUCE_MIN")
def reduce_min(ctx: KernelContext) -> list[np.ndarray]:
    x = ctx.inputs[0]
    if is_float_dtype(x.dtype):
        return [_float_extreme(ctx, float_min, np.inf)]
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
