"""Patterns for TFL ops that write values into place: MATRIX_DIAG,
MATRIX_SET_DIAG, DYNAMIC_UPDATE_SLICE. The values are moved into position by
PAD / RESHAPE / SLICE and, where they replace part of a tensor, chosen by a
SELECT on a constant mask, or SCATTERed where the position is known only at
run time; type-generic, see `legalize.shape`.
"""

from __future__ import annotations

import numpy as np

from legalize.common import element, tensor_type
from legalize.gather import Window, scatter_window
from legalize.registry import pattern
from legalize.shape import (
    MOVE_TYPES,
    SELECT_TYPES,
    finish,
    fresh,
    identity,
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


def _diagonal_matrix(rw: Rewriter, diag: Value, rows: int, cols: int) -> Value:
    """[..., K] -> [..., rows, cols] with the K values on the main diagonal and
    the stored value 0 elsewhere, by moves only: element (i, i) sits at flat
    index i*(cols+1), so each value followed by `cols` zeros, flattened and cut
    (or padded) to rows*cols, is the matrix."""
    batch = list(shape_of(diag)[:-1])
    k = shape_of(diag)[-1]
    x = reshape_to(rw, diag, batch + [k, 1])
    x = pad_with(rw, x, [0, 0] * (len(batch) + 1) + [0, cols], 0)
    x = reshape_to(rw, x, batch + [k * (cols + 1)])
    total = rows * cols
    if k * (cols + 1) > total:
        x = slice_of(rw, x, [0] * (len(batch) + 1), batch + [total])
    elif k * (cols + 1) < total:
        x = pad_with(rw, x, [0, 0] * len(batch) + [0, total - k * (cols + 1)], 0)
    return reshape_to(rw, x, batch + [rows, cols])


@pattern("tfl.matrix_diag", kind="any", types=MOVE_TYPES)
def matrix_diag(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """The diagonal matrix by PAD/RESHAPE/SLICE (no arithmetic). Off-diagonal
    elements are the stored value 0, as TFLite's kernel writes T(0) even for
    quantized data."""
    failed = require_move(op)
    if failed is not None:
        return failed
    n = shape_of(op.operands[0])[-1]
    return [finish(rw, _diagonal_matrix(rw, op.operands[0], n, n), op.result)]


@pattern("tfl.matrix_set_diag", kind="any", types=SELECT_TYPES)
def matrix_set_diag(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SELECT(constant identity mask, diagonal matrix of the new values, input).
    TFLite copies the stored diagonal values even when their quantization differs
    from the input's (kernels/matrix_set_diag.cc), and so does this lowering."""
    failed = require_move(op, op.operands, raw=True)
    if failed is not None:
        return failed
    x, diag = op.operands
    shape = shape_of(x)
    rows, cols = shape[-2:]
    if shape_of(diag)[-1] != min(rows, cols):
        return Failure(f"{op.name}: the diagonal has {shape_of(diag)[-1]} values, "
                       f"expected {min(rows, cols)}")
    matrix = _diagonal_matrix(rw, diag, rows, cols)
    mask = np.eye(rows, cols, dtype=bool).reshape((1,) * (len(shape) - 2) + (rows, cols))
    out = build.op(rw, "tosa.select", [build.const(rw, mask), matrix, x], tensor_type(x))
    return [out]


@pattern("tfl.dynamic_update_slice", kind="any", types=SELECT_TYPES)
def dynamic_update_slice(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """The start indices clamped so the update fits, each to [0, dim - update
    dim] (TFLite's ClampStartIndices, kernels/dynamic_update_slice.cc). With
    constant indices: PAD the update into place and SELECT it where a constant
    mask marks the region; with run-time ones: a TOSA SCATTER of the update's
    rows at positions computed from the clamped indices (`scatter_window`).
    Stored values are copied as TFLite does, whatever the update's
    quantization."""
    x, update, indices = op.operands
    failed = require_move(op, [x, update], raw=True)
    if failed is not None:
        return failed
    shape, size = shape_of(x), shape_of(update)
    if len(size) != len(shape) or any(u > d for u, d in zip(size, shape)):
        return Failure(f"{op.name}: the update {list(size)} does not fit in {list(shape)}")
    if tuple(size) == shape:
        return [identity(rw, update)]
    start = int_list(indices)
    if start is None:
        window = Window(list(shape), [0] * len(shape), [1] * len(shape), list(size),
                        {j: (0, d - u) for j, (d, u) in enumerate(zip(shape, size))
                         if d != u}, wrap=False)
        out = scatter_window(rw, x, update, indices, window)
        return out if isinstance(out, Failure) else [fresh(rw, out)]
    start = [min(max(0, s), d - u) for s, d, u in zip(start, shape, size)]
    padding = []
    for s, d, u in zip(start, shape, size):
        padding += [s, d - s - u]
    placed = pad_with(rw, update, padding, pad_value(element(x)))
    mask = np.zeros(shape, dtype=bool)
    mask[tuple(slice(s, s + u) for s, u in zip(start, size))] = True
    return [build.op(rw, "tosa.select", [build.const(rw, mask), placed, x], tensor_type(x))]
