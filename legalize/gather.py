"""Patterns for TFL gather/scatter ops: GATHER, GATHER_ND, EMBEDDING_LOOKUP,
SCATTER_ND, ONE_HOT and the segment reductions.

TOSA has one gather and one scatter, both on 3-D tensors: GATHER
values[N,K,C], indices[N,W] -> [N,W,C] and SCATTER of [N,W,C] rows into
[N,K,C]. Every TFLite form is reshaped (and transposed) into those; the index
arithmetic is done in numpy when the indices are constants. Gathers only move
values, so they are type-generic (kind="any"); the segment reductions add or
compare values and are float patterns.
"""

from __future__ import annotations

import math

import numpy as np

from legalize.common import constant_value, element, scalar, tensor_type
from legalize.registry import pattern
from legalize.shape import (
    MOVE_TYPES,
    SELECT_TYPES,
    fresh,
    int_list,
    normalize_axis,
    require_move,
    reshape_to,
    shape_of,
)
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import ScalarType, TensorType, i1, i8, i32, numpy_dtype, storage_type
from tfl2tosa.tosa import build

# TOSA GATHER/SCATTER take i8, i16, i32, f16, f32; bool goes through an i8 CAST,
# so gathers serve every column a move does.
GATHER_TYPES = MOVE_TYPES


def _prod(dims: list[int] | tuple[int, ...]) -> int:
    return math.prod(dims)


def _index_operand(rw: Rewriter, indices: Value, shape: list[int], bound: int
                   ) -> Value | Failure:
    """`indices` as an i32 tensor of `shape`, checked against [0, bound) when constant.

    TOSA indices are i32: constant i64 indices are converted here, i16 ones
    CAST; run-time i64 indices have no TOSA type.
    """
    array = constant_value(indices)
    if array is not None:
        if array.size and (array.min() < 0 or array.max() >= bound):
            return Failure(f"indices of {indices.name} outside [0, {bound})")
        return build.const(rw, np.asarray(array, dtype=np.int32).reshape(shape))
    name = storage_type(element(indices)).name
    if name == "i16":
        indices = build.cast(rw, indices, i32)
    elif name != "i32":
        return Failure(f"run-time {name} indices (TOSA gathers take i32)")
    return reshape_to(rw, indices, shape)


def _gather_3d(rw: Rewriter, values: Value, indices: Value) -> Value:
    """TOSA GATHER of values[N,K,C] at indices[N,W]; bool data goes through i8."""
    n, _, c = shape_of(values)
    w = shape_of(indices)[1]
    elem = element(values)
    if elem == i1:
        values = build.cast(rw, values, i8)
    out_type = TensorType((n, w, c), element(values))
    out = build.op(rw, "tosa.gather", [values, indices], out_type)
    return build.cast(rw, out, i1) if elem == i1 else out


def gather_along(rw: Rewriter, params: Value, indices: Value, axis: int, batch_dims: int
                 ) -> Value | Failure:
    """TFLite GATHER semantics (kernels/gather.cc) on static shapes.

    params [B..., O..., K, I...] (B: batch_dims dims, O: dims before axis) is
    viewed as [batch, outer, K, inner]; when outer > 1 it is TRANSPOSEd to
    [batch, K, outer, inner] so that one GATHER of W = prod(indices[bd:]) rows
    per batch does the work, and the result is transposed back.
    """
    p_shape = list(shape_of(params))
    i_shape = list(shape_of(indices))
    batch = _prod(p_shape[:batch_dims])
    outer = _prod(p_shape[batch_dims:axis])
    k = p_shape[axis]
    inner = _prod(p_shape[axis + 1:])
    w = _prod(i_shape[batch_dims:])
    index = _index_operand(rw, indices, [batch, w], k)
    if isinstance(index, Failure):
        return index
    x = reshape_to(rw, params, [batch, outer, k, inner])
    if outer > 1:
        x = build.transpose(rw, x, [0, 2, 1, 3])
    x = reshape_to(rw, x, [batch, k, outer * inner])
    y = _gather_3d(rw, x, index)
    if outer > 1:
        y = reshape_to(rw, y, [batch, w, outer, inner])
        y = build.transpose(rw, y, [0, 2, 1, 3])
    return reshape_to(rw, y, p_shape[:axis] + i_shape[batch_dims:] + p_shape[axis + 1:])


