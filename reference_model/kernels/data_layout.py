"""Data layout operators (TOSA 1.0 chapter "Data Layout"): exact moves of elements.

`shape_t` operands (PAD padding, RESHAPE shape, SLICE start/size, TILE
multiples) arrive as 1-D int64 arrays.
"""

from __future__ import annotations

import math

import numpy as np

from reference_model.kernels import KernelContext, Prepared, StaticOp, kernel, prepared
from tfl2tosa.tosa import rules


def _ints(values: np.ndarray) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]


@kernel("CONCAT")
def concat(ctx: KernelContext) -> list[np.ndarray]:
    tensors = ctx.inputs
    axis = int(ctx.attrs["axis"])
    ctx.check(rules.concat_problems([t.shape for t in tensors], axis, ctx.output_shape()))
    return [np.concatenate(tensors, axis=axis)]


@kernel("PAD")
def pad(ctx: KernelContext) -> list[np.ndarray]:
    x, padding = ctx.inputs[0], _ints(ctx.inputs[1])
    pad_const = np.asarray(ctx.inputs[2]).reshape(-1)[0] if len(ctx.inputs) > 2 else 0
    ctx.check(rules.pad_problems(x.shape, padding, ctx.output_shape()))
    widths = [(padding[2 * i], padding[2 * i + 1]) for i in range(x.ndim)]
    return [np.pad(x, widths, mode="constant", constant_values=pad_const)]


@kernel("RESHAPE")
def reshape(ctx: KernelContext) -> list[np.ndarray]:
    x, shape = ctx.inputs[0], _ints(ctx.inputs[1])
    ctx.check(rules.reshape_problems(x.shape, shape, ctx.output_shape()))
    return [x.reshape(shape)]


@kernel("REVERSE")
def reverse(ctx: KernelContext) -> list[np.ndarray]:
    x, axis = ctx.inputs[0], int(ctx.attrs["axis"])
    ctx.check(rules.reverse_problems(x.shape, axis, ctx.output_shape()))
    return [np.flip(x, axis=axis)]


@kernel("SLICE")
def slice_(ctx: KernelContext) -> list[np.ndarray]:
    x, start, size = ctx.inputs[0], _ints(ctx.inputs[1]), _ints(ctx.inputs[2])
    ctx.check(rules.slice_problems(x.shape, start, size, ctx.output_shape()))
    window = tuple(slice(s, s + n) for s, n in zip(start, size))
    return [x[window].copy()]


@kernel("TILE")
def tile(ctx: KernelContext) -> list[np.ndarray]:
    x, multiples = ctx.inputs[0], _ints(ctx.inputs[1])
    ctx.check(rules.tile_problems(x.shape, multiples, ctx.output_shape()))
    return [np.tile(x, multiples) if x.ndim else x.copy()]


@kernel("TRANSPOSE")
def transpose(ctx: KernelContext) -> list[np.ndarray]:
    x, perms = ctx.inputs[0], [int(p) for p in ctx.attrs["perms"]]
    ctx.check(rules.transpose_problems(x.shape, perms, ctx.output_shape()))
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
