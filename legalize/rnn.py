"""Patterns for TFL recurrent ops, unrolled over their static sequence length:
UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN, RNN, and the
`tfl.variable` state tensors they start from; and the unrolling that they and
the float LSTMs of legalize.lstm share (a direction's weights, its input
products, the step loop).

The arithmetic follows TFLite's float kernels step by step
(kernels/internal/kernel_utils.cc `RnnBatchStep`; the LSTM step is
legalize.lstm's):

    h_t = act(bias + W_x x_t + W_h h_(t-1))

The input products of all time steps are one MATMUL (bias added there, as
TFLite starts each gate from its bias); each step adds one recurrent MATMUL
of the gates' stacked weights and slices the gates apart. A weight
matrix [rows, cols] is used transposed, as MATMUL's [1, cols, rows] operand
(folded at conversion time when constant). Quantized constant weights
(dynamic-range models) are dequantized at conversion time, or, for the
hybrid patterns of legalize.hybrid, the products are TFLite's hybrid ones:
input and state rows quantized at run time, int8 MATMULs (`direction_product`).

State: TFLite keeps the output and cell state in variable tensors that its
kernels overwrite, so a TFLite interpreter carries the state from one
invocation into the next. The TOSA graph starts every run from the state
operands' initial values (`tfl.variable` -> a constant of its fill value),
which is TFLite's first invocation after AllocateTensors or
ResetVariableTensors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
import numpy as np

from legalize.common import (
    constant_value,
    fused_activation,
    is_none,
    require_static,
    tensor_type,
)
from legalize.conv import require_float_activations
from legalize.quantized import dequantized_values
from legalize.registry import pattern
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import ElementType, Record, TensorType, is_quantized, numpy_dtype
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


def broadcast_add(rw: Rewriter, a: Value, b: Value) -> Value:
    shape = tuple(max(p, q) for p, q in zip(tensor_type(a).shape, tensor_type(b).shape))
    return build.op(rw, "tosa.add", [a, b], tensor_type(a).with_shape(shape))


def broadcast_sub(rw: Rewriter, a: Value, b: Value) -> Value:
    shape = tuple(max(p, q) for p, q in zip(tensor_type(a).shape, tensor_type(b).shape))
    return build.op(rw, "tosa.sub", [a, b], tensor_type(a).with_shape(shape))


def clip_vector(rw: Rewriter, x: Value, bound: float) -> Value:
    """TFLite's ClipVector when the bound is positive (a bound of 0 means off)."""
    return build.clamp(rw, x, -bound, bound) if bound > 0 else x


def _matmul(rw: Rewriter, a: Value, b: Value) -> Value:
    """[1, M, K] x [1, K, N] -> [1, M, N] in float."""
    elem = tensor_type(a).element
    m, n = tensor_type(a).shape[1], tensor_type(b).shape[2]
    return build.op(rw, "tosa.matmul", [a, b, build.zero_point(rw, 0.0, elem),
                                        build.zero_point(rw, 0.0, elem)],
                    TensorType((1, m, n), elem))


def direction_product(rw: Rewriter, d: Direction, name: str, x: Value) -> Value:
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


def gate_slice(rw: Rewriter, gates: Value, index: int, width: int) -> Value:
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


