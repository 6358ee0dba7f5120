"""Patterns for TFL reversals: REVERSE_V2 (one TOSA REVERSE per axis) and
REVERSE_SEQUENCE (SLICE, REVERSE and CONCAT per batch entry); type-generic
moves, see `legalize.shape`.
"""

from __future__ import annotations

from legalize.common import tensor_type
from legalize.registry import pattern
from legalize.shape import (
    MOVE_TYPES,
    concat,
    finish,
    identity,
    int_list,
    normalize_axis,
    require_move,
    reverse_axis,
    shape_of,
    slice_along,
)
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter


@pattern("tfl.reverse_v2", kind="any", types=MOVE_TYPES)
def reverse_v2(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """One REVERSE per constant axis. TFLite's kernel copies stored values whatever
    the quantization of its input and output (the int8 bidirectional LSTM has them
    differ), so the move is raw as well."""
    failed = require_move(op, raw=True)
    if failed is not None:
        return failed
    axes = int_list(op.operands[1])
    if axes is None:
        return Failure(f"{op.name}: the axes must be a constant")
    x = op.operands[0]
    rank = len(shape_of(x))
    for axis in sorted({normalize_axis(a, rank) for a in axes}):
        x = reverse_axis(rw, x, axis)
    reversed_values = finish(rw, x, op.result)
    # The copied stored values mean what the result's quantization says they do.
    reversed_values.type = tensor_type(op.result)
    return [reversed_values]


@pattern("tfl.reverse_sequence", kind="any", types=MOVE_TYPES)
def reverse_sequence(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Per batch entry b (constant seq_lengths L_b): SLICE it, REVERSE its first
    L_b steps along seq_dim, CONCAT the batch back together."""
    failed = require_move(op)
    if failed is not None:
        return failed
    lengths = int_list(op.operands[1])
    if lengths is None:
        return Failure(f"{op.name}: seq_lengths must be a constant")
    x = op.operands[0]
    shape = shape_of(x)
    seq_dim = normalize_axis(int(op.attrs.get("seq_dim", 0)), len(shape))
    batch_dim = normalize_axis(int(op.attrs.get("batch_dim", 0)), len(shape))
    if len(lengths) != shape[batch_dim] or not all(0 <= n <= shape[seq_dim] for n in lengths):
        return Failure(f"{op.name}: seq_lengths {lengths} do not fit {shape}")
    if all(n <= 1 for n in lengths):
        return [identity(rw, x)]
    parts = []
    for b, n in enumerate(lengths):
        entry = slice_along(rw, x, batch_dim, b, 1)
        if n > 1:
            pieces = [reverse_axis(rw, slice_along(rw, entry, seq_dim, 0, n), seq_dim)]
            if n < shape[seq_dim]:
                pieces.append(slice_along(rw, entry, seq_dim, n, shape[seq_dim] - n))
            entry = concat(rw, pieces, seq_dim)
        parts.append(entry)
    return [concat(rw, parts, batch_dim)]
