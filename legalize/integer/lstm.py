"""Integer (bit exact with TFLite) UNIDIRECTIONAL_SEQUENCE_LSTM: the 8x8->16 kernel.

TFLite runs an int8 LSTM whose cell state is int16 (and which has five
intermediates, the last one the hidden state's quantization) through
lstm_eval.cc `EvalInteger8x8_16`; its parameters come from lstm.cc
`PopulateQuantizedLstmParams8x8_16` and the zero-point-folded biases from
`PopulatePrecomputedZPTimesWeightsWithBias`. One time step
(`LstmStepInteger8x8_16`), per gate (CalculateLstmGateInteger8x8_16):

    gate = sat16(sat16(MBQM(bias + W_x (x - zp_x), s_x)) + MBQM(W_h (h - zp_h), s_h))
    i, f, o = logistic(gate as Q3.12) -> Q0.15      (gemmlowp fixed point, int16)
    g       = tanh(gate as Q3.12) -> Q0.15
    c_t     = clip(sat16(RDBP(f * c, 15) + RDBP(i * g, 30 + cell_scale)), cell_clip)
    h_t     = sat8(MBQM(o * tanh(c_t as Q(15 + cell_scale)), s_hidden) + zp_hidden)

MBQM is MultiplyByQuantizedMultiplier (TOSA RESCALE with DOUBLE_ROUND, see
legalize.quantized), RDBP gemmlowp's RoundingDivideByPOT (half away from
zero), the gate scales `s = float(s_w * s_in) / 2^-12` in float32 and the
hidden scale `2^-15 / s_hidden * 2^-15`. The effective bias `bias - zp * rowsum(W)`
is what MATMUL's A_zp computes.

TOSA: one MATMUL (A_zp = input zero point) for the input products of every
step and one per-channel RESCALE to i16 (the first saturation); per step a
MATMUL on the previous output (A_zp = output state zero point), a per-channel
RESCALE to i32, ADD, the int16 saturation as MAXIMUM/MINIMUM, and the
activations as one GATHER from a constant holding the gemmlowp functions on all
65536 int16 inputs (TOSA's int16 TABLE interpolates 513 entries and cannot
reproduce them). RDBP is ARITHMETIC_RIGHT_SHIFT with round after subtracting
one from negative values (round half up of x - 1 is half away from zero of x).

Refused (Failure, so the float fallback takes them): layer norm, peephole,
projection, int16 activations (16x8), hybrid and dynamic shapes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from legalize.common import constant_value, is_none, require_static
from legalize.integer.support import (
    integer_pattern,
    per_tensor,
    require_per_tensor,
    tensor_type,
)
from legalize.quantized import DOUBLE_ROUND, UnsupportedScale, quantize_multiplier
from legalize.registry import pattern
from legalize.rnn import sequence, split_steps
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import (
    ElementType,
    TensorType,
    UniformQuantized,
    i8,
    i16,
    i32,
    storage_type,
)
from tfl2tosa.tosa import build

# ---------------------------------------------------------------------------
# gemmlowp fixed point (fixedpoint/fixedpoint.h) on whole numpy arrays, for a
# raw type of `bits` bits (16 or 32). Every array holds the raw integers in
# int64; results are wrapped to the raw type where C++ would wrap.


def _wrap(x: np.ndarray, bits: int) -> np.ndarray:
    """Two's complement wrap to `bits` bits (C++'s implicit narrowing)."""
    half = 1 << (bits - 1)
    return ((x + half) & ((1 << bits) - 1)) - half


def _limits(bits: int) -> tuple[int, int]:
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _doubling_high_mul(a: np.ndarray, b: np.ndarray | int, bits: int) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul: round(a * b / 2^(bits - 1)), ties toward
    +inf via the nudge then C's truncating division; min * min saturates."""
    low, high = _limits(bits)
    b = np.broadcast_to(np.asarray(b, dtype=np.int64), np.shape(a))
    product = a * b
    nudged = product + np.where(product >= 0, 1 << (bits - 2), 1 - (1 << (bits - 2)))
    quotient = np.sign(nudged) * (np.abs(nudged) >> (bits - 1))
    return np.where((a == b) & (a == low), high, quotient)


def _rounding_divide_by_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    """RoundingDivideByPOT: x / 2^exponent rounded half away from zero."""
    mask = (1 << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)


