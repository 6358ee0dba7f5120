"""Patterns for TFL recurrent ops, unrolled over their static sequence length:
UNIDIRECTIONAL_SEQUENCE_LSTM, BIDIRECTIONAL_SEQUENCE_LSTM, LSTM,
UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN, RNN; and the
`tfl.variable` state tensors they start from.

The arithmetic follows TFLite's float kernels step by step
(kernels/lstm_eval.cc `LstmStepFloat`, kernels/internal/kernel_utils.cc
`RnnBatchStep`):

    gate   = bias + W_x x_t + W_h h_(t-1)  [+ w_c * c for peephole i, f]
             (layer norm: normalize(W_x x_t + W_h h_(t-1) [+ peephole]) * ln + bias)
    i, f   = sigmoid(gate_i), sigmoid(gate_f)      (CIFG: i = 1 - f)
    g      = act(gate_g)                           (act: fused_activation_function)
    c_t    = clip(f * c_(t-1) + g * i, cell_clip)  (clip only when cell_clip > 0)
    o      = sigmoid(gate_o [+ w_co * c_t])
    h_t    = o * act(c_t), then projection: clip(P h_t + p_bias, proj_clip)
    RNN:     h_t = act(bias + W_x x_t + W_h h_(t-1))

The input products of all time steps are one MATMUL (bias added there, as
TFLite starts each gate from its bias); each step adds one recurrent MATMUL
of the four gates' stacked weights and slices the gates apart. A weight
matrix [rows, cols] is used transposed, as MATMUL's [1, cols, rows] operand
(folded at conversion time when constant). Quantized constant weights
(dynamic-range models) are dequantized at conversion time, or, for the
hybrid patterns of legalize.hybrid, the products are TFLite's hybrid ones:
input and state rows quantized at run time, int8 MATMULs (`_product`).

State: TFLite keeps the output and cell state in variable tensors that its
kernels overwrite, so a TFLite interpreter carries the state from one
invocation into the next. The TOSA graph starts every run from the state
operands' initial values (`tfl.variable` -> a constant of its fill value),
which is TFLite's first invocation after AllocateTensors or
ResetVariableTensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from legalize.common import (
    constant_value,
    fused_activation,
    is_none,
    require_static,
    scalar,
    tensor_type,
)
from legalize.conv import require_float_activations
from legalize.quantized import dequantized_values
from legalize.registry import pattern
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import ElementType, TensorType, is_quantized, numpy_dtype
from tfl2tosa.tosa import build

# ---------------------------------------------------------------------------
# Helpers (candidates for legalize/common.py)


def activation(rw: Rewriter, x: Value, name: str | None) -> Value | Failure:
    """TFLite's ApplyActivationToVector: the RELU family, TANH and SIGMOID.

    Unlike a kernel's fused-activation clamp (which ignores TANH), the recurrent
    kernels really apply TANH and SIGMOID to their gates and cell state.
    """
    if name == "SIGMOID":
        return build.op(rw, "tosa.sigmoid", [x], tensor_type(x))
    if name == "TANH":
        return build.op(rw, "tosa.tanh", [x], tensor_type(x))
    return fused_activation(rw, x, name)


def _add(rw: Rewriter, a: Value, b: Value) -> Value:
    shape = tuple(max(p, q) for p, q in zip(tensor_type(a).shape, tensor_type(b).shape))
    return build.op(rw, "tosa.add", [a, b], tensor_type(a).with_shape(shape))


def _sub(rw: Rewriter, a: Value, b: Value) -> Value:
    shape = tuple(max(p, q) for p, q in zip(tensor_type(a).shape, tensor_type(b).shape))
    return build.op(rw, "tosa.sub", [a, b], tensor_type(a).with_shape(shape))


def _clip(rw: Rewriter, x: Value, bound: float) -> Value:
    """TFLite's ClipVector when the bound is positive (a bound of 0 means off)."""
    return build.clamp(rw, x, -bound, bound) if bound > 0 else x


def _matmul(rw: Rewriter, a: Value, b: Value) -> Value:
    """[1, M, K] x [1, K, N] -> [1, M, N] in float."""
    elem = tensor_type(a).element
    m, n = tensor_type(a).shape[1], tensor_type(b).shape[2]
    return build.op(rw, "tosa.matmul", [a, b, build.zero_point(rw, 0.0, elem),
                                        build.zero_point(rw, 0.0, elem)],
                    TensorType((1, m, n), elem))


