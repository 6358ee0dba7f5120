"""legalize/quantized.py against values derived by hand from TFLite's definitions,
and its lookup tables against the TFLite interpreter.

Hand derivations follow the C++ they restate:
- QuantizeMultiplier (tensorflow/lite/kernels/internal/quantization_util.cc):
  `q = frexp(scale, &e)`, `m = round_half_away(q * 2^31)`, m == 2^31 -> (2^30, e+1),
  e < -31 -> (0, 0); TOSA shift = 31 - e.
- MultiplyByQuantizedMultiplier(int64) (common.cc): m16 = m < 0x7FFF0000 ?
  (m + 2^15) >> 16 : 0x7FFF, shift 15 - e.
- QuantizedMeanOrSum (reference/reduce.h): k = min(63 - clz64(N), 32, 31 + e),
  m' = (m << k) / N, exponent e - k.
- gemmlowp fixedpoint.h and PreprocessSoftmaxScaling / CalculateInputRadius.
"""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from legalize.common import fused_activation
from legalize.quantized import (
    INT32_MAX,
    ZERO_SHIFT,
    UnsupportedScale,
    exp_on_negative_values,
    mean_multiplier,
    quantize_multiplier,
    quantize_multiplier_16,
    quantize_multipliers,
    quantize_scalar,
    round_half_away,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
    softmax_input_scaling,
    table_i8,
    table_i16,
)
from reference_model import numerics
from tfl2tosa.ir.builder import Builder
from tfl2tosa.ir.core import Graph
from tfl2tosa.ir.types import TensorType, UniformQuantized, f32, i8, i16, u8

MODELS = Path(__file__).resolve().parent.parent / "models"


# ---------------------------------------------------------------------------
# QuantizeMultiplier -> (multiplier, TOSA shift)

MULTIPLIER_CASES = [
    # frexp(0.5) = (0.5, 0): m = 0.5 * 2^31 = 2^30, shift 31 - 0.
    pytest.param(0.5, (1 << 30, 31), id="half"),
    # frexp(1) = (0.5, 1): shift 30 (the unit scale 2^30 / 2^30).
    pytest.param(1.0, (1 << 30, 30), id="one"),
    # frexp(0.75) = (0.75, 0): m = 0.75 * 2^31 = 1610612736.
    pytest.param(0.75, (1610612736, 31), id="three_quarters"),
    # Scale > 1: frexp(3) = (0.75, 2): shift 31 - 2 = 29.
    pytest.param(3.0, (1610612736, 29), id="three"),
    # ADD's left shift 2^20: frexp = (0.5, 21): shift 10.
    pytest.param(2.0 ** 20, (1 << 30, 10), id="two_pow_20"),
    # Tie in the mantissa: 0.5 + 2^-32 -> q * 2^31 = 2^30 + 0.5 exactly; std::round
    # goes away from zero to 2^30 + 1 (Python's round() would give 2^30).
    pytest.param(0.5 + 2.0 ** -32, ((1 << 30) + 1, 31), id="mantissa_tie_rounds_up"),
    # 1 - 2^-33: q * 2^31 = 2^31 - 1/4 rounds to 2^31: halved to 2^30 with e + 1 = 1.
    pytest.param(1.0 - 2.0 ** -33, (1 << 30, 30), id="mantissa_carry"),
    # 2^-32: frexp = (0.5, -31), the smallest exponent TFLite keeps: shift 62.
    pytest.param(2.0 ** -32, (1 << 30, 62), id="smallest_kept"),
    # 2^-33: e = -32 < -31: TFLite flushes to multiplier 0.
    pytest.param(2.0 ** -33, (0, ZERO_SHIFT), id="tiny_flushed"),
    pytest.param(0.0, (0, ZERO_SHIFT), id="zero"),
    # 2^28: frexp = (0.5, 29): shift 2, the smallest RESCALE allows.
    pytest.param(2.0 ** 28, (1 << 30, 2), id="largest_representable"),
]


@pytest.mark.parametrize(("scale", "expected"), MULTIPLIER_CASES)
def test_quantize_multiplier(scale: float, expected: tuple[int, int]) -> None:
    assert quantize_multiplier(scale) == expected


@pytest.mark.parametrize("scale", [2.0 ** 29, 1e12, -0.5, math.nan, math.inf],
                         ids=["shift_1", "huge", "negative", "nan", "inf"])
