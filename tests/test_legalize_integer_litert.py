"""Integer convolutions and matrix products on the builtin kernels of both TFLite
runtimes `validate` can use (BUILTIN_WITHOUT_DEFAULT_DELEGATES; tfl2tosa.kernels).

TensorFlow 2.20 and LiteRT 2.3 run the same optimized int8 CONV_2D,
DEPTHWISE_CONV_2D and FULLY_CONNECTED (cpu_backend_gemm, ruy: GEMM_ROUND), but
LiteRT has no optimized BATCH_MATMUL any more: its builtin resolver runs the
reference kernel, which rounds twice, ties away from zero (DOUBLE_ROUND). So
convert(kernels="optimized") is exact against TensorFlow's builtin kernels,
convert(kernels="litert-optimized") against LiteRT's, and on these inputs the two
runtimes disagree for BATCH_MATMUL and agree for the rest. int16x8 convolutions
and matrix products compute the same on both runtimes and both resolvers here
(int64 bias: the reference kernel everywhere). `validate` converts for the
runtime and resolver that judge, and so does `batch`.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TfliteBuilder
from e2e import check_against_arm
from test_legalize_integer import conv_model, depthwise_model, fully_connected_model
from test_legalize_integer_matmul import _int8_matmul_model
from tflite_ref import reference_outputs, write_model

import reference_model
from tfl2tosa.batch.job import JobOptions, convert_and_validate
from tfl2tosa.kernels import BUILTIN_KERNELS
from tfl2tosa.pipeline import convert
from tfl2tosa.validation import as_graph_input, random_input, validate
from tfl2tosa.validation.judge import _runtime

RUNTIMES = tuple(BUILTIN_KERNELS)   # ai-edge-litert, tensorflow
pytestmark = pytest.mark.filterwarnings("ignore:.*tf.lite.Interpreter is deprecated")


def builtin_outputs(path, feeds: list[np.ndarray], backend: str) -> np.ndarray:
    """`backend`'s output on its builtin kernels without delegates."""
    Interpreter, resolvers, _ = _runtime(backend)
    interpreter = Interpreter(
        model_path=str(path),
        experimental_op_resolver_type=resolvers.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    interpreter.allocate_tensors()
    for detail, array in zip(interpreter.get_input_details(), feeds):
        interpreter.set_tensor(detail["index"], array)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


def ours(module, feeds: list[np.ndarray]) -> np.ndarray:
    run = [as_graph_input(a, v) for a, v in zip(feeds, module.main.inputs)]
    (value,) = reference_model.run(module, run).values()
    return np.asarray(value)


def _matmul(tmp_path, op_name, q_x, q_y, q_out, x_shape, y_shape):
    _int8_matmul_model(tmp_path, op_name, q_x, q_y, q_out, x_shape, y_shape)
    return tmp_path / f"{op_name.lower()}.tflite"


# (model, whether the runtimes' builtin kernels differ on these inputs)
CASES = [
    # keras-hub Llama int8's attention scores.
    pytest.param(lambda t: _matmul(t, "BATCH_MATMUL", (0.00296667474322021, -5),
                                   (0.003418907057493925, -3), (0.001469990354962647, -6),
                                   (1, 8, 64, 16), (1, 8, 16, 64)), True,
                 id="batch_matmul_int8_llama_scores"),
    # Scale 1/8: the many ties of -x.5 after the high multiply.
    pytest.param(lambda t: _matmul(t, "BATCH_MATMUL", (0.25, 0), (0.5, 0), (1.0, 0),
                                   (1, 4, 64, 16), (1, 4, 16, 64)), True,
                 id="batch_matmul_int8_eighths"),
    pytest.param(lambda t: _matmul(t, "FULLY_CONNECTED", (0.02, 3), (0.004, 0), (0.3, -2),
                                   (512, 48), (24, 48)), False, id="fully_connected_int8"),
    pytest.param(lambda t: conv_model(t, input_shape=(1, 16, 16, 8), filters=16,
                                      kernel=(3, 3)), False, id="conv_2d_int8"),
    pytest.param(lambda t: depthwise_model(t, input_shape=(1, 16, 16, 8), multiplier=2,
                                           kernel=(3, 3)), False, id="depthwise_conv_2d_int8"),
    pytest.param(lambda t: conv_model(t, input_shape=(1, 16, 16, 8), filters=16,
                                      kernel=(3, 3), bits=16), False, id="conv_2d_int16x8"),
    pytest.param(lambda t: fully_connected_model(t, input_shape=(64, 48), units=24, bits=16),
                 False, id="fully_connected_int16x8"),
]


@pytest.mark.parametrize("make, runtimes_differ", CASES)
def test_each_runtimes_builtin_kernels(tmp_path, make, runtimes_differ) -> None:
    path = make(tmp_path)
    modules = {backend: convert(path, kernels=BUILTIN_KERNELS[backend]) for backend in RUNTIMES}
    inputs = _runtime("tensorflow")[0](model_path=str(path)).get_input_details()
    feeds_per_run = [[random_input(np.random.default_rng(seed), list(d["shape"]), d["dtype"])
                      for d in inputs] for seed in range(3)]
    differ = 0
    for feeds in feeds_per_run:
        judged = {backend: builtin_outputs(path, feeds, backend) for backend in RUNTIMES}
        for backend, (module, conversion) in modules.items():
            assert {o["path"] for o in conversion.outcomes} == {"integer"}
            assert np.array_equal(ours(module, feeds).reshape(judged[backend].shape),
                                  judged[backend]), backend
        differ += int((judged["ai-edge-litert"] != judged["tensorflow"]).sum())
        if runtimes_differ:  # LiteRT's builtin BATCH_MATMUL is its reference kernel
            assert np.array_equal(judged["ai-edge-litert"], reference_outputs(path, feeds)[0])
    assert bool(differ) == runtimes_differ
    check_against_arm(*modules["ai-edge-litert"], feeds_per_run[:1])


def tile_matmul_model(tmp_path):
    """int8 TILE v3 (not in BUILTIN_REF) feeding a BATCH_MATMUL, as in keras-hub's
    Llama with grouped-query attention: TFLite runs it on its builtin kernels only."""
    b = TfliteBuilder()
    x = b.tensor([1, 2, 32, 16], "INT8", "x", scale=[0.25], zero_point=[0])
    y = b.tensor([1, 1, 16, 32], "INT8", "y", scale=[0.5], zero_point=[0])
    multiples = b.tensor([4], "INT32", "multiples", data=np.array([1, 2, 1, 1], np.int32))
    tiled = b.tensor([1, 2, 16, 32], "INT8", "tiled", scale=[0.5], zero_point=[0])
    out = b.tensor([1, 2, 32, 32], "INT8", "out", scale=[1.0], zero_point=[0])
    tile = b.opcode("TILE")
    b.model.operatorCodes[tile].version = 3
    b.op("TILE", [y, multiples], [tiled], opcode_index=tile)
    b.op("BATCH_MATMUL", [x, tiled], [out],
         options=b.options("BatchMatMulOptions", adjX=False, adjY=False))
    b.io([x, y], [out])
    return write_model(b, tmp_path / "tile_matmul.tflite")


@pytest.mark.parametrize("backend", RUNTIMES)
def test_validate_converts_for_the_runtime_that_judges(tmp_path, backend: str) -> None:
    """Exact on either runtime's builtin kernels, the report naming the kernels; the
    other runtime's conversion is not (checked: the test can fail)."""
    path = tile_matmul_model(tmp_path)
    report = validate(path, runs=3, backend=backend)
    assert (report.backend, report.resolver, report.kernels) == (
        backend, "BUILTIN_WITHOUT_DEFAULT_DELEGATES", BUILTIN_KERNELS[backend])
    assert all(o.exact for o in report.outputs), report.outputs
    other = next(k for b, k in BUILTIN_KERNELS.items() if b != backend)
    module, conversion = convert(path, kernels=other)
    mismatch = validate(path, runs=3, backend=backend, module=module, conversion=conversion)
    assert not all(o.exact for o in mismatch.outputs)
    assert any(f"converted for TFLite's {other} kernels" in n for n in mismatch.notes)


def test_batch_writes_the_conversion_validate_judges(tmp_path) -> None:
    """batch's default converts each model for the kernels that validate it (LiteRT's
    builtin ones here) and writes that; --kernels writes the kernels asked for."""
    path = tile_matmul_model(tmp_path)
    output = tmp_path / "out.tosa"
    record = convert_and_validate(str(path), JobOptions(output=str(output)))
    assert record["status"] == "pass", record
    assert record["conversion"]["kernels"] == record["validation"]["kernels"] == \
        BUILTIN_KERNELS[record["validation"]["backend"]]
    asked = convert_and_validate(str(path), JobOptions(output=str(output), kernels="reference"))
    assert asked["conversion"]["kernels"] == asked["validation"]["kernels"] == "reference"
    unvalidated = convert_and_validate(str(path), JobOptions(output=str(output), validate=False))
    assert unvalidated["conversion"]["kernels"] == "reference"
