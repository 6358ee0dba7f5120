"""Patterns for TFL padding: PAD, PADV2 (TOSA PAD) and MIRROR_PAD (reversed
SLICEs CONCATenated around the input); type-generic moves, see `legalize.shape`.
"""

from __future__ import annotations

from legalize.common import constant_value, element, is_none
from legalize.registry import pattern
from legalize.shape import (
    MOVE_TYPES,
    concat,
    finish,
    identity,
    int_list,
    pad_value,
    pad_with,
    require_move,
    reverse_axis,
    shape_of,
    slice_along,
)
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter


def _paddings(op: Op, rank: int) -> list[int] | Failure:
    padding = int_list(op.operands[1])
    if padding is None or len(padding) != 2 * rank:
        return Failure(f"{op.name}: paddings must be a constant [rank, 2] tensor")
    if min(padding) < 0:
        return Failure(f"{op.name}: negative padding")
    return padding


@pattern("tfl.pad", "tfl.padv2", kind="any", types=MOVE_TYPES)
def pad(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """PAD with the constant paddings. The pad value is PADV2's constant operand,
    else real 0: for quantized data the ZERO POINT (TFLite pad.cc pads with
    output->params.zero_point), never the stored integer 0."""
    failed = require_move(op)
    if failed is not None:
        return failed
    x = op.operands[0]
    padding = _paddings(op, len(shape_of(x)))
    if isinstance(padding, Failure):
        return padding
    value: int | float = pad_value(element(x))
    if len(op.operands) > 2 and not is_none(op.operands[2]):
        given = constant_value(op.operands[2])
        if given is None or given.size != 1:
            return Failure(f"{op.name}: the pad value must be a constant scalar")
        if element(op.operands[2]) != element(x):
            return Failure(f"{op.name}: the pad value is quantized differently from the input")
        value = given.reshape(-1)[0].item()
    if not any(padding):
        return [identity(rw, x)]
    return [pad_with(rw, x, padding, value)]


@pattern("tfl.mirror_pad", kind="any", types=MOVE_TYPES)
def mirror_pad(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Per axis: CONCAT [reversed SLICE, x, reversed SLICE]. REFLECT mirrors
    around the edge element (excluded), SYMMETRIC includes it."""
    failed = require_move(op)
    if failed is not None:
        return failed
    x = op.operands[0]
    shape = shape_of(x)
    padding = _paddings(op, len(shape))
    if isinstance(padding, Failure):
        return padding
    reflect = op.attrs.get("mode", "REFLECT") == "REFLECT"
    for axis, size in enumerate(shape):
        before, after = padding[2 * axis], padding[2 * axis + 1]
        if not before and not after:
            continue
        skip = 1 if reflect else 0
        if max(before, after) + skip > size:
            return Failure(f"{op.name}: padding {before},{after} exceeds axis size {size}")
        parts = []
        if before:
            parts.append(_mirrored(rw, x, axis, skip, before))
        parts.append(x)
        if after:
            parts.append(_mirrored(rw, x, axis, size - skip - after, after))
        x = concat(rw, parts, axis)
    return [finish(rw, x, op.result)]


def _mirrored(rw: Rewriter, x: Value, axis: int, start: int, count: int) -> Value:
    return reverse_axis(rw, slice_along(rw, x, axis, start, count), axis)