def test_quantize_multiplier_rejects(scale: float) -> None:
    with pytest.raises(UnsupportedScale):
        quantize_multiplier(scale)


MULTIPLIER_16_CASES = [
    # m32 = 2^30 -> (2^30 + 2^15) >> 16 = 2^14; shift 15 - 0.
    pytest.param(0.5, (1 << 14, 15), id="half"),
    # m32 = 0x60000000 -> 0x6000; shift 15.
    pytest.param(0.75, (0x6000, 15), id="three_quarters"),
    # 1 - 2^-16: m32 = 2^31 - 2^15 = 0x7FFF8000 >= 0x7FFF0000 -> clamped to 0x7FFF
    # (rounding would give 2^15, which int16 cannot hold).
    pytest.param(1.0 - 2.0 ** -16, (0x7FFF, 15), id="clamped_near_one"),
    # m32 = 0x7FFEFFFF... just below the clamp: 0x7FFEFFFF + 2^15 >> 16 = 0x7FFF.
    pytest.param(0x7FFEFFFF / 2.0 ** 31, (0x7FFF, 15), id="below_clamp"),
    # (0x40008000) -> (0x40008000 + 0x8000) >> 16 = 0x4001: rounding half up.
    pytest.param(0x40008000 / 2.0 ** 31, (0x4001, 15), id="reduction_rounds_up"),
    # 2^12: e = 13: shift 2.
    pytest.param(2.0 ** 12, (1 << 14, 2), id="largest_representable"),
    pytest.param(2.0 ** -33, (0, ZERO_SHIFT), id="tiny_flushed"),
]


@pytest.mark.parametrize(("scale", "expected"), MULTIPLIER_16_CASES)
def test_quantize_multiplier_16(scale: float, expected: tuple[int, int]) -> None:
    assert quantize_multiplier_16(scale) == expected


def test_quantize_multiplier_16_rejects_shift_below_two() -> None:
    with pytest.raises(UnsupportedScale):
        quantize_multiplier_16(2.0 ** 13)  # e = 14: shift 1


def _edge_scales() -> np.ndarray:
    """Scales at every boundary of the scalar definitions, and a random spread."""
    hand = [case.values[0] for case in MULTIPLIER_CASES + MULTIPLIER_16_CASES]
    boundaries = []
    for e in range(-40, 30):
        base = 2.0 ** e
        boundaries += [base, math.nextafter(base, 0), math.nextafter(base, math.inf),
                       base * (1 + 2.0 ** -31), base * (1 + 2.0 ** -32), base * (1 - 2.0 ** -33),
                       base * 0x7FFF0000 / 2.0 ** 31, base * 0x7FFEFFFF / 2.0 ** 31,
                       base * 0x40008000 / 2.0 ** 31, base * 0x40007FFF / 2.0 ** 31]
    rng = np.random.default_rng(18)
    spread = np.exp2(rng.uniform(-40.0, 13.0, 20000))
    # Exact mantissa ties: an odd integer k over 2^32 has its half bit set in q * 2^31.
    ties = (2 * rng.integers(1 << 29, 1 << 30, 2000) + 1) / 2.0 ** 32
    tiny = [5e-324, 1e-310, 2.0 ** -1074 * 3]
    return np.concatenate([hand, boundaries, spread, ties, tiny, [0.0]]).astype(np.float64)


@pytest.mark.parametrize("scale32", [True, False], ids=["scale32", "scale16"])
def test_quantize_multipliers_matches_the_scalar_definition(scale32: bool) -> None:
    """The vectorised per-channel form gives, scale by scale, the integers of
    quantize_multiplier / quantize_multiplier_16 (themselves pinned to hand
    derivations above); scales whose shift is below 2 must raise in both."""
    scalar = quantize_multiplier if scale32 else quantize_multiplier_16
    limit = 2.0 ** (28 if scale32 else 12)
    scales = _edge_scales()
    scales = scales[scales < limit * 2]
    expected = []
    for scale in scales.tolist():
        try:
            expected.append(scalar(scale))
        except UnsupportedScale:
            with pytest.raises(UnsupportedScale):
                quantize_multipliers([scale], scale32)
            expected.append(None)
    keep = np.array([e is not None for e in expected])
    multipliers, shifts = quantize_multipliers(scales[keep], scale32)
    assert multipliers.dtype == shifts.dtype == np.int64
    assert list(zip(multipliers.tolist(), shifts.tolist())) == [e for e in expected if e]
    assert not keep.all()  # the boundary scales above the limit were exercised


