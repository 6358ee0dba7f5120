"""CAST and RESCALE kernels: hand-derived cases from the TOSA 1.0 pseudocode, then
differential checks against Arm's reference model (helpers in test_ref_tensor_ops)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from test_ref_tensor_ops import assert_same, run_arm, run_ours, t

from reference_model import numerics
from reference_model.kernels import StaticOp, type_conversion
from tfl2tosa.errors import SpecErrorIf, SpecRequire
from tfl2tosa.ir import TensorType, scalar_type
from tfl2tosa.ir.types import numpy_dtype


def cast(values, source: str, target: str) -> np.ndarray:
    operand = t(values, source)
    return run_ours("CAST", [operand], [(operand[0].shape, target)])[0]


# ---------------------------------------------------------------------------
# CAST by hand


def test_cast_bool_to_and_from_int():
    assert cast([True, False], "i1", "i8").tolist() == [1, 0]
    assert cast([True, False], "i1", "i32").tolist() == [1, 0]
    # out = (in != 0).
    assert cast([0, -128, 5], "i8", "i1").tolist() == [False, True, True]


def test_cast_between_float_and_bool_is_no_type_mode():
    # TOSA 1.0 lists no fp <-> bool CAST mode, so the graph is invalid (ERROR_IF).
    # Arm's reference model runs such a cast anyway: a known disagreement with the spec.
    with pytest.raises(SpecErrorIf):
        cast([0.0, 0.5], "f32", "i1")


def test_cast_int_narrowing_truncates_and_widening_sign_extends():
    # truncate<out_t>: 0x12345678 -> i16 0x5678 = 22136 -> i8 0x78 = 120; 200 -> i8 -56;
    # -129 = 0x...FF7F -> i8 0x7F = 127.
    assert cast([0x12345678], "i32", "i16").tolist() == [0x5678]
    assert cast([0x12345678, 200, -129], "i32", "i8").tolist() == [0x78, -56, 127]
    assert cast([-1, -128], "i8", "i32").tolist() == [-1, -128]


def test_cast_float_to_int_rounds_half_to_even_and_saturates():
    # apply_clip_s(round_to_nearest_int(in)): 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -2.5 -> -2,
    # 126.5 -> 126, 127.5 -> 128 -> clipped 127, -inf -> -128.
    values = [0.5, 1.5, 2.5, -2.5, 126.5, 127.5, -np.inf, 2.0**100]
    assert cast(values, "f32", "i8").tolist() == [0, 2, 2, -2, 126, 127, -128, 127]
    assert cast([65504.0, -65504.0], "f16", "i16").tolist() == [32767, -32768]


def test_cast_int_to_float_rounds_to_nearest_even():
    # f16 has 11 significand bits: 2049 is halfway between 2048 and 2050 -> even 2048;
    # 2051 -> 2052; 65520 ties to 65536, which overflows: +inf.
    assert cast([2049, 2051, 65519, 65520], "i32", "f16").tolist() == [2048, 2052, 65504, np.inf]
    # f32: 2^24 + 1 -> 2^24 (tie to even), 2^24 + 3 -> 2^24 + 4.
    assert cast([2**24 + 1, 2**24 + 3], "i32", "f32").tolist() == [2**24, 2**24 + 4]


def test_cast_float_to_float():
    # f32 -> f16: 1 + 2^-11 is a tie between 1 and 1 + 2^-10 -> 1; 70000 overflows to inf.
    out = cast([1 + 2**-11, 1 + 3 * 2**-11, 70000.0], "f32", "f16")
    assert out.tolist() == [1.0, 1 + 2**-9, np.inf]
    # f32 -> fp8e4m3: 464 ties to 448; 500 is past the largest value and e4m3 has no
    # infinity: NaN (OCP non-saturating conversion).
    out = cast([464.0, 500.0, -3.0], "f32", "f8E4M3FN").astype(np.float32)
    assert out[0] == 448 and np.isnan(out[1]) and out[2] == -3
    # fp8e5m2 -> f32 is exact: 0x7B is 1.75 * 2^15 = 57344.
    assert cast(np.array([0x7B], np.uint8).view(ml_dtypes.float8_e5m2), "f8E5M2",
                "f32").tolist() == [57344.0]


# ---------------------------------------------------------------------------
# RESCALE by hand (the arithmetic itself is pinned in test_ref_numerics)


def rescale_attrs(scale32=True, mode="SINGLE_ROUND", per_channel=False, in_u=False,
                  out_u=False) -> dict:
    return {"scale32": scale32, "rounding_mode": mode, "per_channel": per_channel,
            "input_unsigned": in_u, "output_unsigned": out_u}


def rescale_operands(x, el, multiplier, shift, in_zp, out_zp, out_el, scale32=True):
    return [t(x, el), t(multiplier, "i32" if scale32 else "i16"), t(shift, "i8"),
            t([in_zp], el), t([out_zp], out_el)]


def test_rescale_kernel_per_channel_with_zero_points():
    # x - (-1) = [11, 21] per row; channel 0 scales by 1/2 (m=2^30, s=31), channel 1 by 3/4
    # (m=3*2^28, s=30); + out_zp 3:  11/2 = 5.5 -> 6 -> 9; 21*3/4 = 15.75 -> 16 -> 19.
    operands = rescale_operands([[10, 20]], "i8", [1 << 30, 3 << 28], [31, 30], -1, 3, "i8")
    out = run_ours("RESCALE", operands, [((1, 2), "i8")], rescale_attrs(per_channel=True))[0]
    assert out.tolist() == [[9, 19]]


def test_rescale_kernel_unsigned_output_stored_as_bit_pattern():
    # i8 100 + out_zp 128 = 228 as u8, stored in the int8 tensor as 228 - 256 = -28.
    operands = rescale_operands([100], "i8", [1 << 30], [30], 0, -128, "i8")
    out = run_ours("RESCALE", operands, [((1,), "i8")], rescale_attrs(out_u=True))[0]
    assert out.tolist() == [-28]


def test_rescale_kernel_errors():
    operands = rescale_operands([1], "i16", [1 << 14], [14], 0, 0, "i8", scale32=False)
    with pytest.raises(SpecErrorIf):  # DOUBLE_ROUND needs scale32
        run_ours("RESCALE", operands, [((1,), "i8")],
                 rescale_attrs(scale32=False, mode="DOUBLE_ROUND"))
    operands = rescale_operands([1 << 29], "i32", [1 << 30], [30], 0, 0, "i32")
    with pytest.raises(SpecRequire):  # |value| must be below 2^(shift-1)
        run_ours("RESCALE", operands, [((1,), "i32")], rescale_attrs())


# ---------------------------------------------------------------------------
# Differential: CAST


def _specials(rng: np.random.Generator, size: int) -> np.ndarray:
    """Floats over many binades plus ties, zeros and infinities (no NaN: NaN to int is
    unpredictable in the specification, and Arm returns different values per type)."""
    values = rng.standard_normal(size) * np.exp2(rng.integers(-30, 40, size))
    values[:12] = [np.inf, -np.inf, 0.5, 1.5, 2.5, -0.5, -2.5, 65520, 1e-8, -0.0, 127.5, 448]
    return values


CAST_CASES = [
    ("i32", ["i1", "i8", "i16", "f16", "bf16", "f32"]),
    ("i16", ["i1", "i8", "i32", "f16", "bf16", "f32"]),
    ("i8", ["i1", "i16", "i32", "f16", "bf16", "f32"]),
    ("f32", ["i8", "i16", "i32", "f16", "bf16", "f8E4M3FN", "f8E5M2"]),
    ("f16", ["i8", "i16", "i32", "f32", "f8E4M3FN", "f8E5M2"]),
    ("bf16", ["i8", "i16", "i32", "f32", "f8E4M3FN", "f8E5M2"]),
    ("f8E4M3FN", ["f16", "bf16", "f32"]),
    ("f8E5M2", ["f16", "bf16", "f32"]),
]


@pytest.mark.parametrize("source, targets", CAST_CASES, ids=[c[0] for c in CAST_CASES])
def test_cast_matches_arm(source, targets):
    rng = np.random.default_rng(20)
    if source.startswith("f8"):
        dtype = ml_dtypes.float8_e4m3fn if source == "f8E4M3FN" else ml_dtypes.float8_e5m2
        x = np.arange(256, dtype=np.uint8).view(dtype)
        x = x[~np.isnan(x.astype(np.float32))]
    elif source.startswith(("f", "bf")):
        with np.errstate(over="ignore"):
            x = t(_specials(rng, 3000).astype(np.float32), "f32")[0]
            x = x.astype({"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32}[
                source])
    else:
        info = np.iinfo({"i8": np.int8, "i16": np.int16, "i32": np.int32}[source])
        x = rng.integers(info.min, info.max, size=3000, endpoint=True)
        x[:4] = [info.min, info.max, 0, -1]
    for target in targets:
        operands = [t(x, source)]
        outputs = [(x.shape, target)]
        assert_same(run_ours("CAST", operands, outputs), run_arm("CAST", operands, outputs))


# ---------------------------------------------------------------------------
# Differential: RESCALE over the type modes, zero points, unsigned, per channel, rounding

_BITS = {"i8": 8, "i16": 16, "i32": 32, "i48": 48}


def _rescale_case(rng: np.random.Generator, in_el: str, out_el: str, scale32: bool,
                  mode: str, per_channel: bool, in_u: bool, out_u: bool):
    in_bits = _BITS[in_el]
    x = rng.integers(0 if in_u else -(1 << (in_bits - 1)),
                     (1 << in_bits) if in_u else 1 << (in_bits - 1), size=(4, 5, 3))
    if in_u:
        x = np.where(x >= 1 << (in_bits - 1), x - (1 << in_bits), x)  # stored bit pattern
    in_zp = 0
    if in_el == "i8":
        in_zp = int(rng.integers(-128, 128))
    elif in_el == "i16" and in_u:
        in_zp = -32768  # u16 zero point 32768, stored as its int16 bit pattern
    out_zp = 0
    if out_el == "i8":
        out_zp = int(rng.integers(-128, 128))
    elif out_el == "i16" and out_u:
        out_zp = -32768
    channels = 3 if per_channel else 1
    # |value| < 2^(in_bits+1) after the zero point: shifts keep apply_scale_32's value
    # REQUIRE and apply_scale_16's int32 result REQUIRE.
    if scale32:
        multiplier = rng.integers(0, 1 << 31, size=channels)
        shift = rng.integers(max(in_bits + 2, 2), 63, size=channels)
    else:
        multiplier = rng.integers(0, 1 << 15, size=channels)
        shift = rng.integers(max(in_bits + 16 - 30, 2), 63, size=channels)
    operands = [t(x, in_el), t(multiplier, "i32" if scale32 else "i16"), t(shift, "i8"),
                t([in_zp], in_el), t([out_zp], out_el)]
    return operands, [(x.shape, out_el)], rescale_attrs(scale32, mode, per_channel, in_u, out_u)


RESCALE_CASES = [
    # (in, out, scale32, rounding, per_channel, input_unsigned, output_unsigned)
    ("i8", "i8", True, "DOUBLE_ROUND", False, False, False),
    ("i8", "i8", True, "SINGLE_ROUND", True, True, False),
    ("i8", "i8", True, "SINGLE_ROUND", False, False, True),
    ("i8", "i16", False, "SINGLE_ROUND", True, False, False),
    ("i8", "i32", True, "DOUBLE_ROUND", True, False, False),
    ("i16", "i8", True, "SINGLE_ROUND", False, True, False),
    ("i16", "i16", False, "SINGLE_ROUND", False, False, True),
    ("i16", "i32", True, "DOUBLE_ROUND", False, False, False),
    ("i32", "i8", True, "DOUBLE_ROUND", True, False, False),
    ("i32", "i16", True, "SINGLE_ROUND", False, False, False),
    ("i32", "i32", False, "SINGLE_ROUND", True, False, False),
    ("i48", "i8", False, "SINGLE_ROUND", True, False, False),
    ("i48", "i32", False, "SINGLE_ROUND", False, False, False),
]


@pytest.mark.parametrize("case", RESCALE_CASES,
                         ids=["{}_{}_{}_{}{}{}{}".format(c[0], c[1], "s32" if c[2] else "s16",
                                                         c[3][0], "_pc" if c[4] else "",
                                                         "_inu" if c[5] else "",
                                                         "_outu" if c[6] else "")
                              for c in RESCALE_CASES])
def test_rescale_matches_arm(case):
    # Parameters as graph inputs (the kernel) and as constants (as in converted models:
    # the plan's prepared RESCALE decodes them once): both must equal Arm's results.
    rng = np.random.default_rng(hash(case) % 2**32)
    for _ in range(3):
        operands, outputs, attrs = _rescale_case(rng, *case)
        arm = run_arm("RESCALE", operands, outputs, attrs)
        assert_same(run_ours("RESCALE", operands, outputs, attrs), arm)
        assert_same(run_ours("RESCALE", operands, outputs, attrs, as_const=RESCALE_PARAMETERS),
                    arm)


RESCALE_PARAMETERS = frozenset({1, 2, 3, 4})   # multiplier, shift, input_zp, output_zp


@pytest.mark.parametrize("as_const", [frozenset(), RESCALE_PARAMETERS], ids=["inputs", "consts"])
def test_rescale_requires_hold_with_constant_parameters(as_const):
    # apply_scale_32: REQUIRE(value in [-2^(shift-1), 2^(shift-1))): 2^29 with shift 30.
    operands = rescale_operands([1, 1 << 29], "i32", [1 << 30], [30], 0, 0, "i32")
    with pytest.raises(SpecRequire, match="apply_scale_32"):
        run_ours("RESCALE", operands, [((2,), "i32")], rescale_attrs(), as_const=as_const)
    # The same value range passes when every value is inside it: 2^28 -> 2^28.
    operands = rescale_operands([1, 1 << 28], "i32", [1 << 30], [30], 0, 0, "i32")
    out = run_ours("RESCALE", operands, [((2,), "i32")], rescale_attrs(), as_const=as_const)
    assert out[0].tolist() == [1, 1 << 28]
    # apply_scale_16: REQUIRE(result fits int32): (2^31 - 1) * (2^15 - 1) >> 2 does not.
    operands = rescale_operands([2**31 - 1], "i32", [2**15 - 1], [2], 0, 0, "i32",
                                scale32=False)
    with pytest.raises(SpecRequire, match="apply_scale_16"):
        run_ours("RESCALE", operands, [((1,), "i32")], rescale_attrs(scale32=False),
                 as_const=as_const)
    # apply_add_s<int32>(result, output_zp): (4 * (2^31 - 1) + 2) >> 2 = 2^31 - 1 fits,
    # + output_zp 127 does not.
    operands = rescale_operands([0, 2**31 - 1], "i32", [4], [2], 0, 127, "i8", scale32=False)
    with pytest.raises(SpecRequire, match="apply_add_s"):
        run_ours("RESCALE", operands, [((2,), "i8")], rescale_attrs(scale32=False),
                 as_const=as_const)


@pytest.mark.parametrize("as_const", [frozenset(), RESCALE_PARAMETERS], ids=["inputs", "consts"])
def test_rescale_double_round_by_hand(as_const):
    # multiplier 2^30, shift 32: v / 4. shift > 31, so DOUBLE_ROUND's round is
    # 2^31 + 2^30 for v >= 0 and 2^31 - 2^30 for v < 0 (apply_scale_32):
    # v = 2: 2^31 + 2^31 + 2^30 >> 32 = 1;   v = -2: -2^31 + 2^31 - 2^30 >> 32 = -1;
    # v = 6: 1.5 -> 2;  v = -6: -1.25 floors to -2. Single rounding (round 2^31) rounds
    # halves up: 0.5 -> 1, -0.5 -> 0, 1.5 -> 2, -1.5 -> -1.
    operands = rescale_operands([2, -2, 6, -6], "i32", [1 << 30], [32], 0, 0, "i32")
    double = run_ours("RESCALE", operands, [((4,), "i32")],
                      rescale_attrs(mode="DOUBLE_ROUND"), as_const=as_const)[0]
    single = run_ours("RESCALE", operands, [((4,), "i32")], rescale_attrs(),
                      as_const=as_const)[0]
    assert double.tolist() == [1, -1, 2, -2] and single.tolist() == [1, 0, 2, -1]


@pytest.mark.parametrize("as_const", [frozenset(), RESCALE_PARAMETERS], ids=["inputs", "consts"])
def test_rescale_of_a_rank_0_tensor_stays_rank_0(as_const):
    # 101 * 2^30 >> 31 = 50.5, rounded half up to 51, + output_zp 3 = 54.
    operands = rescale_operands(np.int8(101), "i8", [1 << 30], [31], 0, 3, "i8")
    out = run_ours("RESCALE", operands, [((), "i8")], rescale_attrs(), as_const=as_const)[0]
    assert out.shape == () and out.dtype == np.int8 and int(out) == 54


# ---------------------------------------------------------------------------
# The prepared fast RESCALE at the edges of what it proves: parameters and values at
# the ends of their ranges, checked against numerics.rescale (the pseudocode) and Arm.

_EDGE_CASES = [
    # (in, out, scale32, rounding, per_channel, output_unsigned)
    ("i8", "i32", True, "SINGLE_ROUND", False, False),
    ("i8", "i8", True, "DOUBLE_ROUND", True, False),
    ("i8", "i8", True, "DOUBLE_ROUND", False, True),
    ("i16", "i16", False, "SINGLE_ROUND", True, False),
    ("i16", "i16", False, "SINGLE_ROUND", False, True),
    ("i16", "i8", True, "DOUBLE_ROUND", False, True),
    ("i32", "i8", True, "DOUBLE_ROUND", True, False),
    ("i32", "i16", True, "DOUBLE_ROUND", False, False),
    ("i32", "i32", True, "DOUBLE_ROUND", True, False),
    ("i32", "i32", False, "SINGLE_ROUND", False, False),
    ("i48", "i16", False, "SINGLE_ROUND", True, False),
    ("i48", "i32", False, "SINGLE_ROUND", False, False),
]
_EDGE_IDS = ["{}_{}_{}_{}{}{}".format(c[0], c[1], "s32" if c[2] else "s16", c[3][0],
                                      "_pc" if c[4] else "", "_outu" if c[5] else "")
             for c in _EDGE_CASES]


def _edge_case(rng: np.random.Generator, in_el: str, out_el: str, scale32: bool, mode: str,
               per_channel: bool, out_u: bool):
    """One RESCALE with parameters picked from the ends of their ranges, and inputs that
    hold the input type's extremes (or, half the time, stay below 2^(shift-2) so that
    apply_scale_32's value REQUIRE holds more often)."""
    in_bits, channels = _BITS[in_el], 3 if per_channel else 1
    largest = (1 << 31) - 1 if scale32 else (1 << 15) - 1
    multiplier = rng.choice([0, 1, 1 << (30 if scale32 else 14), largest,
                             int(rng.integers(0, largest + 1))], size=channels)
    shift = rng.choice([2, 3, 15, 31, 32, 33, 47, 61, 62, int(rng.integers(2, 63))],
                       size=channels)
    if rng.random() < 0.3:
        shift[:] = shift[0]  # one shift in every channel (the fast form's scalar shift)
    low, high = -(1 << (in_bits - 1)), (1 << (in_bits - 1)) - 1
    if rng.random() < 0.5:
        bound = min(high, (1 << (int(shift.min()) - 2)) - 1)
        low, high = -bound, bound
    # Small and large tensors: the fast form works differently from 256 elements on.
    x = rng.integers(low, high, size=(int(rng.choice([2, 70])), 4, channels), endpoint=True)
    x.reshape(-1)[:4] = [low, high, 0, -1 if low < 0 else 0]
    in_zp = int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))])) \
        if in_el == "i8" else 0
    out_zp = 0
    if out_el == "i8":
        out_zp = int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))]))
    elif out_el == "i16" and out_u:
        out_zp = int(rng.choice([0, -32768]))  # u16 0 or 32768, stored as int16
    operands = [t(x, in_el), t(multiplier, "i32" if scale32 else "i16"), t(shift, "i8"),
                t([in_zp], in_el), t([out_zp], out_el)]
    return operands, [(x.shape, out_el)], rescale_attrs(scale32, mode, per_channel, False,
                                                        out_u)


