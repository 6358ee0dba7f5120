"""FULLY_CONNECTED (int16x8, and int8 where the two share a point) on both of
TFLite's kernel sets, bit exact.

TFLite's optimized FULLY_CONNECTED (fully_connected.cc, EvalQuantized) runs 16x8
on ruy's int16 x int8 GEMM when every zero point is 0 and the bias is not int64:
an int32 accumulator scaled by a rounding doubling high multiply, then a rounding
right shift, both rounding ties up (GEMM_ROUND), where the reference kernel
rounds the same product once. The two differ where the first rounding makes a
tie of the second: scales that are powers of two make many. With an int64 bias or
a non-zero weight zero point, the optimized resolver runs the reference kernel.
With per-tensor weights the optimized kernel's multiplier comes from the scales
multiplied in float32, the reference kernel's in double.
convert(kernels="optimized") follows the first, the default the second; the
judges are TFLite's interpreter on each resolver (and Arm's reference model on
our .tosa). int16 BATCH_MATMUL computes the same on both resolvers.

TF 2.20's reference FULLY_CONNECTED requantizes in double, `std::round(acc *
scale)`, rounding an exact tie away from zero where RESCALE rounds it up: the
reference lowering moves negative ties first, which the power-of-two scales here
check, for int8 too.

The AI Edge Quantizer int16x8 Swin runs only on the builtin kernels (the
reference resolver lacks TRANSPOSE v6): exact there.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TfliteBuilder
from e2e import check_against_arm
from tflite_ref import reference_outputs, write_model

import reference_model
from tfl2tosa.pipeline import convert
from tfl2tosa.validation import as_graph_input, validate

OPTIMIZED = "BUILTIN_WITHOUT_DEFAULT_DELEGATES"
SWIN = "models/toolchains/ai_edge_quantizer/swin_static_a16w8.tflite"


def optimized_outputs(data: bytes, feeds: list[np.ndarray]) -> list[np.ndarray]:
    """TFLite's outputs on its builtin (optimized) kernels, without delegates."""
    import warnings

    import tensorflow as tf

    warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated.*")
    interpreter = tf.lite.Interpreter(
        model_content=data,
        experimental_op_resolver_type=getattr(tf.lite.experimental.OpResolverType, OPTIMIZED))
    interpreter.allocate_tensors()
    for detail, array in zip(interpreter.get_input_details(), feeds):
        interpreter.set_tensor(detail["index"], array)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def ours(path, kernels: str, feeds: list[np.ndarray]) -> tuple[np.ndarray, object, object]:
    """Our reference model's output for `feeds` on the conversion for `kernels`,
    every op on its integer path."""
    module, conversion = convert(path, kernels=kernels)
    assert {o["path"] for o in conversion.outcomes} == {"integer"}, conversion.outcomes
    run = [as_graph_input(a, v) for a, v in zip(feeds, module.main.inputs)]
    (value,) = reference_model.run(module, run).values()
    return np.asarray(value), module, conversion


# Weight scales: powers of two make the real multiplier 2^-k (ties), the others
# are what a quantizer writes.
TIES = [2.0 ** -6, 2.0 ** -7, 2.0 ** -9]
ORDINARY = [1.6042590141296387e-04, 3.1200621742755175e-04, 2.2977164189796895e-04]


def fc16_model(tmp_path, *, weight_scales, bias: str | None = None, weight_zp: int = 0,
               units: int = 12, depth: int = 24, activation: str = "NONE") -> bytes:
    """FULLY_CONNECTED int16 [32, depth] x int8 [units, depth] -> int16, input scale
    2^-4, output scale 2^-8 (so a weight scale 2^-k makes the multiplier 2^(4-k))."""
    rng = np.random.default_rng(3)
    b = TfliteBuilder()
    s_in, s_out = 2.0 ** -4, 2.0 ** -8
    scales = [weight_scales[c % len(weight_scales)] for c in range(units)] \
        if len(weight_scales) > 1 else list(weight_scales)
    x = b.tensor([32, depth], "INT16", "x", scale=[s_in], zero_point=[0])
    weights = rng.integers(-127, 128, (units, depth)).astype(np.int8)
    w = b.tensor([units, depth], "INT8", "w", data=weights, scale=scales,
                 zero_point=[weight_zp] * len(scales))
    inputs = [x, w]
    options = {"fusedActivationFunction": getattr(b.s.ActivationFunctionType, activation)}
    if bias is not None:
        dtype = {"INT32": np.int32, "INT64": np.int64}[bias]
        values = rng.integers(-20000, 20000, units).astype(dtype)
        inputs.append(b.tensor([units], bias, "bias", data=values,
                               scale=[s_in * s for s in scales], zero_point=[0] * len(scales)))
        # TF 2.20's reference kernel reads the bias as int64 unless told otherwise.
        options["quantizedBiasType"] = getattr(b.s.TensorType, bias)
    out = b.tensor([32, units], "INT16", "out", scale=[s_out], zero_point=[0])
    b.op("FULLY_CONNECTED", inputs, [out],
         options=b.options("FullyConnectedOptions", **options))
    b.io([x], [out])
    return write_model(b, tmp_path / "fc16.tflite").read_bytes()


