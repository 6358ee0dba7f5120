"""Integer REDUCE_PROD (int8, int16) and uint8 SUM against TFLite, bit exact,
and against Arm's reference model (tests/e2e.py check_model).

TFLite's quantized REDUCE_PROD (reference_ops::QuantizedReduceProd,
kernels/internal/reference/reduce.h) multiplies the zero-point-free values of
each reduced row one by one in int32, scaling every 48-bit product back with
the int64 MultiplyByQuantizedMultiplier (kernels/internal/common.cc: the
multiplier reduced to 15 bits, one rounding half up) by `s_in / s_out^(1/N)`,
then scales the result once more, adds the output zero point and clamps.

Cases: the zoo's models and models written field by field for what the
converter does not emit: tiny and above-one per-step scales, saturation at
both ends, non-zero zero points at the extremes, several (non-adjacent,
negative) axes, keep_dims, no axes, a single factor, long chains, int16, and
products that are exact halves of both signs (where rounding half up and half
away from zero differ). Chains that could overflow TFLite's int32 accumulator
and chains above MAX_PRODUCT_STEPS are refused and take the fallback.

uint8 SUM is judged against TFLite's optimized kernel, as every quantized SUM
(tfl2tosa.validation: the reference SUM reads int8 data as uint8 and its int16
results vary). For uint8 the reference kernel does run, but computes another
recipe (an integer multiplier instead of the optimized kernel's float32 scale
and bias) and disagrees with the optimized one on some outputs; we match the
optimized kernel, the one validation uses for SUM and the one TFLite runs by
default (test_sum_uint8_kernels_disagree names a case).

MAXIMUM / MINIMUM / SELECT / SELECT_V2 whose inputs are quantized differently
from their output (not emitted by the converter, which requantizes inputs
first: every such op in the zoo has equal parameters and takes the integer
path): TFLite's kernels compare and choose the stored integers, ignoring the
scales, so its answer is not the real-valued maximum or choice. Our integer
patterns refuse these, the fallback computes the real-valued definition, and
the tests check that against the definition computed here (dequantize, the
op, quantize rounding half away), show TFLite's raw-integer answer differs,
and that validate reports the mismatch instead of passing.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import pytest
from conftest import TfliteBuilder
from e2e import check_against_arm, check_model, model_path
from tflite_ref import check_patterns, reference_outputs, write_model

import reference_model
from legalize.reduce import MAX_PRODUCT_STEPS
from tfl2tosa.pipeline import convert
from tfl2tosa.validation import as_graph_input, as_tflite_output, validate

NUMPY = {"INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16}


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...], keep_dims: bool) -> list[int]:
    resolved = {a % len(shape) for a in axes}
    if keep_dims:
        return [1 if i in resolved else d for i, d in enumerate(shape)]
    return [d for i, d in enumerate(shape) if i not in resolved]


def reducer_model(tmp_path, op_code: str, type_name: str, shape, axes, keep_dims: bool,
                  in_q: tuple[float, int], out_q: tuple[float, int], name: str):
    """One quantized reducer op (`op_code`, ReducerOptions) as a .tflite file."""
    b = TfliteBuilder()
    x = b.tensor(list(shape), type_name, "x", scale=[in_q[0]], zero_point=[in_q[1]])
    axis = b.tensor([len(axes)], "INT32", "axes", data=np.array(axes, np.int32))
    y = b.tensor(reduced_shape(tuple(shape), tuple(axes), keep_dims), type_name, "y",
                 scale=[out_q[0]], zero_point=[out_q[1]])
    b.op(op_code, [x, axis], [y], options=b.options("ReducerOptions", keepDims=keep_dims))
    b.io([x], [y])
    return write_model(b, tmp_path / f"{name}.tflite")


def draw(rng: np.random.Generator, shape, type_name: str, low: int | None = None,
         high: int | None = None) -> np.ndarray:
    info = np.iinfo(NUMPY[type_name])
    low = int(info.min) if low is None else low
    high = int(info.max) if high is None else high
    return rng.integers(low, high + 1, shape).astype(NUMPY[type_name])


# ---------------------------------------------------------------------------
# REDUCE_PROD: zoo


@pytest.mark.parametrize("relative", ["unit/int8/reduce_prod.tflite",
                                      "unit/int16x8/reduce_prod.tflite"])
def test_reduce_prod_zoo(relative: str) -> None:
    check_patterns(model_path(relative), {"tfl.reduce_prod": "reduce_prod_int"}, runs=4)


# ---------------------------------------------------------------------------
# REDUCE_PROD: models the converter does not emit


@dataclass(frozen=True)
class ProdCase:
    id: str
    type: str
    shape: tuple[int, ...]
    axes: tuple[int, ...]
    keep_dims: bool
    in_q: tuple[float, int]
    out_q: tuple[float, int]
    # Inputs are drawn from [zp_in + low, zp_in + high] (clipped to the type), so
    # the real factors stay near one (long chains) or span everything.
    low: int | None = None
    high: int | None = None


PROD_CASES = [
    # s_in / s_out^(1/3) ~ 0.0046: every step scales down hard.
    ProdCase("int8_tiny_step_scale", "INT8", (2, 3, 5), (1,), False, (0.01, 0), (1.0, 0)),
    # s_in / s_out^(1/2) = 5: steps scale up (16-bit multiplier, shift 12); the
    # products saturate at both ends.
    ProdCase("int8_step_scale_above_one", "INT8", (3, 4, 2), (2,), True, (0.5, 0),
             (0.01, 0)),
    ProdCase("int8_saturates_both_ends", "INT8", (6, 3), (1,), False, (0.1, 0), (0.001, 0)),
    ProdCase("int8_extreme_zero_points", "INT8", (2, 3, 4), (1,), False, (0.02, -128),
             (0.05, 127)),
    ProdCase("int8_zero_points", "INT8", (3, 2, 4), (0,), True, (0.03, 37), (0.02, -100)),
    ProdCase("int8_non_adjacent_axes", "INT8", (2, 3, 2, 3), (0, 2), False, (0.05, 3),
             (0.04, -9)),
    ProdCase("int8_negative_axes_all", "INT8", (2, 1, 3), (-1, 0, -2), False, (0.08, -4),
             (0.03, 5)),
    ProdCase("int8_duplicate_axes_keep_dims", "INT8", (3, 4, 2), (1, -2), True, (0.1, 2),
             (0.2, -1)),
    ProdCase("int8_single_factor", "INT8", (2, 1, 5), (1,), False, (0.04, 6), (0.01, -20)),
    # No axes: every element is its own product, scaled once by s_in / s_out.
    ProdCase("int8_no_axes", "INT8", (3, 4), (), False, (0.05, 3), (0.02, -5)),
    # 24 factors near one (real 0.9 .. 1.1), calibrated like the converter would:
    # inputs on [0, 1.1], the product on [0, 1.1^24].
    ProdCase("int8_long_chain", "INT8", (2, 24), (1,), False, (0.0043, -128), (0.0385, -128),
             low=209, high=255),
    ProdCase("int16_rescaled", "INT16", (2, 3, 4), (1,), False, (3.0e-4, 0), (0.05, 0)),
    ProdCase("int16_two_axes", "INT16", (2, 2, 3), (0, 2), True, (3.0e-5, 0), (1.0e-3, 0)),
    ProdCase("int16_saturates_both_ends", "INT16", (5, 2), (1,), True, (1.0e-3, 0),
             (1.0e-2, 0)),
    # 16 factors with real values 0.9 .. 1.1 (scale 1.1 / 32767), the product on
    # [0, 1.1^16 ~ 4.6] with headroom.
    ProdCase("int16_near_one_chain", "INT16", (3, 16), (-1,), False, (3.36e-5, 0),
             (3.0e-4, 0), low=26786, high=32738),
    # s_in / s_out^(1/2) = 0.5 exactly: multiplier 2^14, shift 15, so each step is
    # (p d + 1) >> 1 and every odd product (either sign) is a tie.
    ProdCase("int8_ties_both_signs", "INT8", (48, 2), (1,), False, (0.5, 0), (1.0, 0),
             low=-15, high=15),
]


def prod_inputs(case: ProdCase, runs: int = 3) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(len(case.id))
    zp = case.in_q[1]
    info = np.iinfo(NUMPY[case.type])
    low = None if case.low is None else max(int(info.min), zp + case.low)
    high = None if case.high is None else min(int(info.max), zp + case.high)
    return [[draw(rng, case.shape, case.type, low, high)] for _ in range(runs)]


@pytest.mark.parametrize("case", PROD_CASES, ids=lambda c: c.id)
def test_reduce_prod(tmp_path, case: ProdCase) -> None:
    path = reducer_model(tmp_path, "REDUCE_PROD", case.type, case.shape, case.axes,
                         case.keep_dims, case.in_q, case.out_q, case.id)
    check_patterns(path, {"tfl.reduce_prod": "reduce_prod_int"}, inputs=prod_inputs(case))


# ---------------------------------------------------------------------------
# REDUCE_PROD: the kernel's arithmetic, pinned against TFLite


def optimized_outputs(path, feeds: list[np.ndarray]) -> list[np.ndarray]:
    """TFLite's outputs on its builtin (optimized) kernels, no default delegates."""
    import tensorflow as tf

    warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated.*")
    interpreter = tf.lite.Interpreter(
        model_path=str(path), experimental_op_resolver_type=(
            tf.lite.experimental.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES))
    interpreter.allocate_tensors()
    for detail, array in zip(interpreter.get_input_details(), feeds):
        interpreter.set_tensor(detail["index"], array)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def _tflite_multiplier(scale: float) -> tuple[int, int]:
    """QuantizeMultiplier (quantization_util.cc), written out from the C++ source."""
    fraction, exponent = math.frexp(scale)
    q = int(np.round(np.float64(fraction) * (1 << 31)))  # ties cannot occur below 2^53
    if q == 1 << 31:
        q, exponent = q // 2, exponent + 1
    return q, exponent


