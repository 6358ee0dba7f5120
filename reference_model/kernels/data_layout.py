"""Data layout operators (TOSA 1.0 chapter "Data Layout"): exact moves of elements.

`shape_t` operands (PAD padding, RESHAPE shape, SLICE start/size, TILE
multiples) arrive as 1-D int64 arrays.
"""

from __future__ import annotations

import math

import numpy as np

from reference_model.kernels import KernelContext, Prepared, StaticOp, kernel, prepared


def _ints(values: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]


@kernel("CONCAT")
def concat(ctx: KernelContext) -> list[np.ndarray]:
    tensors = ctx.inputs
    ctx.error_if(not tensors, "CONCAT needs at least one input")
    axis = int(ctx.attrs["axis"])
    rank = tensors[0].ndim
    ctx.error_if(axis < 0 or axis >= max(1, rank), f"axis {axis} is out of range for rank {rank}")
    for i, tensor in enumerate(tensors):
        ctx.error_if(tensor.ndim != rank, f"input {i} has rank {tensor.ndim}, input 0 has {rank}")
        for d in range(rank):
            ctx.error_if(d != axis and tensor.shape[d] != tensors[0].shape[d],
                         f"input {i} has shape {tensor.shape}, input 0 has "
                         f"{tensors[0].shape} (only axis {axis} may differ)")
    return [np.concatenate(tensors, axis=axis)]


@kernel("PAD")
def pad(ctx: KernelContext) -> list[np.ndarray]:
    x, padding = ctx.inputs[0], _ints(ctx.inputs[1])
    pad_const = np.asarray(ctx.inputs[2]).reshape(-1)[0] if len(ctx.inputs) > 2 else 0
    ctx.error_if(len(padding) != 2 * x.ndim,
                 f"padding has {len(padding)} values; rank {x.ndim} needs {2 * x.ndim}")
    ctx.error_if(any(p < 0 for p in padding), f"negative padding {padding}")
    # The argument table gives input1 rank 1 to MAX_RANK (Arm's model checks it too).
    ctx.error_if(x.ndim == 0, "PAD of a rank-0 tensor")
    widths = [(padding[2 * i], padding[2 * i + 1]) for i in range(x.ndim)]
    ctx.expect_output_shape(tuple(d + lo + hi for d, (lo, hi) in zip(x.shape, widths)))
    return [np.pad(x, widths, mode="constant", constant_values=pad_const)]


@kernel("RESHAPE")
def reshape(ctx: KernelContext) -> list[np.ndarray]:
    x, shape = ctx.inputs[0], _ints(ctx.inputs[1])
    ctx.error_if(any(d < 0 for d in shape), f"shape {shape} has a negative dimension")
    ctx.error_if(math.prod(shape) != x.size,  # Python integers: no wrap-around
                 f"shape {shape} holds {math.prod(shape)} elements, the input {x.size}")
    return [x.reshape(shape)]


@kernel("REVERSE")
def reverse(ctx: KernelContext) -> list[np.ndarray]:
    x, axis = ctx.inputs[0], int(ctx.attrs["axis"])
    ctx.error_if(axis < 0 or axis >= x.ndim, f"axis {axis} is out of range for rank {x.ndim}")
    return [np.flip(x, axis=axis)]


@kernel("SLICE")
def slice_(ctx: KernelContext) -> list[np.ndarray]:
    x, start, size = ctx.inputs[0], _ints(ctx.inputs[1]), _ints(ctx.inputs[2])
    ctx.error_if(len(start) != x.ndim or len(size) != x.ndim,
                 f"start {start} and size {size} must each have rank {x.ndim} values")
    for d in range(x.ndim):
        ctx.error_if(start[d] < 0, f"start[{d}] = {start[d]} < 0")
        ctx.error_if(size[d] <= 0, f"size[{d}] = {size[d]} <= 0")
        ctx.error_if(start[d] + size[d] > x.shape[d],
                     f"start[{d}] + size[{d}] = {start[d] + size[d]} > {x.shape[d]}")
    window = tuple(slice(s, s + n) for s, n in zip(start, size))
    return [x[window].copy()]


