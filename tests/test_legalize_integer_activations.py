"""Integer patterns for quantized activations (legalize/activations.py).

Every case converts a quantized model and requires (tests/e2e.py check_model)
that our reference model equals TFLite's builtin reference kernels exactly and
that Arm's reference model agrees on the written `.tosa` file; the op must
take its integer pattern. 8-bit cases feed every input value (256), int16
cases all 65536 where the kernel is not a plain LUT, so a table that is off
in one entry fails. Models come from the zoo (what the converter emits) and
from the TFLite builder for zero points at both ends, tiny and large scales,
uint8 models (uint8 inputs and outputs) and int16.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TfliteBuilder
from e2e import check_model, model_path

from legalize.activations import (
    SIGMOID_TABLE_UINT16,
    inv_sqrt_multiplier,
    lut_8bit,
)
from legalize.quantized import table_i8
from tfl2tosa.pipeline import convert
from tfl2tosa.ir.types import UniformQuantized, f32, i8

LABELS = {
    "tfl.logistic": "logistic_int", "tfl.tanh": "tanh_int", "tfl.exp": "exp_int",
    "tfl.log": "log_int", "tfl.rsqrt": "rsqrt_int", "tfl.gelu": "gelu_int",
    "tfl.elu": "elu_int8", "tfl.hard_swish": "hard_swish_int8", "tfl.relu": "relu_int",
    "tfl.relu6": "relu_int", "tfl.relu_n1_to_1": "relu_unit_range_int",
    "tfl.relu_0_to_1": "relu_unit_range_int", "tfl.leaky_relu": "leaky_relu_int",
    "tfl.prelu": "prelu_int8",
}


def check_integer(path, **kwargs):
    """check_model on the integer path only; the activation took its pattern; exact."""
    conversion, report = check_model(path, allowed_paths=("integer",), **kwargs)
    for outcome in conversion.outcomes:
        label = LABELS.get(outcome["op_name"])
        if label is not None:
            assert outcome["pattern"] == label, outcome
    assert report.outputs and all(o.exact for o in report.outputs)
    return conversion, report


# ---------------------------------------------------------------------------
# The model zoo

ZOO_INT8 = ["logistic", "tanh", "exp", "log", "rsqrt", "gelu_approximate", "gelu_exact",
            "hard_swish", "relu", "relu6", "relu_n1_to_1", "leaky_relu", "prelu"]
ZOO_INT16 = ["logistic", "tanh", "exp", "log", "gelu_approximate", "gelu_exact", "relu",
             "relu6", "leaky_relu"]


@pytest.mark.parametrize("relative", [f"unit/int8/{n}.tflite" for n in ZOO_INT8]
                         + [f"unit/int16x8/{n}.tflite" for n in ZOO_INT16])
def test_zoo_model(relative: str) -> None:
    check_integer(model_path(relative), runs=2)


def test_zoo_rsqrt_int16() -> None:
    """TFLite rejects negative RSQRT inputs at run time: feed |x|."""
    rng = np.random.default_rng(0)
    inputs = [[np.abs(rng.integers(-32767, 32768, (1, 4, 4, 3))).astype(np.int16)]
              for _ in range(2)]
    check_integer(model_path("unit/int16x8/rsqrt.tflite"), inputs=inputs)


def test_zoo_elu_is_float_in_tflite() -> None:
    """The converter keeps ELU float between DEQUANTIZE/QUANTIZE (no quantized
    ELU op in the zoo model); the quantized ELU is covered by builder cases."""
    conversion, report = check_model(model_path("unit/int8/elu.tflite"),
                                     allowed_paths=("integer", "float"))
    assert {o["path"] for o in conversion.outcomes if o["op_name"] == "tfl.elu"} == {"float"}
    assert all(o.exact for o in report.outputs)


# ---------------------------------------------------------------------------
# Models written field by field

_TYPE_NAMES = {"i8": "INT8", "u8": "UINT8", "i16": "INT16"}
_DTYPES = {"i8": np.int8, "u8": np.uint8, "i16": np.int16}


def unary_model(tmp_path, op_name: str, kind: str, s_in: float, zp_in: int, s_out: float,
                zp_out: int, shape: tuple[int, ...], options=None, alpha=None):
    """x -> OP -> y in `kind` (uint8 models have uint8 inputs and outputs);
    PRELU with `alpha` = (values, scale, zero point) as a constant second input."""
    b = TfliteBuilder()
    body = _TYPE_NAMES[kind]
    x = b.tensor(list(shape), body, "x", scale=[s_in], zero_point=[zp_in])
    inputs = [x]
    if alpha is not None:
        values, a_scale, a_zp = alpha
        inputs.append(b.tensor(list(values.shape), body, "alpha", data=values,
                               scale=[a_scale], zero_point=[a_zp]))
    y = b.tensor(list(shape), body, "y", scale=[s_out], zero_point=[zp_out])
    b.op(op_name, inputs, [y], options=options(b) if options else None)
    b.io([x], [y])
    path = tmp_path / f"{op_name.lower()}_{kind}.tflite"
    path.write_bytes(b.to_bytes())
    return path


def every_value(kind: str, shape: tuple[int, ...], low: int | None = None
                ) -> list[list[np.ndarray]]:
    """Every storage value (from `low`) of the graph input, tiled over `shape`."""
    dtype = _DTYPES[kind]
    info = np.iinfo(dtype)
    values = np.arange(info.min if low is None else low, int(info.max) + 1)
    count = int(np.prod(shape))
    return [[np.resize(values, count).reshape(shape).astype(dtype)]]


def _gelu(approximate: bool):
    return lambda b: b.options("GeluOptions", approximate=approximate)


def _leaky(alpha: float):
    return lambda b: b.options("LeakyReluOptions", alpha=alpha)


S8 = (2, 128)  # 256 elements: each 8-bit value once

# id, op, kind, s_in, zp_in, s_out, zp_out, options
TABLE_CASES = [
    ("logistic_i8_zp-128_tiny_scale", "LOGISTIC", "i8", 1e-4, -128, 1 / 256, -128, None),
    ("logistic_i8_zp127_large_scale", "LOGISTIC", "i8", 0.5, 127, 1 / 256, -128, None),
    ("logistic_u8_zp255", "LOGISTIC", "u8", 0.06, 255, 1 / 256, 0, None),
    ("tanh_i8_zp127", "TANH", "i8", 0.03, 127, 1 / 128, 0, None),
    ("tanh_u8_zp0", "TANH", "u8", 0.02, 0, 1 / 128, 128, None),
    # exp(x) * (1 / s_out) exceeds int32 in float: TFLite clamps to 127.
    ("exp_i8_overflow_clamps", "EXP", "i8", 0.12, -48, 0.116, -112, None),
    ("exp_i8_infinity_gives_min", "EXP", "i8", 2.0, -128, 0.5, 0, None),
    ("exp_i8_zp127_tiny_scale", "EXP", "i8", 1e-4, 127, 0.01, -128, None),
    ("log_i8_nonpositive_inputs", "LOG", "i8", 0.05, 3, 0.03, 20, None),
    ("log_i8_zp-128", "LOG", "i8", 0.0157, -128, 0.0139, 27, None),
    ("rsqrt_i8_small_scales", "RSQRT", "i8", 1e-3, -128, 0.2, -128, None),
    ("rsqrt_i8_large_scale_zp127_out", "RSQRT", "i8", 0.8, -128, 0.004, 127, None),
    ("gelu_i8_exact_zp127", "GELU", "i8", 0.05, 127, 0.02, -128, _gelu(False)),
    ("gelu_i8_approximate_zp-128", "GELU", "i8", 0.03, -128, 0.03, -100, _gelu(True)),
    ("gelu_u8_exact", "GELU", "u8", 0.04, 200, 0.02, 10, _gelu(False)),
    ("gelu_u8_approximate", "GELU", "u8", 0.04, 30, 0.02, 60, _gelu(True)),
    ("elu_i8_zp127", "ELU", "i8", 0.05, 127, 0.03, 10, None),
    ("elu_i8_zp-128_tiny_scale", "ELU", "i8", 1e-4, -128, 1e-4, -128, None),
    ("hard_swish_i8_zp127_to_zp-128", "HARD_SWISH", "i8", 0.04, 127, 0.02, -128, None),
    ("hard_swish_i8_large_input_scale", "HARD_SWISH", "i8", 2.5, 0, 1.7, -90, None),
    ("hard_swish_i8_tiny_scales", "HARD_SWISH", "i8", 1e-3, -5, 1e-4, 3, None),
    ("hard_swish_u8", "HARD_SWISH", "u8", 0.05, 100, 0.03, 20, None),
]


@pytest.mark.parametrize("case", [pytest.param(c[1:], id=c[0]) for c in TABLE_CASES])
def test_table_8bit(tmp_path, case) -> None:
    op_name, kind, s_in, zp_in, s_out, zp_out, options = case
    path = unary_model(tmp_path, op_name, kind, s_in, zp_in, s_out, zp_out, S8, options)
    # RSQRT: TFLite rejects inputs below the zero point (all allowed at -128).
    check_integer(path, inputs=every_value(kind, S8))


def test_rsqrt_i8_inputs_from_zero_point(tmp_path) -> None:
    path = unary_model(tmp_path, "RSQRT", "i8", 0.02, -20, 0.05, -128, S8)
    check_integer(path, inputs=every_value("i8", S8, low=-20))


S16 = (1, 256, 256)  # 65536 elements: each int16 value once

INT16_CASES = [
    # LOGISTIC/TANH: TFLite's fixed-point kernels; power-of-two scales take
    # the multiplier 3 << s path, others the computed multiplier and shift.
    ("logistic_i16_power_of_two", "LOGISTIC", 2.0 ** -12, 2.0 ** -15, None),
    ("logistic_i16_tiny_scale", "LOGISTIC", 1e-5, 2.0 ** -15, None),
    ("logistic_i16_zoo_like_scale", "LOGISTIC", 1.2197568e-4, 2.0 ** -15, None),
    ("logistic_i16_large_scale_no_shift", "LOGISTIC", 2.0, 2.0 ** -15, None),
    ("tanh_i16_power_of_two_shift0", "TANH", 2.0 ** -12, 2.0 ** -15, None),
    ("tanh_i16_power_of_two_shift1", "TANH", 2.0 ** -11, 2.0 ** -15, None),
    ("tanh_i16_scale_3e-4", "TANH", 3e-4, 2.0 ** -15, None),
    # LUT kernels: TABLE + RESCALE.
    ("exp_i16", "EXP", 3e-4, 0.6, None),
    ("exp_i16_saturating", "EXP", 1e-4, 2e-4, None),
    ("log_i16_negative_inputs", "LOG", 9.6e-5, 1.7e-4, None),
    ("gelu_i16_exact", "GELU", 1.8e-4, 3.9e-5, _gelu(False)),
    ("gelu_i16_approximate", "GELU", 3e-4, 2e-4, _gelu(True)),
]


@pytest.mark.parametrize("case", [pytest.param(c[1:], id=c[0]) for c in INT16_CASES])
def test_int16_every_value(tmp_path, case) -> None:
    op_name, s_in, s_out, options = case
    path = unary_model(tmp_path, op_name, "i16", s_in, 0, s_out, 0, S16, options)
    check_integer(path, inputs=every_value("i16", S16))


def test_int16_table_with_a_wrapping_step_falls_back(tmp_path) -> None:
    """exp(x) * 65536 / range overflows float32 inside the input range: TFLite's
    table then steps from 32767 to -32768, a slope its LUTLookup wraps to int16
    and TOSA's TABLE may not hold (REQUIRE), so the pattern refuses."""
    path = unary_model(tmp_path, "EXP", "i16", 0.009, 0, 7.9e-4, 0, (1, 64))
    _, conversion = convert(path)
    (outcome,) = [o for o in conversion.outcomes if o["op_name"] == "tfl.exp"]
    assert outcome["path"] == "fallback"
    assert "does not fit int16" in outcome["reason"]