def prod_recipe(rows: np.ndarray, zp_in: int, zp_out: int, scale: float, *,
                rounding: str = "half_up", multiplier_bits: int = 15) -> np.ndarray:
    """QuantizedReduceProd on [rows, factors] stored values, in Python integers,
    clamped to the values' integer type.

    rounding "half_up" is `(v m + 2^(s-1)) >> s` (int64 MBQM); "half_away" rounds
    ties away from zero instead. multiplier_bits 15 reduces the 31-bit
    multiplier as the int64 MBQM does; 31 keeps it (the int32 MBQM's precision).
    """
    m31, exponent = _tflite_multiplier(scale)
    if multiplier_bits == 15:
        m, shift = (m31 + (1 << 15)) >> 16, 15 - exponent
    else:
        m, shift = m31, 31 - exponent

    def scaled(v: int) -> int:
        if rounding == "half_up":
            return (v * m + (1 << (shift - 1))) >> shift
        magnitude = (abs(v) * m + (1 << (shift - 1))) >> shift
        return magnitude if v >= 0 else -magnitude

    out = []
    for row in rows.astype(np.int64):
        product = int(row[0]) - zp_in
        for value in row[1:]:
            product = scaled(product * (int(value) - zp_in))
        info = np.iinfo(rows.dtype)
        out.append(max(int(info.min), min(int(info.max), scaled(product) + zp_out)))
    return np.array(out)