def _product(rw: Rewriter, d: Direction, name: str, x: Value) -> Value:
    """x [1, M, K] times the direction's weights `name` ("input_weights",
    "recurrent_weights" or "projection"): a float MATMUL, or TFLite's hybrid
    product (legalize.hybrid) when the direction emulates the hybrid kernel."""
    if d.hybrid is None or name not in d.hybrid:
        return _matmul(rw, x, getattr(d, name))
    from legalize.hybrid import hybrid_product

    values, scales = d.hybrid[name]
    _, m, k = tensor_type(x).shape
    rows = hybrid_product(rw, build.reshape(rw, x, (m, k)), values, scales, d.asymmetric)
    return build.reshape(rw, rows, (1, m, values.shape[1]))


def _gate_slice(rw: Rewriter, gates: Value, index: int, width: int) -> Value:
    rows = tensor_type(gates).shape[1]
    return build.slice(rw, gates, [0, 0, index * width], [1, rows, width])


# ---------------------------------------------------------------------------
# Operands


def _array(value: Value) -> np.ndarray | None:
    """A constant operand as float values (quantized constants dequantized)."""
    array = constant_value(value)
    if array is None:
        return None
    t = tensor_type(value)
    if is_quantized(t.element):
        if value.owner is not None and value.owner.attrs.get("packed_int4"):
            return None
        return dequantized_values(array, t.element)
    return np.asarray(array)


def stacked_transposed(rw: Rewriter, weights: Sequence[Value], elem: ElementType
                       ) -> Value | Failure:
    """Weight matrices [rows_k, cols] stacked along rows, as MATMUL's [1, cols, sum rows].

    Constants (quantized ones dequantized) are stacked at conversion time;
    run-time weights through CONCAT and TRANSPOSE.
    """
    arrays = [_array(w) for w in weights]
    if all(a is not None for a in arrays):
        stacked = np.concatenate([np.asarray(a).reshape(a.shape[0], -1) for a in arrays])
        return build.const(rw, stacked.T[np.newaxis].astype(numpy_dtype(elem)), elem)
    if any(is_quantized(tensor_type(w).element) for w in weights):
        return Failure("quantized weights that are not constants")
    rows = sum(tensor_type(w).shape[0] for w in weights)
    cols = tensor_type(weights[0]).shape[1]
    joined = weights[0] if len(weights) == 1 else build.op(
        rw, "tosa.concat", list(weights), TensorType((rows, cols), elem), axis=0)
    return build.reshape(rw, build.transpose(rw, joined, (1, 0)), (1, cols, rows))


def vector(rw: Rewriter, values: Sequence[Value], elem: ElementType) -> Value | Failure:
    """One-dimensional operands joined end to end, as a [1, 1, total] tensor."""
    arrays = [_array(v) for v in values]
    if all(a is not None for a in arrays):
        joined = np.concatenate([np.ravel(a) for a in arrays])
        return build.const(rw, joined.reshape(1, 1, -1).astype(numpy_dtype(elem)), elem)
    if any(is_quantized(tensor_type(v).element) for v in values):
        return Failure("quantized vectors that are not constants")
    parts = [build.reshape(rw, v, (1, 1, tensor_type(v).num_elements)) for v in values]
    total = sum(tensor_type(p).shape[2] for p in parts)
    return parts[0] if len(parts) == 1 else build.op(
        rw, "tosa.concat", parts, TensorType((1, 1, total), elem), axis=2)


def initial_state(rw: Rewriter, value: Value, batch: int, width: int,
                  elem: ElementType) -> Value | Failure:
    """A state operand as [1, batch, width]."""
    array = _array(value)
    if array is not None:
        return build.const(rw, np.asarray(array).reshape(1, batch, width)
                           .astype(numpy_dtype(elem)), elem)
    if is_quantized(tensor_type(value).element):
        return Failure("a quantized state tensor needs the integer path")
    return build.reshape(rw, value, (1, batch, width))


# ---------------------------------------------------------------------------
# One direction of an LSTM or RNN, as weights ready for the step loop


_LSTM_GATES = ("input", "forget", "cell", "output")


@dataclass(frozen=True)
class LstmLayout:
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


# kernels/lstm_shared.h (UNIDIRECTIONAL_SEQUENCE_LSTM, LSTM full kernel).
LSTM = LstmLayout((1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11), (12, 13, 14, 15), 16, 17, 18, 19,
                  (20, 21, 22, 23))
