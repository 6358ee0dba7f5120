"""Float legalization of the convolution family, on corner cases the TFLite
converter rarely emits: each case is a one-op model built with TfliteBuilder
and checked against the TFLite interpreter and Arm's reference model
(`check_model`). The converter-made models of the zoo are covered by
test_float_zoo.py.

Also here: hybrid (dynamic range) ops in `--hybrid float` mode, float
activations with int8 weights dequantized at conversion time (the emulation of
TFLite's hybrid kernels, the default, is tests/test_hybrid.py). The tests pin
two facts: the float lowering equals TFLite's float kernel on the dequantized
weights, and differs from TFLite's hybrid kernel by no more than the
activations' quantization error can explain.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from e2e import check_against_arm, check_model

import reference_model
from tfl2tosa.pipeline import convert
from tfl2tosa.validation import validate

RNG = np.random.default_rng(7)


# ---------------------------------------------------------------------------
# One-op models


@dataclass(frozen=True)
class Input:
    """A graph input (float32 unless `type_name` says otherwise)."""

    shape: tuple[int, ...]
    type_name: str = "FLOAT32"


@dataclass(frozen=True)
class Int8Weights:
    """A constant int8 tensor quantized per channel along `axis` (zero points 0)."""

    values: np.ndarray
    scales: tuple[float, ...]
    axis: int = 0

    def dequantized(self) -> np.ndarray:
        shape = [1] * self.values.ndim
        shape[self.axis] = len(self.scales)
        scales = np.asarray(self.scales, dtype=np.float64).reshape(shape)
        return (self.values.astype(np.float64) * scales).astype(np.float32)


@dataclass
class OneOp:
    """A TFLite model with one operator. Operands: Input, a numpy constant,
    Int8Weights, or None (an omitted optional operand)."""

    code: str
    operands: list[Any]
    out_shape: tuple[int, ...]
    options: tuple[str, dict[str, Any]] | None = None
    version: int = 1
    feeds: list[list[np.ndarray]] | None = field(default=None)

    def build(self, builder: Any, *, dequantize_weights: bool = False,
              float_type: str = "FLOAT32") -> bytes:
        """The model bytes; `float_type` "FLOAT16" makes every float tensor f16."""
        float_dtype = {"FLOAT32": np.float32, "FLOAT16": np.float16}[float_type]
        inputs, indices = [], []
        for i, operand in enumerate(self.operands):
            if operand is None:
                indices.append(-1)
            elif isinstance(operand, Input):
                type_name = float_type if operand.type_name == "FLOAT32" else operand.type_name
                index = builder.tensor(list(operand.shape), type_name, f"input_{i}")
                inputs.append(index)
                indices.append(index)
            elif isinstance(operand, Int8Weights) and dequantize_weights:
                array = operand.dequantized()
                indices.append(builder.tensor(list(array.shape), "FLOAT32", f"const_{i}",
                                              data=array))
            elif isinstance(operand, Int8Weights):
                indices.append(builder.tensor(
                    list(operand.values.shape), "INT8", f"const_{i}",
                    data=operand.values.astype(np.int8), scale=list(operand.scales),
                    zero_point=[0] * len(operand.scales), axis=operand.axis))
            else:
                array = np.asarray(operand)
                if array.dtype == np.float32:
                    array, type_name = array.astype(float_dtype), float_type
                else:
                    type_name = {"int32": "INT32"}[array.dtype.name]
                indices.append(builder.tensor(list(array.shape), type_name, f"const_{i}",
                                              data=array))
        output = builder.tensor(list(self.out_shape), float_type, "output")
        options = builder.options(self.options[0], **self.options[1]) if self.options else None
        builder.op(self.code, indices, [output], options=options)
        builder.model.operatorCodes[-1].version = self.version
        builder.io(inputs, [output])
        return builder.to_bytes()


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(data)
    return path


def weights(*shape: int, rng: np.random.Generator = RNG) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def weights16(*shape: int) -> np.ndarray:
    """Weights exactly representable in float16 (f16 and f32 models then hold equal values)."""
    return weights(*shape).astype(np.float16).astype(np.float32)


def tflite_outputs(data: bytes, feeds: list[np.ndarray],
                   resolver: str | None = None) -> list[np.ndarray]:
    """The TFLite interpreter's outputs for one run: builtin reference kernels,
    or (as validate does) the builtin kernels when the reference resolver lacks
    the op version (e.g. ELU v1); `resolver` pins one OpResolverType."""
    import warnings

    import tensorflow as tf

    warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated.*")
    resolvers = [resolver] if resolver else ["BUILTIN_REF", "BUILTIN_WITHOUT_DEFAULT_DELEGATES"]
    for name in resolvers:
        try:
            interpreter = tf.lite.Interpreter(
                model_content=data,
                experimental_op_resolver_type=getattr(tf.lite.experimental.OpResolverType,
                                                      name))
            interpreter.allocate_tensors()
            break
        except (RuntimeError, ValueError):
            if name == resolvers[-1]:
                raise
    for detail, array in zip(interpreter.get_input_details(), feeds):
        interpreter.set_tensor(detail["index"], array)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


# float16 lowering: TFLite has no f16 kernels for these ops, so the judge is its f32
# kernel on the same (f16-representable) values; the allowed difference is f16
# rounding of the data and of the few intermediates the lowering keeps in f16.
FLOAT16_TOLERANCE = {"rtol": 4e-3, "atol": 4e-3}


def check_float16(case: OneOp, tmp_path: Path) -> None:
    """Convert `case` with every float tensor f16 and compare with TFLite's f32
    kernel on the f32 twin, then with Arm's reference model on the f16 graph."""
    from conftest import TfliteBuilder

    half = write(tmp_path, "half", case.build(TfliteBuilder(), float_type="FLOAT16"))
    module, conversion = convert(half)
    feeds = [RNG.uniform(-2.0, 2.0, size=o.shape).astype(np.float16)
             for o in case.operands if isinstance(o, Input)]
    ours = next(iter(reference_model.run(module, feeds).values()))
    assert ours.dtype == np.float16
    theirs = tflite_outputs(case.build(TfliteBuilder()), [f.astype(np.float32) for f in feeds])
    np.testing.assert_allclose(ours.astype(np.float32), theirs[0], **FLOAT16_TOLERANCE)
    check_against_arm(module, conversion, [feeds])


