"""FULLY_CONNECTED with int4 weights in blockwise scales (AI Edge Quantizer's
dynamic blockwise recipe), emulated as TFLite's builtin 4-bit kernel computes
it (legalize/hybrid.py fully_connected_blockwise_hybrid).

Each case is a one-op model (TfliteBuilder) with float16 block scales. Judges:
- TFLite's builtin kernels (fully_connected.cc EvalBlockwise4Bit), on
  TensorFlow and on LiteRT: our outputs bit-identical, over inputs with an
  all-zero row, an all-positive row, an all-negative row and rows of different
  magnitudes;
- Arm's reference model running the written `.tosa` file: bit-identical to ours;
- `validate`, which must pass with the ordinary float tolerances.
Layers the 4-bit path does not take (TFLite then ignores the scales) are
lowered in float and judged against their dequantized twin.
"""

from __future__ import annotations

import os
import subprocess
import sysconfig
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from arm import run_arm
from conftest import TfliteBuilder
from test_weights_int4 import blockwise_weights

import reference_model
from tfl2tosa.pipeline import convert, emit
from tfl2tosa.tosa.writer import write_tosa
from tfl2tosa.validation import hybrid_mode, validate

RNG = np.random.default_rng(14)
BUILTIN = "BUILTIN_WITHOUT_DEFAULT_DELEGATES"