def _by_the_pseudocode(operands, outputs, attrs):
    (x, in_el), (multiplier, _), (shift, _), (in_zp, _), (out_zp, out_el) = operands
    result = numerics.rescale(
        x, multiplier, shift, in_zp, out_zp, in_bits=_BITS[in_el], out_bits=_BITS[out_el],
        scale32=attrs["scale32"], rounding_mode=attrs["rounding_mode"],
        per_channel=attrs["per_channel"], output_unsigned=attrs["output_unsigned"])
    return result.reshape(x.shape).astype(numpy_dtype(scalar_type(out_el)))


def _takes_the_fast_form(operands, outputs, attrs) -> bool:
    static = StaticOp("RESCALE", attrs, [TensorType(a.shape, scalar_type(e)) for a, e in operands],
                      [TensorType(shape, scalar_type(e)) for shape, e in outputs],
                      constants=[None] + [a for a, _ in operands[1:]])
    return type_conversion._fast_rescale(static) is not None


@pytest.mark.parametrize("case", _EDGE_CASES, ids=_EDGE_IDS)
def test_prepared_rescale_follows_the_pseudocode_at_the_edges(case):
    rng = np.random.default_rng(sum(map(ord, "".join(map(str, case)))))
    fast = 0
    for _ in range(60):
        operands, outputs, attrs = _edge_case(rng, *case)
        fast += _takes_the_fast_form(operands, outputs, attrs)
        try:
            expected = _by_the_pseudocode(operands, outputs, attrs)
        except SpecRequire:
            with pytest.raises(SpecRequire):
                run_ours("RESCALE", operands, outputs, attrs, as_const=RESCALE_PARAMETERS)
            continue
        ours = run_ours("RESCALE", operands, outputs, attrs, as_const=RESCALE_PARAMETERS)[0]
        assert ours.dtype == expected.dtype
        np.testing.assert_array_equal(ours, expected)
    assert fast >= 5  # each case above reaches the fast form


