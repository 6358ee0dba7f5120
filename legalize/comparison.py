"""Patterns for TFL comparisons, logical ops and SELECT.

TOSA compares only f16/f32/i32 (EQUAL, GREATER, GREATER_EQUAL), so LESS and
LESS_EQUAL swap their operands, NOT_EQUAL negates EQUAL (NaN != NaN is true,
as in C), and bool equality is LOGICAL_XOR. Non-quantized int8/int16 operands
are widened to int32 first (exact).

Quantized comparisons, as TFLite 2.20's builtin reference kernels compute
them (read in the kernels, confirmed on the interpreter;
tests/test_legalize_integer_data.py pins each):

- EQUAL ... LESS_EQUAL on int8/uint8 (comparisons.cc, reference_ops::
  ComparisonWithScaling): each input becomes `MBQM_SmallerThanOneExp((x - zp)
  * 2^8, QuantizeMultiplier(scale))`, a double-rounded scaling, and the two
  i32 values are compared. Scales >= 1 reach gemmlowp's RoundingDivideByPOT
  with a negative exponent (undefined), so they are refused. int16 inputs are
  compared as stored integers, whatever their scales, and only EQUAL, LESS and
  GREATER_EQUAL exist: with equal quantization that is the real comparison.

Quantized comparisons the integer pattern does not take go through the
fallback, which compares the dequantized values.
"""

from __future__ import annotations

from legalize.common import element, require_static, reshape_to_rank, tensor_type
from legalize.elementwise import elementwise_for
from legalize.integer.data import to_int8
from legalize.integer.support import integer_pattern, require_per_tensor
from legalize.quantized import DOUBLE_ROUND, rescale, rescale_to_i32, tflite_quantize_multiplier
from legalize.registry import pattern
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import i1, i32, storage_type
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise

_COMPARABLE = ("f32", "f16", "i32", "i16", "i8")
_NARROW_INTS = ("i8", "i16")


def _compare_operands(op: Op, rw: Rewriter) -> tuple[Elementwise, Value, Value] | Failure:
    failure = require_static(op)
    if failure is not None:
        return failure
    a, b = op.operands
    if element(a) != element(b) or element(a).name not in (*_COMPARABLE, "i1"):
        return Failure(f"{op.name}: comparing {element(a)} with {element(b)} has no TOSA mode")
    e = elementwise_for(rw, op)
    x, y = e.operand(a), e.operand(b)
    if element(x).name in _NARROW_INTS:
        x, y = e.cast(x, i32), e.cast(y, i32)
    return e, x, y


def _is_bool(value: Value) -> bool:
    return element(value) == i1