@dataclass(frozen=True)
class Blockwise:
    """A FULLY_CONNECTED of `rows` x `depth` float inputs into `units` outputs,
    int4 weights with one float16 scale per block of `block` values."""

    rows: int
    units: int
    depth: int
    block: int
    bias: bool = True
    activation: int = 0
    zero_points: bool = False
    input_shape: tuple[int, ...] | None = None

    def build(self, seed: int) -> bytes:
        rng = np.random.default_rng(seed)
        q = rng.integers(-8, 8, (self.units, self.depth)).astype(np.int8)
        scales = rng.uniform(0.002, 0.05, (self.units, self.depth // self.block))
        scales[0, 0] = 0  # AI Edge Quantizer gives a block of zeros the scale 0
        q[0, :self.block] = 0
        zero_points = (rng.integers(-2, 3, scales.shape).astype(np.int32)
                       if self.zero_points else None)
        b = TfliteBuilder()
        w = blockwise_weights(b, q, scales.astype(np.float16), self.block,
                              zero_points=zero_points)
        shape = list(self.input_shape or (self.rows, self.depth))
        x = b.tensor(shape, "FLOAT32", "x")
        y = b.tensor([*shape[:-1], self.units], "FLOAT32", "y")
        bias = b.tensor([self.units], "FLOAT32", "bias",
                        data=rng.uniform(-1, 1, self.units).astype(np.float32)) \
            if self.bias else -1
        b.op("FULLY_CONNECTED", [x, w, bias], [y], options=b.options(
            "FullyConnectedOptions", fusedActivationFunction=self.activation,
            keepNumDims=self.input_shape is not None))
        b.io([x], [y])
        return b.to_bytes()

    def feeds(self, runs: int = 3) -> list[list[np.ndarray]]:
        """Per run: rows of different magnitudes, the first all zeros, the
        second non-negative, the third non-positive."""
        feeds = []
        for _ in range(runs):
            x = RNG.uniform(-3.0, 3.0, size=(self.rows, self.depth))
            x *= 10.0 ** RNG.uniform(-2, 1, size=(self.rows, 1))
            x[0] = 0.0
            x[1] = np.abs(x[1])
            x[2] = -np.abs(x[2])
            feeds.append([x.reshape(self.input_shape or x.shape).astype(np.float32)])
        return feeds


CASES = {
    # Blocks per row: 1, 2, 4, 3; block sizes 32 (AI Edge Quantizer's), 16, 8,
    # and 12, whose rows of 36 end in a tail the kernel rounds with std::round.
    "units6_depth32_block32": Blockwise(4, 6, 32, 32),
    "units5_depth64_block32_no_bias": Blockwise(5, 5, 64, 32, bias=False),
    "units8_depth128_block32": Blockwise(3, 8, 128, 32),
    "units4_depth96_block32": Blockwise(6, 4, 96, 32),
    "units7_depth64_block16": Blockwise(3, 7, 64, 16),
    "units4_depth40_block8": Blockwise(4, 4, 40, 8),
    "units4_depth36_block12": Blockwise(3, 4, 36, 12),
    # The zoo's layout: [1, tokens, depth] with keep_num_dims.
    "keep_num_dims_1x8x64_block32": Blockwise(8, 16, 64, 32, input_shape=(1, 8, 64)),
}

# Layers whose scales TFLite's builtin kernel ignores, or which it computes
# otherwise than the model says: lowered in float (dequantized weights).
FLOAT_CASES = {
    "three_units": Blockwise(3, 3, 64, 32),           # the 4-bit path needs 4 outputs
    "depth16": Blockwise(3, 4, 16, 16),               # ... and 32 values a row
    "relu": Blockwise(3, 5, 64, 32, activation=1),    # EvalBlockwise4Bit drops it
    "zero_points": Blockwise(3, 5, 64, 32, zero_points=True),  # ... and ignores them
}


def interpreter_outputs(data: bytes, feeds: list[np.ndarray], backend: str,
                        resolver: str = BUILTIN) -> np.ndarray:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if backend == "tensorflow":
        import tensorflow as tf

        warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated.*")

        interpreter_class, resolvers = tf.lite.Interpreter, tf.lite.experimental.OpResolverType
    else:
        from ai_edge_litert import interpreter as litert

        interpreter_class, resolvers = litert.Interpreter, litert.OpResolverType
    interpreter = interpreter_class(model_content=data,
                                    experimental_op_resolver_type=getattr(resolvers, resolver))
    interpreter.allocate_tensors()
    for detail, array in zip(interpreter.get_input_details(), feeds):
        interpreter.set_tensor(detail["index"], array)
    interpreter.invoke()
    return interpreter.get_tensor(interpreter.get_output_details()[0]["index"])


@pytest.mark.parametrize("name", list(CASES))
def test_bit_identical_to_tflite_and_arm(name: str) -> None:
    case = CASES[name]
    data = case.build(seed=len(name))
    module, conversion = convert(data)
    assert [(o["pattern"], hybrid_mode(o)) for o in conversion.outcomes] == [
        ("fully_connected_blockwise_hybrid", "emulate")]
    compiled = reference_model.compile(module)
    tosa = write_tosa(module)
    for feeds in case.feeds():
        ours = next(iter(compiled.run(feeds).values()))
        for backend in ("tensorflow", "ai-edge-litert"):
            theirs = interpreter_outputs(data, feeds, backend)
            assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs), (
                f"{backend}: {int((ours != theirs).sum())} values differ, by up to "
                f"{np.abs(ours.astype(np.float64) - theirs).max()}")
        arm = run_arm(tosa, feeds, [ours.dtype])
        assert arm.status == "valid", arm.message
        assert np.array_equal(arm.outputs[0], ours)


def test_reference_kernel_ignores_the_scales() -> None:
    """Why validate leaves BUILTIN_REF for blockwise layers: the reference
    FULLY_CONNECTED reads a per-tensor scale of 0 and returns the bias."""
    case = CASES["units6_depth32_block32"]
    data = case.build(seed=1)
    feeds = case.feeds(runs=1)[0]
    bias_only = interpreter_outputs(data, [np.zeros_like(feeds[0])], "tensorflow")
    reference = interpreter_outputs(data, feeds, "tensorflow", resolver="BUILTIN_REF")
    assert np.array_equal(reference, bias_only)
    assert not np.array_equal(interpreter_outputs(data, feeds, "tensorflow"), bias_only)


def bfloat16(values: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (to nearest, ties to even)."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return rounded.astype(np.uint32).view(np.float32)


def dequantized_row(row: np.ndarray) -> np.ndarray:
    """A float32 row quantized to int8 and back as tensor_utils'
    AsymmetricQuantizeFloats does it (scale and zero point from the double
    range, the zero point from the end with the smaller error, values
    `round(x * (1 / scale)) + zero_point` clamped); no value lies on a tie."""
    low, high = min(float(row.min()), 0.0), max(float(row.max()), 0.0)
    scale = (high - low) / 255
    from_low, from_high = -128 - low / scale, 127 - high / scale
    zero_point = from_low if 128 + abs(low / scale) < 127 + abs(high / scale) else from_high
    zero_point = float(np.clip(np.round(zero_point), -128, 127))
    inverse = np.float32(1) / np.float32(scale)
    q = np.clip(np.round(row * inverse) + zero_point, -128, 127)
    return (q - zero_point) * np.float64(np.float32(scale))


def test_xnnpack_rounds_the_scales_to_bfloat16() -> None:
    """Why LiteRT's XNNPACK is not the judge: it computes the same dynamic
    int8 products, but with each float16 block scale rounded to bfloat16 (up
    to 2^-9 relative). By hand, from int8 rows quantized as the kernels do,
    XNNPACK is matched to float rounding with bfloat16 scales and missed by
    far more with the stored ones."""
    rng = np.random.default_rng(3)
    q = rng.integers(-8, 8, (8, 128)).astype(np.int8)
    scales = rng.uniform(0.01, 0.05, (8, 4)).astype(np.float16)
    b = TfliteBuilder()
    w = blockwise_weights(b, q, scales, 32)
    x = b.tensor([4, 128], "FLOAT32", "x")
    y = b.tensor([4, 8], "FLOAT32", "y")
    b.op("FULLY_CONNECTED", [x, w, -1], [y], options=b.options("FullyConnectedOptions"))
    b.io([x], [y])
    data = b.to_bytes()
    feed = rng.uniform(-3, 3, (4, 128)).astype(np.float32)
    xnnpack = interpreter_outputs(data, [feed], "ai-edge-litert", resolver="BUILTIN")
    real_rows = np.stack([dequantized_row(row) for row in feed])

    def by_hand(block_scales: np.ndarray) -> np.ndarray:
        weights = q * np.repeat(block_scales.astype(np.float64), 32, axis=1)
        return real_rows @ weights.T

    assert np.abs(by_hand(bfloat16(scales.astype(np.float32))) - xnnpack).max() < 1e-5
    assert np.abs(by_hand(scales.astype(np.float32)) - xnnpack).max() > 1e-3


@pytest.mark.parametrize("name", ["units8_depth128_block32", "keep_num_dims_1x8x64_block32"])
def test_validate_judges_on_the_builtin_kernels(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(CASES[name].build(seed=5))
    for backend in ("tensorflow", "ai-edge-litert"):
        report = validate(path, runs=2, backend=backend)
        assert report.passed and report.resolver == BUILTIN, report
        assert all(o.exact for o in report.outputs)
        assert any("blockwise int4 weights" in note for note in report.notes)


@pytest.mark.parametrize("name", list(FLOAT_CASES))
def test_layers_the_kernel_reads_otherwise_are_lowered_in_float(name: str,
                                                                 tmp_path: Path) -> None:
    """Dequantized once at conversion (with the zero points TFLite's kernel
    ignores), validated against the twin whose weights are dequantized."""
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(FLOAT_CASES[name].build(seed=9))
    module, conversion = convert(path)
    assert [(o["pattern"], o["weights"], hybrid_mode(o)) for o in conversion.outcomes] == [
        ("fully_connected", "dequantized-constant", "float")]
    report = validate(path, module=module, conversion=conversion, runs=2)
    assert report.passed, report
    assert any("dequantized" in note for note in report.notes)


def test_float_mode_is_judged_against_the_float_twin(tmp_path: Path) -> None:
    case = CASES["units8_depth128_block32"]
    path = tmp_path / "float_mode.tflite"
    path.write_bytes(case.build(seed=2))
    module, conversion = convert(path, hybrid="float")
    assert [hybrid_mode(o) for o in conversion.outcomes] == ["float"]
    report = validate(path, module=module, conversion=conversion, runs=2)
    assert report.passed and report.resolver == "BUILTIN_REF", report
    # The twin: TFLite's float kernel on the hand-dequantized weights.
    feeds = case.feeds(runs=1)[0]
    ours = next(iter(reference_model.run(module, feeds).values()))
    builtin = interpreter_outputs(path.read_bytes(), feeds, "tensorflow")
    assert np.abs(ours - builtin).max() > 1e-4  # the emulated kernel computes otherwise


def test_tosa_opt_validates_the_emulation(tmp_path: Path) -> None:
    """Arm's tosa-opt accepts the emulated graph under PRO-INT + PRO-FP."""
    module, _ = convert(CASES["units4_depth36_block12"].build(seed=4))
    text = tmp_path / "blockwise.mlir"
    text.write_bytes(emit(module, "mlir"))
    tosa_opt = Path(sysconfig.get_paths()["scripts"]) / "tosa-opt"
    done = subprocess.run([str(tosa_opt), str(text), "--tosa-attach-target=profiles=pro_int,pro_fp",
                           "--tosa-validate=strict-op-spec-alignment", "-o", "/dev/null"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