# ---------------------------------------------------------------------------
# Windows at run-time positions (DYNAMIC_UPDATE_SLICE, SLICE, STRIDED_SLICE)


class Window:
    """A box of a tensor of `shape` whose start along some axes is known only at
    run time. Per axis: `count` elements from `start` with `stride`; on the
    axes in `runtime`, start is the run-time begin value, wrapped by the axis
    size when negative if `wrap`, then clamped to [low, high]: the static
    `start` is unused there and the stride is 1."""

    def __init__(self, shape: list[int], start: list[int], stride: list[int],
                 count: list[int], runtime: dict[int, tuple[int, int]], wrap: bool) -> None:
        self.shape, self.start, self.stride, self.count = shape, start, stride, count
        self.runtime, self.wrap = runtime, wrap

    def split(self) -> int:
        """How many leading axes index the rows: the trailing axes the window
        spans whole (static start 0, stride 1) form each row's C elements."""
        split = len(self.shape)
        while split > 1 and split - 1 not in self.runtime and self.start[split - 1] == 0 \
                and self.stride[split - 1] == 1 and self.count[split - 1] == self.shape[split - 1]:
            split -= 1
        return split

    def rows(self) -> tuple[int, int, int]:
        """(K, W, C): the tensor seen as [1, K, C], the window as W of its rows."""
        split = self.split()
        return (_prod(self.shape[:split]), _prod(self.count[:split]),
                _prod(self.shape[split:]))


def _window_index(rw: Rewriter, begin: Value, window: Window) -> Value | Failure:
    """The window's row numbers [1, W] (i32): a constant offset per row, plus
    sum_j clamp(begin_j) * row_stride_j over the run-time axes."""
    _, w, _ = window.rows()
    split = window.split()
    row_strides = [_prod(window.shape[j + 1:split]) for j in range(split)]
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in window.count[:split]],
                        indexing="ij")
    offsets = np.zeros(window.count[:split], dtype=np.int64)
    for j, grid in enumerate(grids):
        start = 0 if j in window.runtime else window.start[j]
        step = 1 if j in window.runtime else window.stride[j]
        offsets = offsets + (start + step * grid) * row_strides[j]
    rank = len(window.shape)
    if tensor_type(begin).num_elements != rank:
        return Failure(f"{tensor_type(begin).num_elements} start indices for a rank-{rank} "
                       "tensor")
    name = storage_type(element(begin)).name
    if name == "i16":
        begin = build.cast(rw, begin, i32)
    elif name != "i32":
        return Failure(f"run-time {name} start indices (TOSA has no 64-bit integers)")
    starts = reshape_to(rw, begin, [rank])

    def constant(values: list[int]) -> Value:
        return build.const(rw, np.array(values, dtype=np.int32))

    vector_type = TensorType((rank,), i32)
    if window.wrap:
        sizes = constant([window.shape[j] if j in window.runtime else 0 for j in range(rank)])
        negative = build.op(rw, "tosa.greater", [constant([0] * rank), starts],
                            TensorType((rank,), i1))
        wrapped = build.op(rw, "tosa.add", [starts, sizes], vector_type)
        starts = build.op(rw, "tosa.select", [negative, wrapped, starts], vector_type)
    low = [window.runtime.get(j, (0, 0))[0] for j in range(rank)]
    high = [window.runtime.get(j, (0, 0))[1] for j in range(rank)]
    starts = build.op(rw, "tosa.maximum", [starts, constant(low)], vector_type)
    starts = build.op(rw, "tosa.minimum", [starts, constant(high)], vector_type)
    weights = constant([row_strides[j] if j in window.runtime else 0 for j in range(rank)])
    base = build.mul(rw, starts, weights)
    base = build.op(rw, "tosa.reduce_sum", [base], TensorType((1,), i32), axis=0)
    offsets = build.const(rw, offsets.astype(np.int32).reshape(1, w))
    return build.op(rw, "tosa.add", [reshape_to(rw, base, [1, 1]), offsets],
                    TensorType((1, w), i32))