@pytest.mark.parametrize("bad", [-0.5, math.nan, math.inf, 2.0 ** 29])
def test_quantize_multipliers_rejects_any_bad_channel(bad: float) -> None:
    with pytest.raises(UnsupportedScale):
        quantize_multipliers([0.25, bad, 0.5])


def test_multiplier_times_shift_approximates_scale() -> None:
    """m / 2^shift is within half a unit of the multiplier's last bit of the scale."""
    rng = np.random.default_rng(0)
    for scale in rng.uniform(1e-6, 100.0, 500):
        m, s = quantize_multiplier(float(scale))
        assert abs(m / 2.0 ** s - scale) <= 2.0 ** -s / 2 * 1.0000001
        assert (1 << 30) <= m < (1 << 31)


# ---------------------------------------------------------------------------
# MEAN's 1/N folding

MEAN_CASES = [
    # 0.5 / 4: m = 2^30, e = 0; k = min(2, 32, 31) = 2; m' = 2^32 / 4 = 2^30;
    # exponent 0 - 2 -> shift 33. 2^30 / 2^33 = 1/8.
    pytest.param(0.5, 4, (1 << 30, 33), id="power_of_two_count"),
    # 1 / 3: m = 2^30, e = 1; k = min(1, 32, 32) = 1; m' = 2^31 // 3 = 715827882
    # (truncating); exponent 0 -> shift 31.
    pytest.param(1.0, 3, (715827882, 31), id="truncating_division"),
    # 2^-30 / 1024: e = -29 so k = min(10, 32, 31 - 29 = 2) = 2: m' = 2^32 // 1024 =
    # 2^22, exponent -31 -> shift 62.
    pytest.param(2.0 ** -30, 1024, (1 << 22, 62), id="k_limited_by_exponent"),
    # N = 2^40: k = min(40, 32, 32) = 32: m' = (2^30 << 32) >> 40 = 2^22; e = 1 - 32.
    pytest.param(1.0, 1 << 40, (1 << 22, 62), id="k_limited_to_32"),
]


@pytest.mark.parametrize(("scale", "count", "expected"), MEAN_CASES)
def test_mean_multiplier(scale: float, count: int, expected: tuple[int, int]) -> None:
    assert mean_multiplier(scale, count) == expected


# ---------------------------------------------------------------------------
# Rounding helpers


@pytest.mark.parametrize(("x", "expected"), [(2.5, 3), (-2.5, -3), (0.5, 1), (-0.5, -1),
                                             (1.4999, 1), (-1.5, -2), (0.0, 0),
                                             # The largest double below 0.5: x + 0.5 would
                                             # round up to 1.0; std::round gives 0.
                                             (0.49999999999999994, 0),
                                             (-0.49999999999999994, 0),
                                             (2.0 ** 52 + 1, 2 ** 52 + 1)])
def test_round_half_away(x: float, expected: int) -> None:
    assert round_half_away(x) == expected


def test_table_i8_rounds_float32_just_below_half() -> None:
    """LUTPopulateInt8 rounds the float32 product with std::round: the largest
    float32 below 0.5 (0.49999997) must give 0, not 1. Identity function,
    output scale 1: entry for input 1 at input scale 0.49999997 is 0."""
    below_half = float(np.nextafter(np.float32(0.5), np.float32(0)))
    table = table_i8(lambda v: v, UniformQuantized(i8, f32, below_half, 0),
                     UniformQuantized(i8, f32, 1.0, 0))
    assert table[128 + 1] == 0
    assert table[128 - 1] == 0
    assert table[128 + 3] == 1  # 1.4999999 -> 1


SRDHM_CASES = [
    pytest.param(1 << 30, 1 << 30, 1 << 29, id="exact_quarter"),
    # 1 * 2^30 = 2^30, half of 2^31: the nudge 2^30 rounds up to 1.
    pytest.param(1, 1 << 30, 1, id="positive_tie_up"),
    # -2^30 + (1 - 2^30) = 1 - 2^31, truncated toward zero: 0 (ties toward +inf).
    pytest.param(-1, 1 << 30, 0, id="negative_tie_toward_zero"),
    pytest.param(-3, 1 << 30, -1, id="negative_tie_minus_one_and_half"),
    pytest.param(-(1 << 31), -(1 << 31), INT32_MAX, id="saturating"),
]


