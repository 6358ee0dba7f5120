"""Ops of no other family (legalize/misc.py) against the TFLite interpreter.

One-op models written with the TFLite builder (the converter folds or never
emits most of these): RANGE, BUCKETIZE, FAKE_QUANT, SPARSE_TO_DENSE, DENSIFY,
DILATE, REDUCE_WINDOW, SVDF and same-type BITCAST are checked with
check_model (TFLite interpreter and Arm's reference model); the refusals
(BITCAST between types, CUSTOM, CONCAT_EMBEDDINGS, HASHTABLE_LOOKUP, leftover
resource-variable ops) by their reasons.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from conftest import TfliteBuilder
from e2e import check_against_arm, check_model, model_path, seeded_inputs

import reference_model
import tfl2tosa.tflite_import
from tfl2tosa.passes.inline_calls import inline_calls
from tfl2tosa.pipeline import convert
from tfl2tosa.errors import ConversionError, ModelError
from tfl2tosa.validation import compare, float_tolerance, validate

TYPES = {np.float32: "FLOAT32", np.int32: "INT32", np.int64: "INT64", np.int8: "INT8",
         np.float16: "FLOAT16", np.bool_: "BOOL"}


def write(b, path: Path) -> Path:
    path.write_bytes(b.to_bytes())
    return path


def const(b, array: np.ndarray, name: str, graph: int = 0) -> int:
    array = np.asarray(array)
    return b.tensor(list(array.shape), TYPES[array.dtype.type], name, data=array, graph=graph)


def one_op(b, path: Path, code: str, inputs: list[int], out_shape: list[int],
           out_type: str = "FLOAT32", graph_inputs: list[int] | None = None,
           **op_args) -> Path:
    out = b.tensor(out_shape, out_type, "out")
    b.op(code, inputs, [out], **op_args)
    b.io(graph_inputs if graph_inputs is not None else inputs[:1], [out])
    return write(b, path)


def check(path: Path, **kwargs):
    return check_model(path, allowed_paths=("float",), **kwargs)


# ---------------------------------------------------------------------------
# RANGE


RANGES = {
    "int_up": (np.int32, 2, 11, 3),
    "int_down": (np.int32, 5, -4, -2),
    "float_up": (np.float32, -1.0, 1.0, 0.1),
    "float_down_inexact_steps": (np.float32, 3.0, -1.7, -0.3),
}


@pytest.mark.parametrize("name", list(RANGES))
def test_range_folds_like_tflite(name: str, builder, tmp_path: Path) -> None:
    """RANGE of constants plus a run-time input (a model needs one)."""
    dtype, start, limit, delta = RANGES[name]
    size = len(np.arange(start, limit, delta)) if dtype is np.int32 else \
        int(np.ceil(abs((np.float32(limit) - np.float32(start)) / np.float32(delta))))
    code = TYPES[dtype]
    scalars = [const(builder, np.array(v, dtype), n)
               for v, n in ((start, "start"), (limit, "limit"), (delta, "delta"))]
    r = builder.tensor([size], code, "range")
    builder.op("RANGE", scalars, [r])
    x = builder.tensor([size], code, "x")
    out = builder.tensor([size], code, "out")
    builder.op("ADD", [r, x], [out], options=builder.options("AddOptions"))
    builder.io([x], [out])
    check(write(builder, tmp_path / f"{name}.tflite"))


def test_range_of_runtime_inputs_is_refused(builder, tmp_path: Path) -> None:
    start = builder.tensor([], "INT32", "start")
    limit = const(builder, np.array(5, np.int32), "limit")
    delta = const(builder, np.array(1, np.int32), "delta")
    path = one_op(builder, tmp_path / "range.tflite", "RANGE", [start, limit, delta], [5],
                  "INT32")
    with pytest.raises(ConversionError, match="output size depends on run-time inputs"):
        convert(path)


# ---------------------------------------------------------------------------
# BUCKETIZE, FAKE_QUANT


@pytest.mark.parametrize("dtype, boundaries", [
    (np.float32, [-1.5, -0.25, 0.0, 0.5, 1.0]),
    (np.float32, [0.0, 0.0, 1.0]),
    (np.int32, [0.5, 1.0, 2.5, 3.0]),
    (np.float32, [7.0]),
], ids=["float", "float_repeated_boundary", "int32_float_boundaries", "float_one_boundary"])
def test_bucketize(dtype, boundaries: list[float], builder, tmp_path: Path) -> None:
    x = builder.tensor([2, 3, 4], TYPES[dtype], "x")
    path = one_op(builder, tmp_path / "bucketize.tflite", "BUCKETIZE", [x], [2, 3, 4], "INT32",
                  options=builder.options("BucketizeOptions", boundaries=boundaries))
    rng = np.random.default_rng(3)
    if dtype is np.int32:
        feeds = [[rng.integers(-1, 5, (2, 3, 4)).astype(np.int32)]]
    else:  # values on the boundaries too
        feeds = [[rng.choice(np.array([*boundaries, -3.0, 0.3, 9.0, 1.25], np.float32),
                             (2, 3, 4))], [rng.uniform(-2, 2, (2, 3, 4)).astype(np.float32)]]
    check(path, inputs=feeds)


FAKE_QUANT = {
    "8bit_symmetric": (-1.0, 1.0, 8),
    "8bit_nudged_zero": (-0.1, 1.7, 8),
    "4bit": (-2.0, 1.5, 4),
    "16bit": (-0.5, 0.75, 16),
    "positive_min": (0.3, 2.0, 8),
}


@pytest.mark.parametrize("name", list(FAKE_QUANT))
def test_fake_quant(name: str, builder, tmp_path: Path) -> None:
    low, high, bits = FAKE_QUANT[name]
    x = builder.tensor([4, 64], "FLOAT32", "x")
    path = one_op(builder, tmp_path / f"{name}.tflite", "FAKE_QUANT", [x], [4, 64],
                  options=builder.options("FakeQuantOptions", min=low, max=high, numBits=bits))
    rng = np.random.default_rng(4)
    # Inputs on and halfway between the quantization levels catch rounding slips.
    levels = np.linspace(low, high, 2 ** min(bits, 8) + 1, dtype=np.float32)
    halfway = ((levels[1:] + levels[:-1]) / 2).astype(np.float32)
    grid = rng.choice(np.concatenate([levels, halfway]), (4, 64)).astype(np.float32)
    _, report = check(path, inputs=[[grid], [rng.uniform(-3, 3, (4, 64)).astype(np.float32)]])
    assert all(o.exact for o in report.outputs)


def test_fake_quant_narrow_range_is_refused(builder, tmp_path: Path) -> None:
    x = builder.tensor([4], "FLOAT32", "x")
    path = one_op(builder, tmp_path / "fq.tflite", "FAKE_QUANT", [x], [4],
                  options=builder.options("FakeQuantOptions", min=-1.0, max=1.0, numBits=8,
                                          narrowRange=True))
    with pytest.raises(ConversionError, match="narrow_range"):
        convert(path)


# ---------------------------------------------------------------------------
# SPARSE_TO_DENSE, DENSIFY


SPARSE_TO_DENSE = {
    "vector_values_2d": (np.array([[0, 1], [2, 3], [1, 0]], np.int32), [3, 4], [3], 0.5),
    "repeated_index_last_wins": (np.array([[1, 1], [0, 2], [1, 1]], np.int32), [2, 3], [3],
                                 -1.0),
    # TFLite allows a scalar value with one index only (sparse_to_dense.cc checks).
    "scalar_value": (np.array([[1, 2]], np.int32), [3, 3], [], 0.0),
    "one_dimensional": (np.array([4, 0, 2], np.int32), [6], [3], 2.0),
    "int64_indices_3d": (np.array([[0, 1, 2], [1, 0, 0]], np.int64), [2, 2, 3], [2], 0.0),
}


@pytest.mark.parametrize("name", list(SPARSE_TO_DENSE))
def test_sparse_to_dense(name: str, builder, tmp_path: Path) -> None:
    indices, out_shape, value_shape, default = SPARSE_TO_DENSE[name]
    index = const(builder, indices, "indices")
    shape = const(builder, np.array(out_shape, np.int32), "shape")
    values = builder.tensor(value_shape, "FLOAT32", "values")
    fill = const(builder, np.array(default, np.float32), "default")
    path = one_op(builder, tmp_path / f"{name}.tflite", "SPARSE_TO_DENSE",
                  [index, shape, values, fill], out_shape, graph_inputs=[values],
                  options=builder.options("SparseToDenseOptions"))
    check(path)


def test_sparse_to_dense_int32_runtime_default(builder, tmp_path: Path) -> None:
    index = const(builder, np.array([[0, 1], [1, 0]], np.int32), "indices")
    shape = const(builder, np.array([2, 2], np.int32), "shape")
    values = builder.tensor([2], "INT32", "values")
    fill = builder.tensor([], "INT32", "default")
    path = one_op(builder, tmp_path / "s2d.tflite", "SPARSE_TO_DENSE",
                  [index, shape, values, fill], [2, 2], "INT32", graph_inputs=[values, fill],
                  options=builder.options("SparseToDenseOptions"))
    check(path)


def test_sparse_to_dense_int8_quantized(builder, tmp_path: Path) -> None:
    """A pure move of stored int8 values (values and default share the quantization)."""
    index = const(builder, np.array([[2], [0], [3]], np.int32), "indices")
    shape = const(builder, np.array([5], np.int32), "shape")
    values = builder.tensor([3], "INT8", "values", scale=[0.5], zero_point=[3])
    fill = builder.tensor([], "INT8", "default", scale=[0.5], zero_point=[3],
                          data=np.array(-7, np.int8))
    out = builder.tensor([5], "INT8", "out", scale=[0.5], zero_point=[3])
    builder.op("SPARSE_TO_DENSE", [index, shape, values, fill], [out],
               options=builder.options("SparseToDenseOptions"))
    builder.io([values], [out])
    _, report = check_model(write(builder, tmp_path / "s2d_i8.tflite"),
                            allowed_paths=("integer",))
    assert all(o.exact for o in report.outputs)


def test_sparse_to_dense_runtime_indices_are_refused(builder, tmp_path: Path) -> None:
    index = builder.tensor([3], "INT32", "indices")
    shape = const(builder, np.array([6], np.int32), "shape")
    values = const(builder, np.ones(3, np.float32), "values")
    fill = const(builder, np.array(0, np.float32), "default")
    path = one_op(builder, tmp_path / "s2d.tflite", "SPARSE_TO_DENSE",
                  [index, shape, values, fill], [6], options=builder.options(
                      "SparseToDenseOptions"))
    with pytest.raises(ConversionError, match="run-time indices"):
        convert(path)


def _dimension(b, dense_size: int = 0, segments=None, indices=None):
    """DimensionMetadataT: DENSE with `dense_size`, or SPARSE_CSR with int32 vectors."""
    s = b.s
    dim = s.DimensionMetadataT()
    if segments is None:
        dim.format, dim.denseSize = s.DimensionType.DENSE, dense_size
        return dim
    dim.format = s.DimensionType.SPARSE_CSR
    seg, idx = s.Int32VectorT(), s.Int32VectorT()
    seg.values, idx.values = list(segments), list(indices)
    dim.arraySegmentsType = dim.arrayIndicesType = s.SparseIndexVector.Int32Vector
    dim.arraySegments, dim.arrayIndices = seg, idx
    return dim


def _sparsity(b, order, block_map, dims):
    params = b.s.SparsityParametersT()
    params.traversalOrder, params.blockMap, params.dimMetadata = order, block_map, dims
    return params


def _csr(dense: np.ndarray) -> tuple[list[int], list[int], np.ndarray]:
    segments, indices, values = [0], [], []
    for row in dense:
        columns = np.nonzero(row)[0]
        indices += columns.tolist()
        values += row[columns].tolist()
        segments.append(len(indices))
    return segments, indices, np.array(values, dense.dtype)


def _block_csr(dense: np.ndarray, block: tuple[int, int]) -> tuple[list, list, np.ndarray]:
    """Block-sparse rows: CSR over [rows/bh, cols/bw] blocks, each block dense."""
    bh, bw = block
    segments, indices, values = [0], [], []
    for r in range(dense.shape[0] // bh):
        for c in range(dense.shape[1] // bw):
            tile = dense[r * bh:(r + 1) * bh, c * bw:(c + 1) * bw]
            if tile.any():
                indices.append(c)
                values.append(tile.reshape(-1))
        segments.append(len(indices))
    return segments, indices, np.concatenate(values).astype(dense.dtype)


def _sparse_weights(rng: np.random.Generator, shape, block=(1, 1)) -> np.ndarray:
    dense = rng.uniform(-1, 1, shape).astype(np.float32)
    mask = rng.random((shape[0] // block[0], shape[1] // block[1])) < 0.4
    return dense * np.kron(mask, np.ones(block, np.float32))


@pytest.mark.parametrize("layout", ["csr_rows", "csr_columns_first", "block_1x4"])
def test_densify_feeding_fully_connected(layout: str, builder, tmp_path: Path) -> None:
    """DENSIFY of a sparse weight constant -> FULLY_CONNECTED, TFLite's own layout."""
    rng = np.random.default_rng(7)
    if layout == "block_1x4":
        dense = _sparse_weights(rng, (6, 8), (1, 4))
        segments, indices, stored = _block_csr(dense, (1, 4))
        sparsity = _sparsity(builder, [0, 1, 2], [1], [
            _dimension(builder, 6), _dimension(builder, segments=segments, indices=indices),
            _dimension(builder, 4)])
    elif layout == "csr_columns_first":
        dense = _sparse_weights(rng, (6, 8))
        segments, indices, stored = _csr(np.ascontiguousarray(dense.T))
        sparsity = _sparsity(builder, [1, 0], [], [
            _dimension(builder, 8), _dimension(builder, segments=segments, indices=indices)])
    else:
        dense = _sparse_weights(rng, (6, 8))
        segments, indices, stored = _csr(dense)
        sparsity = _sparsity(builder, [0, 1], [], [
            _dimension(builder, 6), _dimension(builder, segments=segments, indices=indices)])
    weights = builder.tensor([6, 8], "FLOAT32", "sparse_w", data=stored, sparsity=sparsity)
    w = builder.tensor([6, 8], "FLOAT32", "w")
    builder.op("DENSIFY", [weights], [w])
    x = builder.tensor([2, 8], "FLOAT32", "x")
    out = builder.tensor([2, 6], "FLOAT32", "out")
    builder.op("FULLY_CONNECTED", [x, w, -1], [out],
               options=builder.options("FullyConnectedOptions"))
    builder.io([x], [out])
    check(write(builder, tmp_path / f"{layout}.tflite"))