def _multiply_by_pot(x: np.ndarray, exponent: int, bits: int) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT<exponent>: a saturating left shift, or a
    rounding right shift for a negative exponent."""
    if exponent <= 0:
        return _rounding_divide_by_pot(x, -exponent)
    low, high = _limits(bits)
    threshold = (1 << (bits - 1 - exponent)) - 1
    shifted = _wrap(x << exponent, bits)
    return np.where(x > threshold, high, np.where(x < -threshold, low, shifted))


def _constant(raw32: int, bits: int) -> int:
    """GEMMLOWP_CHECKED_FIXEDPOINT_CONSTANT: an int32 raw constant rounded to the raw type."""
    value = np.array(raw32, dtype=np.int64)
    return int(_rounding_divide_by_pot(value, 32 - bits))


def _rounding_half_sum(a: np.ndarray, b: int) -> np.ndarray:
    total = a + b
    halved = total + np.where(total >= 0, 1, -1)
    return np.sign(halved) * (np.abs(halved) >> 1)


def _exp_on_interval_between_negative_one_quarter_and_0_excl(a: np.ndarray,
                                                             bits: int) -> np.ndarray:
    """exp(a) for a in [-1/4, 0), Q0 in and out: the Taylor expansion around -1/8."""
    constant_term = _constant(1895147668, bits)      # exp(-1/8)
    one_third = _constant(715827883, bits)
    x = _wrap(a + (1 << (bits - 4)), bits)           # a + 1/8
    x2 = _doubling_high_mul(x, x, bits)
    x3 = _doubling_high_mul(x2, x, bits)
    x4 = _doubling_high_mul(x2, x2, bits)
    x4_over_4 = _rounding_divide_by_pot(x4, 2)
    cubic = _doubling_high_mul(_wrap(x4_over_4 + x3, bits), one_third, bits)
    polynomial = _rounding_divide_by_pot(_wrap(cubic + x2, bits), 1)
    tail = _doubling_high_mul(np.full_like(x, constant_term), _wrap(x + polynomial, bits),
                              bits)
    total = constant_term + tail
    # AddSaturatingIf16Bit: saturating for int16, a plain (wrapping) add for int32.
    low, high = _limits(bits)
    return np.clip(total, low, high) if bits == 16 else _wrap(total, bits)


# exp(-2^k) as int32 raw Q0.31 for the barrel shifter of exp_on_negative_values.
_EXP_OF_NEGATIVE_POWERS_OF_TWO = ((-2, 1672461947), (-1, 1302514674), (0, 790015084),
                                  (1, 290630308), (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a: np.ndarray, bits: int, integer_bits: int) -> np.ndarray:
    """gemmlowp exp_on_negative_values: exp(a) for a <= 0, a raw Q(integer_bits), result Q0."""
    fractional_bits = bits - 1 - integer_bits
    one_quarter = 1 << (fractional_bits - 2)
    remainder_in_quarter = _wrap((a & (one_quarter - 1)) - one_quarter, bits)
    result = _exp_on_interval_between_negative_one_quarter_and_0_excl(
        _multiply_by_pot(remainder_in_quarter, integer_bits, bits), bits)
    remainder = _wrap(remainder_in_quarter - a, bits)
    for exponent, multiplier in _EXP_OF_NEGATIVE_POWERS_OF_TWO:
        if integer_bits > exponent:
            # Dup<raw>(1 << shift): the bit as the raw type (1 << 15 is int16's sign bit).
            bit = int(_wrap(np.int64(1) << (fractional_bits + exponent), bits))
            result = np.where(remainder & bit != 0,
                              _doubling_high_mul(result, _constant(multiplier, bits), bits),
                              result)
    if integer_bits > 5:
        clamp = _constant(-(1 << (36 - integer_bits)), bits)
        result = np.where(a < clamp, 0, result)
    return np.where(a == 0, _limits(bits)[1], result)


def _newton_raphson_reciprocal(half_denominator: np.ndarray, bits: int) -> np.ndarray:
    """x ~ 1 / half_denominator (Q2) after gemmlowp's three Newton-Raphson steps
    from 48/17 - 32/17 * d."""
    one_q2 = 1 << (bits - 3)
    x = _wrap(_constant(1515870810, bits)
              + _doubling_high_mul(half_denominator, _constant(-1010580540, bits), bits), bits)
    for _ in range(3):
        product = _doubling_high_mul(half_denominator, x, bits)
        correction = _doubling_high_mul(x, _wrap(one_q2 - product, bits), bits)
        x = _wrap(x + _multiply_by_pot(correction, 2, bits), bits)
    return x


def logistic(a: np.ndarray, bits: int, integer_bits: int) -> np.ndarray:
    """gemmlowp logistic: 1 / (1 + exp(-a)) from Q(integer_bits) to Q0."""
    one = _limits(bits)[1]
    magnitude = np.where(a > 0, a, _wrap(-a, bits))
    exp_negative = exp_on_negative_values(_wrap(-magnitude, bits), bits, integer_bits)
    # one_over_one_plus_x_for_x_in_0_1
    reciprocal = _newton_raphson_reciprocal(_rounding_half_sum(exp_negative, one), bits)
    positive = _multiply_by_pot(reciprocal, 1, bits)
    negative = _wrap(one - positive, bits)
    return np.where(a == 0, _constant(1 << 30, bits), np.where(a > 0, positive, negative))


def tanh(a: np.ndarray, bits: int, integer_bits: int) -> np.ndarray:
    """gemmlowp tanh from Q(integer_bits) to Q0, via exp(2a) on the negative side."""
    negative_part = np.where(a < 0, a, _wrap(-a, bits))
    exp_twice = exp_on_negative_values(negative_part, bits, integer_bits + 1)
    # one_minus_x_over_one_plus_x_for_x_in_0_1
    one = _limits(bits)[1]
    reciprocal = _newton_raphson_reciprocal(_rounding_half_sum(exp_twice, one), bits)
    t = _multiply_by_pot(_wrap(reciprocal - (1 << (bits - 3)), bits), 2, bits)
    return np.where(a == 0, 0, np.where(a < 0, _wrap(-t, bits), t))


def int16_lookup(fn: Callable[[np.ndarray, int, int], np.ndarray],
                 integer_bits: int) -> np.ndarray:
    """`fn` (logistic or tanh) on every int16 input read as Q(integer_bits), as
    int16, indexed by input + 32768."""
    inputs = np.arange(-32768, 32768, dtype=np.int64)
    return fn(inputs, 16, integer_bits).astype(np.int16)


# ---------------------------------------------------------------------------
# Parameters of the 8x8->16 kernel (lstm.cc PopulateQuantizedLstmParams8x8_16)

# Gate pre-activations are Q3.12 when there is no layer norm (lstm.cc).
GATE_SCALE = 2.0 ** -12
GATE_INTEGER_BITS = 3
# Operand indices (kernels/lstm_shared.h).
INPUT_WEIGHTS = (1, 2, 3, 4)          # input, forget, cell, output gate
RECURRENT_WEIGHTS = (5, 6, 7, 8)
PEEPHOLE = (9, 10, 11)
BIASES = (12, 13, 14, 15)
PROJECTION = (16, 17)
OUTPUT_STATE, CELL_STATE = 18, 19
LAYER_NORM = (20, 21, 22, 23)
# Rows of the activation lookup constant: each holds 65536 int16 results.
SIGMOID_ROW, TANH_GATE_ROW, TANH_CELL_ROW = 0, 1, 2
TABLE_SIZE = 1 << 16


def gate_scale(weight_scale: float, activation_scale: float) -> float:
    """`weight_scale * activation_scale / intermediate_scale`, all float32 as lstm.cc
    computes the effective scales."""
    product = np.float32(weight_scale) * np.float32(activation_scale)
    return float(np.float32(product / np.float32(GATE_SCALE)))


def hidden_scale(hidden: float) -> float:
    """`std::pow(2, -15) / hidden_scale * std::pow(2, -15)` in double, stored as float."""
    return float(np.float32(2.0 ** -15 / float(np.float32(hidden)) * 2.0 ** -15))


def cell_scale_exponent(scale: float) -> int | None:
    """The power of two of the cell state's scale, None if it is not one."""
    mantissa, exponent = math.frexp(scale)
    return exponent - 1 if mantissa == 0.5 else None