@pytest.mark.parametrize(("a", "b", "expected"), SRDHM_CASES)
def test_saturating_rounding_doubling_high_mul(a: int, b: int, expected: int) -> None:
    assert saturating_rounding_doubling_high_mul(a, b) == expected


@pytest.mark.parametrize(("x", "exponent", "expected"),
                         [(5, 1, 3), (-5, 1, -3), (3, 1, 2), (-3, 1, -2), (-4, 1, -2),
                          (6, 2, 2), (-6, 2, -2), (7, 0, 7), (2047, 12, 0), (2048, 12, 1)])
def test_rounding_divide_by_pot(x: int, exponent: int, expected: int) -> None:
    """Half away from zero: 2.5 -> 3, -2.5 -> -3, 1.5 -> 2, -1.5 -> -2, 1.5 -> 2."""
    assert rounding_divide_by_pot(x, exponent) == expected


def test_mul_shift_31_is_srdhm() -> None:
    """TOSA MUL with shift 31 equals SRDHM away from INT32_MIN^2 (the softmax lowering
    relies on it), on random and tie-heavy operands."""
    rng = np.random.default_rng(1)
    a = rng.integers(-(1 << 31), 1 << 31, 20000)
    b = rng.integers(-(1 << 31), 1 << 31, 20000)
    a[:5000] = rng.integers(-8, 8, 5000)           # products near the rounding boundary
    b[:5000] = 1 << 30
    tosa = numerics.mul_with_shift(a, b, 31)
    expected = [saturating_rounding_doubling_high_mul(int(x), int(y)) for x, y in zip(a, b)]
    assert tosa.tolist() == expected


def test_exp_on_negative_values_special_and_known_points() -> None:
    # exp(0) is the saturated one (2^31 - 1).
    assert exp_on_negative_values(0, 5) == INT32_MAX
    # exp(-1) in Q5.26 input -2^26: the quarter remainder is 0 so the Taylor part
    # evaluates exp(-1/4), then barrel-shifter bits -2 and -1 multiply by exp(-1/4)
    # and exp(-1/2). The degree-4 Taylor polynomial around -1/8 on [-1/4, 0) errs by
    # at most (1/8)^5 / 5! = 2.5e-7, i.e. 546 units of 2^-31 (plus a few roundings).
    bound = 2 ** 31 * (1 / 8) ** 5 / math.factorial(5) + 8
    value = exp_on_negative_values(-(1 << 26), 5)
    assert abs(value - math.exp(-1) * 2 ** 31) <= bound
    value = exp_on_negative_values(-(1 << 24), 5)
    assert abs(value - math.exp(-0.25) * 2 ** 31) <= bound
    # Monotone on a grid of inputs.
    grid = [exp_on_negative_values(-k * (1 << 20), 5) for k in range(0, 2000, 7)]
    assert all(p >= q for p, q in itertools.pairwise(grid))


SOFTMAX_SCALING_CASES = [
    # beta * s * 2^26 = 2^-8 * 2^26 = 2^18 -> frexp (0.5, 19): m = 2^30, left shift
    # 19; radius floor(31 * 2^26 / 2^19) = 31 * 128 = 3968.
    pytest.param(1.0, 1 / 256, (1 << 30, 19, -3968), id="scale_1_over_256"),
    # 2^-1 * 2^26 = 2^25 -> shift 26; radius 31 * 2^26 / 2^26 = 31.
    pytest.param(1.0, 0.5, (1 << 30, 26, -31), id="scale_half"),
    # beta * s * 2^26 = 2 * 16 * 2^26 = 2^31 is capped to 2^31 - 1; frexp gives
    # (1 - 2^-31, 31) and q * 2^31 = 2^31 - 1 exactly: m = 2^31 - 1, left shift 31;
    # radius floor(31 * 2^26 / 2^31) = floor(0.97) = 0.
    pytest.param(2.0, 16.0, (INT32_MAX, 31, 0), id="capped"),
]