def gather_window(rw: Rewriter, x: Value, begin: Value, window: Window) -> Value | Failure:
    """The window of `x` as a [count...] tensor: one TOSA GATHER of W rows."""
    k, w, c = window.rows()
    index = _window_index(rw, begin, window)
    if isinstance(index, Failure):
        return index
    rows = _gather_3d(rw, reshape_to(rw, x, [1, k, c]), index)
    return reshape_to(rw, rows, window.count)


def scatter_window(rw: Rewriter, x: Value, update: Value, begin: Value, window: Window
                   ) -> Value | Failure:
    """`x` with the window replaced by `update`'s stored values: one TOSA
    SCATTER of W rows (the rows are distinct, as SCATTER requires)."""
    k, w, c = window.rows()
    index = _window_index(rw, begin, window)
    if isinstance(index, Failure):
        return index
    values, rows_in = reshape_to(rw, x, [1, k, c]), reshape_to(rw, update, [1, w, c])
    is_bool = element(values) == i1
    if is_bool:  # SCATTER has no bool mode: scatter 0/1 in i8
        values, rows_in = build.cast(rw, values, i8), build.cast(rw, rows_in, i8)
    out = build.op(rw, "tosa.scatter", [values, index, rows_in],
                   TensorType((1, k, c), element(values)))
    if is_bool:
        out = build.cast(rw, out, i1)
    return reshape_to(rw, out, window.shape)


