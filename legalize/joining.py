"""Patterns for TFL ops that join or repeat tensors: CONCATENATION, PACK, TILE,
BROADCAST_TO (TOSA CONCAT and TILE); type-generic moves, see `legalize.shape`.
"""

from __future__ import annotations

from legalize.common import fused_activation, tensor_type
from legalize.registry import pattern
from legalize.shape import (
    MOVE_TYPES,
    concat,
    finish,
    fresh,
    identity,
    int_list,
    normalize_axis,
    require_move,
    reshape_to,
    shape_of,
)
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.tosa import build


@pattern("tfl.concatenation", kind="any", types=MOVE_TYPES)
def concatenation(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """CONCAT along `axis`, then the fused activation.

    Quantized inputs must share the output's scale and zero point: TFLite
    requantizes otherwise, which is not a move (the fallback handles it).
    """
    failed = require_move(op, op.operands)
    if failed is not None:
        return failed
    rank = len(shape_of(op.result))
    axis = normalize_axis(int(op.attrs.get("axis", 0)), rank)
    parts = [v for v in op.operands if shape_of(v)[axis] > 0]
    if not parts:
        return Failure(f"{op.name}: the result is empty")
    joined = fresh(rw, concat(rw, parts, axis))
    return [fused_activation(rw, joined, op.attrs.get("fused_activation_function"))]


@pattern("tfl.pack", kind="any", types=MOVE_TYPES)
def pack(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Each input RESHAPEd to have a size-1 dimension at `axis`, then CONCAT."""
    failed = require_move(op, op.operands)
    if failed is not None:
        return failed
    out_shape = shape_of(op.result)
    axis = normalize_axis(int(op.attrs.get("axis", 0)), len(out_shape))
    piece = list(out_shape)
    piece[axis] = 1
    parts = [reshape_to(rw, v, piece) for v in op.operands]
    return [finish(rw, concat(rw, parts, axis), op.result)]


@pattern("tfl.tile", kind="any", types=MOVE_TYPES)
def tile(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TILE with the constant multiples."""
    failed = require_move(op)
    if failed is not None:
        return failed
    multiples = int_list(op.operands[1])
    if multiples is None:
        return Failure(f"{op.name}: multiples must be a constant")
    x = op.operands[0]
    if all(m == 1 for m in multiples):
        return [identity(rw, x)]
    return [build.op(rw, "tosa.tile", [x, build.const_shape(rw, multiples)],
                     tensor_type(op.result))]


@pattern("tfl.broadcast_to", kind="any", types=MOVE_TYPES)
def broadcast_to(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """RESHAPE to the output's rank (leading 1s), then TILE the size-1 dimensions."""
    failed = require_move(op)
    if failed is not None:
        return failed
    out_shape = shape_of(op.result)
    x = op.operands[0]
    in_shape = (1,) * (len(out_shape) - len(shape_of(x))) + shape_of(x)
    if any(i not in (1, o) for i, o in zip(in_shape, out_shape)):
        return Failure(f"{op.name}: {shape_of(x)} does not broadcast to {out_shape}")
    x = reshape_to(rw, x, in_shape)
    multiples = [o // i for i, o in zip(in_shape, out_shape)]
    if all(m == 1 for m in multiples):
        return [finish(rw, x, op.result)]
    return [build.op(rw, "tosa.tile", [x, build.const_shape(rw, multiples)],
                     tensor_type(op.result))]