def test_reduce_prod_rounding_and_multiplier_pinned(tmp_path) -> None:
    """TFLite rounds each scaled product half up: on a tie-heavy model the recipe
    matches TFLite that way only (not half away from zero), and the converted
    graph is exact there."""
    case = next(c for c in PROD_CASES if c.id == "int8_ties_both_signs")
    path = reducer_model(tmp_path, "REDUCE_PROD", case.type, case.shape, case.axes,
                         case.keep_dims, case.in_q, case.out_q, case.id)
    data = prod_inputs(case, runs=1)[0][0]
    expected = reference_outputs(path, [data])[0].astype(np.int64)
    scale = case.in_q[0] / math.pow(case.out_q[0], 1.0 / case.shape[1])
    recipe = {variant: prod_recipe(data, case.in_q[1], case.out_q[1], scale, **variant_kw)
              for variant, variant_kw in {
                  "tflite": {}, "half_away": {"rounding": "half_away"}}.items()}
    assert np.array_equal(recipe["tflite"], expected)
    assert not np.array_equal(recipe["half_away"], expected)
    check_patterns(path, {"tfl.reduce_prod": "reduce_prod_int"}, inputs=[[data]])


def test_reduce_prod_15_bit_multiplier_pinned(tmp_path) -> None:
    """int16 products up to ~2.5e5 before the last scaling: the 15-bit multiplier's
    relative error (~2^-16) moves some outputs, and TFLite has it."""
    in_q, out_q, shape = (1.0e-3, 0), (1.0e-2, 0), (64, 2)
    path = reducer_model(tmp_path, "REDUCE_PROD", "INT16", shape, (1,), False, in_q, out_q,
                         "prod_multiplier_bits")
    data = draw(np.random.default_rng(7), shape, "INT16", -5000, 5000)
    expected = reference_outputs(path, [data])[0].astype(np.int64)
    scale = in_q[0] / math.pow(out_q[0], 1.0 / shape[1])
    assert np.array_equal(prod_recipe(data, 0, 0, scale), expected)
    assert not np.array_equal(prod_recipe(data, 0, 0, scale, multiplier_bits=31), expected)
    check_patterns(path, {"tfl.reduce_prod": "reduce_prod_int"}, inputs=[[data]])