@pytest.mark.parametrize(("beta", "scale", "expected"), SOFTMAX_SCALING_CASES)
def test_softmax_input_scaling(beta: float, scale: float, expected: tuple[int, int, int]
                               ) -> None:
    assert softmax_input_scaling(beta, scale) == expected


def test_softmax_input_scaling_rejects_tiny_product() -> None:
    with pytest.raises(UnsupportedScale):
        softmax_input_scaling(1.0, 2.0 ** -27)  # real multiplier 0.5 is not > 1


# ---------------------------------------------------------------------------
# Fused activation bounds: CalculateActivationRangeQuantized (kernel_util.cc):
# act_min = max(qmin, zp + round(lo / scale)), act_max = min(qmax, zp + round(hi / scale))


def _clamp_bounds(element, activation: str) -> tuple[int, int]:
    graph = Graph("g")
    x = graph.add_input("x", TensorType((4,), element))
    clamp = fused_activation(Builder(graph, []), x, activation)
    return clamp.owner.attrs["min_val"], clamp.owner.attrs["max_val"]


ACTIVATION_CASES = [
    # RELU6 at scale 1/4, zp -10: 0 -> -10, 6 / 0.25 = 24 -> 14.
    pytest.param(UniformQuantized(i8, f32, 0.25, -10), "RELU6", (-10, 14), id="i8_relu6"),
    # RELU: the top stays qmax.
    pytest.param(UniformQuantized(i8, f32, 0.25, -10), "RELU", (-10, 127), id="i8_relu"),
    # RELU_N1_TO_1 at scale 2: -1/2 = -0.5 and 0.5 are ties, rounded away from zero.
    pytest.param(UniformQuantized(i8, f32, 2.0, 0), "RELU_N1_TO_1", (-1, 1),
                 id="i8_relu_n1_to_1_ties"),
    # RELU6 past the storage range: zp 120 + 6 / 0.25 = 144 -> 127.
    pytest.param(UniformQuantized(i8, f32, 0.25, 120), "RELU6", (120, 127),
                 id="i8_relu6_clipped"),
    # uint8, scale 2^-5, zp 128: RELU6 top 128 + 192 = 320 -> 255.
    pytest.param(UniformQuantized(u8, f32, 2.0 ** -5, 128), "RELU6", (128, 255),
                 id="u8_relu6"),
    pytest.param(UniformQuantized(u8, f32, 2.0 ** -5, 128), "RELU_N1_TO_1", (96, 160),
                 id="u8_relu_n1_to_1"),
    # int16, scale 2^-10, zp 0: 6 * 1024 = 6144; -1 -> -1024.
    pytest.param(UniformQuantized(i16, f32, 2.0 ** -10, 0), "RELU6", (0, 6144),
                 id="i16_relu6"),
    pytest.param(UniformQuantized(i16, f32, 2.0 ** -10, 0), "RELU_N1_TO_1", (-1024, 1024),
                 id="i16_relu_n1_to_1"),
    # Narrow range storage [-127, 127]: -1 / 2^-7 = -128 is raised to -127.
    pytest.param(UniformQuantized(i8, f32, 2.0 ** -7, 0, -127, 127), "RELU_N1_TO_1",
                 (-127, 127), id="i8_narrow_relu_n1_to_1"),
]


@pytest.mark.parametrize(("element", "activation", "expected"), ACTIVATION_CASES)
def test_fused_activation_bounds(element, activation: str, expected: tuple[int, int]) -> None:
    assert _clamp_bounds(element, activation) == expected


def test_quantize_scalar_divides_in_float32() -> None:
    # float32(0.15) / float32(0.1) = 0.150000006 / 0.100000001 = 1.50000004 rounds to
    # the float32 1.5, a tie, rounded away from zero: 2. In double, 0.15 / 0.1 =
    # 1.4999999999999998 would give 1.
    assert quantize_scalar(0.15, UniformQuantized(i8, f32, 0.1, 0)) == 2
    assert quantize_scalar(-0.15, UniformQuantized(i8, f32, 0.1, 0)) == -2
    # Saturation to the storage range: 6 / 0.024 = 250 -> 127.
    assert quantize_scalar(6.0, UniformQuantized(i8, f32, 0.024, 0)) == 127


