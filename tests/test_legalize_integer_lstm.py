"""The int8 UNIDIRECTIONAL_SEQUENCE_LSTM (8x8->16 kernel) on the integer path.

Judge: TFLite's kernel, bit exactly, and Arm's reference model on the written
`.tosa` (tests/e2e.py check_model with only the integer path allowed).
BUILTIN_REF registers the same LSTM kernel as the builtin resolver
(lstm_eval.cc EvalInteger8x8_16); on x86 its tensor_utils calls are the
portable ones (PortableMatrixBatchVectorMultiplyAccumulate,
PortableApplySigmoid / PortableApplyTanh on gemmlowp int16 fixed point,
PortableCwiseMul / CwiseAdd / CwiseClipping), which is what the lowering
reproduces.

Zoo models come from the TFLite converter (TANH, cell clip 10, cell scale
2^-15 or 2^-11). The builder reaches what it never emits: batch > 1, time
major, CIFG, peephole weights, a projection (with and without bias, clipped;
TF 2.20 stores the hidden state with zero point -hidden_zp on that path), the
one-step LSTM op, gate scales above one (MultiplyByQuantizedMultiplier's left
shift), no cell clip, every cell scale TFLite accepts (2^-15 .. 2^-9, i.e. tanh
of Q0 .. Q6, and the smaller ones, where TFLite skips the tanh), zero points on
every int8 tensor, a hidden-state quantization other than the output's (TFLite
copies the stored hidden values into the output), exact halves for each
rounding step, and a sweep whose gate pre-activations cover most of the int16
range (every activation lookup is checked against TFLite at those points); a
long run adds random configurations. TFLite's kernels overwrite their variable
state, so each check compares a first invocation (runs=1).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from e2e import check_model, model_path

import legalize  # noqa: F401  (registers every pattern)
from legalize.lstm import logistic, tanh
from tfl2tosa.pipeline import convert

TANH, RELU = 4, 1


@dataclass(frozen=True)
class Int8Lstm:
    """One int8x8->16 UNIDIRECTIONAL_SEQUENCE_LSTM, quantization included."""

    batch: int = 1
    steps: int = 4
    n_input: int = 3
    n_cell: int = 5
    n_output: int | None = None                  # a projection when given
    projection_bias: bool = True
    proj_clip: float = 0.0
    cifg: bool = False
    peephole: bool = False
    time_major: bool = False
    activation: int = TANH
    cell_clip: float = 10.0
    cell_exponent: int = -11
    input_q: tuple[float, int] = (0.02, 3)
    weight_scale: float = 0.01
    weight_max: int = 127
    bias_max: int = 4000
    state_q: tuple[float, int] = (0.008, -5)     # output state (recurrent input)
    hidden_q: tuple[float, int] = (0.008, -5)    # intermediate 4
    output_q: tuple[float, int] | None = None    # default: the hidden quantization


def _sequence(c: Int8Lstm, width: int) -> list[int]:
    return [c.steps, c.batch, width] if c.time_major else [c.batch, c.steps, width]


def _output_width(c: Int8Lstm) -> int:
    return c.n_cell if c.n_output is None else c.n_output


def int8_lstm(b, path: Path, c: Int8Lstm, seed: int = 0,
              weights: dict[str, np.ndarray] | None = None, one_step: bool = False) -> Path:
    """Write the model (UNIDIRECTIONAL_SEQUENCE_LSTM, or LSTM on [batch, input] with
    `one_step`); `weights` may give "input"/"recurrent" [4, n_cell, k] int8 and "bias"
    [4, n_cell] int32 arrays instead of random ones."""
    rng = np.random.default_rng(seed)
    given = weights or {}
    n_output = _output_width(c)
    in_scale, in_zp = c.input_q
    x_shape = [c.batch, c.n_input] if one_step else _sequence(c, c.n_input)
    x = b.tensor(x_shape, "INT8", "x", scale=[in_scale], zero_point=[in_zp])

    def matrix(kind: str, gate: int, cols: int) -> int:
        if c.cifg and gate == 0:
            return -1
        data = given[kind][gate] if kind in given else rng.integers(
            -c.weight_max, c.weight_max + 1, (c.n_cell, cols))
        return b.tensor([c.n_cell, cols], "INT8", f"{kind}{gate}",
                        data=np.asarray(data, dtype=np.int8), scale=[c.weight_scale])

    def bias(gate: int) -> int:
        if c.cifg and gate == 0:
            return -1
        data = given["bias"][gate] if "bias" in given else rng.integers(
            -c.bias_max, c.bias_max + 1, c.n_cell)
        return b.tensor([c.n_cell], "INT32", f"bias{gate}", data=np.asarray(data, np.int32),
                        scale=[c.weight_scale * in_scale])

    def peephole(gate: int) -> int:
        if not c.peephole or (c.cifg and gate == 0):
            return -1
        return b.tensor([c.n_cell], "INT16", f"peephole{gate}",
                        data=rng.integers(-100, 100, c.n_cell).astype(np.int16), scale=[0.01])

    def projection() -> list[int]:
        if c.n_output is None:
            return [-1, -1]
        weights = b.tensor([n_output, c.n_cell], "INT8", "projection", scale=[0.02],
                           data=rng.integers(-127, 128, (n_output, c.n_cell)).astype(np.int8))
        if not c.projection_bias:
            return [weights, -1]
        return [weights, b.tensor([n_output], "INT32", "projection_bias", scale=[0.0001],
                                  data=rng.integers(-3000, 3001, n_output).astype(np.int32))]

    inputs = [matrix("input", g, c.n_input) for g in range(4)]
    recurrent = [matrix("recurrent", g, n_output) for g in range(4)]
    state_scale, state_zp = c.state_q
    h = b.tensor([c.batch, n_output], "INT8", "h", scale=[state_scale],
                 zero_point=[state_zp], is_variable=True)
    cell = b.tensor([c.batch, c.n_cell], "INT16", "c", scale=[2.0 ** c.cell_exponent],
                    is_variable=True)
    out_scale, out_zp = c.output_q or c.hidden_q
    y_shape = [c.batch, n_output] if one_step else _sequence(c, n_output)
    y = b.tensor(y_shape, "INT8", "y", scale=[out_scale], zero_point=[out_zp])
    hidden_scale, hidden_zp = c.hidden_q
    intermediates = [b.tensor([0], "FLOAT32", f"gate{g}") for g in range(4)]
    intermediates.append(b.tensor([0], "INT8", "hidden", scale=[hidden_scale],
                                  zero_point=[hidden_zp]))
    operands = [x, *inputs, *recurrent, *[peephole(g) for g in range(3)],
                *[bias(g) for g in range(4)], *projection(), h, cell, -1, -1, -1, -1]
    if one_step:
        b.op("LSTM", operands, [y], intermediates=intermediates,
             options=b.options("LSTMOptions", fusedActivationFunction=c.activation,
                               cellClip=c.cell_clip, projClip=c.proj_clip, kernelType=0))
    else:
        b.op("UNIDIRECTIONAL_SEQUENCE_LSTM", operands, [y], intermediates=intermediates,
             options=b.options("UnidirectionalSequenceLSTMOptions",
                               fusedActivationFunction=c.activation, cellClip=c.cell_clip,
                               projClip=c.proj_clip, timeMajor=c.time_major))
    b.io([x], [y])
    path.write_bytes(b.to_bytes())
    return path


# ---------------------------------------------------------------------------
# Zoo models


@pytest.mark.parametrize("relative", ["unit/int8/lstm.tflite",
                                      "arch/lstm_classifier_int8.tflite"])
@pytest.mark.parametrize("seed", [0, 1])
def test_zoo_int8_lstm_is_exact(relative: str, seed: int) -> None:
    conversion, _ = check_model(model_path(relative), allowed_paths=("integer",), runs=1,
                                seed=seed)
    lstm_paths = {o["path"] for o in conversion.outcomes
                  if o["op_name"] == "tfl.unidirectional_sequence_lstm"}
    assert lstm_paths == {"integer"}


FIXTURES = Path(__file__).resolve().parent / "fixtures" / "numerics"


@pytest.mark.parametrize("seed", [0, 1])
def test_converter_text_classifier_is_exact(seed: int) -> None:
    """Embedding -> LSTM(16) -> Dense from TFLiteConverter (fixtures/numerics/generate.py):
    calibration on small embeddings gives the cell state a scale below 2^-15, where
    TFLite's output skips tanh(c) (IntegerLstm.cell_tanh). Token ids drawn in the
    vocabulary."""
    path = FIXTURES / "lstm_text_classifier_int8.tflite"
    tokens = np.random.default_rng(seed).integers(0, 1000, (4, 1, 16)).astype(np.int32)
    conversion, _ = check_model(path, allowed_paths=("integer", "float"),
                                inputs=[[t] for t in tokens])
    (lstm,) = [o for o in conversion.outcomes
               if o["op_name"] == "tfl.unidirectional_sequence_lstm"]
    assert lstm["path"] == "integer" and "1.9073486328125e-06" in lstm["types"]


def test_zoo_int8_bidirectional_lstm_is_exact() -> None:
    """The converter's int8 bidirectional LSTM: two UNIDIRECTIONAL_SEQUENCE_LSTMs, the
    backward one between REVERSE_V2s whose output is quantized like the forward
    LSTM's (TFLite copies the stored values), then CONCATENATION. REF lacks
    REVERSE_V2 v3, so validate runs the builtin kernels (the same LSTM kernel)."""
    check_model(model_path("unit/int8/bidirectional_lstm.tflite"),
                allowed_paths=("integer",), runs=1)


# ---------------------------------------------------------------------------
# Builder cases

CASES = {
    "int8_lstm_plain": Int8Lstm(),
    "int8_lstm_batch3_time_major": Int8Lstm(batch=3, time_major=True),
    "int8_lstm_batch2_batch_major": Int8Lstm(batch=2, steps=3),
    "int8_lstm_cifg": Int8Lstm(cifg=True, batch=2),
    "int8_lstm_no_cell_clip": Int8Lstm(cell_clip=0.0, cell_exponent=-12),
    "int8_lstm_tight_cell_clip": Int8Lstm(cell_clip=0.05, cell_exponent=-13),
    "int8_lstm_cell_q0_15": Int8Lstm(cell_exponent=-15, cell_clip=0.9),
    "int8_lstm_cell_q6_9": Int8Lstm(cell_exponent=-9, cell_clip=0.0, bias_max=30000),
    # Below 2^-15 PortableApplyTanh writes nothing and the output reads the input
    # gate in tanh(c)'s place; below 2^-16 CwiseMul's int16 cast wraps i * g, which
    # the output then sees only through the peephole weights.
    "int8_lstm_cell_2_minus_16": Int8Lstm(cell_exponent=-16, steps=6),
    "int8_lstm_cell_2_minus_19": Int8Lstm(cell_exponent=-19, cell_clip=0.0, steps=8,
                                          batch=2, bias_max=30000),
    "int8_lstm_cell_2_minus_22_peephole_wraps": Int8Lstm(
        cell_exponent=-22, cell_clip=0.0, peephole=True, steps=5),
    "int8_lstm_cell_2_minus_20_projection": Int8Lstm(cell_exponent=-20, n_output=3,
                                                     hidden_q=(0.006, 9), cell_clip=0.0),
    "int8_lstm_zero_points_extreme": Int8Lstm(input_q=(0.05, -128), state_q=(0.01, 127),
                                               hidden_q=(0.004, 100)),
    "int8_lstm_hidden_not_output_quantization": Int8Lstm(hidden_q=(0.006, 7),
                                                          output_q=(0.01, -3)),
    "int8_lstm_saturated_gates": Int8Lstm(weight_scale=0.05, bias_max=200000),
    "int8_lstm_gate_scale_above_one": Int8Lstm(weight_scale=0.5, input_q=(0.5, -1)),
    "int8_lstm_peephole": Int8Lstm(peephole=True, batch=2),
    "int8_lstm_cifg_peephole": Int8Lstm(cifg=True, peephole=True),
    "int8_lstm_projection": Int8Lstm(n_output=3, hidden_q=(0.006, 9)),
    "int8_lstm_projection_clip_no_bias": Int8Lstm(n_output=7, projection_bias=False,
                                                   proj_clip=0.3, state_q=(0.01, 20),
                                                   output_q=(0.01, 20), hidden_q=(0.007, -30)),
    "int8_lstm_cifg_projection_time_major": Int8Lstm(cifg=True, n_output=4, batch=2,
                                                      time_major=True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_int8_lstm_matches_tflite(name: str, builder, tmp_path: Path) -> None:
    path = int8_lstm(builder, tmp_path / f"{name}.tflite", CASES[name])
    check_model(path, allowed_paths=("integer",), runs=1)


@pytest.mark.parametrize("name, config", [
    ("int8_one_step_lstm_projection", Int8Lstm(batch=2, n_output=3, hidden_q=(0.006, -11))),
    ("int8_one_step_lstm_cifg_peephole", Int8Lstm(batch=3, cifg=True, peephole=True)),
])
def test_int8_one_step_lstm_matches_tflite(name: str, config: Int8Lstm, builder,
                                           tmp_path: Path) -> None:
    """TFL LSTM (lstm.cc, full kernel): the same EvalInteger8x8_16 on one step."""
    path = int8_lstm(builder, tmp_path / f"{name}.tflite", config, one_step=True)
    conversion, _ = check_model(path, allowed_paths=("integer",), runs=1)
    assert {o["path"] for o in conversion.outcomes if o["op_name"] == "tfl.lstm"} == \
        {"integer"}


def test_activation_lookups_over_the_int16_range(builder, tmp_path: Path) -> None:
    """Gate accumulators scaled by exactly 1 (weights and input 2^-6 each: 2^-12 /
    2^-12), so a gate's int16 pre-activation is bias + w (x - zp) itself: 256 batch
    rows (every int8 input) x 64 units x 4 gates sample the whole int16 range, and
    step 2 feeds a wide spread of cell states through tanh."""
    c = Int8Lstm(batch=256, steps=2, n_input=1, n_cell=64, input_q=(2.0 ** -6, 0),
                 weight_scale=2.0 ** -6, cell_clip=0.0, cell_exponent=-10,
                 state_q=(0.01, 0), hidden_q=(0.01, 0))
    rng = np.random.default_rng(7)
    weights = {"input": rng.integers(-127, 128, (4, 64, 1)),
               "recurrent": rng.integers(-127, 128, (4, 64, 64)),
               "bias": rng.integers(-32768, 32768, (4, 64))}
    path = int8_lstm(builder, tmp_path / "sweep.tflite", c, weights=weights)
    every_input = np.repeat(np.arange(-128, 128, dtype=np.int8)[:, None, None], 2, axis=1)
    check_model(path, allowed_paths=("integer",), inputs=[[every_input]])


def test_exact_halves_round_as_tflite(builder, tmp_path: Path) -> None:
    """Input, forget and output gates with zero weights and bias are logistic(0) =
    16384 exactly. Then f * c / 2^15 = c / 2 and i * g / 2^19 are exact halves for
    odd c and g = 16 mod 32, which CwiseMul's RoundingDivideByPOT rounds away from
    zero (ARITHMETIC_RIGHT_SHIFT alone rounds negative halves up); and with a hidden
    scale of 2^-8 the hidden multiplier is 2^-22 exactly, so o * tanh(c) = 16384 *
    (128 mod 256) is an exact half that MultiplyByQuantizedMultiplier's double
    rounding (DOUBLE_ROUND) rounds away from zero and SINGLE_ROUND would not."""
    c = Int8Lstm(batch=8, steps=6, n_cell=16, cell_clip=0.0, hidden_q=(2.0 ** -8, 0))
    rng = np.random.default_rng(3)
    weights = {"input": rng.integers(-127, 128, (4, 16, 3)),
               "recurrent": rng.integers(-127, 128, (4, 16, 16)),
               "bias": rng.integers(-4000, 4001, (4, 16))}
    for values in weights.values():
        values[[0, 1, 3]] = 0  # input, forget, output gates
    path = int8_lstm(builder, tmp_path / "ties.tflite", c, weights=weights)
    check_model(path, allowed_paths=("integer",), runs=1)


@pytest.mark.parametrize("name, config, reason", [
    ("peephole_with_projection", Int8Lstm(peephole=True, n_output=3), "peephole"),
    ("relu_cell_activation", Int8Lstm(activation=RELU), "RELU activation"),
    ("gate_scale_beyond_rescale_range",
     Int8Lstm(weight_scale=1.0, input_q=(100.0, 0)), "RESCALE's input range"),
    ("cifg_cell_below_2_minus_15", Int8Lstm(cifg=True, cell_exponent=-16),
     "unwritten scratch buffer"),
])
def test_unsupported_variants_take_the_fallback(name: str, config: Int8Lstm, reason: str,
                                               builder, tmp_path: Path) -> None:
    """Variants the lowering does not reproduce are refused by name, so the float
    fallback (not a wrong integer graph) takes them."""
    _, conversion = convert(int8_lstm(builder, tmp_path / f"{name}.tflite", config))
    outcome = next(o for o in conversion.outcomes
                   if o["op_name"] == "tfl.unidirectional_sequence_lstm")
    assert outcome["path"] == "fallback"
    assert reason in outcome["reason"]


# ---------------------------------------------------------------------------
# The gemmlowp ports at points the definitions fix exactly


def test_fixed_point_activations_at_exact_points() -> None:
    """logistic(0) is gemmlowp's one_half constant (2^30 rounded to 16 bits),
    tanh(0) = 0, both are odd/complementary by construction (logistic(-x) =
    One - logistic(x) with One = 32767; tanh(-x) = -tanh(x)), and both stay within
    two LSB (gemmlowp's int16 accuracy) of their real values at the ends of Q3.12."""
    sigmoid = logistic(3).astype(np.int64)
    hyperbolic = tanh(3).astype(np.int64)
    zero = 32768
    assert sigmoid[zero] == 16384 and hyperbolic[zero] == 0
    positive = np.arange(1, 32768)
    assert np.array_equal(sigmoid[zero - positive], 32767 - sigmoid[zero + positive])
    assert np.array_equal(hyperbolic[zero - positive], -hyperbolic[zero + positive])
    assert abs(sigmoid[-1] - 32768 / (1 + np.exp(-8 + 2 ** -12))) <= 2
    assert abs(hyperbolic[-1] - 32768 * np.tanh(8 - 2 ** -12)) <= 2


# ---------------------------------------------------------------------------
# Random configurations (long run)


def random_config(rng: np.random.Generator) -> Int8Lstm:
    """Any combination the lowering covers: sizes, layout, CIFG, peephole, projection,
    clips, cell scales 2^-22 .. 2^-9 (2^-15 .. 2^-9 with CIFG), and scales and zero
    points drawn across their ranges."""
    n_cell = int(rng.integers(1, 9))
    n_output = int(rng.integers(1, 9)) if rng.integers(2) else None
    cifg = bool(rng.integers(2))
    return Int8Lstm(
        batch=int(rng.integers(1, 4)), steps=int(rng.integers(1, 6)),
        n_input=int(rng.integers(1, 6)), n_cell=n_cell, n_output=n_output,
        projection_bias=bool(rng.integers(2)), proj_clip=float(rng.choice([0.0, 0.1, 0.5])),
        cifg=cifg,
        peephole=bool(rng.integers(2)) and n_output in (None, n_cell),
        time_major=bool(rng.integers(2)),
        cell_clip=float(rng.choice([0.0, 0.3, 1.0, 10.0])),
        cell_exponent=int(rng.integers(-15 if cifg else -22, -8)),
        input_q=(float(rng.uniform(0.002, 0.1)), int(rng.integers(-128, 128))),
        weight_scale=float(rng.uniform(0.001, 0.05)), weight_max=int(rng.integers(1, 128)),
        bias_max=int(rng.choice([0, 100, 5000, 100000])),
        state_q=(float(rng.uniform(0.002, 0.05)), int(rng.integers(-128, 128))),
        hidden_q=(float(rng.uniform(0.002, 0.05)),
                  int(rng.choice([-128, 127, int(rng.integers(-128, 128))]))))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(40))
def test_random_int8_lstm_matches_tflite(seed: int, builder, tmp_path: Path) -> None:
    rng = np.random.default_rng(seed)
    config, one_step = random_config(rng), bool(rng.integers(4) == 0)
    path = int8_lstm(builder, tmp_path / f"random_{seed}.tflite", config, seed=seed,
                     one_step=one_step)
    check_model(path, allowed_paths=("integer",), runs=1, seed=seed)