# ---------------------------------------------------------------------------
# DILATE


DILATE = {
    "2d": ([3, 4], [2, 3], np.float32, 0.0),
    "3d_padding_value": ([2, 3, 2], [3, 1, 2], np.float32, -7.5),
    "int32_first_axis": ([4, 2], [2, 1], np.int32, 9),
    "none_dilated": ([2, 2], [1, 1], np.float32, 1.0),
    "bool": ([3, 2], [2, 2], np.bool_, True),
}


@pytest.mark.parametrize("name", list(DILATE))
def test_dilate(name: str, builder, tmp_path: Path) -> None:
    shape, factors, dtype, fill = DILATE[name]
    x = builder.tensor(shape, TYPES[dtype], "x")
    dilations = const(builder, np.array(factors, np.int32), "dilations")
    value = const(builder, np.array(fill, dtype), "padding_value")
    out = [(n - 1) * d + 1 for n, d in zip(shape, factors)]
    path = one_op(builder, tmp_path / f"{name}.tflite", "DILATE", [x, dilations, value], out,
                  TYPES[dtype], options2=builder.options("DilateOptions"))
    check(path)


# ---------------------------------------------------------------------------
# REDUCE_WINDOW

ADD, MUL, MINIMUM, MAXIMUM, ALL, ANY = 1, 2, 3, 4, 5, 6
REDUCE_WINDOW = {
    "max_pool_like": (MAXIMUM, [1, 6, 6, 2], [1, 2, 2, 1], [1, 2, 2, 1], [1, 1, 1, 1],
                      np.float32, -np.inf),
    "sum_overlapping": (ADD, [2, 7], [1, 3], [1, 2], [1, 1], np.float32, 0.0),
    "dilated_min": (MINIMUM, [5, 6], [2, 2], [1, 1], [2, 3], np.float32, np.inf),
    "product_with_init": (MUL, [4, 4], [2, 2], [2, 2], [1, 1], np.float32, 1.5),
    "int32_sum": (ADD, [3, 5], [3, 2], [1, 3], [1, 1], np.int32, 4),
    "int32_all": (ALL, [4, 6], [2, 3], [2, 3], [1, 1], np.int32, 1),
    "int32_any": (ANY, [4, 6], [1, 2], [1, 1], [1, 2], np.int32, 0),
}