# kernels/bidirectional_sequence_lstm.cc: forward 1-17, backward 18-34, states 35-38.
LSTM_FORWARD = LstmLayout((1, 2, 3, 4), (5, 6, 7, 8), (9, 10, 11), (12, 13, 14, 15), 16, 17,
                          35, 36, None)
LSTM_BACKWARD = LstmLayout((18, 19, 20, 21), (22, 23, 24, 25), (26, 27, 28), (29, 30, 31, 32),
                           33, 34, 37, 38, None)


@dataclass
class Direction:
    """One direction's weights as TOSA values.

    `input_weights` / `recurrent_weights`: [1, cols, gates * width] MATMUL
    operands; `bias`: [1, 1, gates * width] (None with layer norm, which adds
    the per-gate biases after normalizing).
    """

    gates: tuple[str, ...]
    width: int                      # n_cell (LSTM) or num_units (RNN)
    output_width: int               # n_output (after projection)
    input_weights: Value
    recurrent_weights: Value
    bias: Value | None
    h0: Value
    c0: Value | None = None
    peephole: dict[str, Value] | None = None
    layer_norm: dict[str, Value] | None = None
    gate_bias: dict[str, Value] | None = None
    projection: Value | None = None
    projection_bias: Value | None = None
    # Emulating TFLite's hybrid kernel: "input_weights", "recurrent_weights",
    # "projection" as int8 [K, N] MATMUL operands and one float32 scale per column.
    hybrid: dict[str, tuple[np.ndarray, np.ndarray]] | None = None
    asymmetric: bool = False


def _present(op: Op, index: int) -> bool:
    return index < len(op.operands) and not is_none(op.operands[index])


def _vector_operand(rw: Rewriter, op: Op, index: int, elem: ElementType) -> Value | Failure:
    return vector(rw, [op.operands[index]], elem)


def lstm_direction(rw: Rewriter, op: Op, layout: LstmLayout, batch: int,
                   elem: ElementType) -> Direction | Failure:
    """The weights of one LSTM direction; CIFG (no input gate), peephole,
    projection and layer norm variants are recognized by their present operands."""
    cifg = not _present(op, layout.input_weights[0])
    gates = _LSTM_GATES[1:] if cifg else _LSTM_GATES
    first = 1 if cifg else 0
    input_ops = [op.operands[i] for i in layout.input_weights[first:]]
    recurrent_ops = [op.operands[i] for i in layout.recurrent_weights[first:]]
    width, output_width = tensor_type(recurrent_ops[0]).shape
    layer_norm = layout.layer_norm is not None and _present(op, layout.layer_norm[1])
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
        parts["layer_norm"] = {g: _vector_operand(rw, op, i, elem) for g, i in zip(gates, norms)}
        parts["gate_bias"] = {g: vector(rw, [b], elem) for g, b in zip(gates, bias_ops)}
    else:
        parts["bias"] = vector(rw, bias_ops, elem)
    if _present(op, layout.peephole[2]):
        peephole_gates = ("forget", "output") if cifg else ("input", "forget", "output")
        indices = layout.peephole[1:] if cifg else layout.peephole
        parts["peephole"] = {g: _vector_operand(rw, op, i, elem)
                             for g, i in zip(peephole_gates, indices)}
    if _present(op, layout.projection_weights):
        parts["projection"] = stacked_transposed(rw, [op.operands[layout.projection_weights]],
                                                 elem)
        if _present(op, layout.projection_bias):
            parts["projection_bias"] = _vector_operand(rw, op, layout.projection_bias, elem)
    elif output_width != width:
        return Failure(f"{op.name}: output size {output_width} differs from cell size "
                       f"{width} without projection weights")
    for value in _flatten(parts.values()):
        if isinstance(value, Failure):
            return Failure(f"{op.name}: {value.reason}")
    return Direction(gates, width, output_width, **parts)  # type: ignore[arg-type]


def _flatten(values: object) -> list[object]:
    flat: list[object] = []
    for value in values:  # type: ignore[attr-defined]
        flat.extend(value.values() if isinstance(value, dict) else [value])
    return flat