def padding(name: str) -> int:
    return {"SAME": 0, "VALID": 1}[name]


def activation(name: str) -> int:
    return {"NONE": 0, "RELU": 1, "RELU_N1_TO_1": 2, "RELU6": 3, "TANH": 4}[name]


# ---------------------------------------------------------------------------
# Convolutions


def conv_2d(in_shape, filter_shape, out_shape, pad="SAME", stride=(1, 1), dilation=(1, 1),
            bias=True, act="NONE", rng: np.random.Generator = RNG) -> OneOp:
    oc = filter_shape[0]
    return OneOp("CONV_2D", [Input(in_shape), weights(*filter_shape, rng=rng),
                             weights(oc, rng=rng) if bias else None], out_shape,
                 ("Conv2DOptions", {"padding": padding(pad), "strideH": stride[0],
                                    "strideW": stride[1], "dilationHFactor": dilation[0],
                                    "dilationWFactor": dilation[1],
                                    "fusedActivationFunction": activation(act)}))


def depthwise(in_shape, filter_shape, out_shape, pad="SAME", stride=(1, 1), dilation=(1, 1),
              act="NONE", rng: np.random.Generator = RNG) -> OneOp:
    return OneOp("DEPTHWISE_CONV_2D",
                 [Input(in_shape), weights(*filter_shape, rng=rng),
                  weights(filter_shape[3], rng=rng)], out_shape,
                 ("DepthwiseConv2DOptions", {
                     "padding": padding(pad), "strideH": stride[0], "strideW": stride[1],
                     "depthMultiplier": filter_shape[3] // in_shape[3],
                     "dilationHFactor": dilation[0], "dilationWFactor": dilation[1],
                     "fusedActivationFunction": activation(act)}), version=2)