@pattern("tfl.equal", "tfl.not_equal", types=("f32", "f16", "i32", "bool"))
def equal(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """EQUAL (NOT_EQUAL: LOGICAL_NOT of it); bool: LOGICAL_XOR (negated for EQUAL)."""
    operands = _compare_operands(op, rw)
    if isinstance(operands, Failure):
        return operands
    e, x, y = operands
    if _is_bool(x):
        differ = e.logical_xor(x, y)
        return [differ if op.name == "tfl.not_equal" else e.logical_not(differ)]
    same = e.equal(x, y)
    return [same if op.name == "tfl.equal" else e.logical_not(same)]


_ORDERED = {
    # TFL op: (TOSA op, operands swapped)
    "tfl.greater": ("greater", False),
    "tfl.greater_equal": ("greater_equal", False),
    "tfl.less": ("greater", True),
    "tfl.less_equal": ("greater_equal", True),
}


@pattern(*_ORDERED, types=("f32", "f16", "i32"))
def ordered_comparison(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """GREATER / GREATER_EQUAL; LESS(x, y) = GREATER(y, x), LESS_EQUAL likewise.
    Any comparison with NaN is false in both TFLite and TOSA."""
    operands = _compare_operands(op, rw)
    if isinstance(operands, Failure):
        return operands
    e, x, y = operands
    if _is_bool(x):
        return Failure(f"{op.name} on bool has no TOSA mode")
    name, swapped = _ORDERED[op.name]
    a, b = (y, x) if swapped else (x, y)
    return [getattr(e, name)(a, b)]


_LOGICAL = {"tfl.logical_and": "tosa.logical_and", "tfl.logical_or": "tosa.logical_or"}


@pattern("tfl.logical_and", "tfl.logical_or", "tfl.logical_not", kind="any", types=("bool",))
def logical(op: Op, rw: Rewriter) -> list[Value] | Failure:
    failure = require_static(op)
    if failure is not None:
        return failure
    if not all(_is_bool(v) for v in (*op.operands, *op.results)):
        return Failure(f"{op.name} needs bool operands")
    e = elementwise_for(rw, op)
    if op.name == "tfl.logical_not":
        return [e.logical_not(op.operands[0])]
    x, y = (e.operand(v) for v in op.operands)
    return [e.binary(_LOGICAL[op.name], x, y)]


@pattern("tfl.select", "tfl.select_v2", kind="any", types=("f32", "f16", "i32", "bool"))
def select(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """SELECT with numpy broadcasting. SELECT (v1) also takes a rank-1 condition
    that picks whole slices along the first dimension of higher-rank operands
    (reference_ops::RankOneSelect): it is reshaped to [n, 1, ..., 1].

    The branches keep their element type, so a quantized SELECT is exact when
    both branches and the result share their parameters (TFLite requires it);
    otherwise the float fallback handles it.
    """
    failure = require_static(op)
    if failure is not None:
        return failure
    condition, a, b = op.operands
    result = op.results[0]
    if not _is_bool(condition):
        return Failure(f"{op.name}: condition is {element(condition)}, not bool")
    if not element(a) == element(b) == element(result):
        return Failure(f"{op.name}: branches {element(a)}, {element(b)} differ from the "
                       f"result {element(result)}")
    if storage_type(element(result)).name not in ("f32", "f16", "i32", "i16", "i8", "i1"):
        return Failure(f"{op.name} on {element(result)} has no TOSA mode")
    e = elementwise_for(rw, op)
    rank = e.rank
    cond_shape = tensor_type(condition).shape
    if op.name == "tfl.select" and len(cond_shape) == 1 and rank > 1 \
            and tensor_type(a).shape[:1] == cond_shape:
        condition = build.reshape(rw, condition, cond_shape + (1,) * (rank - 1))
    return [e.select(e.operand(condition), e.operand(a), e.operand(b))]


# ---------------------------------------------------------------------------
# Comparisons

# TFL op -> (TOSA comparison, operands swapped, negated)
_COMPARISONS = {
    "tfl.equal": ("tosa.equal", False, False),
    "tfl.not_equal": ("tosa.equal", False, True),
    "tfl.greater": ("tosa.greater", False, False),
    "tfl.greater_equal": ("tosa.greater_equal", False, False),
    "tfl.less": ("tosa.greater", True, False),
    "tfl.less_equal": ("tosa.greater_equal", True, False),
}
# comparisons.cc: inputs are shifted left by 8 bits before their scaling.
COMPARISON_LEFT_SHIFT = 8


def _comparison_key(rw: Rewriter, op: Op, x: Value, rank: int) -> Value | Failure:
    """The i32 value TFLite compares for 8-bit `x`:
    `MBQM_SmallerThanOneExp((x - zp) * 2^8, QuantizeMultiplier(scale))`."""
    x = to_int8(rw, reshape_to_rank(rw, x, rank))
    scale = tensor_type(x).element.scale
    _, exponent = tflite_quantize_multiplier(scale)
    if exponent > 0:
        return Failure(f"{op.name}: input scale {scale} >= 1 (TFLite's scaling is only "
                       "defined for scales below 1)")
    shifted = rescale_to_i32(rw, x, float(1 << COMPARISON_LEFT_SHIFT))
    return rescale(rw, shifted, scale, i32, input_zp=0, output_zp=0, rounding=DOUBLE_ROUND)


def _comparison_keys(op: Op, rw: Rewriter) -> tuple[Value, Value] | Failure:
    elements = require_per_tensor(op, op.operands[:2], "i8", "ui8", "i16")
    if isinstance(elements, Failure):
        return elements
    if len({storage_type(e) for e in elements}) != 1:
        return Failure(f"{op.name}: operands of different storage types")
    rank = len(tensor_type(op.results[0]).shape)
    if storage_type(elements[0]).name == "i16":
        if elements[0] != elements[1]:
            return Failure(f"{op.name}: int16 operands with different quantization (TFLite "
                           "compares their stored values; left to the fallback)")
        return tuple(build.cast(rw, reshape_to_rank(rw, v, rank), i32)  # type: ignore
                     for v in op.operands[:2])
    keys = [_comparison_key(rw, op, v, rank) for v in op.operands[:2]]
    for key in keys:
        if isinstance(key, Failure):
            return key
    return keys[0], keys[1]  # type: ignore[return-value]


@pattern(*_COMPARISONS, kind="integer", label="comparison_int", types=("i8", "u8", "i16"))
@integer_pattern
def comparison_int(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Both inputs scaled to i32 as TFLite's ComparisonWithScaling does (two
    RESCALEs each: x 2^8 exactly, then the scale with double rounding), then
    EQUAL / GREATER / GREATER_EQUAL (operands swapped for LESS*, LOGICAL_NOT
    for NOT_EQUAL). int16 with one quantization: the stored values widened."""
    keys = _comparison_keys(op, rw)
    if isinstance(keys, Failure):
        return keys
    name, swapped, negated = _COMPARISONS[op.name]
    a, b = (keys[1], keys[0]) if swapped else keys
    result = tensor_type(op.results[0])
    if storage_type(result.element) != i1:
        return Failure(f"{op.name}: result {result.element} is not bool")
    compared = build.op(rw, name, [a, b], result)
    return [build.op(rw, "tosa.logical_not", [compared], result) if negated else compared]