@kernel("TILE")
def tile(ctx: KernelContext) -> list[np.ndarray]:
    x, multiples = ctx.inputs[0], _ints(ctx.inputs[1])
    ctx.error_if(len(multiples) != x.ndim,
                 f"multiples {multiples} must have rank {x.ndim} values")
    ctx.error_if(any(m <= 0 for m in multiples), f"multiples {multiples} must be positive")
    ctx.expect_output_shape(tuple(d * m for d, m in zip(x.shape, multiples)))
    return [np.tile(x, multiples) if x.ndim else x.copy()]


@kernel("TRANSPOSE")
def transpose(ctx: KernelContext) -> list[np.ndarray]:
    x, perms = ctx.inputs[0], [int(p) for p in ctx.attrs["perms"]]
    ctx.error_if(sorted(perms) != list(range(x.ndim)),
                 f"perms {perms} is not a permutation of 0..{x.ndim - 1}")
    return [np.transpose(x, perms).copy()]


# ---------------------------------------------------------------------------
# Prepared forms: constant shape operands and static shapes checked once


@prepared("RESHAPE")
def prepare_reshape(op: StaticOp) -> Prepared | None:
    shape = op.constants[1] if len(op.constants) > 1 else None
    in_shape, out_shape = op.static_shape(0), op.static_shape(0, output=True)
    if shape is None or in_shape is None or shape.dtype.kind not in "iu":
        return None
    new_shape = tuple(shape.reshape(-1).tolist())
    if new_shape != out_shape or min(new_shape, default=0) < 0 \
            or math.prod(new_shape) != math.prod(in_shape):
        return None

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        return [operands[0].reshape(new_shape)]
    return run


@prepared("SLICE")
def prepare_slice(op: StaticOp) -> Prepared | None:
    if len(op.constants) < 3:
        return None
    start, size = op.constants[1], op.constants[2]
    in_shape = op.static_shape(0)
    if start is None or size is None or in_shape is None or start.dtype.kind not in "iu" \
            or size.dtype.kind not in "iu":
        return None
    start, size = start.reshape(-1).tolist(), size.reshape(-1).tolist()
    if len(start) != len(in_shape) or len(size) != len(in_shape):
        return None
    for first, count, dim in zip(start, size, in_shape):
        if first < 0 or count <= 0 or first + count > dim:
            return None
    window = tuple(slice(first, first + count) for first, count in zip(start, size))

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        return [operands[0][window].copy()]
    return run


@prepared("CONCAT")
def prepare_concat(op: StaticOp) -> Prepared | None:
    """Static shapes that agree off the axis and sum to the declared one on it."""
    axis = op.attrs.get("axis")
    out = op.static_shape(0, output=True)
    shapes = [op.static_shape(i) for i in range(len(op.input_types))]
    if out is None or axis.__class__ is not int or not shapes or not 0 <= axis < len(out) \
            or any(shape is None or len(shape) != len(out) for shape in shapes):
        return None
    off_axis = out[:axis] + out[axis + 1:]
    if any(shape[:axis] + shape[axis + 1:] != off_axis for shape in shapes) \
            or sum(shape[axis] for shape in shapes) != out[axis]:
        return None

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        return [np.concatenate(operands, axis=axis)]
    return run


@prepared("TRANSPOSE")
def prepare_transpose(op: StaticOp) -> Prepared | None:
    perms = op.attrs.get("perms")
    shape, out = op.static_shape(0), op.static_shape(0, output=True)
    if shape is None or out is None or perms is None:
        return None
    perms = tuple(int(p) for p in perms)
    if sorted(perms) != list(range(len(shape))) or out != tuple(shape[p] for p in perms):
        return None

    def run(operands: list[np.ndarray]) -> list[np.ndarray]:
        return [operands[0].transpose(perms).copy()]
    return run