def reduce_window_model(b, path: Path, function: int, shape, window, strides, dilations,
                        dtype, init) -> Path:
    x = b.tensor(shape, TYPES[dtype], "x")
    init_value = const(b, np.array(init, dtype), "init")
    params = [const(b, np.array(v, np.int64), n) for v, n in
              ((window, "window"), (strides, "strides"), (dilations, "dilations"))]
    span = [(w - 1) * d + 1 for w, d in zip(window, dilations)]
    out = [(n - s) // t + 1 for n, s, t in zip(shape, span, strides)]
    return one_op(b, path, "REDUCE_WINDOW", [x, init_value, *params], out, TYPES[dtype],
                  options2=b.options("ReduceWindowOptions", reduceFunction=function))


@pytest.mark.parametrize("name", list(REDUCE_WINDOW))
def test_reduce_window(name: str, builder, tmp_path: Path) -> None:
    path = reduce_window_model(builder, tmp_path / f"{name}.tflite", *REDUCE_WINDOW[name])
    feeds = None
    if name in ("int32_all", "int32_any"):
        rng = np.random.default_rng(5)
        feeds = [[(rng.random((4, 6)) < 0.8).astype(np.int32) * 3] for _ in range(2)]
    check(path, inputs=feeds)


def test_reduce_window_past_the_end_is_refused(builder, tmp_path: Path) -> None:
    """5 columns, window 2, stride 2: TFLite's ceiling makes a third window that
    reads past the input."""
    x = builder.tensor([1, 5], "FLOAT32", "x")
    init = const(builder, np.array(0.0, np.float32), "init")
    params = [const(builder, np.array(v, np.int64), n) for v, n in
              (([1, 2], "window"), ([1, 2], "strides"), ([1, 1], "dilations"))]
    path = one_op(builder, tmp_path / "rw.tflite", "REDUCE_WINDOW", [x, init, *params], [1, 3],
                  options2=builder.options("ReduceWindowOptions", reduceFunction=ADD))
    with pytest.raises(ConversionError, match="do not tile"):
        convert(path)


# ---------------------------------------------------------------------------
# SVDF

@dataclass(frozen=True)
class Svdf:
    batch: int
    inputs: int
    units: int
    rank: int
    memory: int
    bias: bool = True
    activation: int = 0  # NONE; 1 RELU, 4 TANH


SVDF = {
    "rank1": Svdf(batch=2, inputs=3, units=4, rank=1, memory=5),
    "rank2_relu": Svdf(batch=1, inputs=4, units=3, rank=2, memory=4, activation=1),
    "no_bias_tanh": Svdf(batch=3, inputs=2, units=2, rank=1, memory=3, bias=False,
                         activation=4),
    "memory_one": Svdf(batch=1, inputs=5, units=2, rank=3, memory=1),
}


def svdf_model(b, path: Path, c: Svdf, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    filters = c.units * c.rank

    def weights(*shape: int, name: str) -> int:
        return const(b, rng.uniform(-1, 1, shape).astype(np.float32), name)

    x = b.tensor([c.batch, c.inputs], "FLOAT32", "x")
    features = weights(filters, c.inputs, name="weights_feature")
    times = weights(filters, c.memory, name="weights_time")
    bias_index = weights(c.units, name="bias") if c.bias else -1
    state = b.tensor([c.batch, filters * c.memory], "FLOAT32", "state", is_variable=True)
    return one_op(b, path, "SVDF", [x, features, times, bias_index, state], [c.batch, c.units],
                  graph_inputs=[x], options=b.options(
                      "SVDFOptions", rank=c.rank, fusedActivationFunction=c.activation))


@pytest.mark.parametrize("name", list(SVDF))
def test_svdf_first_invocation(name: str, builder, tmp_path: Path) -> None:
    """One run per seed: TFLite's SVDF carries its variable state into the next
    invocation, the TOSA graph starts from the initial state (as validate does)."""
    check(svdf_model(builder, tmp_path / f"{name}.tflite", SVDF[name]), runs=1)


@pytest.mark.parametrize("asymmetric", [False, True], ids=["symmetric", "asymmetric"])
def test_svdf_hybrid_int8_weights(asymmetric: bool, builder, tmp_path: Path) -> None:
    """int8 weights with float activations: the feature product emulates
    TFLite's hybrid kernel (input rows quantized at run time), judged on TFLite's
    hybrid SVDF; with `--hybrid float` the weights are dequantized and the judge
    is TFLite on the model with those weights dequantized."""
    rng = np.random.default_rng(2)
    batch, inputs, units, rank, memory = 2, 4, 3, 2, 4
    filters = units * rank
    x = builder.tensor([batch, inputs], "FLOAT32", "x")
    features = builder.tensor([filters, inputs], "INT8", "weights_feature", scale=[0.01],
                              data=rng.integers(-127, 128, (filters, inputs)).astype(np.int8))
    times = builder.tensor([filters, memory], "INT8", "weights_time", scale=[0.008],
                           data=rng.integers(-127, 128, (filters, memory)).astype(np.int8))
    bias = const(builder, rng.uniform(-1, 1, units).astype(np.float32), "bias")
    state = builder.tensor([batch, filters * memory], "FLOAT32", "state", is_variable=True)
    path = one_op(builder, tmp_path / "hybrid.tflite", "SVDF", [x, features, times, bias, state],
                  [batch, units], graph_inputs=[x],
                  options=builder.options("SVDFOptions", rank=rank,
                                          asymmetricQuantizeInputs=asymmetric))
    conversion, report = check(path, runs=1)
    assert any("emulate TFLite's hybrid kernels" in note for note in report.notes)
    assert "svdf_hybrid" in {o["pattern"] for o in conversion.outcomes}
    report = validate(path, runs=1, hybrid="float")
    assert report.passed and any("dequantized" in note for note in report.notes)


# ---------------------------------------------------------------------------
# BITCAST and the refusals


def test_bitcast_between_identical_types_is_a_move(builder, tmp_path: Path) -> None:
    x = builder.tensor([2, 3], "INT32", "x")
    check(one_op(builder, tmp_path / "bitcast.tflite", "BITCAST", [x], [2, 3], "INT32"))


def test_zoo_bitcast_float_to_int_is_refused() -> None:
    with pytest.raises(ConversionError, match="reinterprets the bits of f32 as i32") as error:
        convert(model_path("unit/float32/bitcast.tflite"))
    assert [f.op_name for f in error.value.failures] == ["tfl.bitcast"]


def test_custom_op_is_refused_by_its_code(builder, tmp_path: Path) -> None:
    x = builder.tensor([4], "FLOAT32", "x")
    path = one_op(builder, tmp_path / "custom.tflite", "CUSTOM", [x], [4],
                  custom_code="MyMagicOp")
    with pytest.raises(ConversionError, match="custom op MyMagicOp has no TOSA lowering"):
        convert(path)


def test_concat_embeddings_is_refused(builder, tmp_path: Path) -> None:
    x = builder.tensor([2, 3], "INT32", "x")
    path = one_op(builder, tmp_path / "concat_embeddings.tflite", "CONCAT_EMBEDDINGS", [x],
                  [2, 8])
    with pytest.raises(ConversionError, match="TFLite has no kernel for it"):
        convert(path)


def test_hashtable_lookup_is_refused(builder, tmp_path: Path) -> None:
    lookup = builder.tensor([3], "INT32", "lookup")
    keys = const(builder, np.array([1, 5, 9], np.int32), "keys")
    values = const(builder, np.ones((3, 2), np.float32), "values")
    out = builder.tensor([3, 2], "FLOAT32", "out")
    hits = builder.tensor([3], "UINT8", "hits")
    builder.op("HASHTABLE_LOOKUP", [lookup, keys, values], [out, hits])
    builder.io([lookup], [out, hits])
    path = write(builder, tmp_path / "lookup.tflite")
    with pytest.raises(ConversionError, match="hash-table lookup") as error:
        convert(path)
    assert [f.op_name for f in error.value.failures] == ["tfl.hashtable_lookup"]


# ---------------------------------------------------------------------------
# CALL (tfl2tosa/passes/inline_calls.py): TFLite has no CALL kernel, so the inlined model is
# judged against TFLite running the same computation written without CALL.


@pytest.fixture
def with_call_inlining(monkeypatch: pytest.MonkeyPatch) -> None:
    """convert() with inline_calls run right after import (until convert runs it)."""
    load = tfl2tosa.tflite_import.load

    def load_and_inline(source):
        module = load(source)
        inline_calls(module)
        return module

    monkeypatch.setattr(tfl2tosa.tflite_import, "load", load_and_inline)


def _scaled_sum(b, graph: int, a: int, c: int, out: int, scale: float) -> None:
    """out = relu(a * scale + c), ops of `graph`."""
    factor = const(b, np.full((1, 4), scale, np.float32), f"scale{graph}", graph=graph)
    scaled = b.tensor([1, 4], "FLOAT32", f"scaled{graph}", graph=graph)
    b.op("MUL", [a, factor], [scaled], graph=graph, options=b.options("MulOptions"))
    b.op("ADD", [scaled, c], [out], graph=graph,
         options=b.options("AddOptions", fusedActivationFunction=1))


def call_models(tmp_path: Path) -> tuple[Path, Path]:
    """The same computation with CALLs (a nested call, a reused callee, an output
    passed straight through) and written out flat."""
    b = TfliteBuilder()
    x, y = b.tensor([1, 4], "FLOAT32", "x"), b.tensor([1, 4], "FLOAT32", "y")
    first, through = b.tensor([1, 4], "FLOAT32", "first"), b.tensor([1, 4], "FLOAT32", "th")
    second, out = b.tensor([1, 4], "FLOAT32", "second"), b.tensor([1, 4], "FLOAT32", "out")
    b.op("CALL", [x, y], [first, through], options=b.options("CallOptions", subgraph=1))
    b.op("CALL", [first, through], [second, b.tensor([1, 4], "FLOAT32", "unused")],
         options=b.options("CallOptions", subgraph=1))
    b.op("SUB", [second, through], [out], options=b.options("SubOptions"))
    b.io([x, y], [out])
    # Subgraph 1: (a, c) -> (outer(inner(a, c), c), c); subgraph 2: inner.
    g1 = b.subgraph("outer")
    a, c = b.tensor([1, 4], "FLOAT32", "a", graph=g1), b.tensor([1, 4], "FLOAT32", "c", graph=g1)
    inner, result = (b.tensor([1, 4], "FLOAT32", n, graph=g1) for n in ("inner", "result"))
    b.op("CALL", [a, c], [inner], graph=g1, options=b.options("CallOptions", subgraph=2))
    _scaled_sum(b, g1, inner, c, result, -0.5)
    b.io([a, c], [result, c], graph=g1)
    g2 = b.subgraph("inner")
    a2, c2, r2 = (b.tensor([1, 4], "FLOAT32", n, graph=g2) for n in ("a", "c", "r"))
    _scaled_sum(b, g2, a2, c2, r2, 2.0)
    b.io([a2, c2], [r2], graph=g2)
    called = write(b, tmp_path / "calls.tflite")

    f = TfliteBuilder()
    x, y = f.tensor([1, 4], "FLOAT32", "x"), f.tensor([1, 4], "FLOAT32", "y")
    value = x
    for step in range(2):
        inner, outer = (f.tensor([1, 4], "FLOAT32", f"{n}{step}") for n in ("inner", "outer"))
        _scaled_sum(f, 0, value, y, inner, 2.0)
        _scaled_sum(f, 0, inner, y, outer, -0.5)
        value = outer
    out = f.tensor([1, 4], "FLOAT32", "out")
    f.op("SUB", [value, y], [out], options=f.options("SubOptions"))
    f.io([x, y], [out])
    return called, write(f, tmp_path / "flat.tflite")


def test_call_inlined_matches_tflite_on_the_flat_model(tmp_path: Path,
                                                       with_call_inlining) -> None:
    called, flat = call_models(tmp_path)
    module, conversion = convert(called)
    assert len(module.graphs) == 1  # both callees inlined and removed
    flat_module, flat_conversion = convert(flat)
    feeds = seeded_inputs(called, 3, seed=6)
    assert validate(flat, module=flat_module, conversion=flat_conversion, inputs=feeds).passed
    family, bounds = float_tolerance({o["op_name"] for o in conversion.outcomes})
    for run in feeds:
        (ours,) = reference_model.run(module, run).values()
        (expected,) = reference_model.run(flat_module, run).values()
        assert compare("out", expected, ours, lsb_tolerance=0, float_bounds=bounds,
                       family=family).exact
    check_against_arm(module, conversion, feeds)


def test_recursive_call_is_refused(builder, tmp_path: Path, with_call_inlining) -> None:
    x = builder.tensor([1, 4], "FLOAT32", "x")
    out = builder.tensor([1, 4], "FLOAT32", "out")
    builder.op("CALL", [x], [out], options=builder.options("CallOptions", subgraph=1))
    builder.io([x], [out])
    g = builder.subgraph("again")
    a, r = builder.tensor([1, 4], "FLOAT32", "a", graph=g), builder.tensor([1, 4], "FLOAT32",
                                                                           "r", graph=g)
    builder.op("CALL", [a], [r], graph=g, options=builder.options("CallOptions", subgraph=1))
    builder.io([a], [r], graph=g)
    # The structural check refuses the cycle before inlining would start.
    with pytest.raises(ModelError, match="call each other in a cycle"):
        convert(write(builder, tmp_path / "recursive.tflite"))