@pytest.mark.parametrize("case", _EDGE_CASES, ids=_EDGE_IDS)
def test_prepared_rescale_matches_arm_at_the_edges(case):
    rng = np.random.default_rng(len(_EDGE_IDS[_EDGE_CASES.index(case)]))
    compared = 0
    while compared < 3:
        operands, outputs, attrs = _edge_case(rng, *case)
        try:
            _by_the_pseudocode(operands, outputs, attrs)
        except SpecRequire:
            continue  # the result is unpredictable: nothing to compare
        arm = run_arm("RESCALE", operands, outputs, attrs)
        assert_same(run_ours("RESCALE", operands, outputs, attrs,
                             as_const=RESCALE_PARAMETERS), arm)
        compared += 1


@pytest.mark.parametrize("as_const", [frozenset(), RESCALE_PARAMETERS], ids=["inputs", "consts"])
def test_rescale_double_round_per_channel_at_the_int32_ends_by_hand(as_const):
    # Channel 0: m = 2^31 - 1, shift 62: value * (2^31 - 1) / 2^62, about value / 2^31.
    # INT32_MIN: (-2^31 * (2^31 - 1) + 2^61 - 2^30) >> 62 = (-2^62 + 2^61 + 2^31 - 2^30) >> 62
    # = -1 (the numerator is in [-2^62, 0)); INT32_MAX: ((2^31 - 1)^2 + 2^61 + 2^30) >> 62
    # = 1 (2^62 - 2^32 + 1 + 2^61 + 2^30 is in [2^62, 2^63)); -1: (-(2^31 - 1) + 2^61 - 2^30)
    # >> 62 = 0.
    # Channel 1: m = 2^30, shift 32: value / 4 rounded half away from zero: INT32_MIN / 4
    # = -2^29, INT32_MAX / 4 = 2^29 - 0.25 -> 2^29, -1 / 4 -> 0.
    x = [[-(1 << 31), -(1 << 31)], [(1 << 31) - 1, (1 << 31) - 1], [-1, -1]]
    operands = rescale_operands(x, "i32", [(1 << 31) - 1, 1 << 30], [62, 32], 0, 0, "i32")
    out = run_ours("RESCALE", operands, [((3, 2), "i32")],
                   rescale_attrs(mode="DOUBLE_ROUND", per_channel=True), as_const=as_const)[0]
    assert out.tolist() == [[-1, -(1 << 29)], [1, 1 << 29], [0, 0]]
