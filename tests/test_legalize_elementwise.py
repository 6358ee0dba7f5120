"""Elementwise arithmetic and math legalization, judged by the TFLite interpreter.

Every case is a one-op model written with the TfliteBuilder, fed chosen
values and checked by `check_model` (TFLite's reference kernels, then Arm's
reference model on the written `.tosa`). Values are picked to break the
known-wrong lowerings: FLOOR_MOD
without the multiply by y, floor(x + 0.5) for ROUND, x * (1/y) for DIV,
RECIPROCAL(RSQRT(x)) style square roots, TOSA POW on a negative base (Arm's
model reports it UNPREDICTABLE). Ops whose lowering is exact must also be
bit-exact with TFLite, not just within the op family's tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from arm import run_arm
from conftest import TfliteBuilder
from e2e import check_model

import legalize
import reference_model
from tfl2tosa.pipeline import convert
from tfl2tosa.tosa.writer import write_tosa
from tfl2tosa.validation import validate

TFLITE_TYPES = {"float32": "FLOAT32", "float16": "FLOAT16", "int32": "INT32", "int16": "INT16",
                "int8": "INT8", "bool": "BOOL", "int64": "INT64"}


@dataclass
class Const:
    """A constant operand (the other operands are graph inputs)."""

    array: np.ndarray


@dataclass
class Case:
    """A one-op model: TFLite op code, operands (arrays are inputs), result."""

    id: str
    code: str
    operands: list[Any]
    out_dtype: Any = None          # default: the first operand's dtype
    out_shape: tuple[int, ...] | None = None
    options: tuple[str, dict] | None = None
    exact: bool = False             # must be bit-exact with TFLite
    max_rel_error: float | None = None


def _array(operand: Any) -> np.ndarray:
    return operand.array if isinstance(operand, Const) else np.asarray(operand)


def write_case(case: Case, directory: Path) -> tuple[Path, list[np.ndarray]]:
    """Write `case` as a .tflite file; returns the path and the input feed."""
    b = TfliteBuilder()
    tensors, feeds, inputs = [], [], []
    for i, operand in enumerate(case.operands):
        array = _array(operand)
        type_name = TFLITE_TYPES[array.dtype.name]
        if isinstance(operand, Const):
            tensors.append(b.tensor(list(array.shape), type_name, f"c{i}", data=array))
        else:
            index = b.tensor(list(array.shape), type_name, f"x{i}")
            tensors.append(index)
            inputs.append(index)
            feeds.append(array)
    arrays = [_array(o) for o in case.operands]
    out_dtype = np.dtype(case.out_dtype or arrays[0].dtype)
    out_shape = case.out_shape if case.out_shape is not None else \
        np.broadcast_shapes(*(a.shape for a in arrays))
    out = b.tensor(list(out_shape), TFLITE_TYPES[out_dtype.name], "y")
    options = b.options(case.options[0], **case.options[1]) if case.options else None
    b.op(case.code, tensors, [out], options=options)
    b.io(inputs, [out])
    path = directory / f"{case.id}.tflite"
    path.write_bytes(b.to_bytes())
    return path, feeds


def run_case(case: Case, directory: Path) -> None:
    path, feeds = write_case(case, directory)
    _, report = check_model(path, inputs=[feeds], allowed_paths=("float",))
    result = report.outputs[0]
    if case.exact:
        assert result.exact, f"{case.id}: not bit-exact with TFLite: {result}"
    if case.max_rel_error is not None:
        assert result.max_rel_error <= case.max_rel_error, f"{case.id}: {result}"


def f32(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def i32(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int32)


NAN, INF = float("nan"), float("inf")


def _random_quotients(seed: int, binades: int, n: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """Operands over 2 * binades binades, where x * (1/y) is wrong a quarter of the time."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, n) * 2.0 ** rng.integers(-binades, binades, n)
    y = rng.uniform(-2, 2, n) * 2.0 ** rng.integers(-binades, binades, n)
    return x.astype(np.float32), y.astype(np.float32)