@pytest.mark.parametrize("scales", [(5.4e-5, 5.9e-5), (3e-3, 1.9e-5), (2e-5, 4e-3)],
                         ids=["near_tie_entry", "saturating", "wide_output"])
def test_rsqrt_i16_nonnegative(tmp_path, scales) -> None:
    """int16 RSQRT: zero gives the output maximum; TFLite rejects negatives."""
    path = unary_model(tmp_path, "RSQRT", "i16", scales[0], 0, scales[1], 0, (1, 128, 256))
    check_integer(path, inputs=every_value("i16", (1, 128, 256), low=0))


# id, op, kind, s_in, zp_in, s_out, zp_out
RELU_CASES = [
    ("relu_i8_zp-128_both", "RELU", "i8", 0.0078, -128, 0.0039, -128),
    ("relu_i8_zp127_in", "RELU", "i8", 0.05, 127, 0.02, 0),
    ("relu_i8_scale_ratio_1000", "RELU", "i8", 0.1, 3, 1e-4, -128),
    ("relu_i8_scale_ratio_1e-3", "RELU", "i8", 1e-4, -7, 0.1, -128),
    ("relu_u8", "RELU", "u8", 0.05, 128, 0.03, 0),
    ("relu6_i8_zp127_out", "RELU6", "i8", 0.06, 0, 0.0235, 127),
    ("relu6_u8_zp255_in", "RELU6", "u8", 0.03, 255, 0.0235, 0),
    ("relu6_i8_tiny_output_scale", "RELU6", "i8", 0.05, 10, 1e-3, -128),
    ("relu_n1_to_1_i8_zp127_in", "RELU_N1_TO_1", "i8", 0.0156, 127, 0.0078, -1),
    ("relu_n1_to_1_u8", "RELU_N1_TO_1", "u8", 0.02, 100, 0.0078, 128),
    ("relu_0_to_1_i8", "RELU_0_TO_1", "i8", 0.01, -20, 0.004, -128),
    ("relu_0_to_1_u8", "RELU_0_TO_1", "u8", 0.01, 60, 0.004, 0),
]