def quantized_cell_clip(cell_clip: float, cell_scale: float) -> int:
    """`(int16_t)min(max(cell_clip / scale, -32768.f), 32767.f)` in float32; 0 is no clip."""
    if not cell_clip > 0:
        return 0
    ratio = np.float32(cell_clip) / np.float32(cell_scale)
    return int(min(max(float(ratio), -32768.0), 32767.0))


def activation_tables(cell_integer_bits: int) -> np.ndarray:
    """The GATHER values [1, 3 * 65536, 1]: logistic and tanh of Q3.12 gates, tanh
    of the cell state (PortableApplySigmoid / PortableApplyTanh)."""
    rows = (int16_lookup(logistic, GATE_INTEGER_BITS), int16_lookup(tanh, GATE_INTEGER_BITS),
            int16_lookup(tanh, cell_integer_bits))
    return np.concatenate(rows).reshape(1, -1, 1)


@dataclass(frozen=True)
class IntegerLstm:
    """What one int8x8->16 LSTM op needs, read from its operands."""

    gates: tuple[str, ...]            # ("input",) "forget", "cell", "output"; CIFG has no input
    width: int                        # n_cell
    output_width: int                 # n_output
    input: UniformQuantized
    output_state: UniformQuantized
    hidden: UniformQuantized          # intermediate 4: the quantization of o * tanh(c)
    cell_exponent: int                # cell state scale = 2^cell_exponent
    cell_clip: int                    # quantized; 0 means no clip
    input_weights: np.ndarray         # [input, gates * width] int8
    recurrent_weights: np.ndarray     # [output_width, gates * width] int8
    bias: np.ndarray                  # [gates * width] int32
    input_scales: tuple[float, ...]   # one effective scale per gate
    recurrent_scales: tuple[float, ...]