def rnn_direction(rw: Rewriter, op: Op, indices: tuple[int, int, int, int], batch: int,
                  elem: ElementType) -> Direction | Failure:
    """The weights of one RNN direction: (weights, recurrent weights, bias, hidden state)."""
    weights, recurrent, bias, state = (op.operands[i] for i in indices)
    units = tensor_type(recurrent).shape[0]
    parts = {
        "input_weights": stacked_transposed(rw, [weights], elem),
        "recurrent_weights": stacked_transposed(rw, [recurrent], elem),
        "bias": vector(rw, [bias], elem),
        "h0": initial_state(rw, state, batch, units, elem),
    }
    for value in parts.values():
        if isinstance(value, Failure):
            return Failure(f"{op.name}: {value.reason}")
    return Direction(("rnn",), units, units, **parts)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Unrolling


def input_products(rw: Rewriter, x: Value, direction: Direction,
                   time_major: bool) -> list[Value]:
    """W_x x_t (+ bias) of every time step as [1, batch, gates * width], in time order:
    one MATMUL over all steps, then a SLICE per step."""
    shape = tensor_type(x).shape
    columns = tensor_type(direction.input_weights).shape[2]
    flat = build.reshape(rw, x, (1, shape[0] * shape[1], shape[2]))
    products = _product(rw, direction, "input_weights", flat)
    if direction.bias is not None:
        products = _add(rw, products, direction.bias)
    products = build.reshape(rw, products, (shape[0], shape[1], columns))
    return split_steps(rw, products, time_major)


def split_steps(rw: Rewriter, values: Value, time_major: bool) -> list[Value]:
    """A [T, batch, C] (time major) or [batch, T, C] sequence as T tensors
    [1, batch, C], in time order."""
    shape = tensor_type(values).shape
    steps, batch = (shape[0], shape[1]) if time_major else (shape[1], shape[0])
    columns = shape[2]
    per_step = []
    for t in range(steps):
        if time_major:
            per_step.append(build.slice(rw, values, [t, 0, 0], [1, batch, columns]))
        else:
            step = build.slice(rw, values, [0, t, 0], [batch, 1, columns])
            per_step.append(build.reshape(rw, step, (1, batch, columns)))
    return per_step


def mean_stddev_normalization(rw: Rewriter, x: Value) -> Value:
    """TFLite's MeanStddevNormalization over the last axis:
    (x - mean) / sqrt(mean((x - mean)^2) + 1e-8), the division as RSQRT."""
    t = tensor_type(x)
    rank, size = len(t.shape), t.shape[-1]
    reduced = t.with_shape((*t.shape[:-1], 1))
    inverse_size = scalar(rw, 1.0 / size, t.element, rank)
    total = build.op(rw, "tosa.reduce_sum", [x], reduced, axis=rank - 1)
    diff = _sub(rw, x, build.mul(rw, total, inverse_size))
    squares = build.op(rw, "tosa.reduce_sum", [build.mul(rw, diff, diff)], reduced,
                       axis=rank - 1)
    variance = build.mul(rw, squares, inverse_size)
    epsilon = scalar(rw, 1e-8, t.element, rank)
    scale = build.op(rw, "tosa.rsqrt", [_add(rw, variance, epsilon)], reduced)
    return build.mul(rw, diff, scale, result_type=t)


def _gate(rw: Rewriter, d: Direction, gates: Value, name: str, cell: Value | None,
          act: str | None) -> Value | Failure:
    """One gate's pre-activation (peephole, layer norm) through its activation."""
    value = _gate_slice(rw, gates, d.gates.index(name), d.width)
    if d.peephole is not None and name in d.peephole and cell is not None:
        value = _add(rw, value, build.mul(rw, d.peephole[name], cell,
                                          result_type=tensor_type(value)))
    if d.layer_norm is not None:
        normalized = mean_stddev_normalization(rw, value)
        scaled = build.mul(rw, normalized, d.layer_norm[name], result_type=tensor_type(value))
        value = _add(rw, scaled, d.gate_bias[name])  # type: ignore[index]
    return activation(rw, value, act)