@pattern("tfl.gather", kind="any", types=GATHER_TYPES)
def gather(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """GATHER along `axis` with `batch_dims`, through TOSA's 3-D GATHER."""
    params, indices = op.operands
    failed = require_move(op, [params])
    if failed is not None:
        return failed
    rank = len(shape_of(params))
    axis = normalize_axis(int(op.attrs.get("axis", 0)), rank)
    batch_dims = normalize_axis(int(op.attrs.get("batch_dims", 0)), len(shape_of(indices)))
    if not 0 <= batch_dims <= axis < rank:
        return Failure(f"{op.name}: batch_dims {batch_dims} and axis {axis} do not fit")
    out = gather_along(rw, params, indices, axis, batch_dims)
    return out if isinstance(out, Failure) else [fresh(rw, out)]


@pattern("tfl.embedding_lookup", kind="any", types=GATHER_TYPES)
def embedding_lookup(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Rows of `value` at `lookup`: a GATHER along axis 0. (Hybrid int8 tables
    with a float output take the fallback, which dequantizes the table.)"""
    lookup, value = op.operands
    failed = require_move(op, [value])
    if failed is not None:
        return failed
    out = gather_along(rw, value, lookup, 0, 0)
    return out if isinstance(out, Failure) else [fresh(rw, out)]


@pattern("tfl.gather_nd", kind="any", types=GATHER_TYPES)
def gather_nd(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """params [P0..P(D-1), R...] viewed as [1, P0*...*P(D-1), R]; each index
    tuple becomes one row number (row-major strides: a numpy dot for constant
    indices, else MUL by the strides and REDUCE_SUM in i32); one GATHER."""
    params, indices = op.operands
    failed = require_move(op, [params])
    if failed is not None:
        return failed
    p_shape = list(shape_of(params))
    i_shape = list(shape_of(indices))
    depth = i_shape[-1]
    if depth > len(p_shape):
        return Failure(f"{op.name}: index depth {depth} exceeds params rank {len(p_shape)}")
    rows = _prod(p_shape[:depth])
    rest = p_shape[depth:]
    w = _prod(i_shape[:-1])
    strides = [_prod(p_shape[j + 1:depth]) for j in range(depth)]
    array = constant_value(indices)
    if array is not None:
        tuples = np.asarray(array, dtype=np.int64).reshape(w, depth)
        if tuples.size and ((tuples < 0).any() or (tuples >= p_shape[:depth]).any()):
            return Failure(f"{op.name}: constant indices out of range")
        index = build.const(rw, (tuples @ np.array(strides, dtype=np.int64))
                            .astype(np.int32).reshape(1, w))
    else:
        index = _flat_index(rw, indices, strides, w)
        if isinstance(index, Failure):
            return index
    x = reshape_to(rw, params, [1, rows, _prod(rest)])
    y = _gather_3d(rw, x, index)
    return [fresh(rw, reshape_to(rw, y, i_shape[:-1] + rest))]


def _flat_index(rw: Rewriter, indices: Value, strides: list[int], w: int) -> Value | Failure:
    """Run-time index tuples [.., D] -> row numbers [1, W]: sum_j idx_j * stride_j."""
    if storage_type(element(indices)).name != "i32":
        return Failure(f"run-time {element(indices)} indices (TOSA gathers take i32)")
    depth = len(strides)
    x = reshape_to(rw, indices, [w, depth])
    if depth > 1:
        x = build.mul(rw, x, build.const(rw, np.array([strides], dtype=np.int32)))
        x = build.op(rw, "tosa.reduce_sum", [x], TensorType((w, 1), i32), axis=1)
    return reshape_to(rw, x, [1, w])


@pattern("tfl.scatter_nd", kind="any", types=GATHER_TYPES)
def scatter_nd(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SCATTER the update rows into a zero tensor [1, P0*..*P(D-1), R] at the
    row numbers of the constant index tuples. TFLite sums duplicate indices
    (kernels/scatter_nd.cc), which a scatter cannot: duplicates are refused."""
    indices, updates, shape_operand = op.operands
    failed = require_move(op, [updates])
    if failed is not None:
        return failed
    array = constant_value(indices)
    if array is None:
        return Failure(f"{op.name}: the indices must be a constant")
    out_shape = list(shape_of(op.result))
    target = int_list(shape_operand)
    if target is not None and target != out_shape:
        return Failure(f"{op.name}: shape {target} differs from the result {out_shape}")
    depth = shape_of(indices)[-1]
    w = _prod(shape_of(indices)[:-1])
    tuples = np.asarray(array, dtype=np.int64).reshape(w, depth)
    if tuples.size and ((tuples < 0).any() or (tuples >= out_shape[:depth]).any()):
        return Failure(f"{op.name}: constant indices out of range")
    strides = np.array([_prod(out_shape[j + 1:depth]) for j in range(depth)], dtype=np.int64)
    rows = tuples @ strides
    if len(set(rows.tolist())) != len(rows):
        return Failure(f"{op.name}: duplicate indices are summed by TFLite, not scattered")
    k, c = _prod(out_shape[:depth]), _prod(out_shape[depth:])
    rows_in = reshape_to(rw, updates, [1, w, c])
    is_bool = element(updates) == i1
    if is_bool:  # SCATTER has no bool mode: scatter 0/1 in i8
        rows_in = build.cast(rw, rows_in, i8)
    elem = element(rows_in)
    zeros = build.const(rw, np.zeros((1, k, c), dtype=numpy_dtype(elem)), elem)
    index = build.const(rw, rows.astype(np.int32).reshape(1, w))
    out = build.op(rw, "tosa.scatter", [zeros, index, rows_in], TensorType((1, k, c), elem))
    if is_bool:
        out = build.cast(rw, out, i1)
    return [fresh(rw, reshape_to(rw, out, out_shape))]


@pattern("tfl.one_hot", kind="any", types=SELECT_TYPES)
def one_hot(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SELECT(indices == iota(depth), on, off), with the indices RESHAPEd to
    have a size-1 dimension at `axis` and on/off to rank-equal [1, ...]."""
    indices, depth_operand, on_value, off_value = op.operands
    failed = require_move(op, [on_value, off_value])
    if failed is not None:
        return failed
    depth = int_list(depth_operand)
    if depth is None:
        return Failure(f"{op.name}: depth must be a constant")
    out_shape = list(shape_of(op.result))
    i_shape = list(shape_of(indices))
    axis = normalize_axis(int(op.attrs.get("axis", -1)), len(i_shape) + 1)
    if out_shape[axis] != depth[0]:
        return Failure(f"{op.name}: depth {depth[0]} does not match the result {out_shape}")
    column = i_shape[:axis] + [1] + i_shape[axis:]
    iota_shape = [1] * len(out_shape)
    iota_shape[axis] = depth[0]
    iota = np.arange(depth[0], dtype=np.int32).reshape(iota_shape)
    array = constant_value(indices)
    if array is not None:
        mask = build.const(rw, np.asarray(array).reshape(column) == iota)
    else:
        if storage_type(element(indices)).name != "i32":
            return Failure(f"{op.name}: run-time {element(indices)} indices")
        mask = build.op(rw, "tosa.equal", [reshape_to(rw, indices, column),
                                           build.const(rw, iota)],
                        TensorType(tuple(out_shape), i1))
    ones = [1] * len(out_shape)
    on = reshape_to(rw, on_value, ones)
    off = reshape_to(rw, off_value, ones)
    return [build.op(rw, "tosa.select", [mask, on, off], tensor_type(op.result))]


# ---------------------------------------------------------------------------
# Segment reductions (arithmetic: float patterns)

# TFLite's initial value of each segment (segment_sum.cc / unsorted_segment.cc),
# which is also what an empty segment holds.
_SEGMENT_REDUCTIONS = {
    "tfl.segment_sum": ("tosa.reduce_sum", "zero"),
    "tfl.unsorted_segment_sum": ("tosa.reduce_sum", "zero"),
    "tfl.unsorted_segment_prod": ("tosa.reduce_product", "one"),
    "tfl.unsorted_segment_max": ("tosa.reduce_max", "lowest"),
    "tfl.unsorted_segment_min": ("tosa.reduce_min", "highest"),
}


def _initial_value(kind: str, scalar: ScalarType) -> float:
    dtype = numpy_dtype(scalar)
    info = np.finfo(dtype) if scalar.is_float else np.iinfo(dtype)
    return {"zero": 0, "one": 1, "lowest": info.min, "highest": info.max}[kind]


@pattern("tfl.segment_sum", "tfl.unsorted_segment_sum", "tfl.unsorted_segment_max",
         "tfl.unsorted_segment_min", kind="float", types=("f32", "f16", "i32"))
def segment_reduction(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Constant segment ids -> a constant mask [S, N, 1]; SELECT(mask, data
    [1, N, C], initial value) then REDUCE over N gives every segment at once.
    Ids outside [0, S) match no segment and are skipped, as in TFLite."""
    data, ids_operand = op.operands[:2]
    failed = require_move(op, [data])
    if failed is not None:
        return failed
    reduce_name, initial = _SEGMENT_REDUCTIONS[op.name]
    stored = storage_type(element(data))
    if reduce_name == "tosa.reduce_product" and not stored.is_float:
        return Failure(f"{op.name}: TOSA has no integer REDUCE_PRODUCT")
    ids = constant_value(ids_operand)
    if ids is None:
        return Failure(f"{op.name}: segment ids must be a constant")
    ids = np.asarray(ids, dtype=np.int64).reshape(-1)
    if op.name == "tfl.segment_sum":
        segments = int(ids.max()) + 1 if ids.size else 0
    else:
        count = int_list(op.operands[2])
        if count is None:
            return Failure(f"{op.name}: num_segments must be a constant")
        segments = count[0]
    d_shape = list(shape_of(data))
    n = ids.size
    tail = d_shape[len(shape_of(ids_operand)):]
    c = _prod(tail)
    if segments < 1 or n == 0:
        return Failure(f"{op.name}: empty segmentation")
    mask = (ids[None, :] == np.arange(segments)[:, None]).reshape(segments, n, 1)
    fill = scalar(rw, _initial_value(initial, stored), stored, 3)
    rows = reshape_to(rw, data, [1, n, c])
    picked = build.op(rw, "tosa.select", [build.const(rw, mask), rows, fill],
                      TensorType((segments, n, c), stored))
    attrs = {"nan_mode": "IGNORE"} if reduce_name in ("tosa.reduce_max", "tosa.reduce_min") \
        else {}
    reduced = build.op(rw, reduce_name, [picked], TensorType((segments, 1, c), stored),
                       axis=1, **attrs)
    return [reshape_to(rw, reduced, [segments] + tail)]


@pattern("tfl.unsorted_segment_prod", kind="float", types=("f32", "f16"))
def unsorted_segment_prod(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """As `segment_reduction` with REDUCE_PRODUCT (float only: TOSA has no integer
    product reduction)."""
    return segment_reduction(op, rw)