def _present(op: Op, index: int) -> bool:
    return index < len(op.operands) and not is_none(op.operands[index])


def _int8_constant(op: Op, index: int) -> tuple[np.ndarray, UniformQuantized] | Failure:
    value = op.operands[index]
    element = per_tensor(value, "i8")
    array = constant_value(value)
    if element is None or array is None or element.zero_point != 0:
        return Failure(f"{op.name}: operand {index} is not a constant symmetric int8 "
                       "per-tensor quantized tensor")
    return np.asarray(array, dtype=np.int8), element


def _int32_constant(op: Op, index: int, size: int) -> np.ndarray | Failure:
    value = op.operands[index]
    array = constant_value(value) if _present(op, index) else None
    t = tensor_type(value)
    if array is None or t is None or storage_type(t.element).name != "i32" or \
            np.size(array) != size:
        return Failure(f"{op.name}: bias operand {index} is not a constant int32 vector "
                       f"of {size}")
    return np.asarray(array, dtype=np.int64).reshape(size)


def _refusal(op: Op) -> Failure | None:
    """Variants the 8x8->16 lowering does not reproduce, by name."""
    if len(op.operands) not in (20, 24) or len(op.results) != 1:
        return Failure(f"{op.name}: expects 20 or 24 operands and one result")
    activation = op.attrs.get("fused_activation_function", "TANH")
    unsupported = (
        (any(_present(op, i) for i in LAYER_NORM), "layer norm"),
        (any(_present(op, i) for i in PEEPHOLE), "peephole connections"),
        (any(_present(op, i) for i in PROJECTION), "a projection"),
        (bool(op.attrs.get("diagonal_recurrent_tensors")), "diagonal recurrent weights"),
        # CalculateLstmGateInteger8x8_16 takes TANH or SIGMOID (which the flatbuffer
        # schema cannot express) and asserts on anything else.
        (activation != "TANH", f"the {activation} activation"),
        # Twelve intermediates select the 8x8->8 kernel.
        (len(op.attrs.get("intermediates", ())) != 5, "other than five intermediates"),
    )
    for refused, what in unsupported:
        if refused:
            return Failure(f"{op.name}: {what} (the integer lowering covers the plain and "
                           "CIFG 8x8->16 kernel)")
    return None