@pytest.mark.parametrize("case", [pytest.param(c[1:], id=c[0]) for c in RELU_CASES])
def test_relu_8bit(tmp_path, case) -> None:
    op_name, kind, s_in, zp_in, s_out, zp_out = case
    path = unary_model(tmp_path, op_name, kind, s_in, zp_in, s_out, zp_out, S8)
    check_integer(path, inputs=every_value(kind, S8))


@pytest.mark.parametrize("case", [("RELU", 3.05e-5, 3.03e-5), ("RELU", 1e-3, 2e-6),
                                  ("RELU6", 2.4e-4, 1.8e-4), ("RELU6", 1e-5, 2.0 ** -12)],
                         ids=["relu_i16", "relu_i16_ratio_500", "relu6_i16",
                              "relu6_i16_below_bound"])
def test_relu_int16(tmp_path, case) -> None:
    op_name, s_in, s_out = case
    path = unary_model(tmp_path, op_name, "i16", s_in, 0, s_out, 0, S16)
    check_integer(path, inputs=every_value("i16", S16))


LEAKY_CASES = [
    ("leaky_i8_alpha0.2_zp127", "i8", 0.2, 0.05, 127, 0.03, -85),
    ("leaky_i8_alpha1.5_zp-128", "i8", 1.5, 0.02, -128, 0.05, 0),
    ("leaky_i8_alpha0", "i8", 0.0, 0.02, 5, 0.01, -128),
    ("leaky_i8_alpha1", "i8", 1.0, 0.02, -3, 0.02, -3),
    ("leaky_u8_alpha0.1", "u8", 0.1, 0.03, 128, 0.02, 100),
    ("leaky_i16_alpha0.3", "i16", 0.3, 3e-5, 0, 3e-5, 0),
    ("leaky_i16_alpha2", "i16", 2.0, 1e-4, 0, 2e-4, 0),
]


