"""Patterns for TFL LSTMs: UNIDIRECTIONAL_SEQUENCE_LSTM, BIDIRECTIONAL_SEQUENCE_LSTM
and LSTM (one step), the float and the integer lowering side by side.

Float path: unrolled over the static sequence length with legalize.rnn's
machinery (input products, the step loop, state; see its docstring), each
step as TFLite's float kernel computes it (kernels/lstm_eval.cc `LstmStepFloat`):

    gate   = bias + W_x x_t + W_h h_(t-1)  [+ w_c * c for peephole i, f]
             (layer norm: normalize(W_x x_t + W_h h_(t-1) [+ peephole]) * ln + bias)
    i, f   = sigmoid(gate_i), sigmoid(gate_f)      (CIFG: i = 1 - f)
    g      = act(gate_g)                           (act: fused_activation_function)
    c_t    = clip(f * c_(t-1) + g * i, cell_clip)  (clip only when cell_clip > 0)
    o      = sigmoid(gate_o [+ w_co * c_t])
    h_t    = o * act(c_t), then projection: clip(P h_t + p_bias, proj_clip)

TFLite's hybrid LSTM kernels are the same lowering with hybrid products
(legalize.hybrid calls the `lower_*` functions with `emulate=True`).

Integer path (bit exact with TFLite): the 8x8->16 kernel.

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

Peephole weights (int16, VectorBatchVectorCwiseProductAccumulate: the gate
plus MBQM(w_c * c), saturated; the output gate sees the new cell state) and
the projection (the hidden state stored with zero point -hidden_zp, int8
MATMUL with the bias plus hidden_zp times the weights' row sums, MBQM, the
output state's zero point, then CwiseClipping of the stored values) are
reproduced too; TFL LSTM (one step)
shares the lowering. A cell scale below 2^-15 (the converter picks one when
calibration saw small cell values) leaves tanh(c) out: TFLite's PortableApplyTanh
has no case for it and writes nothing (`IntegerLstm.cell_tanh`). Refused
(Failure, so the float fallback takes them): layer norm, the 8x8->8 kernel,
int16 activations (16x8), hybrid and dynamic shapes. TFLite has no integer
BIDIRECTIONAL_SEQUENCE_LSTM kernel (int8 weights there mean the hybrid kernel;
the converter emits two unidirectional LSTMs).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence

import numpy as np

from legalize.common import constant_value, require_static, scalar, tensor_type
from legalize.conv import require_float_activations
from legalize.integer.support import integer_pattern, per_tensor, require_per_tensor
from legalize.quantized import DOUBLE_ROUND, UnsupportedScale, quantize_multiplier
from legalize.registry import pattern
from legalize.rnn import (
    Direction,
    activation,
    bidirectional_results,
    broadcast_add,
    broadcast_sub,
    clip_vector,
    direction_product,
    flatten_parts,
    float_sequence_op,
    gate_slice,
    initial_state,
    maybe_emulating,
    no_aux_input,
    present,
    result_element,
    sequence,
    single_step,
    split_steps,
    stacked_transposed,
    steps_and_batch,
    unrolled_sequence,
    vector,
    vector_operand,
)
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import (
    ElementType,
    Frozen,
    TensorType,
    UniformQuantized,
    i8,
    i16,
    i32,
    storage_type,
)
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise

# ---------------------------------------------------------------------------
# Float path: operand layouts, one direction's weights


_LSTM_GATES = ("input", "forget", "cell", "output")


class LstmLayout(Frozen):
    """Operand indices of one direction of an LSTM op (gates in TFLite's i, f, c, o order)."""

    input_weights: tuple[int, int, int, int]
    recurrent_weights: tuple[int, int, int, int]
    peephole: tuple[int, int, int]            # cell_to_input, _forget, _output
    bias: tuple[int, int, int, int]
    projection_weights: int
    projection_bias: int
    output_state: int
    cell_state: int
    layer_norm: tuple[int, int, int, int] | None

    _fields = ("input_weights", "recurrent_weights", "peephole", "bias", "projection_weights",
               "projection_bias", "output_state", "cell_state", "layer_norm")

    def __init__(self, input_weights: tuple[int, int, int, int],
                 recurrent_weights: tuple[int, int, int, int], peephole: tuple[int, int, int],
                 bias: tuple[int, int, int, int], projection_weights: int, projection_bias: int,
                 output_state: int, cell_state: int,
                 layer_norm: tuple[int, int, int, int] | None) -> None:
        self._set(input_weights, recurrent_weights, peephole, bias, projection_weights,
                  projection_bias, output_state, cell_state, layer_norm)


# kernels/lstm_shared.h (UNIDIRECTIONAL_SEQUENCE_LSTM, LSTM full kernel).
LSTM = LstmLayout((1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11), (12, 13, 14, 15), 16, 17, 18, 19,
                  (20, 21, 22, 23))
# kernels/bidirectional_sequence_lstm.cc: forward 1-17, backward 18-34, states 35-38.
LSTM_FORWARD = LstmLayout((1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11), (12, 13, 14, 15), 16, 17,
                          35, 36, None)
LSTM_BACKWARD = LstmLayout((18, 19, 20, 21), (22, 23, 24, 25), (26, 27, 28), (29, 30, 31, 32),
                           33, 34, 37, 38, None)


def lstm_direction(rw: Rewriter, op: Op, layout: LstmLayout, batch: int,
                   elem: ElementType) -> Direction | Failure:
    """The weights of one LSTM direction; CIFG (no input gate), peephole,
    projection and layer norm variants are recognized by their present operands."""
    cifg = not present(op, layout.input_weights[0])
    gates = _LSTM_GATES[1:] if cifg else _LSTM_GATES
    first = 1 if cifg else 0
    input_ops = [op.operands[i] for i in layout.input_weights[first:]]
    recurrent_ops = [op.operands[i] for i in layout.recurrent_weights[first:]]
    width, output_width = tensor_type(recurrent_ops[0]).shape
    layer_norm = layout.layer_norm is not None and present(op, layout.layer_norm[1])
    parts: dict[str, object] = {
        "input_weights": stacked_transposed(rw, input_ops, elem),
        "recurrent_weights": stacked_transposed(rw, recurrent_ops, elem),
        "h0": initial_state(rw, op.operands[layout.output_state], batch, output_width, elem),
        "c0": initial_state(rw, op.operands[layout.cell_state], batch, width, elem),
    }
    bias_ops = [op.operands[i] for i in layout.bias[first:]]
    if layer_norm:
        parts["bias"] = None
        norms = layout.layer_norm[first:]  # type: ignore[index]
        parts["layer_norm"] = {g: vector_operand(rw, op, i, elem) for g, i in zip(gates, norms)}
        parts["gate_bias"] = {g: vector(rw, [b], elem) for g, b in zip(gates, bias_ops)}
    else:
        parts["bias"] = vector(rw, bias_ops, elem)
    if present(op, layout.peephole[2]):
        peephole_gates = ("forget", "output") if cifg else ("input", "forget", "output")
        indices = layout.peephole[1:] if cifg else layout.peephole
        parts["peephole"] = {g: vector_operand(rw, op, i, elem)
                             for g, i in zip(peephole_gates, indices)}
    if present(op, layout.projection_weights):
        parts["projection"] = stacked_transposed(rw, [op.operands[layout.projection_weights]],
                                                 elem)
        if present(op, layout.projection_bias):
            parts["projection_bias"] = vector_operand(rw, op, layout.projection_bias, elem)
    elif output_width != width:
        return Failure(f"{op.name}: output size {output_width} differs from cell size "
                       f"{width} without projection weights")
    for value in flatten_parts(parts.values()):
        if isinstance(value, Failure):
            return Failure(f"{op.name}: {value.reason}")
    return Direction(gates, width, output_width, **parts)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Float path: one step


def mean_stddev_normalization(rw: Rewriter, x: Value) -> Value:
    """TFLite's MeanStddevNormalization over the last axis:
    (x - mean) / sqrt(mean((x - mean)^2) + 1e-8), the division as RSQRT."""
    t = tensor_type(x)
    rank, size = len(t.shape), t.shape[-1]
    reduced = t.with_shape((*t.shape[:-1], 1))
    inverse_size = scalar(rw, 1.0 / size, t.element, rank)
    total = build.op(rw, "tosa.reduce_sum", [x], reduced, axis=rank - 1)
    diff = broadcast_sub(rw, x, build.mul(rw, total, inverse_size))
    squares = build.op(rw, "tosa.reduce_sum", [build.mul(rw, diff, diff)], reduced,
                       axis=rank - 1)
    variance = build.mul(rw, squares, inverse_size)
    epsilon = scalar(rw, 1e-8, t.element, rank)
    scale = build.op(rw, "tosa.rsqrt", [broadcast_add(rw, variance, epsilon)], reduced)
    return build.mul(rw, diff, scale, result_type=t)


def _gate(rw: Rewriter, d: Direction, gates: Value, name: str, cell: Value | None,
          act: str | None) -> Value | Failure:
    """One gate's pre-activation (peephole, layer norm) through its activation."""
    value = gate_slice(rw, gates, d.gates.index(name), d.width)
    if d.peephole is not None and name in d.peephole and cell is not None:
        value = broadcast_add(rw, value, build.mul(rw, d.peephole[name], cell,
                                          result_type=tensor_type(value)))
    if d.layer_norm is not None:
        normalized = mean_stddev_normalization(rw, value)
        scaled = build.mul(rw, normalized, d.layer_norm[name], result_type=tensor_type(value))
        value = broadcast_add(rw, scaled, d.gate_bias[name])  # type: ignore[index]
    return activation(rw, value, act)


def float_lstm_step(rw: Rewriter, op: Op, d: Direction, product: Value, h: Value,
              c: Value) -> tuple[Value, Value] | Failure:
    """One LstmStepFloat: returns (h_t, c_t), both [1, batch, width]."""
    act = op.attrs.get("fused_activation_function", "TANH")
    gates = broadcast_add(rw, product, direction_product(rw, d, "recurrent_weights", h))
    forget = _gate(rw, d, gates, "forget", c, "SIGMOID")
    candidate = _gate(rw, d, gates, "cell", None, act)
    if "input" in d.gates:
        input_gate = _gate(rw, d, gates, "input", c, "SIGMOID")
    elif not isinstance(forget, Failure):
        one = scalar(rw, 1.0, tensor_type(forget).element, 3)
        input_gate = broadcast_sub(rw, one, forget)
    else:
        input_gate = forget
    for value in (forget, candidate, input_gate):
        if isinstance(value, Failure):
            return value
    cell = broadcast_add(rw, build.mul(rw, forget, c), build.mul(rw, candidate, input_gate))
    cell = clip_vector(rw, cell, float(op.attrs.get("cell_clip", 0.0)))
    output_gate = _gate(rw, d, gates, "output", cell, "SIGMOID")
    squashed = activation(rw, cell, act)
    if isinstance(output_gate, Failure) or isinstance(squashed, Failure):
        return output_gate if isinstance(output_gate, Failure) else squashed
    hidden = build.mul(rw, output_gate, squashed)
    if d.projection is not None:
        hidden = direction_product(rw, d, "projection", hidden)
        if d.projection_bias is not None:
            hidden = broadcast_add(rw, hidden, d.projection_bias)
        hidden = clip_vector(rw, hidden, float(op.attrs.get("proj_clip", 0.0)))
    return hidden, cell


# ---------------------------------------------------------------------------
# Float path: patterns


# Operand indices that may hold (quantized, constant) weights, per op.
_LSTM_WEIGHTS = tuple(i for i in range(1, 18)) + (20, 21, 22, 23)
_BIDI_LSTM_WEIGHTS = tuple(range(1, 35)) + tuple(range(40, 48))


def _lstm_products(op: Op, layout: LstmLayout) -> dict[str, Sequence[int]]:
    """The weight operands of an LSTM direction's products (no input gate: CIFG)."""
    first = 0 if present(op, layout.input_weights[0]) else 1
    weights: dict[str, Sequence[int]] = {"input_weights": layout.input_weights[first:],
                                         "recurrent_weights": layout.recurrent_weights[first:]}
    if present(op, layout.projection_weights):
        weights["projection"] = (layout.projection_weights,)
    return weights


@pattern("tfl.unidirectional_sequence_lstm", types=("f32",), weights=_LSTM_WEIGHTS)
def unidirectional_sequence_lstm(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """The LSTM unrolled over the time axis (see the module docstring)."""
    return lower_unidirectional_lstm(op, rw, emulate=False)


def lower_unidirectional_lstm(op: Op, rw: Rewriter, emulate: bool) -> list[Value] | Failure:
    failure = float_sequence_op(op, _LSTM_WEIGHTS)
    if failure is not None:
        return failure
    if op.attrs.get("diagonal_recurrent_tensors"):
        return Failure(f"{op.name}: diagonal recurrent weights are not supported")
    if len(op.results) != 1:
        return Failure(f"{op.name}: {len(op.results)} results (only the output is supported)")
    x, time_major = op.operands[0], bool(op.attrs.get("time_major", False))
    _, batch = steps_and_batch(x, time_major)
    d = maybe_emulating(op, lstm_direction(rw, op, LSTM, batch, result_element(op)),
                   _lstm_products(op, LSTM), emulate)
    if isinstance(d, Failure):
        return d
    output = unrolled_sequence(rw, op, d, float_lstm_step, x, time_major)
    return output if isinstance(output, Failure) else [output]


@pattern("tfl.lstm", types=("f32",), weights=_LSTM_WEIGHTS)
def lstm(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """One LSTM step on [batch, input]: the sequence lowering with one time step."""
    return lower_lstm(op, rw, emulate=False)


def lower_lstm(op: Op, rw: Rewriter, emulate: bool) -> list[Value] | Failure:
    failure = require_float_activations(op, weights=_LSTM_WEIGHTS)
    if failure is not None:
        return failure
    if op.attrs.get("kernel_type", "FULL") != "FULL":
        return Failure(f"{op.name}: the {op.attrs['kernel_type']} kernel is not supported")
    x = op.operands[0]
    shape = tensor_type(x).shape
    d = maybe_emulating(op, lstm_direction(rw, op, LSTM, shape[0], result_element(op)),
                   _lstm_products(op, LSTM), emulate)
    if isinstance(d, Failure):
        return d
    return single_step(rw, op, d, float_lstm_step, x)


@pattern("tfl.bidirectional_sequence_lstm", types=("f32",), weights=_BIDI_LSTM_WEIGHTS)
def bidirectional_sequence_lstm(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Forward and backward LSTMs over the same input; the backward one walks
    the steps from the last and writes each output at its own time step.
    merge_outputs concatenates them along the feature axis.

    With batch-major input, merge_outputs and batch > 1, TFLite's float kernel
    offsets each batch row's state by the merged output's row stride
    (lstm_eval.cc EvalFloat, `b * output_batch_leading_dim`) and so reads past
    its state tensor; this lowering computes the LSTM as defined instead.
    """
    return lower_bidirectional_lstm(op, rw, emulate=False)


def lower_bidirectional_lstm(op: Op, rw: Rewriter, emulate: bool) -> list[Value] | Failure:
    for failure in (float_sequence_op(op, _BIDI_LSTM_WEIGHTS), no_aux_input(op, 39)):
        if failure is not None:
            return failure
    x, time_major = op.operands[0], bool(op.attrs.get("time_major", True))
    _, batch = steps_and_batch(x, time_major)
    elem = result_element(op)
    results = []
    for layout, reverse in ((LSTM_FORWARD, False), (LSTM_BACKWARD, True)):
        d = maybe_emulating(op, lstm_direction(rw, op, layout, batch, elem),
                       _lstm_products(op, layout), emulate)
        if isinstance(d, Failure):
            return d
        output = unrolled_sequence(rw, op, d, float_lstm_step, x, time_major, reverse)
        if isinstance(output, Failure):
            return output
        results.append(output)
    return bidirectional_results(rw, op, results)


# ---------------------------------------------------------------------------
# gemmlowp fixed point (fixedpoint/fixedpoint.h) with int16 raw values, as the
# integer LSTM kernels evaluate their activations (PortableApplySigmoid and
# PortableApplyTanh on int16), on numpy int32 arrays: every intermediate, a
# product of two raw values included, fits in int32. Results are wrapped to
# int16 where C++ would wrap.

_LOW, _HIGH = -(1 << 15), (1 << 15) - 1


def _wrap(x: np.ndarray) -> np.ndarray:
    """Two's complement wrap to int16 (C++'s implicit narrowing), kept as int32."""
    wrapped = x + (1 << 15)
    wrapped &= 0xFFFF
    wrapped -= 1 << 15
    return wrapped


def _saturate(x: np.ndarray) -> np.ndarray:
    """x clamped to the int16 range, in place."""
    np.maximum(x, _LOW, out=x)
    return np.minimum(x, _HIGH, out=x)


def _doubling_high_mul(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul: round(a * b / 2^15), ties toward +inf;
    min * min saturates.

    The kernel nudges the product p by 2^14 (by 1 - 2^14 when negative) and
    divides truncating toward zero: for negative p that is the floor of
    p + 2^14 over 2^15 too, so one arithmetic shift of p + 2^14 gives every
    quotient."""
    quotient = a * b
    quotient += 1 << 14
    quotient >>= 15
    if isinstance(b, np.ndarray):
        quotient[(a == _LOW) & (b == _LOW)] = _HIGH
    elif b == _LOW:
        quotient[a == _LOW] = _HIGH
    return quotient


def _rounding_divide_by_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    """RoundingDivideByPOT: x / 2^exponent rounded half away from zero."""
    mask = (1 << exponent) - 1
    remainder = x & mask
    remainder -= x < 0   # the threshold is one higher for negative x
    quotient = x >> exponent
    quotient += remainder > mask >> 1
    return quotient


def _multiply_by_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT<exponent> for exponent > 0: gemmlowp's
    thresholds give the left shift clamped to the int16 range."""
    return _saturate(x << exponent)


def _constant(raw32: int) -> int:
    """GEMMLOWP_CHECKED_FIXEDPOINT_CONSTANT: an int32 raw constant rounded to int16
    (RoundingDivideByPOT by 16)."""
    return (raw32 >> 16) + ((raw32 & 0xFFFF) > 0x7FFF + (raw32 < 0))


def _rounding_half_sum(a: np.ndarray, b: int) -> np.ndarray:
    """RoundingHalfSum: (a + b +- 1) / 2, truncating: (a + b + 1) >> 1 from 0 up,
    (a + b) >> 1 below."""
    total = a + b
    total += total >= 0
    total >>= 1
    return total


def _exp_on_interval_between_negative_one_quarter_and_0_excl(a: np.ndarray) -> np.ndarray:
    """exp(a) for a in [-1/4, 0), Q0 in and out: the Taylor expansion around -1/8."""
    constant_term = _constant(1895147668)      # exp(-1/8)
    one_third = _constant(715827883)
    x = _wrap(a + (1 << 12))                   # a + 1/8
    x2 = _doubling_high_mul(x, x)
    x3 = _doubling_high_mul(x2, x)
    x4 = _doubling_high_mul(x2, x2)
    x4_over_4 = _rounding_divide_by_pot(x4, 2)
    cubic = _doubling_high_mul(_wrap(x4_over_4 + x3), one_third)
    polynomial = _rounding_divide_by_pot(_wrap(cubic + x2), 1)
    tail = _doubling_high_mul(_wrap(x + polynomial), constant_term)
    # AddSaturatingIf16Bit: the int16 sum saturates.
    return _saturate(tail + constant_term)


# exp(-2^k) as int32 raw Q0.31 for the barrel shifter of exp_on_negative_values.
_EXP_OF_NEGATIVE_POWERS_OF_TWO = ((-2, 1672461947), (-1, 1302514674), (0, 790015084),
                                  (1, 290630308), (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(integer_bits: int) -> np.ndarray:
    """gemmlowp exp_on_negative_values on every negative int16 input, -32768 to -1
    in order, read as Q(integer_bits): Q0.15 results.

    gemmlowp splits a = -(m + 1) / 4 + low (low in [0, 1/4)): exp of
    low - 1/4 from a polynomial, then one multiplication by exp(-2^k) for
    each set bit of m, bit j standing for k = j - 2, lowest bit first. So the
    polynomial is evaluated once per distinct low part, and the products are
    built bit by bit, doubling the values of m covered each time (the rows):
    each multiplication is done once for the values that need it."""
    fractional_bits = 15 - integer_bits
    one_quarter = 1 << (fractional_bits - 2)
    remainder_in_quarter = np.arange(one_quarter, dtype=np.int32) - one_quarter
    rows = _exp_on_interval_between_negative_one_quarter_and_0_excl(
        _multiply_by_pot(remainder_in_quarter, integer_bits))[np.newaxis]
    # a >= -2^15 raw, so m < 2^(integer_bits + 2): bits up to k = integer_bits - 1,
    # of which gemmlowp multiplies those up to k = 4 (the clamp below covers the rest).
    for j in range(integer_bits + 2):
        if j < len(_EXP_OF_NEGATIVE_POWERS_OF_TWO):
            multiplier = _constant(_EXP_OF_NEGATIVE_POWERS_OF_TWO[j][1])
            rows = np.concatenate((rows, _doubling_high_mul(rows, multiplier)))
        else:
            rows = np.concatenate((rows, rows))
    # Row m holds a = -(m + 1) / 4 + low: reversed, the rows run from a = -2^15 up.
    result = rows[::-1].reshape(-1)
    if integer_bits > 5:
        clamp = _constant(-(1 << (36 - integer_bits)))
        result[:clamp + (1 << 15)] = 0   # a < clamp
    return result


def _newton_raphson_reciprocal(half_denominator: np.ndarray) -> np.ndarray:
    """x ~ 1 / half_denominator (Q2) after gemmlowp's three Newton-Raphson steps
    from 48/17 - 32/17 * d."""
    one_q2 = 1 << 13
    x = _wrap(_constant(1515870810)
              + _doubling_high_mul(half_denominator, _constant(-1010580540)))
    for _ in range(3):
        product = _doubling_high_mul(half_denominator, x)
        correction = _doubling_high_mul(x, _wrap(one_q2 - product))
        x = _wrap(x + _multiply_by_pot(correction, 2))
    return x


@functools.cache
def _reciprocals() -> np.ndarray:
    """_newton_raphson_reciprocal of every half denominator, 2^14 to 2^15 - 1 in
    order (RoundingHalfSum(e, One) of any e in [0, One]). Both activations
    take their reciprocals from here (read-only, shared)."""
    reciprocals = _newton_raphson_reciprocal(np.arange(1 << 14, 1 << 15, dtype=np.int32))
    reciprocals.flags.writeable = False
    return reciprocals


def _one_over_half_sum(exp: np.ndarray) -> np.ndarray:
    """The reciprocal (Q2) of RoundingHalfSum(exp, One) for exp results (Q0.15,
    in [0, One]), as the Newton-Raphson steps compute it."""
    return _reciprocals()[_rounding_half_sum(exp, _HIGH) - (1 << 14)]


def _odd_table(negative: np.ndarray, at_zero: int, mirrored: np.ndarray) -> np.ndarray:
    """An int16 table indexed by input + 32768 from its values at the negative
    inputs (-32768 to -1), at 0, and `mirrored`, whose value at -a is the
    table's at a > 0."""
    table = np.empty(1 << 16, dtype=np.int16)
    table[:1 << 15] = negative
    table[1 << 15] = at_zero
    table[(1 << 15) + 1:] = mirrored[:0:-1]
    table.flags.writeable = False
    return table


@functools.cache
def logistic(integer_bits: int) -> np.ndarray:
    """gemmlowp logistic from Q(integer_bits) to Q0.15 on every int16 input, as int16
    indexed by input + 32768. Computed once per format (read-only, shared).

    gemmlowp evaluates exp(-|a|) (-a wrapped: -32768 stays itself), the positive
    side as 1 / (1 + exp(-|a|)) and the negative one as One minus that: both
    from the negative inputs."""
    # one_over_one_plus_x_for_x_in_0_1
    positive = _multiply_by_pot(_one_over_half_sum(exp_on_negative_values(integer_bits)), 1)
    return _odd_table(_wrap(_HIGH - positive), _constant(1 << 30), positive)


@functools.cache
def tanh(integer_bits: int) -> np.ndarray:
    """gemmlowp tanh from Q(integer_bits) to Q0.15 on every int16 input, as int16
    indexed by input + 32768. Computed once per format (read-only, shared).

    gemmlowp evaluates t = (1 - exp(-2|a|)) / (1 + exp(-2|a|)) (-a wrapped:
    -32768 stays itself) and negates it for negative a: both sides from the
    negative inputs (exp of 2a is exp of a read with one integer bit more)."""
    # one_minus_x_over_one_plus_x_for_x_in_0_1
    reciprocal = _one_over_half_sum(exp_on_negative_values(integer_bits + 1))
    t = _multiply_by_pot(_wrap(reciprocal - (1 << 13)), 2)
    return _odd_table(_wrap(-t), 0, t)


# ---------------------------------------------------------------------------
# Parameters of the 8x8->16 kernel (lstm.cc PopulateQuantizedLstmParams8x8_16)

# Gate pre-activations are Q3.12 when there is no layer norm (lstm.cc).
GATE_SCALE = 2.0 ** -12
GATE_INTEGER_BITS = 3
# Operand indices (kernels/lstm_shared.h).
INPUT_WEIGHTS = (1, 2, 3, 4)          # input, forget, cell, output gate
RECURRENT_WEIGHTS = (5, 6, 7, 8)
PEEPHOLE = (9, 10, 11)                # input, forget, output gate
BIASES = (12, 13, 14, 15)
PROJECTION_WEIGHTS, PROJECTION_BIAS = 16, 17
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


def peephole_scale(cell_exponent: int, weight_scale: float) -> float:
    """`std::pow(2, cell_scale) * weight_scale / intermediate_scale`: double
    arithmetic on the float scales, stored as float."""
    return float(np.float32(2.0 ** cell_exponent * float(np.float32(weight_scale))
                            / float(np.float32(GATE_SCALE))))


def hidden_scale(hidden: float) -> float:
    """`std::pow(2, -15) / hidden_scale * std::pow(2, -15)` in double, stored as float."""
    return float(np.float32(2.0 ** -15 / float(np.float32(hidden)) * 2.0 ** -15))


def projection_scale(weight_scale: float, hidden: float, output_state: float) -> float:
    """`projection_weight_scale * intermediate_scale[4] / output_state_scale` in float32."""
    product = np.float32(weight_scale) * np.float32(hidden)
    return float(np.float32(product / np.float32(output_state)))


def cell_scale_exponent(scale: float) -> int | None:
    """The power of two of the cell state's scale, None if it is not one."""
    mantissa, exponent = math.frexp(scale)
    return exponent - 1 if mantissa == 0.5 else None


def quantized_clip(clip: float, scale: float, bits: int) -> int:
    """`(intN_t)min(max(clip / scale, min), max)` in float32 (truncating); 0 is no clip."""
    if not clip > 0:
        return 0
    with np.errstate(over="ignore"):  # a clip beyond float32 saturates, as in the kernel
        ratio = float(np.float32(clip) / np.float32(scale))
    return int(min(max(ratio, -(2.0 ** (bits - 1))), 2.0 ** (bits - 1) - 1))


@functools.cache
def activation_tables(cell_integer_bits: int | None) -> np.ndarray:
    """The GATHER values [1, rows * 65536, 1]: logistic and tanh of Q3.12 gates, tanh
    of the cell state (PortableApplySigmoid / PortableApplyTanh) unless
    `cell_integer_bits` is None (`IntegerLstm.cell_tanh`). Read-only, one array per
    cell format, so the LSTMs of a model share one constant."""
    rows = (logistic(GATE_INTEGER_BITS), tanh(GATE_INTEGER_BITS))
    if cell_integer_bits is not None:
        rows += (tanh(cell_integer_bits),)
    tables = np.concatenate(rows).reshape(1, -1, 1)
    tables.flags.writeable = False
    return tables


class Projection(Frozen):
    """The int8 projection of the hidden state (CalculateLstmOutputInteger8x8_16)."""

    weights: np.ndarray               # [width, output_width] int8 (transposed)
    bias: np.ndarray                  # [output_width]: projection bias + hidden_zp * row sums
    scale: float
    clip: int                         # quantized on the output scale; 0 means no clip

    _fields = ("weights", "bias", "scale", "clip")

    def __init__(self, weights: np.ndarray, bias: np.ndarray, scale: float, clip: int) -> None:
        self._set(weights, bias, scale, clip)


class IntegerLstm(Frozen):
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
    # Peephole: gate -> (int16 weights [width], effective scale), for input, forget, output.
    peephole: dict[str, tuple[np.ndarray, float]] | None
    projection: Projection | None

    _fields = ("gates", "width", "output_width", "input", "output_state", "hidden",
               "cell_exponent", "cell_clip", "input_weights", "recurrent_weights", "bias",
               "input_scales", "recurrent_scales", "peephole", "projection")

    def __init__(self, gates: tuple[str, ...], width: int, output_width: int,
                 input: UniformQuantized, output_state: UniformQuantized,
                 hidden: UniformQuantized, cell_exponent: int, cell_clip: int,
                 input_weights: np.ndarray, recurrent_weights: np.ndarray, bias: np.ndarray,
                 input_scales: tuple[float, ...], recurrent_scales: tuple[float, ...],
                 peephole: dict[str, tuple[np.ndarray, float]] | None = None,
                 projection: Projection | None = None) -> None:
        self._set(gates, width, output_width, input, output_state, hidden, cell_exponent,
                  cell_clip, input_weights, recurrent_weights, bias, input_scales,
                  recurrent_scales, peephole, projection)

    @property
    def cell_tanh(self) -> bool:
        """Whether the output squashes the cell state. PortableApplyTanh dispatches
        on the cell's integer bits, 15 + cell_exponent, for 0..6 only and returns
        without writing anything for fewer (a cell scale below 2^-15). The output
        then multiplies the output gate by what its buffer already holds: the
        input gate of the same step (LstmStepInteger8x8_16 hands scratch0, the
        input gate's buffer, to CalculateLstmOutputInteger8x8_16 as tanh(c)'s)."""
        return self.cell_exponent >= -15


def _quantized_constant(op: Op, index: int, storage: str
                        ) -> tuple[np.ndarray, UniformQuantized] | Failure:
    value = op.operands[index]
    element = per_tensor(value, storage)
    array = constant_value(value)
    if element is None or array is None or element.zero_point != 0:
        return Failure(f"{op.name}: operand {index} is not a constant symmetric {storage} "
                       "per-tensor quantized tensor")
    return np.asarray(array, dtype=np.int64), element


def _int32_vector(op: Op, index: int, size: int) -> np.ndarray | Failure:
    value = op.operands[index]
    array = constant_value(value)
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
        (any(present(op, i) for i in LAYER_NORM), "layer norm"),
        (bool(op.attrs.get("diagonal_recurrent_tensors")), "diagonal recurrent weights"),
        # CalculateLstmGateInteger8x8_16 takes TANH or SIGMOID (which the flatbuffer
        # schema cannot express) and asserts on anything else.
        (activation != "TANH", f"the {activation} activation"),
        # Twelve intermediates select the 8x8->8 kernel.
        (len(op.attrs.get("intermediates", ())) != 5, "other than five intermediates"),
    )
    for refused, what in unsupported:
        if refused:
            return Failure(f"{op.name}: {what} (the integer lowering covers the 8x8->16 "
                           "kernel without layer norm)")
    return None


def _gate_weights(op: Op, indices: tuple[int, ...], activation_scale: float
                  ) -> tuple[np.ndarray, tuple[float, ...]] | Failure:
    """Gate weight matrices stacked and transposed ([cols, gates * width]), and each
    gate's effective scale."""
    arrays, scales = [], []
    for index in indices:
        constant = _quantized_constant(op, index, "i8")
        if isinstance(constant, Failure):
            return constant
        arrays.append(constant[0])
        scales.append(gate_scale(constant[1].scale, activation_scale))
    return np.concatenate(arrays).T, tuple(scales)


def _peephole(op: Op, gates: tuple[str, ...], cell_exponent: int, width: int
              ) -> dict[str, tuple[np.ndarray, float]] | None | Failure:
    """Peephole weights (int16, VectorBatchVectorCwiseProductAccumulate) per gate."""
    named = [(g, i) for g, i in zip(("input", "forget", "output"), PEEPHOLE) if g in gates]
    if not any(present(op, i) for _, i in named):
        return None
    peephole = {}
    for gate, index in named:
        constant = _quantized_constant(op, index, "i16") if present(op, index) else None
        if constant is None or isinstance(constant, Failure) or constant[0].size != width:
            return Failure(f"{op.name}: peephole weights {index} are not a constant int16 "
                           f"vector of {width}")
        peephole[gate] = (constant[0].reshape(width),
                          peephole_scale(cell_exponent, constant[1].scale))
    return peephole


def _projection(op: Op, hidden: UniformQuantized, output_state: UniformQuantized,
                width: int, output_width: int) -> Projection | None | Failure:
    if not present(op, PROJECTION_WEIGHTS):
        return None
    constant = _quantized_constant(op, PROJECTION_WEIGHTS, "i8")
    if isinstance(constant, Failure):
        return constant
    weights, element = constant
    bias = _int32_vector(op, PROJECTION_BIAS, output_width) \
        if present(op, PROJECTION_BIAS) else np.zeros(output_width, dtype=np.int64)
    if isinstance(bias, Failure):
        return bias
    # PopulatePrecomputedZPTimesWeightsWithBias: bias + hidden_zp * row sums.
    effective_bias = bias + hidden.zero_point * weights.sum(axis=1)
    out = tensor_type(op.results[0]).element
    return Projection(weights.reshape(output_width, width).T, effective_bias,
                      projection_scale(element.scale, hidden.scale, output_state.scale),
                      quantized_clip(float(op.attrs.get("proj_clip", 0.0)), out.scale, 8))


def integer_lstm(op: Op, input_rank: int = 3) -> IntegerLstm | Failure:
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
    # lstm.cc requires a power of two <= 2^-9 (CheckedLog2, cell_scale <= -9).
    if exponent is None or exponent > -9:
        return Failure(f"{op.name}: cell state scale {cell.scale!r} is not a power of two "
                       "<= 2^-9")
    if len(tensor_type(op.operands[0]).shape) != input_rank:
        return Failure(f"{op.name}: the input is not of rank {input_rank}")
    first = 0 if present(op, INPUT_WEIGHTS[0]) else 1  # CIFG: no input gate
    gates = ("input", "forget", "cell", "output")[first:]
    if exponent < -15 and first:
        # The output then reads the input gate's scratch buffer (see cell_tanh),
        # which a CIFG LSTM never writes: nothing defined to reproduce.
        return Failure(f"{op.name}: CIFG with cell state scale 2^{exponent} (TFLite's "
                       "output reads an unwritten scratch buffer)")
    input_part = _gate_weights(op, INPUT_WEIGHTS[first:], q_input.scale)
    recurrent_part = _gate_weights(op, RECURRENT_WEIGHTS[first:], q_output_state.scale)
    for part in (input_part, recurrent_part):
        if isinstance(part, Failure):
            return part
    output_width = recurrent_part[0].shape[0]
    width = recurrent_part[0].shape[1] // len(gates)
    biases = [_int32_vector(op, i, width) for i in BIASES[first:]]
    peephole = _peephole(op, gates, exponent, width)
    projection = _projection(op, hidden, q_output_state, width, output_width)
    for part in (*biases, peephole, projection):
        if isinstance(part, Failure):
            return part
    if peephole is not None and output_width != width:
        # CalculateLstmGateInteger8x8_16 walks the peephole weights with n_output.
        return Failure(f"{op.name}: peephole weights with a projection to another width")
    if projection is None and output_width != width:
        return Failure(f"{op.name}: output width {output_width} without a projection")
    return IntegerLstm(
        gates, width, output_width, q_input, q_output_state, hidden, exponent,
        quantized_clip(float(op.attrs.get("cell_clip", 0.0)), cell.scale, 16),
        input_part[0], recurrent_part[0], np.concatenate(biases), input_part[1],
        recurrent_part[1], peephole, projection)


# ---------------------------------------------------------------------------
# TOSA building blocks


def _i32(rw: Rewriter, values: np.ndarray | int) -> Value:
    """An i32 constant of rank 3 ([1, 1, n] or [1, 1, 1])."""
    return build.const(rw, np.asarray(values, dtype=np.int32).reshape(1, 1, -1), i32)


@functools.lru_cache(maxsize=256)
def _column_scales(scales: tuple[float, ...], width: int, bound: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """RESCALE's multipliers (int32) and shifts (int8) for each group of `width`
    columns scaled by its own scale. Every time step asks for the recurrent
    ones again (read-only, shared).

    apply_scale_32 REQUIRES |acc| < 2^(shift - 1); `bound` (the largest
    accumulator the operands allow) must stay inside it."""
    pairs = [quantize_multiplier(s) for s in scales]
    for multiplier, shift in pairs:
        if multiplier and bound >= 1 << (shift - 1):
            raise UnsupportedScale(f"scale 2^{31 - shift} with accumulators up to {bound} "
                                   "exceeds RESCALE's input range")
    multipliers = np.repeat(np.array([m for m, _ in pairs], dtype=np.int32), width)
    shifts = np.repeat(np.array([s for _, s in pairs], dtype=np.int8), width)
    multipliers.flags.writeable = shifts.flags.writeable = False
    return multipliers, shifts


def _scaled(rw: Rewriter, acc: Value, column_scales: tuple[np.ndarray, np.ndarray],
            out: ElementType, output_zp: int = 0) -> Value:
    """MultiplyByQuantizedMultiplier of each column by its scale (`_column_scales`;
    DOUBLE_ROUND: TFLite's default-build double rounding), plus `output_zp`,
    saturated to `out`."""
    multipliers, shifts = column_scales
    # Copies: a large constant op holds the array it is given.
    return build.rescale(rw, acc, multipliers.copy(), shifts.copy(), 0, output_zp,
                         tensor_type(acc).with_element(out), rounding_mode=DOUBLE_ROUND,
                         per_channel=multipliers.size > 1)


def _accumulator_bound(weights: np.ndarray, bias: np.ndarray | None = None,
                       magnitude: int = 255) -> int:
    """The largest |bias + W^T v| for |v| <= magnitude (255: int8 less its zero point)."""
    column_sums = np.abs(weights.astype(np.int64)).sum(axis=0) * magnitude
    if bias is not None:
        column_sums = column_sums + np.abs(bias)
    return int(column_sums.max(initial=0))


def _saturating_add(e: Elementwise, a: Value, b: Value) -> Value:
    """a + b clamped to int16, as i32 (the kernels' accumulate-and-saturate)."""
    return e.saturate(e.add(a, b), -32768, 32767)


def _lookup(rw: Rewriter, tables: Value, x: Value, rows: Value) -> Value:
    """The int16 function values of the i32 tensor x (int16 range) [1, batch, n],
    row by row of `tables` as `rows` ([1, 1, n] or [1, 1, 1]: row * 65536 + 32768)
    says: one GATHER."""
    shape = tensor_type(x).shape
    count = math.prod(shape)
    indices = build.reshape(rw, Elementwise(rw, 3).add(x, rows), (1, count))
    gathered = build.op(rw, "tosa.gather", [tables, indices], TensorType((1, count, 1), i16))
    return build.reshape(rw, gathered, shape)


def _widen(rw: Rewriter, x: Value) -> Value:
    return build.cast(rw, x, i32)


def _columns(rw: Rewriter, x: Value, start: int, width: int) -> Value:
    batch = tensor_type(x).shape[1]
    return build.slice(rw, x, [0, 0, start], [1, batch, width])


# ---------------------------------------------------------------------------
# The lowering


class StepConstants(Frozen):
    """Constants every time step reads."""

    recurrent_weights: Value          # [1, output_width, gates * width] i8
    recurrent_bound: int              # largest recurrent accumulator
    tables: Value                     # [1, 3 * 65536, 1] i16
    gate_rows: Value                  # [1, 1, gates * width] i32: each gate's table row
    sigmoid_row: Value                # [1, 1, 1] i32
    cell_row: Value | None            # [1, 1, 1] i32: the cell state's tanh row
    hidden_multiplier: tuple[int, int]
    peephole: dict[str, tuple[Value, float]]  # gate -> ([1, 1, width] i16, scale)
    projection: Value | None          # [1, width, output_width] i8

    _fields = ("recurrent_weights", "recurrent_bound", "tables", "gate_rows", "sigmoid_row",
               "cell_row", "hidden_multiplier", "peephole", "projection")

    def __init__(self, recurrent_weights: Value, recurrent_bound: int, tables: Value,
                 gate_rows: Value, sigmoid_row: Value, cell_row: Value | None,
                 hidden_multiplier: tuple[int, int], peephole: dict[str, tuple[Value, float]],
                 projection: Value | None) -> None:
        self._set(recurrent_weights, recurrent_bound, tables, gate_rows, sigmoid_row, cell_row,
                  hidden_multiplier, peephole, projection)


def _row_offsets(rows: list[int]) -> np.ndarray:
    """GATHER index offsets: row * 65536 plus 32768 (int16 x -> x + 32768)."""
    return np.asarray(rows, dtype=np.int64) * TABLE_SIZE + TABLE_SIZE // 2


def step_constants(rw: Rewriter, p: IntegerLstm) -> StepConstants:
    rows = [TANH_GATE_ROW if gate == "cell" else SIGMOID_ROW for gate in p.gates]
    multiplier, shift = quantize_multiplier(hidden_scale(p.hidden.scale))
    # |o * tanh(c)| < 2^30 must be a valid apply_scale_32 input.
    if multiplier and shift < 32:
        raise UnsupportedScale(f"hidden scale {p.hidden.scale!r} needs RESCALE shift {shift}")
    peephole = {gate: (build.const(rw, weights.reshape(1, 1, -1).astype(np.int16), i16), scale)
                for gate, (weights, scale) in (p.peephole or {}).items()}
    projection = None if p.projection is None else \
        build.const(rw, p.projection.weights[np.newaxis].astype(np.int8), i8)
    return StepConstants(
        build.const(rw, p.recurrent_weights[np.newaxis].astype(np.int8), i8),
        _accumulator_bound(p.recurrent_weights),
        build.const(rw, activation_tables(15 + p.cell_exponent if p.cell_tanh else None), i16),
        _i32(rw, _row_offsets([r for r in rows for _ in range(p.width)])),
        _i32(rw, _row_offsets([SIGMOID_ROW])),
        _i32(rw, _row_offsets([TANH_CELL_ROW])) if p.cell_tanh else None,
        (multiplier, shift), peephole, projection)


def integer_input_products(rw: Rewriter, p: IntegerLstm, x: Value, time_major: bool) -> list[Value]:
    """sat16(MBQM(bias + W_x (x - zp_x))) of every step as i32 [1, batch, gates * width]:
    one MATMUL and one RESCALE for the whole sequence."""
    shape = tensor_type(x).shape
    columns = len(p.gates) * p.width
    flat = build.reshape(rw, x, (1, shape[0] * shape[1], shape[2]))
    weights = build.const(rw, p.input_weights[np.newaxis].astype(np.int8), i8)
    acc = build.op(rw, "tosa.matmul", [flat, weights, build.zero_point(rw, p.input.zero_point, i8),
                                       build.zero_point(rw, 0, i8)],
                   TensorType((1, shape[0] * shape[1], columns), i32))
    acc = Elementwise(rw, 3).add(acc, _i32(rw, p.bias))
    gates = _scaled(rw, acc, _column_scales(p.input_scales, p.width,
                                            _accumulator_bound(p.input_weights, p.bias)), i16)
    widened = _widen(rw, build.reshape(rw, gates, (shape[0], shape[1], columns)))
    return split_steps(rw, widened, time_major)


def _with_peephole(rw: Rewriter, k: StepConstants, gate: str, pre: Value, c: Value) -> Value:
    """VectorBatchVectorCwiseProductAccumulate: pre + MBQM(w_c * c), saturated to int16
    (|w_c * c| <= 2^30)."""
    weights, scale = k.peephole[gate]
    e = Elementwise(rw, 3)
    scaled = _scaled(rw, e.mul(c, weights), _column_scales((scale,), 1, 1 << 30), i32)
    return _saturating_add(e, pre, scaled)


def _cell_update(rw: Rewriter, p: IntegerLstm, gate: dict[str, Value], c: Value) -> Value:
    """UpdateLstmCellInteger: sat16(RDBP(f * c, 15) + RDBP(i * g, 30 + cell_exponent)),
    clipped; as i32. CwiseMul casts each product to int16: with gates <= 32767 that
    changes nothing down to cell exponent -15 and wraps i * g below it."""
    e = Elementwise(rw, 3)
    forget = e.shift_right_half_away(e.mul(gate["forget"], c), 15)
    if "input" in gate:
        update = e.mul(gate["input"], gate["cell"])
    else:  # CIFG: Sub1Vector, input = 32767 - forget
        complement = e.sub(_i32(rw, 32767), _widen(rw, gate["forget"]))
        update = e.mul(complement, _widen(rw, gate["cell"]))
    update = e.shift_right_half_away(update, 30 + p.cell_exponent)
    if p.cell_exponent < -15:
        update = _widen(rw, build.cast(rw, update, i16))  # TOSA's narrowing CAST wraps
    bound = p.cell_clip or 32767
    return e.saturate(e.add(forget, update), -bound if p.cell_clip else -32768, bound)


def _output_state(rw: Rewriter, p: IntegerLstm, k: StepConstants, output_gate: Value,
                  squashed: Value, out: ElementType) -> Value:
    """CalculateLstmOutputInteger8x8_16: CwiseMul(o, tanh(c)) by the hidden scale to
    int8, then the projection (MatrixBatchVectorMultiplyAccumulate to int8 and
    CwiseClipping of the stored values) if there is one. `squashed` is tanh(c) or
    what the kernel uses in its place (`IntegerLstm.cell_tanh`)."""
    batch = tensor_type(squashed).shape[1]
    multiplier, shift = k.hidden_multiplier
    product = build.mul(rw, output_gate, squashed)
    if p.projection is None:
        return build.rescale(rw, product, multiplier, shift, 0, p.hidden.zero_point,
                             TensorType((1, batch, p.width), out), rounding_mode=DOUBLE_ROUND)
    # With a projection the kernel stores the hidden state with zero point -hidden_zp
    # (and adds hidden_zp times the row sums to the projection's bias).
    scaled = build.rescale(rw, product, multiplier, shift, 0, 0,
                           TensorType((1, batch, p.width), i32), rounding_mode=DOUBLE_ROUND)
    e = Elementwise(rw, 3)
    shifted = e.add(scaled, _i32(rw, -p.hidden.zero_point))
    hidden = build.cast(rw, e.saturate(shifted, -128, 127), i8)
    proj = p.projection
    acc = build.op(rw, "tosa.matmul", [hidden, k.projection, build.zero_point(rw, 0, i8),
                                       build.zero_point(rw, 0, i8)],
                   TensorType((1, batch, p.output_width), i32))
    acc = e.add(acc, _i32(rw, proj.bias))
    projected = _scaled(rw, acc, _column_scales((proj.scale,), p.output_width,
                                                _accumulator_bound(proj.weights, proj.bias,
                                                                   128)),
                        out, p.output_state.zero_point)
    return build.clamp(rw, projected, -proj.clip, proj.clip) if proj.clip else projected


def integer_lstm_step(rw: Rewriter, p: IntegerLstm, k: StepConstants, product: Value, h: Value,
              c: Value, out: ElementType) -> tuple[Value, Value]:
    """One LstmStepInteger8x8_16 on [1, batch, *] tensors: (h_t as `out`, c_t as i16)."""
    batch = tensor_type(product).shape[1]
    columns = len(p.gates) * p.width
    recurrent = build.op(rw, "tosa.matmul", [h, k.recurrent_weights,
                                             build.zero_point(rw, p.output_state.zero_point, i8),
                                             build.zero_point(rw, 0, i8)],
                         TensorType((1, batch, columns), i32))
    recurrent = _scaled(rw, recurrent,
                        _column_scales(p.recurrent_scales, p.width, k.recurrent_bound), i32)
    # MatrixBatchVectorMultiplyAccumulate adds to the gate and saturates to int16.
    total = _saturating_add(Elementwise(rw, 3), product, recurrent)
    column = {name: i * p.width for i, name in enumerate(p.gates)}
    if p.peephole is not None:  # input and forget gates see the previous cell state
        parts = [_columns(rw, total, column[g], p.width) for g in p.gates]
        parts = [_with_peephole(rw, k, g, part, c) if g in ("input", "forget") else part
                 for g, part in zip(p.gates, parts)]
        total = build.op(rw, "tosa.concat", parts, tensor_type(total), axis=2)
    activated = _lookup(rw, k.tables, total, k.gate_rows)
    gate = {name: _columns(rw, activated, start, p.width) for name, start in column.items()}
    cell = _cell_update(rw, p, gate, c)
    output_gate = gate["output"]
    if p.peephole is not None:  # the output gate sees the new cell state
        pre = _with_peephole(rw, k, "output",
                             _columns(rw, total, column["output"], p.width),
                             build.cast(rw, cell, i16))
        output_gate = _lookup(rw, k.tables, pre, k.sigmoid_row)
    squashed = _lookup(rw, k.tables, cell, k.cell_row) if p.cell_tanh else gate["input"]
    return _output_state(rw, p, k, output_gate, squashed, out), build.cast(rw, cell, i16)


def integer_initial_state(rw: Rewriter, value: Value, batch: int, width: int,
                  element: ElementType) -> Value:
    """A state operand's stored values as [1, batch, width]."""
    array = constant_value(value)
    if array is not None:
        return build.const(rw, np.asarray(array).reshape(1, batch, width), element)
    return build.reshape(rw, value, (1, batch, width))


def unrolled(rw: Rewriter, op: Op, p: IntegerLstm, products: list[Value]) -> list[Value]:
    """Every step's output state [1, batch, output_width], in time order."""
    batch = tensor_type(products[0]).shape[1]
    out = tensor_type(op.results[0]).element
    k = step_constants(rw, p)
    h = integer_initial_state(rw, op.operands[OUTPUT_STATE], batch, p.output_width,
                      tensor_type(op.operands[OUTPUT_STATE]).element)
    c = integer_initial_state(rw, op.operands[CELL_STATE], batch, p.width, i16)
    outputs = []
    for product in products:
        h, c = integer_lstm_step(rw, p, k, product, h, c, out)
        outputs.append(h)
    return outputs


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
    outputs = unrolled(rw, op, p, integer_input_products(rw, p, x, time_major))
    return [sequence(rw, outputs, time_major)]


@pattern("tfl.lstm", kind="integer", types=("i8",), label="lstm_int8")
@integer_pattern
def lstm_int8(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """One step of the same kernel (lstm.cc's full kernel runs EvalInteger8x8_16 on a
    [batch, input] input as a time-major sequence of one step)."""
    if op.attrs.get("kernel_type", "FULL") != "FULL":
        return Failure(f"{op.name}: the {op.attrs['kernel_type']} kernel")
    p = integer_lstm(op, input_rank=2)
    if isinstance(p, Failure):
        return p
    if failure := require_static(op):
        return failure
    batch, width = tensor_type(op.operands[0]).shape
    step = build.reshape(rw, op.operands[0], (1, batch, width))
    outputs = unrolled(rw, op, p, integer_input_products(rw, p, step, time_major=True))
    return [build.reshape(rw, outputs[0], tensor_type(op.results[0]).shape)]