def integer_lstm(op: Op) -> IntegerLstm | Failure:
    """The operands and effective scales of an int8x8->16 LSTM, or why it is not one."""
    if refused := _refusal(op):
        return refused
    elements = require_per_tensor(op, [op.operands[0], op.operands[OUTPUT_STATE],
                                       op.results[0]], "i8")
    if isinstance(elements, Failure):
        return elements
    q_input, q_output_state, _ = elements
    hidden = op.attrs["intermediates"][4].element
    cell = per_tensor(op.operands[CELL_STATE], "i16")
    if not isinstance(hidden, UniformQuantized) or storage_type(hidden).name != "i8":
        return Failure(f"{op.name}: the hidden state intermediate is not int8 per tensor")
    if cell is None or cell.zero_point != 0:
        return Failure(f"{op.name}: the cell state is not symmetric int16 per tensor")
    exponent = cell_scale_exponent(cell.scale)
    # lstm.cc requires a cell scale <= 2^-9; PortableApplyTanh has Q0..Q6 inputs.
    if exponent is None or not -15 <= exponent <= -9:
        return Failure(f"{op.name}: cell state scale {cell.scale!r} is not 2^-15 .. 2^-9")
    if len(tensor_type(op.operands[0]).shape) != 3:
        return Failure(f"{op.name}: input must be [batch, time, features] or time major")
    cifg = not _present(op, INPUT_WEIGHTS[0])
    first = 1 if cifg else 0
    gates = ("input", "forget", "cell", "output")[first:]
    weights, scales = [], []
    for indices, activation_scale in ((INPUT_WEIGHTS, q_input.scale),
                                      (RECURRENT_WEIGHTS, q_output_state.scale)):
        arrays, gate_scales = [], []
        for index in indices[first:]:
            constant = _int8_constant(op, index)
            if isinstance(constant, Failure):
                return constant
            arrays.append(constant[0])
            gate_scales.append(gate_scale(constant[1].scale, activation_scale))
        weights.append(np.concatenate(arrays).T)
        scales.append(tuple(gate_scales))
    width, output_width = arrays[0].shape
    biases = [_int32_constant(op, i, width) for i in BIASES[first:]]
    for bias in biases:
        if isinstance(bias, Failure):
            return bias
    return IntegerLstm(
        gates, width, output_width, q_input, q_output_state, hidden, exponent,
        quantized_cell_clip(float(op.attrs.get("cell_clip", 0.0)), cell.scale),
        weights[0], weights[1], np.concatenate(biases), scales[0], scales[1])


# ---------------------------------------------------------------------------
# TOSA building blocks


def _i32(rw: Rewriter, values: np.ndarray | int) -> Value:
    """An i32 constant of rank 3 ([1, 1, n] or [1, 1, 1])."""
    return build.const(rw, np.asarray(values, dtype=np.int32).reshape(1, 1, -1), i32)


def _elementwise(rw: Rewriter, name: str, a: Value, b: Value, **attrs: object) -> Value:
    ta, tb = tensor_type(a), tensor_type(b)
    shape = tuple(max(p, q) for p, q in zip(ta.shape, tb.shape))
    return build.op(rw, name, [a, b], TensorType(shape, i32), **attrs)


def _per_gate_rescale(rw: Rewriter, acc: Value, scales: tuple[float, ...], width: int,
                      bound: int, out: ElementType) -> Value:
    """MultiplyByQuantizedMultiplier of each gate's columns by its scale (per
    channel, DOUBLE_ROUND: the default-build double rounding), saturated to `out`.

    apply_scale_32 REQUIRES |acc| < 2^(shift - 1); `bound` (the largest
    accumulator the operands allow) must stay inside it."""
    pairs = [quantize_multiplier(s) for s in scales]
    for multiplier, shift in pairs:
        if multiplier and bound >= 1 << (shift - 1):
            raise UnsupportedScale(f"gate scale 2^{31 - shift} with accumulators up to "
                                   f"{bound} exceeds RESCALE's input range")
    multipliers = [m for m, _ in pairs for _ in range(width)]
    shifts = [s for _, s in pairs for _ in range(width)]
    return build.rescale(rw, acc, multipliers, shifts, 0, 0, tensor_type(acc).with_element(out),
                         rounding_mode=DOUBLE_ROUND, per_channel=len(multipliers) > 1)


def _accumulator_bound(weights: np.ndarray, bias: np.ndarray | None = None) -> int:
    """The largest |bias + W^T (x - zp)| for int8 x (|x - zp| <= 255)."""
    column_sums = np.abs(weights.astype(np.int64)).sum(axis=0) * 255
    if bias is not None:
        column_sums = column_sums + np.abs(bias)
    return int(column_sums.max(initial=0))