# ---------------------------------------------------------------------------
# Tables against the TFLite interpreter (every input value)


def _interpreter(path):
    import os
    import warnings

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated.*")
    interp = tf.lite.Interpreter(
        model_path=str(path),
        experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
    interp.allocate_tensors()
    return interp


def _run_every_value(path, values: np.ndarray, dtype) -> tuple[np.ndarray, tuple, tuple]:
    """TFLite's output for each of `values`, fed in chunks of the model's input size."""
    interp = _interpreter(path)
    d_in, d_out = interp.get_input_details()[0], interp.get_output_details()[0]
    shape = list(d_in["shape"])
    size = int(np.prod(shape))
    out = np.empty(values.size, dtype=np.int64)
    for start in range(0, values.size, size):
        chunk = np.resize(values[start:start + size], size)
        interp.set_tensor(d_in["index"], chunk.reshape(shape).astype(dtype))
        interp.invoke()
        count = min(size, values.size - start)
        out[start:start + count] = interp.get_tensor(d_out["index"]).reshape(-1)[:count]
    q_in = d_in["quantization_parameters"]
    q_out = d_out["quantization_parameters"]
    return (out, (float(q_in["scales"][0]), int(q_in["zero_points"][0])),
            (float(q_out["scales"][0]), int(q_out["zero_points"][0])))


@pytest.mark.parametrize(("model", "fn"), [("exp", np.exp), ("log", np.log)])
def test_table_i8_matches_tflite_lut(model: str, fn) -> None:
    """TFLite's int8 EXP/LOG kernels are LUTPopulateInt8 tables: ours must be equal
    entry for entry (all 256 inputs)."""
    values = np.arange(-128, 128)
    expected, (s_in, zp_in), (s_out, zp_out) = _run_every_value(
        MODELS / "unit" / "int8" / f"{model}.tflite", values, np.int8)
    table = table_i8(lambda v: fn(np.float32(v)), UniformQuantized(i8, f32, s_in, zp_in),
                     UniformQuantized(i8, f32, s_out, zp_out))
    assert table.astype(np.int64).tolist() == expected.tolist()


def test_table_i16_matches_tflite_exp() -> None:
    """TFLite's int16 EXP is a LUTPopulateInt16 table read with interpolation: TOSA's
    TABLE (apply_lookup_s, a 23-bit result) then a rounding shift by 7 gives TFLite's
    answer for all 65536 inputs."""
    values = np.arange(-32768, 32768)
    expected, (s_in, zp_in), (s_out, zp_out) = _run_every_value(
        MODELS / "unit" / "int16x8" / "exp.tflite", values, np.int16)
    table = table_i16(lambda v: np.exp(np.float64(v)), UniformQuantized(i16, f32, s_in, zp_in),
                      UniformQuantized(i16, f32, s_out, zp_out))
    looked_up = numerics.table_i16(values, table)
    ours = np.clip(numerics.arithmetic_right_shift(looked_up + 64, 7, round=False),
                   -32768, 32767)
    assert ours.tolist() == expected.tolist()


def test_table_i8_saturates_and_handles_non_finite() -> None:
    # exp(127 * 1.0) overflows float32 to inf: TFLite's (int32_t) cast of inf is
    # INT32_MIN on x86, clamped to -128; finite huge values clamp to 127.
    q = UniformQuantized(i8, f32, 1.0, 0)
    table = table_i8(lambda v: np.exp(np.float32(v)), q, q)
    assert table[128 + 0] == 1            # exp(0) = 1
    assert table[128 + 5] == 127          # exp(5) = 148.4 -> 127
    assert table[128 + 127] == -128       # exp(127) = inf
    assert table[0] == 0                  # exp(-128) = 0


def test_quantize_multipliers_hands_out_arrays_no_caller_can_change() -> None:
    """Results are kept per distinct scales and handed out again, so a caller
    that wrote into one would change every later RESCALE with those scales."""
    multipliers, shifts = quantize_multipliers([0.25, 0.5])
    again = quantize_multipliers(np.array([0.25, 0.5]))
    assert again[0].tolist() == multipliers.tolist() == [1 << 30, 1 << 30]
    assert again[1].tolist() == shifts.tolist() == [32, 31]
    for array in (multipliers, shifts):
        with pytest.raises(ValueError):
            array[0] = 0