@pytest.mark.parametrize("case", [pytest.param(c[1:], id=c[0]) for c in LEAKY_CASES])
def test_leaky_relu(tmp_path, case) -> None:
    kind, alpha, s_in, zp_in, s_out, zp_out = case
    shape = S16 if kind == "i16" else S8
    path = unary_model(tmp_path, "LEAKY_RELU", kind, s_in, zp_in, s_out, zp_out, shape,
                       _leaky(alpha))
    check_integer(path, inputs=every_value(kind, shape))


def test_leaky_relu_negative_alpha_falls_back(tmp_path) -> None:
    """RESCALE multipliers are non-negative: alpha < 0 takes the fallback,
    within its 1 LSB of TFLite."""
    path = unary_model(tmp_path, "LEAKY_RELU", "i8", 0.02, 0, 0.02, 0, S8, _leaky(-0.5))
    conversion, _ = check_model(path, allowed_paths=("fallback",), inputs=every_value("i8", S8))
    (outcome,) = [o for o in conversion.outcomes if o["op_name"] == "tfl.leaky_relu"]
    assert "negative alpha" in outcome["reason"]


PRELU_SHAPE = (2, 8, 16)
PRELU_CASES = [
    ("prelu_i8_per_channel_alpha", "i8", (16,), 0.0014, 0, 0.02, -5, 0.01, -90),
    ("prelu_i8_single_alpha_zp127", "i8", (1,), 0.01, 20, 0.03, 127, 0.02, -128),
    ("prelu_i8_alpha_rows_zp-128", "i8", (8, 1), 0.02, -128, 0.02, -128, 0.05, 0),
    ("prelu_u8_per_channel_alpha", "u8", (16,), 0.002, 128, 0.03, 200, 0.02, 60),
]