def _near_integer_quotients(seed: int, n: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """x = RN(k * y): x / y lies within an ulp of the integer k, where floor(x * (1/y))
    and x - y * floor(x / y) computed naively go wrong."""
    rng = np.random.default_rng(seed)
    y = (rng.uniform(0.1, 3, n) * rng.choice([-1, 1], n)).astype(np.float32)
    k = rng.integers(-300, 300, n).astype(np.float32)
    return (k * y).astype(np.float32), y


_QX, _QY = _random_quotients(1, 20)
# Quotients below 2^22: the float FLOOR_DIV / FLOOR_MOD lowering is exact up to 2^23
# (TFLite's fmod stays exact beyond; ours then loses the low bits of the quotient).
_FX, _FY = _random_quotients(3, 10)
_NX, _NY = _near_integer_quotients(2)

CASES = [
    # ADD / SUB / MUL: rank alignment, activations, int32.
    Case("add_rank_broadcast", "ADD", [f32(1, 2, 3), np.arange(6, dtype=np.float32)
                                        .reshape(2, 1, 3)], exact=True),
    Case("add_relu6", "ADD", [f32(-9, 1, 5, 9), f32(1, 2, 3, 4)],
         options=("AddOptions", {"fusedActivationFunction": 3}), exact=True),
    Case("add_int32_relu", "ADD", [i32(-9, 1, 5, 9), i32(1, 2, 3, 4)],
         options=("AddOptions", {"fusedActivationFunction": 1}), exact=True),
    Case("sub_const_operand", "SUB", [f32(1.5, -2, 3), Const(f32(0.25))], exact=True),
    Case("mul_int32_wraps", "MUL", [i32(100000, -70000, 3), i32(100000, 70000, -4)],
         exact=True),
    Case("mul_f32", "MUL", [_QX[:64], _QY[:64]], exact=True),
    # DIV: correctly rounded quotients, TFLite's clamp of +-inf, int32 truncation.
    Case("div_correctly_rounded", "DIV", [_QX, _QY], exact=True),
    Case("div_by_zero_saturates", "DIV", [f32(1, -1, 0, INF, 3e38, 5, -5, 1e-30),
                                          f32(0, 0, 0, 2, 0.1, INF, 3, 1e30)], exact=True),
    Case("div_relu6", "DIV", [f32(100, -3, 7, 1), f32(3, 1, 2, 0)],
         options=("DivOptions", {"fusedActivationFunction": 3}), exact=True),
    Case("div_int32_truncates", "DIV", [i32(7, -7, 7, -7, 0, -2147483647),
                                        i32(2, 2, -2, -2, 5, 3)], exact=True),
    # FLOOR_DIV / FLOOR_MOD: sign of the divisor, quotients next to integers, int32.
    Case("floor_mod_negative_divisor", "FLOOR_MOD",
         [f32(5, -5, 5, -5, 0.5, -0.1, 7.5, -7.5, 1e-3, 6),
          f32(-3, 3, 3, -3, -1.5, 1, 2.5, 2.5, -1, 3)], exact=True),
    Case("floor_mod_near_integer_quotients", "FLOOR_MOD", [_NX, _NY], exact=True),
    Case("floor_mod_random", "FLOOR_MOD", [_FX, _FY], exact=True),
    Case("floor_div_near_integer_quotients", "FLOOR_DIV", [_NX, _NY], exact=True),
    Case("floor_div_random", "FLOOR_DIV", [_FX, _FY], exact=True),
    Case("floor_div_int32", "FLOOR_DIV", [i32(7, -7, 7, -7, 0, 6, -6, -2147483647),
                                          i32(2, 2, -2, -2, 3, -3, 4, 2)], exact=True),
    Case("floor_mod_int32", "FLOOR_MOD", [i32(7, -7, 7, -7, 0, 6, -6, -2147483647),
                                          i32(2, 2, -2, -2, 3, -3, 4, 2)], exact=True),
    # POW: negative bases, zero and infinite operands, C's special cases.
    Case("pow_special_cases", "POW",
         [f32(-2, -2, -2, 0, 0, -0.0, -0.0, -0.0, INF, 0.5, 2, -1, 1, NAN, -8, -INF, -INF, 2,
              -3, 0),
          f32(3, 2, 0.5, 0, -1, 3, -3, 0.5, -2, INF, -INF, INF, NAN, 0, 1 / 3, 3, 0.5, -1,
              -2, 2.5)]),
    Case("pow_random_signs", "POW", [f32(*np.linspace(-3, 3, 25)),
                                     f32(*np.round(np.linspace(-4, 4, 25)))]),
    # Unary math.
    Case("round_half_to_even", "ROUND",
         [f32(0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997, 3.5, -3.5, 4.5,
              8388609, -8388609, 1e10, INF, -INF, NAN, 0.7, -0.7, 2.5000002)], exact=True),
    Case("sqrt_special_and_random", "SQRT",
         [np.concatenate([f32(0, -0.0, INF, -1, NAN, 2, 4, 3e38, 1.2e-38),
                          np.abs(_QX)])], exact=True),
    Case("sign_nan_and_zeros", "SIGN", [f32(NAN, -0.0, 0, 3, -3, INF, -INF, 1e-40)],
         exact=True),
    Case("sign_int32", "SIGN", [i32(-5, 0, 7)], exact=True),
    Case("neg_int32", "NEG", [i32(-5, 0, 7)], exact=True),
    Case("abs_int32", "ABS", [i32(-5, 0, 7)], exact=True),
    Case("square", "SQUARE", [f32(-3, 0.1, 1e20)], exact=True),
    Case("log_of_zero_and_negative", "LOG", [f32(0, -1, 1, INF, NAN)], exact=True),
    Case("exp_extremes", "EXP", [f32(-INF, 0, 100, -100)], max_rel_error=1e-6),
    # Other binary ops.
    Case("squared_difference_int32", "SQUARED_DIFFERENCE", [i32(3, -4, 5), i32(-1, 4, 9)],
         exact=True),
    Case("maximum_int32", "MAXIMUM", [i32(3, -4, 5), i32(-1, 4, 9)], exact=True),
    Case("minimum_broadcast", "MINIMUM", [f32(1, -2, 3), np.ones((2, 3), np.float32)],
         exact=True),
    Case("add_n_three", "ADD_N", [_QX[:8], _QY[:8], _QX[8:16]], exact=True),
    Case("bitwise_xor_int32", "BITWISE_XOR", [i32(-1, 5, 12345678), i32(7, 5, -2)],
         exact=True),
    Case("right_shift_clamps_amount", "RIGHT_SHIFT",
         [i32(-8, 8, -2147483648, 1000, -1000), i32(-1, 0, 31, 40, 3)], exact=True),
    Case("right_shift_const_amount", "RIGHT_SHIFT", [i32(-8, 8, 1000), Const(i32(35))],
         exact=True),
    # Constant-shaped results.
    Case("zeros_like", "ZEROS_LIKE", [f32(1, 2, 3)], exact=True),
    Case("zeros_like_int32", "ZEROS_LIKE", [i32(1, 2, 3)], exact=True),
    Case("fill_input_value", "FILL", [Const(i32(2, 3)), np.array(2.5, np.float32)],
         out_dtype=np.float32, out_shape=(2, 3), exact=True),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_elementwise(case: Case, tmp_path: Path) -> None:
    run_case(case, tmp_path)


def test_fill_with_constant_value_folds(tmp_path: Path) -> None:
    """FILL with constant dims and value: the whole result is a constant (the model
    gets a dummy input so that TFLite has something to feed)."""
    b = TfliteBuilder()
    dims = b.tensor([1], "INT32", "dims", data=i32(4))
    value = b.tensor([], "INT32", "value", data=np.array(7, np.int32))
    filled = b.tensor([4], "INT32", "filled")
    x = b.tensor([4], "INT32", "x")
    y = b.tensor([4], "INT32", "y")
    b.op("FILL", [dims, value], [filled])
    b.op("ADD", [filled, x], [y])
    b.io([x], [y])
    path = tmp_path / "fill.tflite"
    path.write_bytes(b.to_bytes())
    conversion, report = check_model(path, inputs=[[i32(1, -2, 3, 4)]], allowed_paths=("float",))
    assert report.outputs[0].exact
    assert "tosa.tile" not in conversion.ops_out


def test_atan2_accuracy(tmp_path: Path) -> None:
    """ATAN2 on every quadrant, both axes, signed zeros and infinities; relative
    error against TFLite's std::atan2 below 1e-6 (about 8 ulp; typically 1-2)."""
    values = np.concatenate([np.linspace(-3, 3, 41), [0.0, -0.0, INF, -INF, 1e-30, -1e-30,
                                                      1e30]]).astype(np.float32)
    y, x = np.meshgrid(values, values)
    rng = np.random.default_rng(3)
    wide = (rng.uniform(-1, 1, (2, 500)) * 2.0 ** rng.integers(-30, 30, (2, 500)))
    y = np.concatenate([y.ravel(), wide[0]]).astype(np.float32)
    x = np.concatenate([x.ravel(), wide[1]]).astype(np.float32)
    run_case(Case("atan2", "ATAN2", [y, x], max_rel_error=1e-6), tmp_path)


def test_naive_reciprocal_division_is_not_exact(tmp_path: Path) -> None:
    """The DIV case above can tell a correctly rounded division from x * (1/y): with
    the `div` pattern disabled (`div_reciprocal` takes over) it is no longer exact."""
    case = next(c for c in CASES if c.id == "div_correctly_rounded")
    path, feeds = write_case(case, tmp_path)
    module, conversion = convert(path, disabled={"div"})
    assert {o["pattern"] for o in conversion.outcomes} == {"div_reciprocal"}
    report = validate(path, module=module, conversion=conversion, inputs=[feeds])
    assert not report.outputs[0].exact


def _float16_expected(code: str, x: np.ndarray, y: np.ndarray | None) -> np.ndarray:
    """The correctly rounded float16 result, from float64 numpy (exact for these ops
    on float16 operands: quotients and square roots round once, fmod is exact)."""
    a = x.astype(np.float64)
    b = None if y is None else y.astype(np.float64)
    if code == "DIV":
        exact = a / b
    elif code == "SQRT":
        exact = np.sqrt(a)
    elif code == "ROUND":
        exact = np.round(a)  # half to even
    elif code == "FLOOR_MOD":
        r = np.fmod(a, b)
        exact = np.where((r != 0) & ((r < 0) != (b < 0)), r + b, r)
    else:
        raise ValueError(code)
    return exact.astype(np.float16)


_H = np.random.default_rng(4)
_HX = (_H.uniform(0.01, 100, 256) * _H.choice([-1, 1], 256)).astype(np.float16)
_HY = (_H.uniform(0.01, 100, 256) * _H.choice([-1, 1], 256)).astype(np.float16)


@pytest.mark.parametrize("code, operands", [
    ("DIV", [_HX, _HY]),
    ("SQRT", [np.abs(_HX)]),
    ("ROUND", [np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.4998, 1000.5, 2049], np.float16)]),
    ("FLOOR_MOD", [_HX, np.float16(3.0) * np.sign(_HY)]),
], ids=["div", "sqrt", "round", "floor_mod"])
def test_float16_lowerings_are_correctly_rounded(code: str, operands: list[np.ndarray],
                                                  tmp_path: Path) -> None:
    """TFLite has no float16 kernels for these ops, so the float16 graphs are judged
    by float64 numpy and by Arm's reference model: both ours and Arm's results must
    be the correctly rounded float16 values."""
    path, feeds = write_case(Case(code.lower(), code, operands), tmp_path)
    module, _ = convert(path)
    expected = _float16_expected(code, operands[0], operands[1] if len(operands) > 1 else None)
    ours = next(iter(reference_model.run(module, feeds).values()))
    arm = run_arm(write_tosa(module), feeds, [np.dtype(np.float16)])
    assert arm.status == "valid"
    np.testing.assert_array_equal(ours, expected)
    np.testing.assert_array_equal(arm.outputs[0], expected)