def transpose_conv(in_shape, filter_shape, out_shape, pad="SAME", stride=(2, 2), bias=False,
                   act="NONE") -> OneOp:
    operands = [np.asarray(out_shape, dtype=np.int32), weights(*filter_shape), Input(in_shape)]
    if bias:
        operands.append(weights(filter_shape[0]))
    return OneOp("TRANSPOSE_CONV", operands, out_shape,
                 ("TransposeConvOptions", {"padding": padding(pad), "strideH": stride[0],
                                           "strideW": stride[1],
                                           "fusedActivationFunction": activation(act)}),
                 version=4 if act != "NONE" else 3 if bias else 1)


def conv_3d(in_shape, filter_shape, out_shape, pad="SAME", stride=(1, 1, 1),
            dilation=(1, 1, 1), bias=False, transpose=False) -> OneOp:
    options = ("Conv3DOptions", {
        "padding": padding(pad), "strideD": stride[0], "strideH": stride[1],
        "strideW": stride[2], "dilationDFactor": dilation[0], "dilationHFactor": dilation[1],
        "dilationWFactor": dilation[2]})
    oc = filter_shape[3] if transpose else filter_shape[4]
    bias_operand = weights(oc) if bias else None
    if transpose:
        return OneOp("CONV_3D_TRANSPOSE", [np.asarray(out_shape, dtype=np.int32),
                                           weights(*filter_shape), Input(in_shape),
                                           bias_operand], out_shape, options)
    return OneOp("CONV_3D", [Input(in_shape), weights(*filter_shape), bias_operand], out_shape,
                 options)


