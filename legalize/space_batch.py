"""Patterns for TFL block rearrangements: SPACE_TO_DEPTH, DEPTH_TO_SPACE,
SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND, each a RESHAPE / TRANSPOSE / RESHAPE
(with a PAD or a SLICE for the ND forms); type-generic moves, see
`legalize.shape`.
"""

from __future__ import annotations

import math

from legalize.common import element
from legalize.registry import pattern
from legalize.shape import (
    MOVE_TYPES,
    finish,
    int_list,
    pad_value,
    pad_with,
    require_move,
    reshape_to,
    shape_of,
    slice_of,
)
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.tosa import build

# ---------------------------------------------------------------------------
# Space <-> depth


def _swap_block_axes(rw: Rewriter, op: Op, split_shape: list[int]) -> Value:
    """op's input RESHAPEd to the rank-6 `split_shape`, axes 2 and 3 swapped
    (TRANSPOSE (0,1,3,2,4,5)), RESHAPEd to op's result."""
    x = reshape_to(rw, op.operands[0], split_shape)
    return finish(rw, build.transpose(rw, x, [0, 1, 3, 2, 4, 5]), op.result)


@pattern("tfl.space_to_depth", kind="any", types=MOVE_TYPES)
def space_to_depth(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """[N,H,W,C] -> RESHAPE [N,H/b,b,W/b,b,C] -> TRANSPOSE (0,1,3,2,4,5) -> RESHAPE
    [N,H/b,W/b,b*b*C] (TFLite's depth order: block row, block column, channel)."""
    failed = require_move(op)
    if failed is not None:
        return failed
    n, h, w, c = shape_of(op.operands[0])
    b = int(op.attrs["block_size"])
    return [_swap_block_axes(rw, op, [n, h // b, b, w // b, b, c])]


@pattern("tfl.depth_to_space", kind="any", types=MOVE_TYPES)
def depth_to_space(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """[N,H,W,C] -> RESHAPE [N,H,W,b,b,C/b²] -> TRANSPOSE (0,1,3,2,4,5) -> RESHAPE
    [N,H*b,W*b,C/b²] (the inverse of SPACE_TO_DEPTH, DCR order)."""
    failed = require_move(op)
    if failed is not None:
        return failed
    n, h, w, c = shape_of(op.operands[0])
    b = int(op.attrs["block_size"])
    return [_swap_block_axes(rw, op, [n, h, w, b, b, c // (b * b)])]


# ---------------------------------------------------------------------------
# Space <-> batch


def _block_params(op: Op) -> tuple[list[int], list[int]] | Failure:
    """SPACE_TO_BATCH_ND's block shape and paddings, BATCH_TO_SPACE_ND's block
    shape and crops: constants, one (before, after) pair per block dim."""
    failed = require_move(op)
    if failed is not None:
        return failed
    rank = len(shape_of(op.operands[0]))
    block = int_list(op.operands[1])
    pads = int_list(op.operands[2])
    if block is None or pads is None:
        return Failure(f"{op.name}: block shape and paddings/crops must be constants")
    if len(pads) != 2 * len(block) or len(block) + 1 > rank or min(block) < 1:
        return Failure(f"{op.name}: block shape {block} does not fit rank {rank}")
    return block, pads


@pattern("tfl.space_to_batch_nd", kind="any", types=MOVE_TYPES)
def space_to_batch_nd(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """PAD the spatial dims (with the zero point when quantized, as TFLite's
    output_offset), RESHAPE [N, S1/b1, b1, ..., R], TRANSPOSE the block dims to
    the front, RESHAPE [N*prod(b), S1/b1, ..., R]."""
    params = _block_params(op)
    if isinstance(params, Failure):
        return params
    x = op.operands[0]
    shape = shape_of(x)
    block, pads = params
    m = len(block)
    padding = [0, 0, *pads] + [0, 0] * (len(shape) - 1 - m)
    if any(padding):
        x = pad_with(rw, x, padding, pad_value(element(x)))
    padded = shape_of(x)
    spatial = [padded[1 + i] // block[i] for i in range(m)]
    rest = list(padded[1 + m:])
    split_shape = [padded[0]]
    for s, b in zip(spatial, block):
        split_shape += [s, b]
    x = reshape_to(rw, x, split_shape + rest)
    # [N, s1, b1, s2, b2, ..., R] -> [b1, b2, ..., N, s1, s2, ..., R]
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)]
    perm += list(range(1 + 2 * m, 1 + 2 * m + len(rest)))
    x = build.transpose(rw, x, perm)
    return [finish(rw, x, op.result)]


@pattern("tfl.batch_to_space_nd", kind="any", types=MOVE_TYPES)
def batch_to_space_nd(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """RESHAPE [b1, ..., bm, N, S1, ..., R], TRANSPOSE to [N, S1, b1, ..., R],
    RESHAPE [N, S1*b1, ..., R], SLICE off the crops."""
    params = _block_params(op)
    if isinstance(params, Failure):
        return params
    x = op.operands[0]
    shape = shape_of(x)
    block, crops = params
    m = len(block)
    batch = shape[0] // math.prod(block)
    spatial = list(shape[1:1 + m])
    rest = list(shape[1 + m:])
    x = reshape_to(rw, x, block + [batch] + spatial + rest)
    # [b1..bm, N, S1..Sm, R] -> [N, S1, b1, S2, b2, ..., R]
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += list(range(1 + 2 * m, 1 + 2 * m + len(rest)))
    x = build.transpose(rw, x, perm)
    full = [batch] + [s * b for s, b in zip(spatial, block)] + rest
    x = reshape_to(rw, x, full)
    start = [0] + [crops[2 * i] for i in range(m)] + [0] * len(rest)
    size = [batch] + [full[1 + i] - crops[2 * i] - crops[2 * i + 1] for i in range(m)] + rest
    return [finish(rw, slice_of(rw, x, start, size), op.result)]
