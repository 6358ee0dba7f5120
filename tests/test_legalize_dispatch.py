"""The driver's dispatch: which declared pattern kinds an op is handed to.

The table follows the declarations in legalize/registry.py: float patterns
take ops without quantized tensors, and those whose only quantized tensors
are constants at the operands they declare as weights; integer patterns
take every op with a quantized tensor; hybrid patterns only ops whose
quantized tensors are all constant weights; "any" patterns every op.
"""

from __future__ import annotations

import numpy as np
import pytest

from legalize.driver import is_quantized_op, quantized_weights, serves
from legalize.registry import Registered, pattern
from tfl2tosa.ir.core import Graph, Op
from tfl2tosa.ir.types import TensorType, UniformQuantized, f32, i8

Q = UniformQuantized(i8, f32, 0.5, 0)
X, W, Y = (1, 4), (3, 4), (1, 3)


def _fully_connected(x: str, w: str, y: str) -> Op:
    """FULLY_CONNECTED with input, weights and result of the given kinds:
    "f32", "q" (int8, run-time) or "q const" (an int8 constant)."""
    graph = Graph("main")

    def operand(name: str, kind: str, shape: tuple[int, ...]):  # type: ignore[no-untyped-def]
        if kind == "q const":
            const = Op("tosa.const", [], [TensorType(shape, Q)],
                       {"values": np.ones(shape, np.int8)})
            return graph.append(const).result
        return graph.add_input(name, TensorType(shape, Q if kind == "q" else f32))

    return Op("tfl.fully_connected", [operand("x", x, X), operand("w", w, W)],
              [TensorType(Y, Q if y == "q" else f32)])


def _entry(kind: str, weights: tuple[int, ...] = ()) -> Registered:
    return Registered(lambda op, rw: None, "p", kind, ("tfl.fully_connected",), (), weights)


OPS = {
    "float": ("f32", "f32", "f32"),
    "int8": ("q", "q const", "q"),
    "int8_activations_float_result": ("q", "q const", "f32"),
    "hybrid_weights": ("f32", "q const", "f32"),
    "runtime_int8_weights": ("f32", "q", "f32"),
}
KINDS = {
    "float": _entry("float"),
    "float_declaring_weights": _entry("float", (1,)),
    "float_declaring_other_weights": _entry("float", (0,)),
    "integer": _entry("integer"),
    "hybrid": _entry("hybrid"),
    "any": _entry("any"),
}
SERVED = {
    "float": {"float", "float_declaring_weights", "float_declaring_other_weights", "any"},
    "int8": {"integer", "any"},
    "int8_activations_float_result": {"integer", "any"},
    "hybrid_weights": {"float_declaring_weights", "integer", "hybrid", "any"},
    "runtime_int8_weights": {"integer", "any"},
}


@pytest.mark.parametrize("op_case", OPS)
def test_each_kind_serves_the_ops_it_declares(op_case: str) -> None:
    op = _fully_connected(*OPS[op_case])
    quantized = is_quantized_op(op)
    weights = quantized_weights(op) if quantized else None
    served = {name for name, entry in KINDS.items() if serves(entry, quantized, weights)}
    assert served == SERVED[op_case]


def test_only_a_float_pattern_declares_weights() -> None:
    with pytest.raises(ValueError, match="float pattern"):
        pattern("tfl.fully_connected", kind="integer", weights=(1,))
    with pytest.raises(ValueError, match="kind"):
        pattern("tfl.fully_connected", kind="int8")


def test_element_signature_spells_each_type_and_shortens_per_axis_scales() -> None:
    """The report's `types`: per-tensor types in full, a per-axis type by its
    count of scales; the same text however often a type is spelt."""
    from legalize.driver import element_signature
    from tfl2tosa.ir.types import UniformQuantizedPerAxis

    graph = Graph("main")
    per_axis = UniformQuantizedPerAxis(i8, f32, 0, (0.5, 0.25, 0.125), (0, 0, 0))
    w = graph.append(Op("tosa.const", [], [TensorType(W, per_axis)],
                        {"values": np.ones(W, np.int8)})).result
    x = graph.add_input("x", TensorType(X, Q))
    op = Op("tfl.fully_connected", [x, w], [TensorType(Y, Q)])
    expected = ("!quant.uniform<i8:f32, 0.5>,!quant.uniform<i8:f32:0, {3 scales}> -> "
                "!quant.uniform<i8:f32, 0.5>")
    assert element_signature(op) == element_signature(op) == expected
