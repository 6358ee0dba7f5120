"""Patterns for TFL slicing ops: SLICE, STRIDED_SLICE, SPLIT, SPLIT_V, UNPACK.

Each is one or more TOSA SLICEs of the input (STRIDED_SLICE adds RESHAPEs for
strides, REVERSE for negative strides), or a TOSA GATHER where SLICE or
STRIDED_SLICE start at a run-time position; type-generic moves, see
`legalize.shape` for the rules and helpers they share.
"""

from __future__ import annotations

import math

from legalize.common import tensor_type
from legalize.gather import Window, gather_window
from legalize.registry import pattern
from legalize.shape import (
    MOVE_TYPES,
    take_every,
    finish,
    int_list,
    normalize_axis,
    require_move,
    reshape_to,
    reverse_axis,
    shape_of,
    slice_along,
    slice_of,
)
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter

# ---------------------------------------------------------------------------
# Slices


@pattern("tfl.slice", kind="any", types=MOVE_TYPES)
def slice_(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SLICE with the constant begin; a size of -1 means "to the end". A
    run-time begin (with a constant size) becomes a TOSA GATHER of the rows at
    positions computed from it (`gather_window`), each begin clamped to
    [0, dim - size]: TFLite refuses a begin outside that range at run time, so
    the clamp only keeps the GATHER's indices in bounds."""
    failed = require_move(op)
    if failed is not None:
        return failed
    x = op.operands[0]
    shape = shape_of(x)
    begin, size = int_list(op.operands[1]), int_list(op.operands[2])
    if size is None:
        return Failure(f"{op.name}: the size must be a constant")
    if begin is None:
        if -1 in size:
            return Failure(f"{op.name}: a size of -1 with a run-time begin gives a run-time "
                           "shape")
        if tuple(size) != shape_of(op.result) or any(n > d for n, d in zip(size, shape)):
            return Failure(f"{op.name}: slice size {size} does not match the result or does "
                           f"not fit in {list(shape)}")
        window = Window(list(shape), [0] * len(shape), [1] * len(shape), size,
                        {j: (0, d - n) for j, (d, n) in enumerate(zip(shape, size)) if d != n},
                        wrap=False)
        out = gather_window(rw, x, op.operands[1], window)
        return out if isinstance(out, Failure) else [finish(rw, out, op.result)]
    size = [d - b if s == -1 else s for d, b, s in zip(shape, begin, size)]
    if tuple(size) != shape_of(op.result):
        return Failure(f"{op.name}: slice size {size} does not match the result")
    return [finish(rw, slice_of(rw, x, begin, size), op.result)]


def _strided_axes(op: Op, shape: tuple[int, ...], begin: list[int], end: list[int],
                  strides: list[int]) -> tuple[list[int], list[tuple[int, int, int]]]:
    """TFLite's STRIDED_SLICE index rules (kernels/strided_slice.cc, TF 2.18).

    Returns the effective input shape (with new_axis_mask dims of size 1 and
    the ellipsis expanded) and, per effective dimension, (start, stride,
    count): elements start, start + stride, ... (count of them).
    """
    attrs = op.attrs
    begin_mask, end_mask = int(attrs.get("begin_mask", 0)), int(attrs.get("end_mask", 0))
    ellipsis_mask = int(attrs.get("ellipsis_mask", 0))
    new_axis_mask = int(attrs.get("new_axis_mask", 0))
    shrink_mask = int(attrs.get("shrink_axis_mask", 0))
    offset = bool(attrs.get("offset", False))
    count = len(begin)
    added = sum(1 for i in range(count)
                if not ellipsis_mask & (1 << i) and new_axis_mask & (1 << i))
    dims = len(shape) + added
    # Which effective dimensions the ellipsis and the new axes cover.
    ellipsis_dims, new_axis_dims = set(), set()
    ellipsis_start, expanded = dims, 0
    i = 0
    while i < dims:
        if ellipsis_mask & (1 << i):
            ellipsis_start = i
            stop = max(i + 1, min(i + 1 + added + len(shape) - count, dims))
            expanded = stop - ellipsis_start - 1
            ellipsis_dims.update(range(i, stop))
            i = stop
            continue
        if new_axis_mask & (1 << (i - expanded)):
            new_axis_dims.add(i)
        i += 1
    effective: list[int] = []
    axes: list[tuple[int, int, int]] = []
    added_ellipsis = added_axes = 0
    for i in range(dims):
        if i in ellipsis_dims:
            added_ellipsis = max(0, i - ellipsis_start)
            size = shape[i - added_axes]
            effective.append(size)
            axes.append((0, 1, size))
            continue
        if i in new_axis_dims:
            effective.append(1)
            axes.append((0, 1, 1))
            added_axes += 1
            continue
        size = shape[i - added_axes]
        effective.append(size)
        if i >= count + expanded:
            axes.append((0, 1, size))
            continue
        j = i - added_ellipsis
        stride = strides[j]
        start = _strided_start(begin[j], stride, size, bool(begin_mask & (1 << j)))
        if shrink_mask & (1 << j):
            stop = start if start >= size else start + 1
        else:
            stop = end[j] + (start if offset else 0)
            stop = _strided_stop(stop, stride, size, bool(end_mask & (1 << j)))
        span = stop - start if stride > 0 else start - stop
        axes.append((start, stride, max(0, -(-span // abs(stride)))))
    return effective, axes


def _strided_start(start: int, stride: int, size: int, masked: bool) -> int:
    if start < 0:
        start += size
    start = min(max(start, 0), size) if stride > 0 else min(max(start, -1), size - 1)
    if masked:
        start = 0 if stride > 0 else size - 1
    return start


def _strided_stop(stop: int, stride: int, size: int, masked: bool) -> int:
    if stop < 0:
        stop += size
    stop = min(max(stop, 0), size) if stride > 0 else min(max(stop, -1), size - 1)
    if masked:
        stop = size if stride > 0 else -1
    return stop


@pattern("tfl.strided_slice", kind="any", types=MOVE_TYPES)
def strided_slice(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SLICE the covered range; strides > 1 keep every n-th element through a
    RESHAPE [outer, n, stride, inner] and a SLICE; negative strides REVERSE the
    axis afterwards; new and shrunk axes come from the final RESHAPE. A
    run-time begin is lowered where only shrunk axes use it (`x[:, i]`): see
    `_strided_slice_at_run_time`."""
    failed = require_move(op)
    if failed is not None:
        return failed
    x = op.operands[0]
    begin, end, strides = (int_list(v) for v in op.operands[1:4])
    if begin is None and end is not None and strides is not None and 0 not in strides:
        return _strided_slice_at_run_time(op, rw, end, strides)
    if begin is None or end is None or strides is None:
        return Failure(f"{op.name}: begin, end and strides must be constants")
    if 0 in strides:
        return Failure(f"{op.name}: a stride is 0")
    effective, axes = _strided_axes(op, shape_of(x), begin, end, strides)
    if any(n == 0 for _, _, n in axes):
        return Failure(f"{op.name}: the result is empty")
    x = reshape_to(rw, x, effective)
    # Lowest index and extent each axis touches, in ascending order.
    start = [s if k > 0 else s + k * (n - 1) for s, k, n in axes]
    size = [min(abs(k) * n, d - b) for (_, k, n), b, d in zip(axes, start, effective)]
    x = slice_of(rw, x, start, size)
    for axis, (_, k, n) in enumerate(axes):
        if abs(k) > 1 and n > 1:
            x = take_every(rw, x, axis, abs(k), n)
        elif shape_of(x)[axis] != n:
            x = slice_along(rw, x, axis, 0, n)
    for axis, (_, k, n) in enumerate(axes):
        if k < 0:
            x = reverse_axis(rw, x, axis)
    expected = math.prod(n for _, _, n in axes)
    if expected != tensor_type(op.result).num_elements:
        return Failure(f"{op.name}: computed {expected} elements, the result has "
                       f"{tensor_type(op.result).num_elements}")
    return [finish(rw, x, op.result)]


def _strided_slice_at_run_time(op: Op, rw: Rewriter, end: list[int], strides: list[int]
                               ) -> list[Value] | Failure:
    """STRIDED_SLICE whose begin is known only at run time, where every axis
    either ignores it (begin_mask) or is shrunk to the one element at it: the
    result's shape does not depend on it. The shrunk axes' begins are wrapped
    when negative and clamped to [0, dim - 1] as TFLite's StartForAxis does
    (kernels/internal/strided_slice_logic.h; it clamps to [0, dim], where dim
    itself is past the end), then one TOSA GATHER (`gather_window`). With
    `offset` (end a length from begin) TFLite's interpreter (2.20) crashes
    running a run-time begin, so there is nothing to match: refused."""
    attrs = op.attrs
    begin_mask = int(attrs.get("begin_mask", 0))
    shrink_mask = int(attrs.get("shrink_axis_mask", 0))
    if int(attrs.get("ellipsis_mask", 0)) or int(attrs.get("new_axis_mask", 0)):
        return Failure(f"{op.name}: a run-time begin with an ellipsis or new axis")
    x = op.operands[0]
    shape = list(shape_of(x))
    runtime = [j for j in range(len(end)) if not begin_mask & (1 << j)]
    unshrunk = [j for j in runtime if not shrink_mask & (1 << j)]
    if unshrunk and attrs.get("offset", False):
        return Failure(f"{op.name}: offset with a run-time begin")
    if unshrunk:
        return Failure(f"{op.name}: with a run-time begin, the size along axis {unshrunk[0]} "
                       "is known only at run time")
    if len(end) != len(shape) or tensor_type(op.operands[1]).num_elements != len(shape):
        return Failure(f"{op.name}: a run-time begin must give every axis")
    _, axes = _strided_axes(op, tuple(shape), [0] * len(end), end, strides)
    start = [a[0] for a in axes]
    stride = [a[1] for a in axes]
    count = [1 if j in runtime else a[2] for j, a in enumerate(axes)]
    window = Window(shape, start, stride, count, {j: (0, shape[j] - 1) for j in runtime},
                    wrap=True)
    out = gather_window(rw, x, op.operands[1], window)
    return out if isinstance(out, Failure) else [finish(rw, out, op.result)]


# ---------------------------------------------------------------------------
# Splits


def _split_along(rw: Rewriter, op: Op, x: Value, axis: int) -> list[Value]:
    """SLICEs of `x` along `axis` with the sizes of `op`'s results, in order."""
    outs, offset = [], 0
    for result in op.results:
        count = shape_of(result)[axis]
        outs.append(finish(rw, slice_along(rw, x, axis, offset, count), result))
        offset += count
    return outs


@pattern("tfl.split", kind="any", types=MOVE_TYPES)
def split(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """`num_splits` equal SLICEs along the constant axis (operand 0)."""
    x = op.operands[1]
    failed = require_move(op, [x])
    if failed is not None:
        return failed
    axis = int_list(op.operands[0])
    if axis is None:
        return Failure(f"{op.name}: the split axis is not a constant")
    return _split_along(rw, op, x, normalize_axis(axis[0], len(shape_of(x))))


@pattern("tfl.split_v", kind="any", types=MOVE_TYPES)
def split_v(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SLICEs along the constant axis with the constant sizes (one may be -1)."""
    x = op.operands[0]
    failed = require_move(op, [x])
    if failed is not None:
        return failed
    axis = int_list(op.operands[2])
    sizes = int_list(op.operands[1])
    if axis is None or sizes is None:
        return Failure(f"{op.name}: split sizes and axis must be constants")
    axis_index = normalize_axis(axis[0], len(shape_of(x)))
    if -1 in sizes:
        sizes[sizes.index(-1)] = shape_of(x)[axis_index] - (sum(sizes) + 1)
    if sizes != [shape_of(r)[axis_index] for r in op.results]:
        return Failure(f"{op.name}: split sizes {sizes} do not match the result shapes")
    return _split_along(rw, op, x, axis_index)


@pattern("tfl.unpack", kind="any", types=MOVE_TYPES)
def unpack(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """One SLICE per output along `axis`, each RESHAPEd to drop that dimension."""
    failed = require_move(op)
    if failed is not None:
        return failed
    x = op.operands[0]
    axis = normalize_axis(int(op.attrs.get("axis", 0)), len(shape_of(x)))
    return [finish(rw, slice_along(rw, x, axis, i, 1), result)
            for i, result in enumerate(op.results)]
