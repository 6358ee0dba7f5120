"""Scatter/gather operators (TOSA 1.0 chapter "Scatter/Gather Operators"), 3-D forms.

GATHER:  values[N,K,C], indices[N,W] -> output[N,W,C],  output[n,w,:] = values[n, indices[n,w], :]
SCATTER: values_in[N,K,C], indices[N,W], input[N,W,C] -> values_out[N,K,C]
"""

from __future__ import annotations

import numpy as np

from reference_model.kernels import (KernelContext, KernelNeeded, Prepared, StaticOp, kernel,
                                     prepared)
from tfl2tosa.tosa import rules


def _check_indices(ctx: KernelContext, indices: np.ndarray, n: int, k: int) -> None:
    ctx.require((indices >= 0) & (indices < k), f"0 <= index < K={k}")


@kernel("GATHER")
def gather(ctx: KernelContext) -> list[np.ndarray]:
    values, indices = ctx.inputs
    ctx.check(rules.gather_problems(values.shape, indices.shape, ctx.output_shape()))
    n, k, c = values.shape
    _check_indices(ctx, indices, n, k)
    rows = np.arange(n)[:, None]
    return [values[rows, indices.astype(np.int64)]]


@kernel("SCATTER")
def scatter(ctx: KernelContext) -> list[np.ndarray]:
    values_in, indices, updates = ctx.inputs
    ctx.check(rules.scatter_problems(values_in.shape, indices.shape, updates.shape,
                                     ctx.output_shape()))
    n, k, c = values_in.shape
    _check_indices(ctx, indices, n, k)
    # Each output position may be written at most once: indices unique per batch
    # (sorted along W, no two neighbours equal). The first batch that repeats one is named.
    ordered = np.sort(indices, axis=1)
    repeats = np.flatnonzero((ordered[:, 1:] == ordered[:, :-1]).any(axis=1))
    if repeats.size:
        ctx.require(False, f"indices of batch {int(repeats[0])} are unique")
    values_out = values_in.copy()
    rows = np.arange(n)[:, None]
    values_out[rows, indices.astype(np.int64)] = updates
    return [values_out]


@prepared("GATHER")
def prepare_gather(op: StaticOp) -> Prepared | None:
    """GATHER with static shapes: the shape ERROR_IFs checked once, the index REQUIRE
    by min/max per run (a failing one runs the kernel, which reports it)."""
    values_shape, indices_shape = op.static_shape(0), op.static_shape(1)
    if values_shape is None or indices_shape is None or len(values_shape) != 3 \
            or len(indices_shape) != 2 or indices_shape[0] != values_shape[0] \
            or op.static_shape(0, output=True) != (values_shape[0], indices_shape[1],
                                                   values_shape[2]):
        return None
    k = values_shape[1]
    rows = np.arange(values_shape[0])[:, None]

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        values, indices = operands
        indices = indices.astype(np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= k):
            raise KernelNeeded
        return [values[rows, indices]]
    return run
