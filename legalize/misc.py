"""Patterns for TFL ops of no other family.

Lowered:
- RANGE: folded to a constant (its inputs must be constants: the output size
  depends on their values).
- BUCKETIZE: COUNT of the boundaries above each value, via GREATER and
  REDUCE_SUM; FAKE_QUANT: clamp to the nudged range and quantize-dequantize
  in float, as TFLite's kernel does.
- SPARSE_TO_DENSE (constant indices): SELECT on a constant mask or SCATTER
  into the default value; DENSIFY: the sparse constant densified here, in
  numpy, following TFLite's sparsity format.
- DILATE: RESHAPE/PAD/RESHAPE per dilated axis; REDUCE_WINDOW: one strided
  SLICE per window position, combined in TFLite's order; SVDF: one step of
  the feature/time factorization from the state operand.
- BITCAST between identical element types: a RESHAPE (nothing to reinterpret).

Refused with a reason: BITCAST between different types (TOSA has no bit
reinterpretation), CUSTOM (named by its custom code), CONCAT_EMBEDDINGS
(TFLite has no kernel), HASHTABLE_LOOKUP, and resource-variable ops that the
stateful pass (tfl2tosa/passes/resource_variables.py) left in place.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from legalize.common import (
    constant_value,
    element,
    fused_activation,
    is_none,
    require_static,
    tensor_type,
)
from legalize.conv import float_weights, require_float_activations
from legalize.elementwise import first_failure
from legalize.registry import known_custom_ops, pattern
from legalize.shape import (
    MOVE_TYPES,
    take_every,
    concat,
    fresh,
    pad_with,
    require_move,
    reshape_to,
    shape_of,
    slice_of,
)
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import TensorType, f32, i32, is_quantized, numpy_dtype
from tfl2tosa.passes.resource_variables import REASON_ATTR
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise

# ---------------------------------------------------------------------------
# Constants computed at conversion time


def _range_values(start: np.generic, limit: np.generic, delta: np.generic,
                  dtype: np.dtype) -> np.ndarray | str:
    """TFLite's RANGE (kernels/range.cc): size from GetSize, values by repeated
    addition of delta in the element type."""
    if delta == 0 or not ((start > limit and delta < 0) or (start < limit and delta > 0)):
        return f"start {start}, limit {limit}, delta {delta} give no range (TFLite fails)"
    if np.issubdtype(dtype, np.integer):
        distance, step = abs(int(limit) - int(start)), abs(int(delta))
        size = (distance + step - 1) // step
        return (int(start) + int(delta) * np.arange(size, dtype=np.int64)).astype(dtype)
    size = int(np.ceil(np.abs((limit - start) / delta)))
    steps = np.full(size, delta, dtype=dtype)
    if size:
        steps[0] = start
    return np.add.accumulate(steps, dtype=dtype)


@pattern("tfl.range", kind="float", types=("f32", "i32"), label="range")
def range_(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """A constant: start, start + delta, ... (the inputs must be constants)."""
    arrays = [constant_value(v) for v in op.operands]
    if any(a is None for a in arrays):
        return Failure(f"{op.name}: its output size depends on run-time inputs")
    t = tensor_type(op.results[0])
    if t.element not in (f32, i32):
        return Failure(f"{op.name}: element type {t.element} is not supported")
    dtype = numpy_dtype(t.element)
    start, limit, delta = (np.asarray(a, dtype=dtype).reshape(-1)[0] for a in arrays)
    values = _range_values(start, limit, delta, dtype)
    if isinstance(values, str):
        return Failure(f"{op.name}: {values}")
    if t.is_static and t.shape != values.shape:
        return Failure(f"{op.name}: {values.size} values for the result {t}")
    return [build.const(rw, values, t.element)]


# ---------------------------------------------------------------------------
# BUCKETIZE, FAKE_QUANT


@pattern("tfl.bucketize", types=("f32", "i32"))
def bucketize(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """The number of boundaries b with !(x < b), TFLite's std::upper_bound over
    the sorted float boundaries (kernels/bucketize.cc; int32 values compare as
    float). Computed as N - REDUCE_SUM(SELECT(GREATER(b, x), 1, 0)) along a new
    axis, counted in float (exact below 2^24 boundaries, and PRO-FP only)."""
    failure = require_static(op)
    if failure is not None:
        return failure
    x = op.operands[0]
    if element(x) not in (f32, i32):
        return Failure(f"{op.name}: element type {element(x)} is not supported")
    boundaries = np.asarray(op.attrs.get("boundaries") or (), dtype=np.float32)
    shape = shape_of(x)
    if boundaries.size == 0:
        return [build.const(rw, np.zeros(shape, dtype=np.int32))]
    if np.any(boundaries[1:] < boundaries[:-1]):
        return Failure(f"{op.name}: the boundaries are not sorted (TFLite rejects them)")
    if element(x) != f32:
        x = build.cast(rw, x, f32)
    e = Elementwise(rw, len(shape) + 1)
    column = reshape_to(rw, x, (*shape, 1))
    row = build.const(rw, boundaries.reshape((1,) * len(shape) + (-1,)))
    above = e.select(e.greater(row, column), e.const(1.0, f32), e.const(0.0, f32))
    count = build.op(rw, "tosa.reduce_sum", [above], tensor_type(above).with_shape((*shape, 1)),
                     axis=len(shape))
    buckets = e.sub(e.const(float(boundaries.size), f32), count)
    return [build.cast(rw, reshape_to(rw, buckets, shape), i32)]


def nudged_range(low: float, high: float, num_bits: int) -> tuple[np.float32, ...]:
    """(nudged_min, nudged_max, nudged_scale) in float32, as TFLite's
    NudgeQuantizationRange computes them (kernels/internal/quantization_util.cc;
    quant_min 0, quant_max 2^num_bits - 1)."""
    f = np.float32
    quant_min, quant_max = f(0), f((1 << num_bits) - 1)
    scale = (f(high) - f(low)) / (quant_max - quant_min)
    zero_from_min = quant_min - f(low) / scale
    if zero_from_min < quant_min:
        zero_point = quant_min
    elif zero_from_min > quant_max:
        zero_point = quant_max
    else:
        # TfLiteRound: half away from zero (the value is not negative here).
        whole = np.floor(zero_from_min)
        zero_point = whole + f(1) if zero_from_min - whole >= f(0.5) else whole
    return (quant_min - zero_point) * scale, (quant_max - zero_point) * scale, scale


@pattern("tfl.fake_quant", types=("f32",))
def fake_quant(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TFLite's FakeQuantizeArray: clamp to [nudged_min, nudged_max] (NaN gives
    nudged_min, as std::min/max there and CLAMP with nan_mode IGNORE), then
    round((x - nudged_min) * (1 / nudged_scale)) * nudged_scale + nudged_min in
    float32, rounding half away from zero."""
    failure = require_static(op)
    if failure is not None:
        return failure
    x = op.operands[0]
    if element(x) != f32:
        return Failure(f"{op.name}: TFLite's kernel takes float32 only, not {element(x)}")
    if op.attrs.get("narrow_range"):
        return Failure(f"{op.name}: narrow_range is rejected by TFLite's kernel at run time")
    num_bits = int(op.attrs.get("num_bits", 8))
    low, high = float(op.attrs.get("min", 0.0)), float(op.attrs.get("max", 0.0))
    if not (2 <= num_bits <= 16 and low < high):
        return Failure(f"{op.name}: num_bits {num_bits} with range [{low}, {high}]")
    nudged_min, nudged_max, scale = nudged_range(low, high, num_bits)
    e = Elementwise(rw, len(shape_of(x)))
    clamped = build.clamp(rw, x, float(nudged_min), float(nudged_max), nan_mode="IGNORE")
    shifted = e.sub(clamped, e.like(float(nudged_min), x))
    scaled = e.mul(shifted, e.like(float(np.float32(1) / scale), x))
    levels = e.round_half_away_non_negative(scaled)
    return [e.add(e.mul(levels, e.like(float(scale), x)), e.like(float(nudged_min), x))]