def lstm_step(rw: Rewriter, op: Op, d: Direction, product: Value, h: Value,
              c: Value) -> tuple[Value, Value] | Failure:
    """One LstmStepFloat: returns (h_t, c_t), both [1, batch, width]."""
    act = op.attrs.get("fused_activation_function", "TANH")
    gates = _add(rw, product, _product(rw, d, "recurrent_weights", h))
    forget = _gate(rw, d, gates, "forget", c, "SIGMOID")
    candidate = _gate(rw, d, gates, "cell", None, act)
    if "input" in d.gates:
        input_gate = _gate(rw, d, gates, "input", c, "SIGMOID")
    elif not isinstance(forget, Failure):
        one = scalar(rw, 1.0, tensor_type(forget).element, 3)
        input_gate = _sub(rw, one, forget)
    else:
        input_gate = forget
    for value in (forget, candidate, input_gate):
        if isinstance(value, Failure):
            return value
    cell = _add(rw, build.mul(rw, forget, c), build.mul(rw, candidate, input_gate))
    cell = _clip(rw, cell, float(op.attrs.get("cell_clip", 0.0)))
    output_gate = _gate(rw, d, gates, "output", cell, "SIGMOID")
    squashed = activation(rw, cell, act)
    if isinstance(output_gate, Failure) or isinstance(squashed, Failure):
        return output_gate if isinstance(output_gate, Failure) else squashed
    hidden = build.mul(rw, output_gate, squashed)
    if d.projection is not None:
        hidden = _product(rw, d, "projection", hidden)
        if d.projection_bias is not None:
            hidden = _add(rw, hidden, d.projection_bias)
        hidden = _clip(rw, hidden, float(op.attrs.get("proj_clip", 0.0)))
    return hidden, cell


def rnn_step(rw: Rewriter, op: Op, d: Direction, product: Value, h: Value,
             c: Value | None) -> tuple[Value, None] | Failure:
    """One RnnBatchStep: h_t = act(bias + W_x x_t + W_h h_(t-1))."""
    total = _add(rw, product, _product(rw, d, "recurrent_weights", h))
    hidden = activation(rw, total, op.attrs.get("fused_activation_function"))
    return hidden if isinstance(hidden, Failure) else (hidden, None)


def unroll(rw: Rewriter, op: Op, d: Direction, products: list[Value],
           reverse: bool = False) -> list[Value] | Failure:
    """Every step's output h_t ([1, batch, output_width]) in time order; a
    reverse direction walks the steps from the last, as TFLite's backward cell."""
    step = rnn_step if d.c0 is None else lstm_step
    h, c = d.h0, d.c0
    outputs = []
    for product in (reversed(products) if reverse else products):
        result = step(rw, op, d, product, h, c)
        if isinstance(result, Failure):
            return result
        h, c = result
        outputs.append(h)
    return outputs[::-1] if reverse else outputs


def sequence(rw: Rewriter, outputs: list[Value], time_major: bool) -> Value:
    """Per-step [1, batch, width] outputs as [T, batch, width] or [batch, T, width]."""
    _, batch, width = tensor_type(outputs[0]).shape
    elem = tensor_type(outputs[0]).element
    steps = len(outputs)
    stacked = outputs[0] if steps == 1 else build.op(
        rw, "tosa.concat", outputs, TensorType((steps, batch, width), elem), axis=0)
    if time_major:
        return stacked
    if batch == 1 or steps == 1:
        return build.reshape(rw, stacked, (batch, steps, width))
    return build.transpose(rw, stacked, (1, 0, 2))


def unrolled_sequence(rw: Rewriter, op: Op, d: Direction, x: Value, time_major: bool,
                      reverse: bool = False) -> Value | Failure:
    """`d` unrolled over the time steps of the sequence `x`, its outputs stacked
    back into a sequence of the same layout."""
    outputs = unroll(rw, op, d, input_products(rw, x, d, time_major), reverse)
    if isinstance(outputs, Failure):
        return outputs
    return sequence(rw, outputs, time_major)


def single_step(rw: Rewriter, op: Op, d: Direction, x: Value) -> list[Value] | Failure:
    """`d` on one [batch, input] step (a time-major sequence of length 1),
    reshaped to the op's result."""
    batch, width = tensor_type(x).shape
    step_input = build.reshape(rw, x, (1, batch, width))
    outputs = unroll(rw, op, d, input_products(rw, step_input, d, time_major=True))
    if isinstance(outputs, Failure):
        return outputs
    return [build.reshape(rw, outputs[0], tensor_type(op.results[0]).shape)]


def _concat_last(rw: Rewriter, a: Value, b: Value) -> Value:
    ta, tb = tensor_type(a), tensor_type(b)
    shape = (*ta.shape[:-1], ta.shape[-1] + tb.shape[-1])
    return build.op(rw, "tosa.concat", [a, b], ta.with_shape(shape), axis=len(shape) - 1)


# ---------------------------------------------------------------------------
# Checks shared by the patterns