def _saturate(rw: Rewriter, x: Value, low: int, high: int) -> Value:
    """Clamp an i32 tensor (TOSA's CLAMP has no i32 mode: MAXIMUM then MINIMUM)."""
    raised = _elementwise(rw, "tosa.maximum", x, _i32(rw, low), nan_mode="PROPAGATE")
    return _elementwise(rw, "tosa.minimum", raised, _i32(rw, high), nan_mode="PROPAGATE")


def _shift_right_half_away(rw: Rewriter, x: Value, exponent: int) -> Value:
    """gemmlowp RoundingDivideByPOT on i32 (half away from zero): ARITHMETIC_RIGHT_SHIFT
    with round (half up) of x - 1 for negative x, x for the others."""
    sign = _elementwise(rw, "tosa.arithmetic_right_shift", x, _i32(rw, 31), round=False)
    adjusted = _elementwise(rw, "tosa.add", x, sign)
    return _elementwise(rw, "tosa.arithmetic_right_shift", adjusted, _i32(rw, exponent),
                        round=True)


def _lookup(rw: Rewriter, tables: Value, x: Value, rows: Value) -> Value:
    """The int16 function values of the i32 tensor x (int16 range) [1, batch, n],
    row by row of `tables` as `rows` ([1, 1, n] or [1, 1, 1]: row * 65536 + 32768)
    says: one GATHER."""
    shape = tensor_type(x).shape
    count = int(np.prod(shape))
    indices = build.reshape(rw, _elementwise(rw, "tosa.add", x, rows), (1, count))
    gathered = build.op(rw, "tosa.gather", [tables, indices], TensorType((1, count, 1), i16))
    return build.reshape(rw, gathered, shape)


def _widen(rw: Rewriter, x: Value) -> Value:
    return build.cast(rw, x, i32)


# ---------------------------------------------------------------------------
# The lowering


@dataclass(frozen=True)
class StepConstants:
    """Constants every time step reads."""

    recurrent_weights: Value          # [1, output_width, gates * width] i8
    recurrent_bound: int              # largest recurrent accumulator
    tables: Value                     # [1, 3 * 65536, 1] i16
    gate_rows: Value                  # [1, 1, gates * width] i32: each gate's table row
    cell_row: Value                   # [1, 1, 1] i32: the cell state's tanh row
    hidden_multiplier: tuple[int, int]


def _row_offsets(rows: list[int]) -> np.ndarray:
    """GATHER index offsets: row * 65536 plus 32768 (int16 x -> x + 32768)."""
    return np.asarray(rows, dtype=np.int64) * TABLE_SIZE + TABLE_SIZE // 2


def step_constants(rw: Rewriter, p: IntegerLstm) -> StepConstants:
    rows = [TANH_GATE_ROW if gate == "cell" else SIGMOID_ROW for gate in p.gates]
    multiplier, shift = quantize_multiplier(hidden_scale(p.hidden.scale))
    # |o * tanh(c)| < 2^30 must be a valid apply_scale_32 input.
    if multiplier and shift < 32:
        raise UnsupportedScale(f"hidden scale {p.hidden.scale!r} needs RESCALE shift {shift}")
    return StepConstants(
        build.const(rw, p.recurrent_weights[np.newaxis], i8),
        _accumulator_bound(p.recurrent_weights),
        build.const(rw, activation_tables(15 + p.cell_exponent), i16),
        _i32(rw, _row_offsets([r for r in rows for _ in range(p.width)])),
        _i32(rw, _row_offsets([TANH_CELL_ROW])),
        (multiplier, shift))


def input_products(rw: Rewriter, p: IntegerLstm, x: Value, time_major: bool) -> list[Value]:
    """sat16(MBQM(bias + W_x (x - zp_x))) of every step as i32 [1, batch, gates * width]:
    one MATMUL and one RESCALE for the whole sequence."""
    shape = tensor_type(x).shape
    columns = len(p.gates) * p.width
    flat = build.reshape(rw, x, (1, shape[0] * shape[1], shape[2]))
    weights = build.const(rw, p.input_weights[np.newaxis], i8)
    acc = build.op(rw, "tosa.matmul", [flat, weights, build.zero_point(rw, p.input.zero_point, i8),
                                       build.zero_point(rw, 0, i8)],
                   TensorType((1, shape[0] * shape[1], columns), i32))
    acc = _elementwise(rw, "tosa.add", acc, _i32(rw, p.bias))
    gates = _per_gate_rescale(rw, acc, p.input_scales, p.width,
                              _accumulator_bound(p.input_weights, p.bias), i16)
    widened = _widen(rw, build.reshape(rw, gates, (shape[0], shape[1], columns)))
    return split_steps(rw, widened, time_major)