# ---------------------------------------------------------------------------
# SPARSE_TO_DENSE, DENSIFY


def _flat_positions(indices: np.ndarray, out_shape: Sequence[int]) -> np.ndarray | str:
    """Row-major positions of SPARSE_TO_DENSE's index tuples (a 0-D/1-D index
    is a position along a 1-D output), or why they are invalid."""
    index = np.asarray(indices, dtype=np.int64)
    index = index.reshape(-1, 1) if index.ndim < 2 else index
    if index.shape[1] != len(out_shape):
        return f"indices of depth {index.shape[1]} for a rank {len(out_shape)} output"
    if index.size and ((index < 0).any() or (index >= np.asarray(out_shape)).any()):
        return "indices out of range (TFLite's behaviour is undefined there)"
    return np.ravel_multi_index(tuple(index.T), out_shape) if len(index) else \
        np.zeros(0, dtype=np.int64)


@pattern("tfl.sparse_to_dense", kind="any", types=("f32", "i32", "i8"))
def sparse_to_dense(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """The default value everywhere except at the constant indices, where the
    values go (the last write wins for a repeated index, as in TFLite's loop).

    A scalar value: SELECT on a constant mask. A vector: SCATTER of the values
    (one GATHER first when repeated indices leave some out) into the default
    value TILEd to the output.
    """
    indices, _, values, default = op.operands
    failure = first_failure(require_move(op, [values, default]), require_static(op))
    if failure is not None:
        return failure
    index_array = constant_value(indices)
    if index_array is None:
        return Failure(f"{op.name}: run-time indices may repeat, which SCATTER cannot take")
    out_shape = shape_of(op.results[0])
    positions = _flat_positions(index_array, out_shape)
    if isinstance(positions, str):
        return Failure(f"{op.name}: {positions}")
    rank = len(out_shape)
    e = Elementwise(rw, rank)
    fill = reshape_to(rw, default, (1,) * rank)
    if len(shape_of(values)) == 0:
        mask = np.zeros(out_shape, dtype=bool)
        mask.reshape(-1)[positions] = True
        value = reshape_to(rw, values, (1,) * rank)
        return [e.select(build.const(rw, mask), value, fill)]
    if shape_of(values)[0] != positions.size:
        return Failure(f"{op.name}: {shape_of(values)[0]} values for {positions.size} indices")
    last = {int(p): i for i, p in enumerate(positions)}
    keep = np.array(sorted(last.values()), dtype=np.int64)
    count, size = len(keep), math.prod(out_shape)
    rows = reshape_to(rw, values, (1, positions.size, 1))
    if count != positions.size:
        rows = build.op(rw, "tosa.gather", [rows, build.const(rw, keep.astype(np.int32)[None])],
                        tensor_type(rows).with_shape((1, count, 1)))
    background = build.op(rw, "tosa.tile", [reshape_to(rw, fill, (1, 1, 1)),
                                            build.const_shape(rw, [1, size, 1])],
                          tensor_type(rows).with_shape((1, size, 1)))
    where = build.const(rw, positions[keep].astype(np.int32)[None])
    dense = build.op(rw, "tosa.scatter", [background, where, rows], tensor_type(background))
    return [reshape_to(rw, dense, out_shape)]


def _segments(metadata: dict) -> tuple[np.ndarray, np.ndarray]:
    segments, indices = metadata.get("array_segments"), metadata.get("array_indices")
    if segments is None or indices is None:
        raise ValueError("a SPARSE_CSR dimension without segments or indices")
    return np.asarray(segments, dtype=np.int64), np.asarray(indices, dtype=np.int64)


def densify(stored: np.ndarray, shape: Sequence[int], sparsity: dict) -> np.ndarray:
    """The dense tensor of TFLite's sparsity format (schema.fbs SparsityParameters;
    the traversal of kernels/internal/utils/sparsity_format_converter.cc).

    The stored values are visited in traversal order: level `k` walks dimension
    `traversal_order[k]` of the expanded (blocked) shape, densely or through
    the CSR segments of its parent position. Raises ValueError for
    inconsistent parameters.
    """
    order = [int(d) for d in sparsity["traversal_order"]]
    block_map = [int(d) for d in sparsity.get("block_map") or ()]
    levels = sparsity["dim_metadata"]
    rank = len(shape)
    if len(levels) != len(order) or len(order) != rank + len(block_map):
        raise ValueError("traversal order, block map and dimension metadata disagree")
    dense_sizes = [int(level.get("dense_size", 0)) for level in levels]
    # As in the converter: a block's size is the dense size at the level that
    # the block dimension's traversal position names.
    block_size = [dense_sizes[order[rank + b]] for b in range(len(block_map))]
    parents = np.zeros(1, dtype=np.int64)
    coordinates: list[np.ndarray] = []
    for level in levels:
        if level["format"] == "DENSE":
            size = int(level["dense_size"])
            coordinates = [np.repeat(c, size) for c in coordinates]
            coordinates.append(np.tile(np.arange(size, dtype=np.int64), len(parents)))
            parents = (parents[:, None] * size + np.arange(size)).reshape(-1)
        elif level["format"] == "SPARSE_CSR":
            segments, indices = _segments(level)
            if parents.size and parents.max() + 1 >= len(segments):
                raise ValueError("CSR segments shorter than the positions they index")
            counts = segments[parents + 1] - segments[parents]
            if (counts < 0).any() or segments.max(initial=0) > len(indices):
                raise ValueError("CSR segments out of order or beyond the indices")
            children = np.concatenate([np.arange(segments[p], segments[p + 1])
                                       for p in parents]) if parents.size else parents
            coordinates = [np.repeat(c, counts) for c in coordinates]
            coordinates.append(indices[children])
            parents = children.astype(np.int64)
        else:
            raise ValueError(f"dimension format {level['format']}")
    if len(parents) != stored.size:
        raise ValueError(f"{stored.size} stored values for {len(parents)} positions")
    original = [np.zeros(len(parents), dtype=np.int64) for _ in range(rank)]
    for k in range(rank):
        original[order[k]] = coordinates[k]
    for k in range(rank, len(order)):
        b = order[k] - rank
        original[block_map[b]] = original[block_map[b]] * block_size[b] + coordinates[k]
    if any((c >= size).any() for c, size in zip(original, shape)):
        raise ValueError("a stored value lies outside the tensor")
    dense = np.zeros(shape, dtype=stored.dtype)
    dense[tuple(original)] = stored.reshape(-1)
    return dense


@pattern("tfl.densify", kind="any", types=("f32", "f16", "i8"))
def densify_constant(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """The sparse constant operand densified at conversion time: a dense
    `tosa.const` (TFLite's DENSIFY takes constant inputs only)."""
    source = op.operands[0].owner
    sparsity = source.attrs.get("sparsity") if source is not None else None
    if sparsity is None:
        return Failure(f"{op.name}: its operand is not a sparse constant (or its sparsity "
                       "parameters were lost)")
    t = tensor_type(op.results[0])
    if not t.is_static or element(op.operands[0]) != t.element:
        return Failure(f"{op.name}: {element(op.operands[0])} -> {t}")
    stored = np.asarray(source.attrs.get("value", source.attrs.get("values")))
    try:
        dense = densify(stored, t.shape, sparsity)
    except ValueError as exc:
        return Failure(f"{op.name}: sparse constant: {exc}")
    return [build.const(rw, dense.astype(numpy_dtype(t.element)), t.element)]


# ---------------------------------------------------------------------------
# DILATE, REDUCE_WINDOW


@pattern("tfl.dilate", kind="any", types=MOVE_TYPES)
def dilate(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Interior padding (kernels/dilate.cc): per axis with dilation d > 1,
    [.., n, ..] -> RESHAPE [.., n, 1, ..] -> PAD d - 1 after on the new axis ->
    RESHAPE [.., n*d, ..] -> SLICE the first (n - 1)*d + 1."""
    x, dilations, padding_value = op.operands
    failure = first_failure(require_move(op, [x, padding_value]), require_static(op))
    if failure is not None:
        return failure
    factors, fill = constant_value(dilations), constant_value(padding_value)
    if factors is None or fill is None:
        return Failure(f"{op.name}: dilations and padding value must be constants")
    shape = list(shape_of(x))
    factors = [int(f) for f in np.asarray(factors).reshape(-1)]
    if len(factors) != len(shape) or min(factors, default=1) < 1:
        return Failure(f"{op.name}: dilations {factors} for a rank {len(shape)} input")
    value = np.asarray(fill).reshape(-1)[0].item()
    for axis, d in enumerate(factors):
        n = shape[axis]
        if d == 1 or n <= 1:
            continue
        spread = reshape_to(rw, x, (*shape[:axis], n, 1, *shape[axis + 1:]))
        padding = [0] * (2 * (len(shape) + 1))
        padding[2 * (axis + 1) + 1] = d - 1
        spread = pad_with(rw, spread, padding, value)
        spread = reshape_to(rw, spread, (*shape[:axis], n * d, *shape[axis + 1:]))
        shape[axis] = (n - 1) * d + 1
        x = slice_of(rw, spread, [0] * len(shape), shape)
    return [fresh(rw, x)]


def _window_params(op: Op) -> tuple[list[int], list[int], list[int]] | Failure:
    arrays = [constant_value(v) for v in op.operands[2:5]]
    if any(a is None for a in arrays):
        return Failure(f"{op.name}: window shape, strides and dilations must be constants")
    window, strides, dilations = ([int(v) for v in np.asarray(a).reshape(-1)] for a in arrays)
    rank = len(shape_of(op.operands[0]))
    if not (len(window) == len(strides) == len(dilations) == rank) or \
            min(window + strides + dilations) < 1:
        return Failure(f"{op.name}: window {window}, strides {strides}, dilations "
                       f"{dilations} for rank {rank}")
    return window, strides, dilations


# TFLite's reduce_function -> how two partial results combine.
_WINDOW_FUNCTIONS = ("ADD", "MUL", "MINIMUM", "MAXIMUM", "ALL", "ANY")
_MAX_WINDOW_POSITIONS = 256


def _combine(e: Elementwise, function: str, a: Value, b: Value) -> Value:
    if function == "ADD":
        return e.add(a, b)
    if function == "MUL":
        return e.mul(a, b)
    if function == "MINIMUM":
        return e.minimum(a, b)
    if function == "MAXIMUM":
        return e.maximum(a, b)
    if function == "ALL":
        return e.logical_and(a, b)
    return e.logical_or(a, b)


def _window_slice(rw: Rewriter, x: Value, offset: Sequence[int], strides: Sequence[int],
                  out_shape: Sequence[int]) -> Value:
    """x[offset + i * stride for i < out] along every axis."""
    shape = shape_of(x)
    size = [min((n - 1) * s + 1, dim - o)
            for n, s, dim, o in zip(out_shape, strides, shape, offset)]
    part = slice_of(rw, x, offset, size)
    for axis, (n, s) in enumerate(zip(out_shape, strides)):
        if s > 1 and n > 1:
            part = take_every(rw, part, axis, s, n)
    return part


@pattern("tfl.reduce_window", kind="float", types=("f32", "i32"))
def reduce_window(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Unrolled over the window: acc = init, then acc = f(acc, x[window
    position k]) for each position in row-major order, the order of TFLite's
    strided reduction (kernels/reduce_window.cc), so float sums round alike.
    ALL / ANY on int32 (TFLite's kernel has no bool mode) work on x != 0 and
    give 0 / 1."""
    failure = require_static(op)
    if failure is not None:
        return failure
    x, init = op.operands[:2]
    function = str(op.attrs.get("reduce_function", ""))
    if function not in _WINDOW_FUNCTIONS:
        return Failure(f"{op.name}: reduce function {function or 'UNSUPPORTED'}")
    if element(x) not in (f32, i32):  # TFLite's kernel has no float16 (nor bool) mode
        return Failure(f"{op.name}: element type {element(x)}")
    if function in ("ALL", "ANY") and element(x) != i32:
        return Failure(f"{op.name}: {function} on {element(x)}")
    params = _window_params(op)
    if isinstance(params, Failure):
        return params
    window, strides, dilations = params
    shape, out_shape = shape_of(x), shape_of(op.results[0])
    span = [(w - 1) * d + 1 for w, d in zip(window, dilations)]
    exact = [(n - s) // t + 1 if n >= s else 0 for n, s, t in zip(shape, span, strides)]
    if list(out_shape) != exact or any((n - s) % t for n, s, t in zip(shape, span, strides)
                                       if n >= s):
        # TFLite sizes the output with a ceiling; a window past the end reads
        # outside the input there.
        return Failure(f"{op.name}: windows {window} (dilation {dilations}, stride "
                       f"{strides}) do not tile {list(shape)} exactly into {list(out_shape)}")
    positions = math.prod(window)
    if positions > _MAX_WINDOW_POSITIONS:
        return Failure(f"{op.name}: {positions} window positions (at most "
                       f"{_MAX_WINDOW_POSITIONS} are unrolled)")
    e = Elementwise(rw, len(shape))
    logical = function in ("ALL", "ANY")
    acc = reshape_to(rw, init, (1,) * len(shape))
    if logical:
        acc = e.logical_not(e.equal(acc, e.like(0, acc)))
    for offset in itertools.product(*(range(w) for w in window)):
        start = [o * d for o, d in zip(offset, dilations)]
        part = _window_slice(rw, x, start, strides, out_shape)
        if logical:
            part = e.logical_not(e.equal(part, e.like(0, part)))
        acc = _combine(e, function, acc, part)
    if logical:
        acc = e.cast(acc, i32)
    if shape_of(acc) != tuple(out_shape):  # an all-size-one window leaves init's shape
        acc = build.op(rw, "tosa.tile", [acc, build.const_shape(rw, out_shape)],
                       tensor_type(acc).with_shape(tuple(out_shape)))
    return [fresh(rw, acc)]


# ---------------------------------------------------------------------------
# SVDF


def _svdf_activation(rw: Rewriter, x: Value, name: str | None) -> Value | Failure:
    """TFLite's ApplyActivationToVector (tensor_utils): TANH and SIGMOID are
    applied, the RELU family clamps."""
    if name == "TANH":
        return build.op(rw, "tosa.tanh", [x], tensor_type(x))
    if name == "SIGMOID":
        return build.op(rw, "tosa.sigmoid", [x], tensor_type(x))
    if name == "SIGN_BIT":
        return Failure("SVDF with a SIGN_BIT activation")
    return fused_activation(rw, x, name)


@pattern("tfl.svdf", types=("f32",), weights=(1, 2))
def svdf(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """One SVDF step (kernels/internal/reference/svdf.h EvalFloatSVDF) from the
    state operand, which holds [batch, filters, memory] in TFLite's layout:

        feature = input x weights_feature^T                 [batch, filters]
        state'  = state[:, :, 1:] ++ feature                (the newest column last)
        scratch = sum over memory of state' * weights_time  [batch, filters]
        output  = bias + sum over each unit's `rank` filters, then the activation

    TFLite keeps the state in a variable tensor and shifts it for the next
    invocation; like the recurrent patterns (legalize/rnn.py), the TOSA graph
    computes one step from the state operand (its initial value). Constant
    int8 weights (hybrid models) are dequantized here (svdf_hybrid in
    legalize.hybrid computes the feature product as TFLite's hybrid kernel).
    """
    return lower_svdf(op, rw, emulate=False)


def lower_svdf(op: Op, rw: Rewriter, emulate: bool) -> list[Value] | Failure:
    """The SVDF step; with `emulate`, the feature product is TFLite's hybrid
    one (input rows quantized at run time, int8 weights, legalize.hybrid)."""
    x, features, times, bias, state = op.operands[:5]
    failure = require_float_activations(op, weights=(1, 2))
    if failure is not None:
        return failure
    if element(x) != f32:
        return Failure(f"{op.name}: element type {element(x)} is not supported")
    rank = int(op.attrs.get("rank", 1))
    batch, _ = shape_of(x)
    filters, memory = shape_of(times)
    units = shape_of(op.results[0])[1]
    if rank < 1 or filters != units * rank or shape_of(state) != (batch, filters * memory):
        return Failure(f"{op.name}: rank {rank}, weights_time {[filters, memory]} and state "
                       f"{list(shape_of(state))} do not fit {units} units")
    if emulate:
        from legalize.hybrid import hybrid_product, stacked_int8

        stacked = stacked_int8(op, (1,))
        if isinstance(stacked, Failure):
            return stacked
        product = hybrid_product(rw, x, *stacked,
                                 bool(op.attrs.get("asymmetric_quantize_inputs", False)))
    else:
        features = float_weights(rw, features, f32)
        if isinstance(features, Failure):
            return features
        zero = build.zero_point(rw, 0.0, f32)
        product = build.op(rw, "tosa.matmul",
                           [reshape_to(rw, x, (1, batch, shape_of(x)[1])),
                            _transposed(rw, features), zero, build.zero_point(rw, 0.0, f32)],
                           TensorType((1, batch, filters), f32))
    times = float_weights(rw, times, f32)
    if isinstance(times, Failure):
        return times
    newest = reshape_to(rw, product, (batch, filters, 1))
    history = reshape_to(rw, state, (batch, filters, memory))
    if memory > 1:
        older = slice_of(rw, history, [0, 0, 1], [batch, filters, memory - 1])
        history = concat(rw, [older, newest], 2)
    else:
        history = newest
    e = Elementwise(rw, 3)
    weighted = e.mul(history, reshape_to(rw, times, (1, filters, memory)))
    scratch = build.op(rw, "tosa.reduce_sum", [weighted],
                       TensorType((batch, filters, 1), f32), axis=2)
    grouped = reshape_to(rw, scratch, (batch, units, rank))
    total = build.op(rw, "tosa.reduce_sum", [grouped], TensorType((batch, units, 1), f32),
                     axis=2)
    out = reshape_to(rw, total, (batch, units))
    if not is_none(bias):
        b = float_weights(rw, bias, f32)
        if isinstance(b, Failure):
            return b
        out = Elementwise(rw, 2).add(out, reshape_to(rw, b, (1, units)))
    result = _svdf_activation(rw, out, op.attrs.get("fused_activation_function"))
    return result if isinstance(result, Failure) else [fresh(rw, result)]


def _transposed(rw: Rewriter, weights: Value) -> Value:
    """[filters, input] weights as MATMUL's [1, input, filters] operand."""
    filters, width = shape_of(weights)
    array = constant_value(weights)
    if array is not None:
        return build.const(rw, np.ascontiguousarray(np.asarray(array).T).reshape(
            1, width, filters), element(weights))
    return reshape_to(rw, build.transpose(rw, weights, [1, 0]), (1, width, filters))


# ---------------------------------------------------------------------------
# BITCAST and the refusals


@pattern("tfl.bitcast", kind="any", types=())
def bitcast(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Between identical element types BITCAST moves nothing: a RESHAPE (an
    IDENTITY). Any other BITCAST reinterprets bits, which no TOSA operator
    does, so it is refused (the coverage table lists it as unsupported)."""
    source, target = element(op.operands[0]), element(op.results[0])
    if source != target or is_quantized(source):
        return Failure(f"{op.name}: TOSA has no operator that reinterprets the bits of "
                       f"{source} as {target}")
    failure = first_failure(require_move(op), require_static(op))
    if failure is not None:
        return failure
    return [fresh(rw, reshape_to(rw, op.operands[0], shape_of(op.results[0])))]


@pattern("tfl.custom", kind="any", types=())
def custom(op: Op, rw: Rewriter) -> Failure:
    """Refused: a custom op no pattern knows (the registry sends the known
    ones to their own patterns); its semantics live in the application's
    kernel. The reason lists the custom ops that do have a lowering."""
    code = op.attrs.get("custom_code") or "(unnamed)"
    return Failure(f"custom op {code} has no TOSA lowering (custom ops with one: "
                   f"{', '.join(known_custom_ops())})")


REASONS: dict[str, str] = {
    "tfl.concat_embeddings": ("TFLite has no kernel for it (it exists only in the schema), "
                              "so there is no behaviour to reproduce"),
    "tfl.hashtable_lookup": ("the hash-table lookup (a search of the key tensor, with a "
                             "uint8 hit flag per lookup) has no TOSA lowering"),
}


@pattern(*REASONS, kind="any", types=(), label="misc_refusal")
def no_lowering(op: Op, rw: Rewriter) -> Failure:
    """Refuse with the reason for this op."""
    return Failure(REASONS[op.name])


@pattern("tfl.var_handle", "tfl.read_variable", "tfl.assign_variable", kind="any", types=())
def resource_variable(op: Op, rw: Rewriter) -> Failure:
    """Resource-variable ops are lowered by the module pass
    tfl2tosa.passes.resource_variables.lower_resource_variables; one that reaches the
    legalization is refused with the reason the pass recorded."""
    reason = op.attrs.get(REASON_ATTR)
    if reason is None:
        return Failure(f"{op.name}: resource variables are lowered to TOSA variables before "
                       "legalization (tfl2tosa.passes.resource_variables), which left this op")
    return Failure(str(reason))