class Direction(Record):
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
    c0: Value | None
    peephole: dict[str, Value] | None
    layer_norm: dict[str, Value] | None
    gate_bias: dict[str, Value] | None
    projection: Value | None
    projection_bias: Value | None
    # Emulating TFLite's hybrid kernel: "input_weights", "recurrent_weights",
    # "projection" as int8 [K, N] MATMUL operands and one float32 scale per column.
    hybrid: dict[str, tuple[np.ndarray, np.ndarray]] | None
    asymmetric: bool

    _fields = ("gates", "width", "output_width", "input_weights", "recurrent_weights", "bias",
               "h0", "c0", "peephole", "layer_norm", "gate_bias", "projection",
               "projection_bias", "hybrid", "asymmetric")

    def __init__(self, gates: tuple[str, ...], width: int, output_width: int,
                 input_weights: Value, recurrent_weights: Value, bias: Value | None, h0: Value,
                 c0: Value | None = None, peephole: dict[str, Value] | None = None,
                 layer_norm: dict[str, Value] | None = None,
                 gate_bias: dict[str, Value] | None = None, projection: Value | None = None,
                 projection_bias: Value | None = None,
                 hybrid: dict[str, tuple[np.ndarray, np.ndarray]] | None = None,
                 asymmetric: bool = False) -> None:
        self.gates = gates
        self.width = width
        self.output_width = output_width
        self.input_weights = input_weights
        self.recurrent_weights = recurrent_weights
        self.bias = bias
        self.h0 = h0
        self.c0 = c0
        self.peephole = peephole
        self.layer_norm = layer_norm
        self.gate_bias = gate_bias
        self.projection = projection
        self.projection_bias = projection_bias
        self.hybrid = hybrid
        self.asymmetric = asymmetric


# One time step of a direction: (rw, op, d, input product, h_(t-1), c_(t-1) or None)
# -> (h_t, c_t or None).
Step = Callable[[Rewriter, Op, Direction, Value, Value, "Value | None"],
                "tuple[Value, Value | None] | Failure"]


def present(op: Op, index: int) -> bool:
    return index < len(op.operands) and not is_none(op.operands[index])


def vector_operand(rw: Rewriter, op: Op, index: int, elem: ElementType) -> Value | Failure:
    return vector(rw, [op.operands[index]], elem)


def flatten_parts(values: object) -> list[object]:
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
    products = direction_product(rw, direction, "input_weights", flat)
    if direction.bias is not None:
        products = broadcast_add(rw, products, direction.bias)
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


def rnn_step(rw: Rewriter, op: Op, d: Direction, product: Value, h: Value,
             c: Value | None) -> tuple[Value, None] | Failure:
    """One RnnBatchStep: h_t = act(bias + W_x x_t + W_h h_(t-1))."""
    total = broadcast_add(rw, product, direction_product(rw, d, "recurrent_weights", h))
    hidden = activation(rw, total, op.attrs.get("fused_activation_function"))
    return hidden if isinstance(hidden, Failure) else (hidden, None)


def unroll(rw: Rewriter, op: Op, d: Direction, step: Step, products: list[Value],
           reverse: bool = False) -> list[Value] | Failure:
    """Every step's output h_t ([1, batch, output_width]) in time order; a
    reverse direction walks the steps from the last, as TFLite's backward cell."""
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


def unrolled_sequence(rw: Rewriter, op: Op, d: Direction, step: Step, x: Value,
                      time_major: bool, reverse: bool = False) -> Value | Failure:
    """`d` unrolled over the time steps of the sequence `x`, its outputs stacked
    back into a sequence of the same layout."""
    outputs = unroll(rw, op, d, step, input_products(rw, x, d, time_major), reverse)
    if isinstance(outputs, Failure):
        return outputs
    return sequence(rw, outputs, time_major)


def single_step(rw: Rewriter, op: Op, d: Direction, step: Step, x: Value
                ) -> list[Value] | Failure:
    """`d` on one [batch, input] step (a time-major sequence of length 1),
    reshaped to the op's result."""
    batch, width = tensor_type(x).shape
    step_input = build.reshape(rw, x, (1, batch, width))
    outputs = unroll(rw, op, d, step, input_products(rw, step_input, d, time_major=True))
    if isinstance(outputs, Failure):
        return outputs
    return [build.reshape(rw, outputs[0], tensor_type(op.results[0]).shape)]


def _concat_last(rw: Rewriter, a: Value, b: Value) -> Value:
    ta, tb = tensor_type(a), tensor_type(b)
    shape = (*ta.shape[:-1], ta.shape[-1] + tb.shape[-1])
    return build.op(rw, "tosa.concat", [a, b], ta.with_shape(shape), axis=len(shape) - 1)