# ---------------------------------------------------------------------------
# REDUCE_PROD: refused, through the fallback


def _reduce_prod_outcome(path) -> dict:
    _, conversion = convert(path)
    (outcome,) = [o for o in conversion.outcomes if o["op_name"] == "tfl.reduce_prod"]
    return outcome


def test_reduce_prod_that_can_overflow_takes_the_fallback(tmp_path) -> None:
    """Step scale 1 / 1e-6^(1/8) ~ 5.6 on factors up to 255: TFLite's int32 chain
    wraps for large inputs, so the chain is refused; on inputs whose product
    stays small, the fallback is within 1 LSB of TFLite."""
    path = reducer_model(tmp_path, "REDUCE_PROD", "INT8", (3, 8), (1,), False, (1.0, -128),
                         (1.0e-6, -128), "prod_overflow")
    outcome = _reduce_prod_outcome(path)
    assert outcome["path"] == "fallback" and "overflow" in outcome["reason"], outcome
    rng = np.random.default_rng(3)
    small = [[(rng.integers(-1, 2, (3, 8)) - 128 + 1).astype(np.int8)] for _ in range(2)]
    report = validate(path, inputs=small)
    assert report.passed, report.outputs


def test_reduce_prod_above_the_step_limit_takes_the_fallback(tmp_path) -> None:
    count = MAX_PRODUCT_STEPS + 1
    path = reducer_model(tmp_path, "REDUCE_PROD", "INT8", (1, count), (1,), False,
                         (0.01, -100), (0.02, 0), "prod_long")
    outcome = _reduce_prod_outcome(path)
    assert outcome["path"] == "fallback" and str(MAX_PRODUCT_STEPS) in outcome["reason"]


# ---------------------------------------------------------------------------
# uint8 SUM


@dataclass(frozen=True)
class SumCase:
    id: str
    shape: tuple[int, ...]
    axes: tuple[int, ...]
    keep_dims: bool
    in_q: tuple[float, int]
    out_q: tuple[float, int]


