"""Comparison operators (TOSA 1.0 chapter "Comparison Operators").

Any comparison with a NaN is false and the sign of zero is ignored, which is
IEEE-754 ordered comparison: numpy's operators.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from reference_model.kernels import KernelContext, Prepared, StaticOp, broadcast_shape, kernel, \
    prepared
from reference_model.kernels.elementwise_binary import static_broadcast

_COMPARISONS = {"EQUAL": np.equal, "GREATER": np.greater, "GREATER_EQUAL": np.greater_equal}


def _compare(ctx: KernelContext, fn: Callable) -> list[np.ndarray]:
    a, b = ctx.inputs
    broadcast_shape(ctx, a.shape, b.shape)
    with np.errstate(invalid="ignore"):
        return [np.asarray(fn(a, b), dtype=np.bool_)]


@kernel("EQUAL")
def equal(ctx: KernelContext) -> list[np.ndarray]:
    return _compare(ctx, np.equal)


@kernel("GREATER")
def greater(ctx: KernelContext) -> list[np.ndarray]:
    return _compare(ctx, np.greater)


@kernel("GREATER_EQUAL")
def greater_equal(ctx: KernelContext) -> list[np.ndarray]:
    return _compare(ctx, np.greater_equal)


@prepared(*_COMPARISONS)
def prepare_comparison(op: StaticOp) -> Prepared | None:
    """Static shapes of rank 1 or more (a ufunc gives a rank-0 result as a scalar):
    numpy's comparison as the kernel."""
    element = op.element(0)
    out = op.static_shape(0, output=True)
    if element is None or not out or not static_broadcast(op):
        return None
    fn = _COMPARISONS[op.op_name]

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        return [fn(operands[0], operands[1])]
    return run
