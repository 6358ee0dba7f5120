"""Float division from RECIPROCAL (`Elementwise.divide`, used by DIV and the
hybrid kernels' row quantization) against IEEE division, and floor division
(`Elementwise.floor_division`, FLOOR_DIV and FLOOR_MOD) against TFLite's.

The judges are independent of our code: numpy's float32 / float16 division
(the hardware's correctly rounded divide), TFLite's DIV kernel on a one-op
model (reference_ops::Div computes `input1 / input2` in the tensor's float
type, as the optimized kernel does), and Arm's reference model running the
converted graph. Our reference model must agree with each bit for bit.

The operands are the ones that break a Newton step rounded twice: quotients
within a few 2^-48 of a rounding midpoint, built as x = M * y + j (scaled)
with M odd, and the divisors whose reciprocal 1 / y lies that close to one.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from arm import run_arm
from conftest import TfliteBuilder
from test_legalize_conv import tflite_outputs

import reference_model
from tfl2tosa.ir import Builder, Graph, Module, TensorType
from tfl2tosa.ir.types import f16, f32
from tfl2tosa.pipeline import convert
from tfl2tosa.tosa import build as tb
from tfl2tosa.tosa.writer import write_tosa

# 1 / y for these y lies so close to a midpoint that q0 = RN(1/y) is right and a
# Newton step whose product rounds before the sum moves it an ulp away.
RECIPROCAL_NEAR_MIDPOINT = np.array(
    [0x3fd43d43, 0x3fe1368b, 0x3fe25473, 0x3fec7ec7, 0x3ff02a3b, 0x3ff0ff0f, 0x3ffc3237,
     0x3ffe01ff, 0x3fffffff], dtype=np.uint32).view(np.float32)


def near_midpoint_mantissas(rng: np.random.Generator, n: int, bits: int = 24,
                            distance: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Mantissas x, y in [1, 2) with x / y = (M + j / y') * 2^-s for an odd M
    and a small odd j: X * 2^s = M * Y + j in integers, so the quotient lies
    about j units of 2^-(bits - 1 + s) from the midpoint M * 2^-s of two
    neighbouring floats (s = bits for x >= y, bits + 1 below)."""
    xs, ys = [], []
    while len(xs) < n:
        y = int(rng.integers(1 << (bits - 1), 1 << bits)) | 1
        j = int(rng.integers(0, distance // 2)) * 2 + 1
        j = j if rng.integers(2) else -j
        s = bits + int(rng.integers(2))
        m = (-j * pow(y, -1, 1 << s)) % (1 << s)
        for k in range(4):
            t = (m + (k << s)) * y + j
            x = t >> s
            if (1 << (bits - 1)) <= x < (1 << bits) and (m + (k << s)) % 2 == 1:
                xs.append(x)
                ys.append(y)
    scale = 2.0 ** (1 - bits)
    return np.array(xs) * scale, np.array(ys) * scale


def _inside(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Where `Elementwise.divide` promises the correctly rounded quotient: |y| in
    [2^-126, 2^115], |x| >= 2^-101, |x / y| in [2^-101, 2^115] (float64 exact
    enough for the bounds)."""
    ax, ay = np.abs(x.astype(np.float64)), np.abs(y.astype(np.float64))
    q = ax / ay
    return ((ay >= 2.0 ** -126) & (ay <= 2.0 ** 115) & (ax >= 2.0 ** -101)
            & (q >= 2.0 ** -101) & (q <= 2.0 ** 115))


def float32_operands(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Near-midpoint quotients and plain random ones, random signs, spread over
    the exponents where the quotient is promised correctly rounded."""
    rng = np.random.default_rng(seed)
    mx, my = near_midpoint_mantissas(rng, n)
    mx = np.concatenate([mx, rng.uniform(1, 2, n)])
    my = np.concatenate([my, rng.uniform(1, 2, n)])
    ey = rng.integers(-126, 115, mx.size)
    eq = rng.integers(-100, 114, mx.size)
    ex = np.clip(eq + ey, -100, 126)
    x = (mx * 2.0 ** ex * rng.choice([-1, 1], mx.size)).astype(np.float32)
    y = (my * 2.0 ** ey * rng.choice([-1, 1], mx.size)).astype(np.float32)
    keep = _inside(x, y)
    return x[keep], y[keep]


def _divide_graph(element, n: int, method: str) -> Module:
    graph = Graph("main")
    x = graph.add_input("x", TensorType((n,), element))
    y = graph.add_input("y", TensorType((n,), element))
    e = tb.Elementwise(Builder(graph, loc="test"), 1)
    graph.set_outputs([getattr(e, method)(x, y)])
    module = Module()
    module.add_graph(graph)
    return module


def _assert_bits_equal(got: np.ndarray, want: np.ndarray, x: np.ndarray, y: np.ndarray,
                       who: str, zero_sign: bool = True) -> None:
    same = (got == want) & ((np.signbit(got) == np.signbit(want)) | (not zero_sign)) \
        | (np.isnan(got) & np.isnan(want))
    wrong = np.flatnonzero(~same)
    assert wrong.size == 0, (f"{who}: {wrong.size} of {got.size} differ, e.g. "
                             + ", ".join(f"{x[i]!r} / {y[i]!r} = {got[i]!r}, not {want[i]!r}"
                                         for i in wrong[:4]))


def _check_divide(x: np.ndarray, y: np.ndarray, element, method: str = "divide") -> None:
    """Ours and Arm's model on an Elementwise.divide (or divide_ieee) graph,
    against numpy's division."""
    module = _divide_graph(element, x.size, method)
    with np.errstate(all="ignore"):
        want = x / y
    ours = next(iter(reference_model.run(module, [x, y]).values()))
    _assert_bits_equal(ours, want, x, y, "our reference model")
    arm = run_arm(write_tosa(module), [x, y], [x.dtype])
    assert arm.status == "valid", arm
    _assert_bits_equal(arm.outputs[0], want, x, y, "Arm's reference model")


@pytest.mark.parametrize("method", ["divide", "divide_ieee"])
def test_reciprocals_next_to_a_midpoint(method: str) -> None:
    y = np.concatenate([RECIPROCAL_NEAR_MIDPOINT, -RECIPROCAL_NEAR_MIDPOINT,
                        RECIPROCAL_NEAR_MIDPOINT * np.float32(2.0 ** 100),
                        RECIPROCAL_NEAR_MIDPOINT * np.float32(2.0 ** -100)])
    _check_divide(np.ones_like(y), y, f32, method)


@pytest.mark.parametrize("method", ["divide", "divide_ieee"])
def test_quotients_next_to_a_midpoint(method: str) -> None:
    x, y = float32_operands(seed=1, n=4000)
    assert x.size > 6000
    _check_divide(x, y, f32, method)


@pytest.mark.parametrize("method", ["divide", "divide_ieee"])
def test_special_operands_give_ieee_results(method: str) -> None:
    """Zeros, infinities and NaN as dividend or divisor: the residuals are NaN
    there and q0 = x * (1/y) is kept, which is what IEEE division gives."""
    inf, nan = np.inf, np.nan
    values = np.array([0.0, -0.0, 1.0, -3.0, 1e-30, 3e30, inf, -inf, nan], np.float32)
    x, y = (a.ravel() for a in np.meshgrid(values, values))
    special = ~np.isfinite(x) | ~np.isfinite(y) | (x == 0) | (y == 0)
    keep = special | _inside(x, y)
    assert special.sum() == 65 and keep.sum() == 77
    _check_divide(x[keep], y[keep], f32, method)


def test_float16_every_mantissa_pair() -> None:
    """All 2^20 pairs of float16 mantissas: quotients in both binades below
    and above 1, the same at any exponent away from the range's ends."""
    m = (np.arange(1024, 2048) / 1024).astype(np.float16)
    x, y = (a.ravel() for a in np.meshgrid(m, m))
    x[::2] = -x[::2]
    _check_divide(x, y, f16)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["divide", "divide_ieee"])
def test_dividend_one_every_divisor_mantissa(method: str) -> None:
    y = (np.arange(1 << 23, dtype=np.uint32) | np.uint32(127 << 23)).view(np.float32)
    _check_divide(np.ones_like(y), y, f32, method)


def any_float32_operands(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Random bit patterns (every kind of float: subnormals, infinities, NaN);
    quotients around the ends of `divide`'s range, of the normal range and of
    the subnormals, and around overflow; exact midpoints between subnormals,
    x / y = (2m + 1) * 2^-150, where only ties-to-even decides."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << 32, (2, n), dtype=np.uint64).astype(np.uint32).view(np.float32)
    xs, ys = [bits[0]], [bits[1]]
    for exponent in (-151, -150, -149, -140, -127, -126, -125, -101, -100, 115, 116, 127, 128):
        y = (rng.uniform(1, 2, n) * 2.0 ** rng.integers(-149, 128, n)).astype(np.float32)
        x = (rng.uniform(0.5, 4, n) * 2.0 ** exponent * y.astype(np.float64)).astype(np.float32)
        xs += [x, np.nextafter(x, np.float32(np.inf)), -x]
        ys += [y, y, y]
    odd = rng.integers(0, 1 << 12, n) * 2 + 1
    divisor = rng.integers(1, 1 << 11, n) * 2 + 1
    fits = odd * divisor < (1 << 24)
    shift = 2.0 ** rng.integers(0, 100, n)[fits]
    xs.append((odd * divisor)[fits] * 2.0 ** -150 * shift * rng.choice([-1, 1], fits.sum()))
    ys.append(divisor[fits] * shift)
    return (np.concatenate(xs).astype(np.float32), np.concatenate(ys).astype(np.float32))


def test_ieee_division_of_any_operands() -> None:
    x, y = any_float32_operands(seed=4, n=20000)
    with np.errstate(all="ignore"):
        ties = (x.astype(np.float64) / y.astype(np.float64) * 2.0 ** 150) % 2 == 1
    assert ties.sum() > 10000
    _check_divide(x, y, f32, "divide_ieee")


def test_ieee_division_float16_random_bit_patterns() -> None:
    """float16 divides in float32 and rounds once more: innocuous double rounding."""
    rng = np.random.default_rng(5)
    x, y = rng.integers(0, 1 << 16, (2, 200000), dtype=np.uint32).astype(np.uint16).view(np.float16)
    _check_divide(x, y, f16, "divide_ieee")


def _div_model(n: int, path: Path) -> Path:
    b = TfliteBuilder()
    x = b.tensor([n], "FLOAT32", "x")
    y = b.tensor([n], "FLOAT32", "y")
    out = b.tensor([n], "FLOAT32", "quotient")
    b.op("DIV", [x, y], [out])
    b.io([x, y], [out])
    path.write_bytes(b.to_bytes())
    return path


def test_div_model_matches_tflite(tmp_path: Path) -> None:
    """A DIV model on the known failing pairs, near-midpoint and random quotients,
    operands of every kind and special ones: the converted graph gives TFLite's
    bits on our model and on Arm's (TFLite clamps +-inf to +-FLT_MAX: DIV's
    activation range)."""
    x, y = float32_operands(seed=2, n=1000)
    ax, ay = any_float32_operands(seed=6, n=300)
    values = np.array([0.0, -0.0, 1.0, -3.0, np.inf, np.nan], np.float32)
    sx, sy = (a.ravel() for a in np.meshgrid(values, values))
    x = np.concatenate([np.ones_like(RECIPROCAL_NEAR_MIDPOINT), x, ax, sx])
    y = np.concatenate([RECIPROCAL_NEAR_MIDPOINT, y, ay, sy])
    path = _div_model(x.size, tmp_path / "div.tflite")
    theirs = tflite_outputs(path.read_bytes(), [x, y])[0]
    with np.errstate(all="ignore"):
        ieee = np.clip(x / y, -np.finfo(np.float32).max, np.finfo(np.float32).max)
    _assert_bits_equal(theirs, ieee, x, y, "TFLite (the judge itself)")
    module, _ = convert(path)
    ours = next(iter(reference_model.run(module, [x, y]).values()))
    _assert_bits_equal(ours, theirs, x, y, "our reference model vs TFLite")
    arm = run_arm(write_tosa(module), [x, y], [np.dtype(np.float32)])
    assert arm.status == "valid", arm
    _assert_bits_equal(arm.outputs[0], theirs, x, y, "Arm's reference model vs TFLite")


def _floor_operands(seed: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Quotients next to integers (x = RN(k * y) and its neighbours, where
    floor(x * (1/y)) is one off), dividends far smaller than an opposite-signed
    divisor (x + y rounds to y), and the pairs found failing before."""
    rng = np.random.default_rng(seed)
    y = (rng.uniform(-2, 2, n) * 2.0 ** rng.integers(-20, 20, n)).astype(np.float32)
    k = rng.integers(-(1 << 21), 1 << 21, n) * (rng.uniform(size=n) < 0.5) \
        + rng.integers(-50, 50, n)
    near = (k * y.astype(np.float64)).astype(np.float32)
    up, down = np.nextafter(near, np.float32(np.inf)), np.nextafter(near, np.float32(-np.inf))
    small = (-np.sign(y) * rng.uniform(0, 1, n) * 2.0 ** rng.integers(-60, -1, n)
             * np.abs(y)).astype(np.float32)
    # Exact multiples, zeros of both signs: a zero remainder keeps x's sign.
    exact_x = [-4.0, 4.0, -6.0, 6.0, -0.0, 0.0, -0.0, -3.0, 3.0, -1e30]
    exact_y = [2.0, -2.0, -3.0, 3.0, 3.0, -5.0, -5.0, 1.5, -1.5, 1e29]
    x = np.concatenate([near, up, down, small, [-1e-10, 1e-10, -59.499725],
                        exact_x]).astype(np.float32)
    y = np.concatenate([y, y, y, y, [1, -1, 0.24999885], exact_y]).astype(np.float32)
    keep = (np.abs(x.astype(np.float64) / y) < 2.0 ** 22) & (y != 0)
    return x[keep], y[keep]


@pytest.mark.parametrize("code", ["FLOOR_DIV", "FLOOR_MOD"])
def test_floor_division_matches_tflite(code: str, tmp_path: Path) -> None:
    """FLOOR_DIV / FLOOR_MOD (Elementwise.floor_division) give TFLite's bits:
    floor(x / y) in double, and fmod(x, y) (+ y where the signs differ), on our
    model and Arm's. -1e-10 / 1 was floor 0 and remainder 0 (TFLite: -1, 1);
    -59.499725 mod 0.24999885 was rounded twice; -4 mod 2 was +0 (fmod keeps
    the dividend's sign: -0)."""
    x, y = _floor_operands(seed=3, n=3000)
    b = TfliteBuilder()
    xi, yi = b.tensor([x.size], "FLOAT32", "x"), b.tensor([x.size], "FLOAT32", "y")
    out = b.tensor([x.size], "FLOAT32", "out")
    b.op(code, [xi, yi], [out])
    b.io([xi, yi], [out])
    path = tmp_path / f"{code.lower()}.tflite"
    path.write_bytes(b.to_bytes())
    theirs = tflite_outputs(path.read_bytes(), [x, y])[0]
    module, _ = convert(path)
    ours = next(iter(reference_model.run(module, [x, y]).values()))
    _assert_bits_equal(ours, theirs, x, y, f"our reference model vs TFLite's {code}")
    arm = run_arm(write_tosa(module), [x, y], [np.dtype(np.float32)])
    assert arm.status == "valid", arm
    _assert_bits_equal(arm.outputs[0], theirs, x, y, f"Arm's reference model vs TFLite's {code}")