@pytest.mark.parametrize("case", [pytest.param(c[1:], id=c[0]) for c in PRELU_CASES])
def test_prelu(tmp_path, case) -> None:
    kind, alpha_shape, a_scale, a_zp, s_in, zp_in, s_out, zp_out = case
    rng = np.random.default_rng(3)
    low, high = (-128, 128) if kind == "i8" else (0, 256)
    alpha = rng.integers(low, high, alpha_shape).astype(np.int8 if kind == "i8" else np.uint8)
    path = unary_model(tmp_path, "PRELU", kind, s_in, zp_in, s_out, zp_out, PRELU_SHAPE,
                       alpha=(alpha, a_scale, a_zp))
    check_integer(path, inputs=every_value(kind, PRELU_SHAPE))


# ---------------------------------------------------------------------------
# Facts behind the tables, against TFLite's numbers


def test_sigmoid_table_entries() -> None:
    """TFLite's table is sigmoid(i / 24) in Q0.16, not a plain rounding of it
    (so it is data); its ends and monotonicity."""
    table = SIGMOID_TABLE_UINT16
    assert table.shape == (256,) and table[0] == 32768 and table[-1] == 65535
    assert np.all(np.diff(table) >= 0)
    exact = np.round(65536 / (1 + np.exp(-np.arange(256) / 24)))
    assert np.max(np.abs(np.minimum(exact, 65535) - table)) <= 2


def test_inv_sqrt_multiplier_matches_the_real_function() -> None:
    """GetInvSqrtQuantizedMultiplierExp(v) = m * 2^shift / 2^31 ~ 1 / sqrt(v)."""
    for value in (2, 3, 100, 12345, 1 << 20, (1 << 29) + 7, (1 << 31) - 1):
        multiplier, shift = inv_sqrt_multiplier(value)
        assert multiplier * 2.0 ** shift / 2 ** 31 == pytest.approx(value ** -0.5, rel=1e-5)


def test_lut_8bit_clamps_where_table_i8_wraps() -> None:
    """The exp_i8_overflow_clamps case: TFLite's LUT entry is 127 (pinned
    against TFLite above); legalize.quantized.table_i8 gives -128 there."""
    def q(scale: float, zp: int) -> UniformQuantized:
        return UniformQuantized(i8, f32, float(np.float32(scale)), zp)

    def exp(x):
        return np.exp(np.asarray(x, np.float64)).astype(np.float32)

    ours = lut_8bit(exp, q(0.12, -48), q(0.116, -112))
    assert ours[-1] == 127
    assert table_i8(exp, q(0.12, -48), q(0.116, -112))[-1] == -128