def lstm_step(rw: Rewriter, p: IntegerLstm, k: StepConstants, product: Value, h: Value,
              c: Value, out: ElementType) -> tuple[Value, Value]:
    """One LstmStepInteger8x8_16 on [1, batch, *] tensors: (h_t as `out`, c_t as i16)."""
    batch = tensor_type(product).shape[1]
    columns = len(p.gates) * p.width
    recurrent = build.op(rw, "tosa.matmul", [h, k.recurrent_weights,
                                             build.zero_point(rw, p.output_state.zero_point, i8),
                                             build.zero_point(rw, 0, i8)],
                         TensorType((1, batch, columns), i32))
    recurrent = _per_gate_rescale(rw, recurrent, p.recurrent_scales, p.width,
                                  k.recurrent_bound, i32)
    # MatrixBatchVectorMultiplyAccumulate adds to the gate and saturates to int16.
    total = _saturate(rw, _elementwise(rw, "tosa.add", product, recurrent), -32768, 32767)
    activated = _lookup(rw, k.tables, total, k.gate_rows)
    gate = {name: build.slice(rw, activated, [0, 0, i * p.width], [1, batch, p.width])
            for i, name in enumerate(p.gates)}
    # UpdateLstmCellInteger: CwiseMul with RoundingDivideByPOT, CwiseAdd, CwiseClipping.
    # Both products fit int16 after the shift (gates <= 32767, cell exponent >= -15).
    forget = _shift_right_half_away(rw, build.mul(rw, gate["forget"], c), 15)
    if "input" in gate:
        update = build.mul(rw, gate["input"], gate["cell"])
    else:  # CIFG: Sub1Vector, input = 32767 - forget
        complement = _elementwise(rw, "tosa.sub", _i32(rw, 32767), _widen(rw, gate["forget"]))
        update = build.mul(rw, complement, _widen(rw, gate["cell"]))
    update = _shift_right_half_away(rw, update, 30 + p.cell_exponent)
    bound = p.cell_clip or 32767
    cell = _saturate(rw, _elementwise(rw, "tosa.add", forget, update),
                     -bound if p.cell_clip else -32768, bound)
    # CalculateLstmOutputInteger8x8_16: CwiseMul(o, tanh(c)) by the hidden scale.
    squashed = _lookup(rw, k.tables, cell, k.cell_row)
    multiplier, shift = k.hidden_multiplier
    hidden = build.rescale(rw, build.mul(rw, gate["output"], squashed), multiplier, shift, 0,
                           p.hidden.zero_point,
                           TensorType((1, batch, p.output_width), out),
                           rounding_mode=DOUBLE_ROUND)
    return hidden, build.cast(rw, cell, i16)


def initial_state(rw: Rewriter, value: Value, batch: int, width: int,
                  element: ElementType) -> Value:
    """A state operand's stored values as [1, batch, width]."""
    array = constant_value(value)
    if array is not None:
        return build.const(rw, np.asarray(array).reshape(1, batch, width), element)
    return build.reshape(rw, value, (1, batch, width))


@pattern("tfl.unidirectional_sequence_lstm", kind="integer", types=("i8",),
         label="unidirectional_sequence_lstm_int8")
@integer_pattern
def unidirectional_sequence_lstm_int8(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """TFLite's EvalInteger8x8_16 unrolled over the time steps (module docstring)."""
    p = integer_lstm(op)
    if isinstance(p, Failure):
        return p
    if failure := require_static(op):
        return failure
    x, time_major = op.operands[0], bool(op.attrs.get("time_major", False))
    shape = tensor_type(x).shape
    batch = shape[1] if time_major else shape[0]
    out = tensor_type(op.results[0]).element
    products = input_products(rw, p, x, time_major)
    k = step_constants(rw, p)
    h = initial_state(rw, op.operands[OUTPUT_STATE], batch, p.output_width,
                      tensor_type(op.operands[OUTPUT_STATE]).element)
    c = initial_state(rw, op.operands[CELL_STATE], batch, p.width, i16)
    outputs = []
    for product in products:
        h, c = lstm_step(rw, p, k, product, h, c, out)
        outputs.append(h)
    return [sequence(rw, outputs, time_major)]