CONV_CASES = [
    # VALID, 8 = 3 + 2*2 + 1: one input row and column no window reads.
    pytest.param(conv_2d((1, 8, 8, 2), (3, 3, 3, 2), (1, 3, 3, 3), "VALID", (2, 2)),
                 id="conv2d_valid_remainder"),
    # SAME with stride 3 > kernel 1: TFLite pads nothing and never reads 2 rows.
    pytest.param(conv_2d((1, 6, 7, 2), (4, 1, 1, 2), (1, 2, 3, 4), "SAME", (3, 3)),
                 id="conv2d_same_stride_above_kernel"),
    pytest.param(conv_2d((1, 9, 10, 3), (4, 3, 3, 3), (1, 5, 5, 4), "SAME", (2, 2), (2, 2)),
                 id="conv2d_same_dilation2_stride2"),
    pytest.param(conv_2d((1, 11, 9, 2), (2, 3, 2, 2), (1, 3, 3, 2), "VALID", (2, 3), (3, 2)),
                 id="conv2d_valid_dilation_stride_mixed"),
    pytest.param(conv_2d((2, 5, 5, 4), (6, 3, 3, 2), (2, 5, 5, 6)), id="conv2d_grouped_2"),
    pytest.param(conv_2d((1, 6, 6, 6), (6, 3, 3, 2), (1, 3, 3, 6), "SAME", (2, 2)),
                 id="conv2d_grouped_3_stride2"),
    # TFLite's float kernels ignore a fused TANH (CalculateActivationRange).
    pytest.param(conv_2d((1, 5, 5, 3), (4, 3, 3, 3), (1, 5, 5, 4), act="TANH"),
                 id="conv2d_fused_tanh_ignored"),
    pytest.param(conv_2d((1, 5, 5, 3), (4, 3, 3, 3), (1, 3, 3, 4), "VALID", act="RELU_N1_TO_1"),
                 id="conv2d_fused_relu_n1_to_1"),
    pytest.param(depthwise((1, 9, 9, 2), (1, 3, 3, 6), (1, 4, 4, 6), "VALID", (2, 2)),
                 id="depthwise_valid_remainder_multiplier3"),
    pytest.param(depthwise((1, 8, 7, 3), (1, 3, 2, 3), (1, 4, 4, 3), "SAME", (2, 2), (2, 3),
                           act="RELU6"),
                 id="depthwise_same_dilation_stride_relu6"),
    pytest.param(transpose_conv((1, 4, 3, 2), (3, 3, 3, 2), (1, 7, 5, 3), "SAME"),
                 id="transpose_conv_same_odd_output"),
    pytest.param(transpose_conv((1, 3, 4, 2), (3, 3, 2, 2), (1, 8, 10, 3), "VALID", bias=True),
                 id="transpose_conv_valid_extra_row_bias"),
    pytest.param(transpose_conv((1, 5, 5, 2), (2, 4, 4, 2), (1, 15, 15, 2), "SAME", (3, 3),
                                act="RELU"),
                 id="transpose_conv_same_stride3_kernel4_relu"),
    pytest.param(transpose_conv((1, 4, 4, 3), (2, 1, 1, 3), (1, 4, 4, 2), "VALID", (1, 1)),
                 id="transpose_conv_1x1_stride1"),
    pytest.param(conv_3d((1, 5, 6, 7, 2), (2, 3, 3, 2, 3), (1, 2, 2, 3, 3), "VALID", (2, 2, 2),
                         bias=True),
                 id="conv3d_valid_remainder_bias"),
    pytest.param(conv_3d((1, 4, 6, 6, 2), (2, 2, 3, 2, 2), (1, 4, 3, 3, 2), "SAME", (1, 2, 2),
                         (1, 2, 1)),
                 id="conv3d_same_dilation_stride"),
    pytest.param(conv_3d((1, 2, 3, 4, 3), (2, 3, 3, 2, 3), (1, 3, 6, 12, 2), "SAME", (2, 2, 3),
                         bias=True, transpose=True),
                 id="conv3d_transpose_same_strides_bias"),
    pytest.param(conv_3d((1, 3, 3, 3, 2), (2, 3, 2, 2, 2), (1, 4, 7, 6, 2), "VALID", (1, 2, 2),
                         transpose=True),
                 id="conv3d_transpose_valid"),
    pytest.param(conv_3d((1, 3, 4, 4, 2), (2, 2, 3, 2, 2), (1, 3, 8, 8, 2), "SAME", (1, 2, 2),
                         (1, 2, 1), transpose=True),
                 id="conv3d_transpose_same_dilation"),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv(case: OneOp, builder: Any, tmp_path: Path) -> None:
    check_model(write(tmp_path, "model", case.build(builder)), allowed_paths=("float",))


# Long sums (a 1x1 over 700 channels, a 3x3 over 48) are where summation orders part.
# Their values come from their own generator: RNG's sequence, which other modules'
# cases draw from too, stays as it was.
IN_ORDER_RNG = np.random.default_rng(70)
IN_ORDER_CASES = [case for case in CONV_CASES if case.values[0].code != "TRANSPOSE_CONV"] + [
    pytest.param(conv_2d((1, 4, 4, 700), (6, 1, 1, 700), (1, 4, 4, 6), rng=IN_ORDER_RNG),
                 id="conv2d_1x1_700"),
    pytest.param(conv_2d((1, 7, 7, 48), (5, 3, 3, 48), (1, 4, 4, 5), "SAME", (2, 2),
                         act="RELU6", rng=IN_ORDER_RNG), id="conv2d_3x3_48_stride2_relu6"),
    pytest.param(depthwise((2, 9, 9, 8), (1, 5, 5, 8), (2, 9, 9, 8), rng=IN_ORDER_RNG),
                 id="depthwise_5x5"),
]


@pytest.mark.parametrize("case", IN_ORDER_CASES)
def test_float_convolutions_give_tflites_reference_bits(case: OneOp, builder: Any,
                                                         tmp_path: Path) -> None:
    """CONV_2D, DEPTHWISE_CONV_2D and CONV_3D (and CONV_3D_TRANSPOSE, lowered to a
    CONV3D) sum in float32 in the order of TFLite's reference kernels (taps, then
    input channels, the bias after), so ours give their bits, not merely close ones."""
    data = case.build(builder)
    rng = np.random.default_rng(len(case.operands[0].shape) + case.out_shape[-1])
    feeds = [rng.standard_normal(o.shape).astype(np.float32) for o in case.operands
             if isinstance(o, Input)]
    module, _ = convert(write(tmp_path, "model", data))
    ours = list(reference_model.run(module, feeds).values())[0]
    theirs = tflite_outputs(data, feeds, "BUILTIN_REF")[0]
    np.testing.assert_array_equal(ours.view(np.uint32), theirs.view(np.uint32))


# ---------------------------------------------------------------------------
# FULLY_CONNECTED and BATCH_MATMUL


def fully_connected(in_shape, units, out_shape, keep_num_dims=False, bias=True, act="NONE",
                    weights_input=False) -> OneOp:
    filter_ = Input((units, in_shape[-1])) if weights_input else weights(units, in_shape[-1])
    return OneOp("FULLY_CONNECTED", [Input(in_shape), filter_, weights(units) if bias else None],
                 out_shape, ("FullyConnectedOptions", {
                     "keepNumDims": keep_num_dims,
                     "fusedActivationFunction": activation(act)}), version=5)


def batch_matmul(x, y, out_shape, adj_x=False, adj_y=False) -> OneOp:
    return OneOp("BATCH_MATMUL", [x, y], out_shape,
                 ("BatchMatMulOptions", {"adjX": adj_x, "adjY": adj_y}))


MATMUL_CASES = [
    pytest.param(fully_connected((2, 3, 4), 5, (2, 3, 5), keep_num_dims=True),
                 id="fully_connected_keep_num_dims"),
    pytest.param(fully_connected((2, 3, 4), 5, (6, 5)), id="fully_connected_flattened_rows"),
    pytest.param(fully_connected((3, 8), 4, (3, 4), bias=False, act="RELU6"),
                 id="fully_connected_no_bias_relu6"),
    pytest.param(fully_connected((2, 6), 3, (2, 3), weights_input=True),
                 id="fully_connected_runtime_weights"),
    pytest.param(batch_matmul(Input((2, 1, 3, 4)), Input((3, 4, 5)), (2, 3, 3, 5)),
                 id="batch_matmul_broadcast_batch"),
    pytest.param(batch_matmul(Input((2, 4, 3)), Input((2, 5, 4)), (2, 3, 5), True, True),
                 id="batch_matmul_adj_x_adj_y"),
    pytest.param(batch_matmul(Input((1, 4, 3)), Input((2, 4, 5)), (2, 3, 5), adj_x=True),
                 id="batch_matmul_adj_x_broadcast_lhs"),
    pytest.param(batch_matmul(Input((2, 3, 4)), Input((1, 5, 4)), (2, 3, 5), adj_y=True),
                 id="batch_matmul_adj_y_broadcast_rhs"),
    pytest.param(batch_matmul(Input((2, 3, 3, 4)), weights(4, 6), (2, 3, 3, 6)),
                 id="batch_matmul_constant_rank2_rhs"),
    pytest.param(batch_matmul(Input((3, 4)), weights(5, 4), (3, 5), adj_y=True),
                 id="batch_matmul_rank2_adj_y"),
    pytest.param(batch_matmul(Input((2, 2, 2, 3, 4)), Input((2, 1, 2, 4, 2)), (2, 2, 2, 3, 2)),
                 id="batch_matmul_rank5"),
]


@pytest.mark.parametrize("case", MATMUL_CASES)
def test_matmul(case: OneOp, builder: Any, tmp_path: Path) -> None:
    check_model(write(tmp_path, "model", case.build(builder)), allowed_paths=("float",))


def test_batch_matmul_adj_x_broadcast_rhs(builder: Any, tmp_path: Path) -> None:
    """adj_x with a broadcast right operand, judged by TFLite's optimized kernel:
    the builtin reference kernel (BUILTIN_REF, TF 2.20) returns wrong values for
    exactly this combination (lhs batch 2, rhs batch 1, adj_x), while numpy
    and the optimized kernel agree."""
    case = batch_matmul(Input((2, 4, 3)), Input((1, 4, 5)), (2, 3, 5), adj_x=True)
    data = case.build(builder)
    module, conversion = convert(write(tmp_path, "model", data))
    x = RNG.uniform(-2.0, 2.0, size=(2, 4, 3)).astype(np.float32)
    y = RNG.uniform(-2.0, 2.0, size=(1, 4, 5)).astype(np.float32)
    theirs = tflite_outputs(data, [x, y], resolver="BUILTIN")[0]
    ours = next(iter(reference_model.run(module, [x, y]).values()))
    np.testing.assert_allclose(theirs, np.swapaxes(x, 1, 2) @ y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
    check_against_arm(module, conversion, [[x, y]])


def test_sparse_weights_refused_with_reason(builder: Any, tmp_path: Path) -> None:
    """A sparse FULLY_CONNECTED filter (the importer keeps its stored values only)
    is refused by name instead of being reshaped into garbage."""
    from tfl2tosa.errors import ConversionError

    s = builder.s
    x = builder.tensor([1, 4], "FLOAT32", "x")
    rows = s.DimensionMetadataT()
    rows.format, rows.denseSize = s.DimensionType.DENSE, 2
    cols = s.DimensionMetadataT()
    cols.format = s.DimensionType.SPARSE_CSR
    cols.arraySegmentsType = cols.arrayIndicesType = s.SparseIndexVector.Int32Vector
    cols.arraySegments, cols.arrayIndices = s.Int32VectorT(), s.Int32VectorT()
    cols.arraySegments.values, cols.arrayIndices.values = [0, 1, 2], [0, 3]
    sparsity = s.SparsityParametersT()
    sparsity.traversalOrder, sparsity.blockMap, sparsity.dimMetadata = [0, 1], [], [rows, cols]
    w = builder.tensor([2, 4], "FLOAT32", "w", data=np.array([1.0, 2.0], np.float32),
                       sparsity=sparsity)
    y = builder.tensor([1, 2], "FLOAT32", "y")
    builder.op("FULLY_CONNECTED", [x, w, -1], [y],
               options=builder.options("FullyConnectedOptions"))
    builder.io([x], [y])
    with pytest.raises(ConversionError, match="sparse weights"):
        convert(write(tmp_path, "sparse", builder.to_bytes()))


def _int8_conv_module(weights_constant: bool) -> object:
    """An int8 CONV_2D (weights a run-time input, or an int8 constant with a
    float input and result: the hybrid shape)."""
    import numpy as np

    from tfl2tosa.ir.core import Graph, Module, Op
    from tfl2tosa.ir.types import TensorType, UniformQuantized, f32, i8

    q = UniformQuantized(i8, f32, 0.5, 0)
    module = Module()
    graph = module.add_graph(Graph("main"))
    if weights_constant:
        x = graph.add_input("x", TensorType((1, 4, 4, 2), f32))
        w = graph.append(Op("tosa.const", [], [TensorType((3, 1, 1, 2), q)],
                            {"values": np.ones((3, 1, 1, 2), np.int8)})).result
        result = TensorType((1, 4, 4, 3), f32)
    else:
        x = graph.add_input("x", TensorType((1, 4, 4, 2), q))
        w = graph.add_input("w", TensorType((3, 1, 1, 2), q))
        result = TensorType((1, 4, 4, 3), q)
    op = graph.append(Op("tfl.conv_2d", [x, w], [result],
                         {"padding": "SAME", "stride_h": 1, "stride_w": 1},
                         result_names=["y"]))
    graph.set_outputs(op.results)
    return module


@pytest.mark.parametrize("weights_constant", [False, True], ids=["int8", "hybrid_weights"])
def test_driver_serves_a_float_pattern_only_float_activations(monkeypatch: pytest.MonkeyPatch,
                                                              weights_constant: bool) -> None:
    """The float CONV_2D pattern declares it takes quantized constant weights
    (operand 1), never quantized activations: the driver hands it the hybrid
    shape as it is, and an int8 op only as the fallback's float stand-in."""
    import legalize.conv  # noqa: F401  (registers the patterns spied on)
    from legalize import registry
    from legalize.driver import legalize as run_legalize
    from tfl2tosa.ir.types import TensorType, is_quantized

    seen: list[tuple[bool, ...]] = []
    entry = registry.LABELS["conv_2d"]

    def spy(op, rw):  # type: ignore[no-untyped-def]
        seen.append(tuple(is_quantized(v.type.element) for v in (*op.operands, *op.results)
                          if isinstance(v.type, TensorType)))
        return entry.fn(op, rw)

    spied = entry.replace(fn=spy)
    monkeypatch.setitem(registry.LABELS, "conv_2d", spied)
    monkeypatch.setitem(registry.PATTERNS, "tfl.conv_2d",
                        [spied if e is entry else e for e in registry.PATTERNS["tfl.conv_2d"]])
    monkeypatch.setattr(registry, "_ORDERED", {})
    module = _int8_conv_module(weights_constant)
    outcome, = run_legalize(module, disabled={"conv_2d_hybrid", "conv_2d_int"}).outcomes
    if weights_constant:
        assert seen == [(False, True, False)]
        assert (outcome.path, outcome.pattern, outcome.weights) == (
            "float", "conv_2d", "dequantized-constant")
    else:
        assert seen == [(False, False, False)]  # the stand-in: dequantized operands
        assert (outcome.path, outcome.pattern) == ("fallback", "conv_2d")
        assert outcome.reason == ("tfl.conv_2d: quantized types need the integer path; "
                                  "tfl.conv_2d: no uint8 tensors")


# ---------------------------------------------------------------------------
# Hybrid (dynamic range) ops


def int8_weights(shape: tuple[int, ...], axis: int = 0, per_channel: bool = True
                 ) -> Int8Weights:
    values = RNG.integers(-127, 128, size=shape).astype(np.int8)
    count = shape[axis] if per_channel else 1
    scales = tuple(float(s) for s in RNG.uniform(0.002, 0.02, size=count).astype(np.float32))
    return Int8Weights(values, scales, axis=axis)


def hybrid_fully_connected(asymmetric: bool) -> OneOp:
    return OneOp("FULLY_CONNECTED", [Input((3, 16)), int8_weights((6, 16)), weights(6)], (3, 6),
                 ("FullyConnectedOptions", {"asymmetricQuantizeInputs": asymmetric}),
                 version=11)


HYBRID_CASES = [
    pytest.param(hybrid_fully_connected(True), id="hybrid_fully_connected_asymmetric"),
    pytest.param(hybrid_fully_connected(False), id="hybrid_fully_connected_symmetric"),
]

HYBRID_OTHER_CASES = [
    pytest.param(OneOp("CONV_2D", [Input((1, 6, 6, 3)), int8_weights((4, 3, 3, 3)), weights(4)],
                       (1, 3, 3, 4), ("Conv2DOptions", {"padding": 0, "strideH": 2,
                                                        "strideW": 2}), version=5),
                 id="hybrid_conv2d_per_channel"),
    pytest.param(OneOp("DEPTHWISE_CONV_2D", [Input((1, 5, 5, 3)), int8_weights((1, 3, 3, 6), 3),
                                             weights(6)], (1, 5, 5, 6),
                       ("DepthwiseConv2DOptions", {"padding": 0, "strideH": 1, "strideW": 1,
                                                   "depthMultiplier": 2}), version=6),
                 id="hybrid_depthwise_per_channel"),
    pytest.param(OneOp("BATCH_MATMUL", [Input((2, 3, 8)), int8_weights((8, 5), per_channel=False)],
                       (2, 3, 5), ("BatchMatMulOptions", {}), version=4),
                 id="hybrid_batch_matmul_per_tensor"),
]


@pytest.mark.parametrize("case", HYBRID_CASES + HYBRID_OTHER_CASES)
def test_hybrid_equals_float_kernel_on_dequantized_weights(case: OneOp, tmp_path: Path) -> None:
    """The float-mode lowering of the int8-weight model matches TFLite's float
    kernel on the same model with the weights dequantized (arithmetic tolerance)."""
    from conftest import TfliteBuilder

    hybrid = write(tmp_path, "hybrid", case.build(TfliteBuilder()))
    float_model = write(tmp_path, "float", case.build(TfliteBuilder(), dequantize_weights=True))
    module, conversion = convert(hybrid, hybrid="float")
    assert f"tfl.{case.code.lower()}" in {o["op_name"] for o in conversion.outcomes}
    report = validate(float_model, module=module, conversion=conversion, runs=2)
    assert report.passed, [o.__dict__ for o in report.outputs]


@pytest.mark.parametrize("case", HYBRID_CASES)
def test_hybrid_gap_is_activation_quantization(case: OneOp, tmp_path: Path) -> None:
    """TFLite's hybrid FULLY_CONNECTED quantizes each input row to int8 (scale
    s = range / 255 asymmetric, max|x| / 127 symmetric): every product then
    carries an input error of at most s / 2, so |ours - TFLite| <= s / 2 *
    sum|w| per output. The lowering must stay inside that bound, and the
    bound is what it costs (the gap is not zero)."""
    from conftest import TfliteBuilder

    import reference_model

    data = case.build(TfliteBuilder())
    module, _ = convert(write(tmp_path, "hybrid", data), hybrid="float")
    x = RNG.uniform(-2.0, 2.0, size=(3, 16)).astype(np.float32)
    theirs = tflite_outputs(data, [x])[0]
    ours = next(iter(reference_model.run(module, [x]).values()))
    w = case.operands[1].dequantized().astype(np.float64)
    asymmetric = case.options[1]["asymmetricQuantizeInputs"]
    if asymmetric:
        step = (np.maximum(x.max(axis=1), 0) - np.minimum(x.min(axis=1), 0)) / 255.0
    else:
        step = np.abs(x).max(axis=1) / 127.0
    bound = (step / 2)[:, None] * np.abs(w).sum(axis=1)[None, :] + 1e-5
    gap = np.abs(ours.astype(np.float64) - theirs)
    assert np.all(gap <= bound), f"gap {gap.max()} exceeds the quantization bound"
    assert gap.max() > 0


@pytest.mark.parametrize("dtype,value,fits", [
    (np.int32, (1 << 31) - 1, True),     # an int32 bias always fits an i32 accumulator
    (np.int64, (1 << 31) - 1, True),
    (np.int64, 1 << 31, False),          # TFLite's int64 bias beyond int32
], ids=["int32_max", "int64_in_range", "int64_too_wide"])
def test_constant_bias_must_fit_the_accumulator(dtype, value, fits) -> None:
    from legalize.integer.support import accumulator_bias
    from tfl2tosa.ir.core import Graph, Op
    from tfl2tosa.ir.rewrite import Failure, Rewriter
    from tfl2tosa.ir.types import TensorType, i32, i64

    graph = Graph("main")
    stored = TensorType((2,), i32 if dtype is np.int32 else i64)
    bias = graph.append(Op("tfl.pseudo_const", [], [stored],
                           {"value": np.array([value, -5], dtype=dtype)})).result
    op = Op("tfl.conv_2d", [graph.add_input("x", TensorType((1, 2), i32)),
                            graph.add_input("w", TensorType((1, 2), i32)), bias],
            [TensorType((1, 2), i32)])
    made = accumulator_bias(Rewriter(graph, [], op), op, 2, 2, i32)
    if fits:
        assert made.owner.attrs["values"].tolist() == [value, -5]
        assert made.owner.attrs["values"].dtype == np.int32
    else:
        assert isinstance(made, Failure) and "bias values do not fit i32" in made.reason