SUM_UINT8_CASES = [
    SumCase("rescaled", (2, 5, 7), (1,), False, (0.1, 3), (0.5, 130)),
    SumCase("same_quantization", (3, 4), (1,), True, (0.2, 128), (0.2, 128)),
    # s_in / s_out = 0.5 and zero points 0: every odd sum is a tie.
    SumCase("ties", (4, 3), (1,), False, (0.5, 0), (1.0, 0)),
    # Ties again, with a zero point: bias -128 * 0.5 * 2 is an integer.
    SumCase("ties_zero_point_128", (6, 2), (1,), False, (0.5, 128), (1.0, 128)),
    SumCase("extreme_zero_points", (2, 6, 3), (2, 0), False, (0.02, 255), (0.07, 0)),
    SumCase("saturates_both_ends", (3, 16), (1,), False, (0.05, 128), (0.01, 128)),
    SumCase("negative_axes_keep_dims", (2, 3, 4), (-1, 0), True, (0.03, 7), (0.2, 250)),
    SumCase("all_axes", (2, 3, 4), (0, 1, 2), False, (0.01, 100), (0.5, 20)),
    SumCase("large_count", (1, 2048), (1,), False, (0.003, 11), (0.9, 3)),
]


def sum_uint8_model(tmp_path, case: SumCase):
    return reducer_model(tmp_path, "SUM", "UINT8", case.shape, case.axes, case.keep_dims,
                         case.in_q, case.out_q, f"sum_uint8_{case.id}")


@pytest.mark.parametrize("case", SUM_UINT8_CASES, ids=lambda c: c.id)
def test_sum_uint8(tmp_path, case: SumCase) -> None:
    rng = np.random.default_rng(len(case.id))
    feeds = [[draw(rng, case.shape, "UINT8")] for _ in range(3)]
    check_patterns(sum_uint8_model(tmp_path, case), {"tfl.sum": "sum_uint8"}, inputs=feeds)


def test_sum_uint8_kernels_disagree(tmp_path) -> None:
    """TFLite's reference and optimized uint8 SUM differ here; validate runs the
    optimized one and our graph equals it."""
    case = SUM_UINT8_CASES[0]
    path = sum_uint8_model(tmp_path, case)
    data = draw(np.random.default_rng(0), case.shape, "UINT8")
    optimized = optimized_outputs(path, [data])[0]
    reference = reference_outputs(path, [data])[0]
    assert not np.array_equal(optimized, reference)
    _, report = check_model(path, allowed_paths=("integer",), inputs=[[data]])
    assert report.resolver == "BUILTIN_WITHOUT_DEFAULT_DELEGATES"
    assert all(o.exact for o in report.outputs)


# ---------------------------------------------------------------------------
# MAXIMUM / MINIMUM / SELECT with inputs quantized unlike the output


@dataclass(frozen=True)
class MixedCase:
    id: str
    op: str
    type: str
    x_q: tuple[float, int]
    y_q: tuple[float, int]
    out_q: tuple[float, int]


MIXED_CASES = [
    MixedCase("maximum_int8", "MAXIMUM", "INT8", (0.1, 0), (0.02, 10), (0.05, -3)),
    MixedCase("minimum_int8", "MINIMUM", "INT8", (0.1, 0), (0.02, 10), (0.05, -3)),
    MixedCase("select_int8", "SELECT", "INT8", (0.1, 0), (0.02, 10), (0.05, -3)),
    MixedCase("select_v2_int8", "SELECT_V2", "INT8", (0.03, -7), (0.08, 20), (0.06, 1)),
    MixedCase("maximum_int16", "MAXIMUM", "INT16", (1.0e-3, 0), (3.0e-4, 0), (5.0e-4, 0)),
    MixedCase("select_v2_int16", "SELECT_V2", "INT16", (1.0e-3, 0), (3.0e-4, 0),
              (5.0e-4, 0)),
    MixedCase("minimum_uint8", "MINIMUM", "UINT8", (0.1, 128), (0.02, 10), (0.05, 100)),
    MixedCase("select_uint8", "SELECT", "UINT8", (0.1, 128), (0.02, 10), (0.05, 100)),
]
MIXED_SHAPE = (3, 8)