def small_inputs(depth: int, seed: int = 7) -> list[np.ndarray]:
    """Inputs small enough that multipliers up to 2^-6 stay inside int16."""
    return [np.random.default_rng(seed).integers(-60, 61, (32, depth)).astype(np.int16)]


GEMM_CASES = [
    pytest.param({"weight_scales": [TIES[0]]}, id="per_tensor_no_bias"),
    pytest.param({"weight_scales": TIES + ORDINARY}, id="per_channel_no_bias"),
    pytest.param({"weight_scales": TIES, "bias": "INT32"}, id="per_channel_int32_bias"),
    pytest.param({"weight_scales": [TIES[1]], "bias": "INT32"}, id="per_tensor_int32_bias"),
]


@pytest.mark.parametrize("params", GEMM_CASES)
def test_ruy_path_rounds_twice(tmp_path, params) -> None:
    """Where TFLite's optimized kernel runs ruy, the kernels disagree on these inputs;
    each conversion is exact with its own kernels, and on Arm's model."""
    data = fc16_model(tmp_path, **params)
    path = tmp_path / "fc16.tflite"
    feeds = small_inputs(24)
    judged = {"optimized": optimized_outputs(data, feeds)[0],
              "reference": reference_outputs(data, feeds)[0]}
    assert not np.array_equal(judged["optimized"], judged["reference"])
    for kernels, expected in judged.items():
        mine, module, conversion = ours(path, kernels, feeds)
        assert np.array_equal(mine.reshape(expected.shape), expected), kernels
        check_against_arm(module, conversion, [feeds])


REFERENCE_PATH_CASES = [
    pytest.param({"weight_scales": TIES, "bias": "INT64"}, id="per_channel_int64_bias"),
    pytest.param({"weight_scales": [TIES[0]], "weight_zp": 3, "activation": "RELU"},
                 id="per_tensor_weight_zp_relu"),
]


@pytest.mark.parametrize("params", REFERENCE_PATH_CASES)
def test_reference_path_on_both_resolvers(tmp_path, params) -> None:
    """An int64 bias or a weight zero point sends the optimized resolver to the
    reference kernel: both resolvers agree, and so do both conversions."""
    data = fc16_model(tmp_path, **params)
    path = tmp_path / "fc16.tflite"
    feeds = small_inputs(24)
    expected = reference_outputs(data, feeds)[0]
    assert np.array_equal(optimized_outputs(data, feeds)[0], expected)
    for kernels in ("optimized", "reference"):
        mine, _, _ = ours(path, kernels, feeds)
        assert np.array_equal(mine.reshape(expected.shape), expected), kernels


def test_full_range_inputs_with_quantizer_scales(tmp_path) -> None:
    """Scales as AI Edge Quantizer writes them and inputs over all of int16: exact
    against each resolver with its conversion."""
    data = fc16_model(tmp_path, weight_scales=[s * 16 for s in ORDINARY], units=32, depth=64)
    path = tmp_path / "fc16.tflite"
    feeds = [np.random.default_rng(1).integers(-32768, 32768, (32, 64)).astype(np.int16)]
    for kernels, expected in (("optimized", optimized_outputs(data, feeds)[0]),
                              ("reference", reference_outputs(data, feeds)[0])):
        mine, _, _ = ours(path, kernels, feeds)
        assert np.array_equal(mine.reshape(expected.shape), expected), kernels


def test_int16_batch_matmul_is_the_same_on_both_resolvers(tmp_path) -> None:
    """int16 BATCH_MATMUL scales with the reference kernel's arithmetic on the optimized
    resolver too (power-of-two scales: ties everywhere); our conversion matches both."""
    b = TfliteBuilder()
    x = b.tensor([2, 16, 32], "INT16", "x", scale=[2.0 ** -12], zero_point=[0])
    y = b.tensor([2, 32, 24], "INT16", "y", scale=[2.0 ** -11], zero_point=[0])
    out = b.tensor([2, 16, 24], "INT16", "out", scale=[2.0 ** -3], zero_point=[0])
    b.op("BATCH_MATMUL", [x, y], [out],
         options=b.options("BatchMatMulOptions", adjX=False, adjY=False))
    b.io([x, y], [out])
    path = write_model(b, tmp_path / "bmm16.tflite")
    rng = np.random.default_rng(2)
    feeds = [rng.integers(-3000, 3001, (2, 16, 32)).astype(np.int16),
             rng.integers(-3000, 3001, (2, 32, 24)).astype(np.int16)]
    expected = reference_outputs(path.read_bytes(), feeds)[0]
    assert np.array_equal(optimized_outputs(path.read_bytes(), feeds)[0], expected)
    for kernels in ("optimized", "reference"):
        mine, _, _ = ours(path, kernels, feeds)
        assert np.array_equal(mine.reshape(expected.shape), expected), kernels


def test_swin_int16x8_is_exact_on_the_builtin_kernels() -> None:
    """The zoo's AI Edge Quantizer Swin (int16 activations, int8 weights) runs on the
    builtin kernels only; validate converts for them and every output is exact."""
    report = validate(SWIN, runs=3, backend="tensorflow", lsb_tolerance=0)
    assert report.resolver == OPTIMIZED
    assert report.passed and all(o.exact for o in report.outputs), report.outputs