# ---------------------------------------------------------------------------
# Checks shared by the patterns


def float_sequence_op(op: Op, weight_indices: Sequence[int]) -> Failure | None:
    failure = require_float_activations(op, weights=weight_indices)
    if failure is not None:
        return failure
    failure = require_static(op)
    if failure is not None:
        return failure
    if len(tensor_type(op.operands[0]).shape) != 3:
        return Failure(f"{op.name}: input must be [batch, time, features] or time major")
    return None


def no_aux_input(op: Op, index: int) -> Failure | None:
    if present(op, index):
        return Failure(f"{op.name}: an auxiliary input (stacked bidirectional layers) is "
                       "not supported")
    return None


def steps_and_batch(x: Value, time_major: bool) -> tuple[int, int]:
    shape = tensor_type(x).shape
    return (shape[0], shape[1]) if time_major else (shape[1], shape[0])


def result_element(op: Op) -> ElementType:
    return tensor_type(op.results[0]).element


# Operand indices that may hold (quantized, constant) weights, per op.
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
    return d.replace(hybrid=hybrid,
                     asymmetric=bool(op.attrs.get("asymmetric_quantize_inputs", False)))


def maybe_emulating(op: Op, d: Direction | Failure, weights: dict[str, Sequence[int]],
                    emulate: bool) -> Direction | Failure:
    """`d`, with TFLite's hybrid products when `emulate`."""
    return emulating(op, d, weights) if emulate and not isinstance(d, Failure) else d


def bidirectional_results(rw: Rewriter, op: Op, results: list[Value]) -> list[Value] | Failure:
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
    failure = float_sequence_op(op, (1, 2, 3))
    if failure is not None:
        return failure
    x, time_major = op.operands[0], bool(op.attrs.get("time_major", False))
    _, batch = steps_and_batch(x, time_major)
    d = maybe_emulating(op, rnn_direction(rw, op, (1, 2, 3, 4), batch, result_element(op)),
                   {"input_weights": (1,), "recurrent_weights": (2,)}, emulate)
    if isinstance(d, Failure):
        return d
    output = unrolled_sequence(rw, op, d, rnn_step, x, time_major)
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
    d = rnn_direction(rw, op, (1, 2, 3, 4), shape[0], result_element(op))
    if isinstance(d, Failure):
        return d
    return single_step(rw, op, d, rnn_step, x)


@pattern("tfl.bidirectional_sequence_rnn", types=("f32",),
         weights=_BIDI_RNN_WEIGHTS)
def bidirectional_sequence_rnn(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Forward and backward RNNs over the same input (kernels/
    bidirectional_sequence_rnn.cc: forward 1-4, backward 5-8, aux input 9)."""
    return lower_bidirectional_rnn(op, rw, emulate=False)


def lower_bidirectional_rnn(op: Op, rw: Rewriter, emulate: bool) -> list[Value] | Failure:
    for failure in (float_sequence_op(op, _BIDI_RNN_WEIGHTS), no_aux_input(op, 9)):
        if failure is not None:
            return failure
    x, time_major = op.operands[0], bool(op.attrs.get("time_major", False))
    _, batch = steps_and_batch(x, time_major)
    elem = result_element(op)
    results = []
    for indices, reverse in (((1, 2, 3, 4), False), ((5, 6, 7, 8), True)):
        d = maybe_emulating(op, rnn_direction(rw, op, indices, batch, elem),
                       {"input_weights": indices[:1], "recurrent_weights": indices[1:2]},
                       emulate)
        if isinstance(d, Failure):
            return d
        output = unrolled_sequence(rw, op, d, rnn_step, x, time_major, reverse)
        if isinstance(output, Failure):
            return output
        results.append(output)
    return bidirectional_results(rw, op, results)


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