def mixed_model(tmp_path, case: MixedCase):
    b = TfliteBuilder()
    shape = list(MIXED_SHAPE)
    x = b.tensor(shape, case.type, "x", scale=[case.x_q[0]], zero_point=[case.x_q[1]])
    y = b.tensor(shape, case.type, "y", scale=[case.y_q[0]], zero_point=[case.y_q[1]])
    out = b.tensor(shape, case.type, "out", scale=[case.out_q[0]],
                   zero_point=[case.out_q[1]])
    if case.op.startswith("SELECT"):
        condition = b.tensor(shape, "BOOL", "condition")
        options = "SelectOptions" if case.op == "SELECT" else "SelectV2Options"
        b.op(case.op, [condition, x, y], [out], options=b.options(options))
        b.io([condition, x, y], [out])
    else:
        b.op(case.op, [x, y], [out])
        b.io([x, y], [out])
    return write_model(b, tmp_path / f"{case.id}.tflite")


def real_valued(case: MixedCase, inputs: list[np.ndarray]) -> np.ndarray:
    """The op on the dequantized inputs, quantized to the output (half away from zero)."""
    *condition, x, y = inputs
    real_x = (x.astype(np.float64) - case.x_q[1]) * case.x_q[0]
    real_y = (y.astype(np.float64) - case.y_q[1]) * case.y_q[0]
    if case.op == "MAXIMUM":
        real = np.maximum(real_x, real_y)
    elif case.op == "MINIMUM":
        real = np.minimum(real_x, real_y)
    else:
        real = np.where(condition[0], real_x, real_y)
    scaled = real / case.out_q[0]
    rounded = np.sign(scaled) * np.floor(np.abs(scaled) + 0.5)
    info = np.iinfo(NUMPY[case.type])
    return np.clip(rounded + case.out_q[1], info.min, info.max).astype(np.int64)


def raw_integer_answer(case: MixedCase, inputs: list[np.ndarray]) -> np.ndarray:
    """What TFLite's kernels compute: the stored integers compared or chosen as they are."""
    *condition, x, y = inputs
    if case.op == "MAXIMUM":
        return np.maximum(x, y).astype(np.int64)
    if case.op == "MINIMUM":
        return np.minimum(x, y).astype(np.int64)
    return np.where(condition[0], x, y).astype(np.int64)


@pytest.mark.parametrize("case", MIXED_CASES, ids=lambda c: c.id)
def test_mixed_quantization_gives_the_real_valued_answer(tmp_path, case: MixedCase) -> None:
    path = mixed_model(tmp_path, case)
    rng = np.random.default_rng(len(case.id))
    inputs = [draw(rng, MIXED_SHAPE, case.type), draw(rng, MIXED_SHAPE, case.type)]
    if case.op.startswith("SELECT"):
        inputs.insert(0, rng.integers(0, 2, MIXED_SHAPE).astype(bool))
    module, conversion = convert(path)
    (outcome,) = conversion.outcomes
    assert outcome["path"] == "fallback", outcome
    # Ours (as TFLite would store it) against the definition: the fallback quantizes
    # x * (1 / s) in float32, which may move a tie by one step.
    (ours,) = reference_model.run(module, [as_graph_input(a, v) for a, v in
                                           zip(inputs, module.main.inputs)]).values()
    ours = as_tflite_output(ours, np.dtype(NUMPY[case.type])).astype(np.int64)
    assert np.abs(ours - real_valued(case, inputs)).max() <= 1
    check_against_arm(module, conversion, [inputs])
    # TFLite ignores the scales, and validate says so rather than passing.
    theirs = reference_outputs(path, inputs)[0].astype(np.int64)
    assert np.array_equal(theirs, raw_integer_answer(case, inputs))
    assert np.abs(theirs - real_valued(case, inputs)).max() > 1
    report = validate(path, module=module, conversion=conversion, inputs=[inputs])
    assert not report.passed and report.fallback_ops
    assert not any(o.exact for o in report.outputs)
    # ... and tells the user why: the note names the op and TFLite's raw choice.
    (note,) = report.notes
    assert note.startswith(f"tfl.{case.op.lower()} at ") and "ignoring the scales" in note