def test_reference_kernel_requantizes_in_double(tmp_path) -> None:
    """What the reference lowering's tie correction follows: TF 2.20's reference
    FULLY_CONNECTED gives `std::round(acc * scale)` (ties away from zero),
    hand-computed here from the weights, where a single RESCALE rounds ties up."""
    data = fc16_model(tmp_path, weight_scales=[TIES[0]])
    feeds = small_inputs(24)
    weights = np.random.default_rng(3).integers(-127, 128, (12, 24))  # fc16_model's draw
    acc = feeds[0].astype(np.int64) @ weights.T
    exact = acc * 2.0 ** -2  # 2^-4 * 2^-6 / 2^-8, exact in double
    away = np.sign(exact) * np.floor(np.abs(exact) + 0.5)
    up = np.floor(exact + 0.5)
    expected = reference_outputs(data, feeds)[0]
    assert np.array_equal(expected, np.clip(away, -32768, 32767))
    assert not np.array_equal(expected, np.clip(up, -32768, 32767))


def test_per_tensor_scale_of_the_optimized_kernel(tmp_path, monkeypatch) -> None:
    """Per-tensor weights: the optimized kernel's multiplier comes from the input and
    weight scales multiplied in float32 (GetQuantizedConvolutionMultipler), not in
    double as the reference kernel's; the optimized conversion is exact, and would
    not be with the double product (int8 per tensor: test_legalize_integer_matmul)."""
    import legalize.conv as conv

    rng = np.random.default_rng(5)
    s_in, s_w = 1.7075043856180704e-4, 4.231763158945975e-4
    s_out = s_in * s_w * 1220.7  # outputs over most of int16
    b = TfliteBuilder()
    x = b.tensor([1024, 64], "INT16", "x", scale=[s_in], zero_point=[0])
    w = b.tensor([32, 64], "INT8", "w", data=rng.integers(-127, 128, (32, 64)).astype(np.int8),
                 scale=[s_w], zero_point=[0])
    out = b.tensor([1024, 32], "INT16", "out", scale=[s_out], zero_point=[0])
    b.op("FULLY_CONNECTED", [x, w], [out], options=b.options("FullyConnectedOptions"))
    b.io([x], [out])
    path = write_model(b, tmp_path / "fc_per_tensor.tflite")
    feeds = [rng.integers(-32768, 32768, (1024, 64)).astype(np.int16)]
    expected = optimized_outputs(path.read_bytes(), feeds)[0]
    mine, _, _ = ours(path, "optimized", feeds)
    assert np.array_equal(mine.reshape(expected.shape), expected)
    monkeypatch.setattr(conv, "_optimized_scale", lambda x, w, out: x.scale * w.scale / out.scale)
    mine, _, _ = ours(path, "optimized", feeds)
    assert not np.array_equal(mine.reshape(expected.shape), expected)


@pytest.mark.parametrize("bits", [8, 16])
@pytest.mark.parametrize("weight_scales", [[2.0 ** -7], TIES + ORDINARY],
                         ids=["per_tensor", "per_channel_mixed"])
def test_reference_ties_away_from_zero(tmp_path, monkeypatch, bits, weight_scales) -> None:
    """Power-of-two scales make exact ties of both signs: the reference conversion
    is exact with TFLite's reference kernel (and Arm's model), and is not without
    moving the negative ones."""
    import legalize.conv as conv

    rng = np.random.default_rng(4)
    storage, dtype = ("INT16", np.int16) if bits == 16 else ("INT8", np.int8)
    scales = [weight_scales[c % len(weight_scales)] for c in range(12)] \
        if len(weight_scales) > 1 else weight_scales
    b = TfliteBuilder()
    x = b.tensor([64, 24], storage, "x", scale=[2.0 ** -4], zero_point=[0])
    w = b.tensor([12, 24], "INT8", "w", data=rng.integers(-127, 128, (12, 24)).astype(np.int8),
                 scale=scales, zero_point=[0] * len(scales))
    out = b.tensor([64, 12], storage, "out", scale=[2.0 ** (-8 if bits == 16 else -6)],
                   zero_point=[0])
    b.op("FULLY_CONNECTED", [x, w], [out], options=b.options("FullyConnectedOptions"))
    b.io([x], [out])
    path = write_model(b, tmp_path / "fc_ties.tflite")
    small = 60 if bits == 16 else 6  # products within the output type
    feeds = [rng.integers(-small, small + 1, (64, 24)).astype(dtype)]
    expected = reference_outputs(path.read_bytes(), feeds)[0]
    mine, module, conversion = ours(path, "reference", feeds)
    assert np.array_equal(mine.reshape(expected.shape), expected)
    check_against_arm(module, conversion, [feeds])
    monkeypatch.setattr(conv, "_ties_away_from_zero", lambda rw, acc, scales: acc)
    mine, _, _ = ours(path, "reference", feeds)
    assert not np.array_equal(mine.reshape(expected.shape), expected)