def _float_sequence_op(op: Op, weight_indices: Sequence[int]) -> Failure | None:
    failure = require_float_activations(op, weights=weight_indices)
    if failure is not None:
        return failure
    failure = require_static(op)
    if failure is not None:
        return failure
    if len(tensor_type(op.operands[0]).shape) != 3:
        return Failure(f"{op.name}: input must be [batch, time, features] or time major")
    return None


def _no_aux_input(op: Op, index: int) -> Failure | None:
    if _present(op, index):
        return Failure(f"{op.name}: an auxiliary input (stacked bidirectional layers) is "
                       "not supported")
    return None


def _steps_and_batch(x: Value, time_major: bool) -> tuple[int, int]:
    shape = tensor_type(x).shape
    return (shape[0], shape[1]) if time_major else (shape[1], shape[0])


def _result_element(op: Op) -> ElementType:
    return tensor_type(op.results[0]).element


# Operand indices that may hold (quantized, constant) weights, per op.
_LSTM_WEIGHTS = tuple(i for i in range(1, 18)) + (20, 21, 22, 23)
_BIDI_LSTM_WEIGHTS = tuple(range(1, 35)) + tuple(range(40, 48))
_BIDI_RNN_WEIGHTS = (1, 2, 3, 5, 6, 7, 10, 11)


# ---------------------------------------------------------------------------
# Patterns


def emulating(op: Op, d: Direction, weights: dict[str, Sequence[int]]) -> Direction | Failure:
    """`d` with its products computed as TFLite's hybrid kernels compute them
    (legalize.hybrid): `weights` names the operands of each product."""
    from legalize.hybrid import stacked_int8

    hybrid = {}
    for name, indices in weights.items():
        stacked = stacked_int8(op, indices)
        if isinstance(stacked, Failure):
            return stacked
        hybrid[name] = stacked
    return replace(d, hybrid=hybrid,
                   asymmetric=bool(op.attrs.get("asymmetric_quantize_inputs", False)))


def _lstm_products(op: Op, layout: LstmLayout) -> dict[str, Sequence[int]]:
    """The weight operands of an LSTM direction's products (no input gate: CIFG)."""
    first = 0 if _present(op, layout.input_weights[0]) else 1
    weights: dict[str, Sequence[int]] = {"input_weights": layout.input_weights[first:],
                                         "recurrent_weights": layout.recurrent_weights[first:]}
    if _present(op, layout.projection_weights):
        weights["projection"] = (layout.projection_weights,)
    return weights


def _direction(op: Op, d: Direction | Failure, weights: dict[str, Sequence[int]],
               emulate: bool) -> Direction | Failure:
    return emulating(op, d, weights) if emulate and not isinstance(d, Failure) else d