@pytest.mark.parametrize("code, out_type", [
    ("ADD", "INT8"), ("MUL", "INT8"), ("MAXIMUM", "INT8"), ("SQUARED_DIFFERENCE", "INT8"),
    ("LESS", "BOOL"),
])
def test_quantized_ops_reach_float_patterns_only_through_the_fallback(
        code: str, out_type: str, tmp_path: Path) -> None:
    """A float pattern handed a quantized op must refuse it (the fallback then
    dequantizes, runs it in float and quantizes back, within 1 LSB of TFLite)."""
    # TFLite's int8 MAXIMUM compares stored values: it needs equal parameters.
    same = code == "MAXIMUM"
    b = TfliteBuilder()
    x = b.tensor([2, 8], "INT8", "x", scale=[0.05], zero_point=[3])
    y = b.tensor([2, 8], "INT8", "y", scale=[0.05 if same else 0.04],
                 zero_point=[3 if same else -2])
    out = b.tensor([2, 8], out_type, "out",
                   **({"scale": [0.05 if same else 0.1], "zero_point": [3 if same else 1]}
                      if out_type == "INT8" else {}))
    b.op(code, [x, y], [out])
    b.io([x, y], [out])
    path = tmp_path / f"{code.lower()}_int8.tflite"
    path.write_bytes(b.to_bytes())
    float_labels = {entry.label for entry in legalize.registry.patterns_for(f"tfl.{code.lower()}")
                    if entry.kind == "float"}
    conversion, _ = check_model(path)
    outcome = conversion.outcomes[0]
    assert outcome["path"] == "fallback" or outcome["pattern"] not in float_labels, outcome