@pattern("tfl.unidirectional_sequence_lstm", types=("f32",), weights=_LSTM_WEIGHTS)
def unidirectional_sequence_lstm(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """The LSTM unrolled over the time axis (see the module docstring)."""
    return lower_unidirectional_lstm(op, rw, emulate=False)


def lower_unidirectional_lstm(op: Op, rw: Rewriter, emulate: bool) -> list[Value] | Failure:
    failure = _float_sequence_op(op, _LSTM_WEIGHTS)
    if failure is not None:
        return failure
    if op.attrs.get("diagonal_recurrent_tensors"):
        return Failure(f"{op.name}: diagonal recurrent weights are not supported")
    if len(op.results) != 1:
        return Failure(f"{op.name}: {len(op.results)} results (only the output is supported)")
    x, time_major = op.operands[0], bool(op.attrs.get("time_major", False))
    _, batch = _steps_and_batch(x, time_major)
    d = _direction(op, lstm_direction(rw, op, LSTM, batch, _result_element(op)),
                   _lstm_products(op, LSTM), emulate)
    if isinstance(d, Failure):
        return d
    output = unrolled_sequence(rw, op, d, x, time_major)
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
    d = _direction(op, lstm_direction(rw, op, LSTM, shape[0], _result_element(op)),
                   _lstm_products(op, LSTM), emulate)
    if isinstance(d, Failure):
        return d
    return single_step(rw, op, d, x)


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
    for failure in (_float_sequence_op(op, _BIDI_LSTM_WEIGHTS), _no_aux_input(op, 39)):
        if failure is not None:
            return failure
    x, time_major = op.operands[0], bool(op.attrs.get("time_major", True))
    _, batch = _steps_and_batch(x, time_major)
    elem = _result_element(op)
    results = []
    for layout, reverse in ((LSTM_FORWARD, False), (LSTM_BACKWARD, True)):
        d = _direction(op, lstm_direction(rw, op, layout, batch, elem),
                       _lstm_products(op, layout), emulate)
        if isinstance(d, Failure):
            return d
        output = unrolled_sequence(rw, op, d, x, time_major, reverse)
        if isinstance(output, Failure):
            return output
        results.append(output)
    return _bidirectional_results(rw, op, results)


def _bidirectional_results(rw: Rewriter, op: Op, results: list[Value]) -> list[Value] | Failure:
    if op.attrs.get("merge_outputs", False):
        if len(op.results) != 1:
            return Failure(f"{op.name}: merge_outputs with {len(op.results)} results")
        return [_concat_last(rw, *results)]
    if len(op.results) != 2:
        return Failure(f"{op.name}: {len(op.results)} results for two directions")
    return results


@pattern("tfl.unidirectional_sequence_rnn", types=("f32",), weights=(1, 2, 3))
def unidirectional_sequence_rnn(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """The RNN cell unrolled over the time axis."""
    return lower_unidirectional_rnn(op, rw, emulate=False)


def lower_unidirectional_rnn(op: Op, rw: Rewriter, emulate: bool) -> list[Value] | Failure:
    failure = _float_sequence_op(op, (1, 2, 3))
    if failure is not None:
        return failure
    x, time_major = op.operands[0], bool(op.attrs.get("time_major", False))
    _, batch = _steps_and_batch(x, time_major)
    d = _direction(op, rnn_direction(rw, op, (1, 2, 3, 4), batch, _result_element(op)),
                   {"input_weights": (1,), "recurrent_weights": (2,)}, emulate)
    if isinstance(d, Failure):
        return d
    output = unrolled_sequence(rw, op, d, x, time_major)
    return output if isinstance(output, Failure) else [output]


@pattern("tfl.rnn", types=("f32",), weights=(1, 2, 3))
def rnn(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """One RNN step on [batch, input]."""
    failure = require_float_activations(op, weights=(1, 2, 3))
    if failure is not None:
        return failure
    x = op.operands[0]
    shape = tensor_type(x).shape
    if len(shape) != 2:
        return Failure(f"{op.name}: input must be [batch, input]")
    d = rnn_direction(rw, op, (1, 2, 3, 4), shape[0], _result_element(op))
    if isinstance(d, Failure):
        return d
    return single_step(rw, op, d, x)


@pattern("tfl.bidirectional_sequence_rnn", types=("f32",),
         weights=_BIDI_RNN_WEIGHTS)
def bidirectional_sequence_rnn(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Forward and backward RNNs over the same input (kernels/
    bidirectional_sequence_rnn.cc: forward 1-4, backward 5-8, aux input 9)."""
    return lower_bidirectional_rnn(op, rw, emulate=False)


def lower_bidirectional_rnn(op: Op, rw: Rewriter, emulate: bool) -> list[Value] | Failure:
    for failure in (_float_sequence_op(op, _BIDI_RNN_WEIGHTS), _no_aux_input(op, 9)):
        if failure is not None:
            return failure
    x, time_major = op.operands[0], bool(op.attrs.get("time_major", False))
    _, batch = _steps_and_batch(x, time_major)
    elem = _result_element(op)
    results = []
    for indices, reverse in (((1, 2, 3, 4), False), ((5, 6, 7, 8), True)):
        d = _direction(op, rnn_direction(rw, op, indices, batch, elem),
                       {"input_weights": indices[:1], "recurrent_weights": indices[1:2]},
                       emulate)
        if isinstance(d, Failure):
            return d
        output = unrolled_sequence(rw, op, d, x, time_major, reverse)
        if isinstance(output, Failure):
            return output
        results.append(output)
    return _bidirectional_results(rw, op, results)


@pattern("tfl.variable", kind="any", types=("f32", "f16", "i8", "i16"))
def variable(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """A TFLite variable tensor (recurrent state) as a constant of its fill
    value: the state every run of the TOSA graph starts from (see the module
    docstring on statefulness)."""
    t = tensor_type(op.results[0])
    if not t.is_static:
        return Failure(f"{op.name}: dynamic shape {t}")
    fill = op.attrs.get("fill_value", 0)
    storage = numpy_dtype(t.element)
    return [build.const(rw, np.full(t.shape, fill, dtype=storage), t.element)]
