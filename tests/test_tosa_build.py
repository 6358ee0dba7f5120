"""Build helpers: ops are checked against the op table and come out as TOSA 1.0 wants.

Expected operand orders and shapes come from the specification's argument
tables; expected stored zero points from two's complement (u8 128 is stored as
the i8 bit pattern -128, u16 32768 as the i16 pattern -32768).
"""

from __future__ import annotations

import numpy as np
import pytest

from tfl2tosa.errors import IRError
from tfl2tosa.ir import Builder, Graph, Module, ShapeType, TensorType, UniformQuantized
from tfl2tosa.ir.types import bf16, f32, i1, i4, i8, i16, i32, i48
from tfl2tosa.tosa import build as tb
from tfl2tosa.tosa.verify import verify

T = TensorType


@pytest.fixture
def graph() -> Graph:
    return Graph("main")


@pytest.fixture
def b(graph: Graph) -> Builder:
    return Builder(graph, loc="test")


def _module(graph: Graph, *outputs) -> Module:
    graph.set_outputs(list(outputs))
    module = Module()
    module.add_graph(graph)
    return module


def test_op_rejects_what_the_table_does_not_define(graph, b):
    x = graph.add_input("x", T((2,), f32))
    with pytest.raises(IRError, match="not a TOSA 1.0 operator"):
        tb.op(b, "tosa.relu", [x], x.type)
    with pytest.raises(IRError, match="takes 2 operands"):
        tb.op(b, "tosa.add", [x], x.type)
    with pytest.raises(IRError, match="has no attribute"):
        tb.op(b, "tosa.add", [x, x], x.type, fused_activation="RELU")
    with pytest.raises(IRError, match=r"needs attribute\(s\) \['axis'\]"):
        tb.op(b, "tosa.reduce_sum", [x], T((1,), f32))
    with pytest.raises(IRError, match="takes 1\\+ operands"):
        tb.op_results(b, "tosa.cond_if", [], [x.type], then_graph="a", else_graph="b")
    assert graph.ops == []  # nothing was created by the rejected calls


def test_optional_attributes_may_be_left_out(graph, b):
    x = graph.add_input("x", T((2, 3), f32))
    y = tb.op(b, "tosa.reduce_max", [x], T((2, 1), f32), axis=1)
    assert y.owner.attrs == {"axis": 1}  # nan_mode defaults to PROPAGATE
    assert verify(_module(graph, y)) == []


def test_const_infers_the_element_type(b):
    assert tb.const(b, np.zeros((2, 3), np.float32)).type == T((2, 3), f32)
    assert tb.const(b, np.array([True, False])).type.element.name == "i1"
    assert tb.const(b, np.int8(4)).type == T((), i8)
    with pytest.raises(IRError, match="no TOSA element type"):
        tb.const(b, np.zeros(2, np.uint8))


def test_const_with_an_explicit_element(b):
    wide = tb.const(b, [1 << 40, -(1 << 40)], i48)
    assert wide.type == T((2,), i48)
    assert wide.owner.attrs["values"].dtype == np.int64
    nibble = tb.const(b, [-8, 7], i4)
    assert nibble.owner.attrs["values"].dtype == np.int8
    with pytest.raises(IRError, match="do not fit i4"):
        tb.const(b, [8], i4)
    with pytest.raises(IRError, match="do not fit"):
        tb.const(b, [300], i8)
    quantized = UniformQuantized(i8, f32, 0.5, -3)
    assert tb.const(b, [1, 2], quantized).type == T((2,), quantized)
    assert tb.const(b, [1.5], bf16).owner.attrs["values"].dtype.name == "bfloat16"


def test_const_shape_and_zero_points(b):
    shape = tb.const_shape(b, [1, 2, 3])
    assert shape.type == ShapeType(3)
    assert shape.owner.name == "tosa.const_shape" and shape.owner.attrs["values"] == [1, 2, 3]
    zp = tb.zero_point(b, -3, UniformQuantized(i8, f32, 0.1, -3))
    assert zp.type == T((1,), i8) and zp.owner.attrs["values"].tolist() == [-3]
    assert tb.zero_point(b, 128, i8).owner.attrs["values"].tolist() == [-128]
    assert tb.zero_point(b, 32768, i16).owner.attrs["values"].tolist() == [-32768]
    assert tb.zero_point(b, 0.0, f32).type == T((1,), f32)


def test_rescale_operands_in_specification_order(graph, b):
    x = graph.add_input("x", T((2, 3), i32))
    y = tb.rescale(b, x, [1 << 30, 1 << 29, 1 << 28], [31, 31, 31], 0, -2, i8,
                   rounding_mode="DOUBLE_ROUND")
    op = y.owner
    assert y.type == T((2, 3), i8)
    assert [v.owner.name for v in op.operands[1:]] == ["tosa.const"] * 4
    multiplier, shift, in_zp, out_zp = (v.owner.attrs["values"] for v in op.operands[1:])
    assert multiplier.dtype == np.int32 and multiplier.tolist() == [1 << 30, 1 << 29, 1 << 28]
    assert shift.dtype == np.int8 and shift.tolist() == [31, 31, 31]
    assert in_zp.dtype == np.int32 and in_zp.tolist() == [0]
    assert out_zp.dtype == np.int8 and out_zp.tolist() == [-2]
    assert op.attrs == {"scale32": True, "rounding_mode": "DOUBLE_ROUND", "per_channel": True,
                        "input_unsigned": False, "output_unsigned": False}
    assert verify(_module(graph, y)) == []


def test_rescale_16_bit_scale_and_unsigned_output(graph, b):
    x = graph.add_input("x", T((4,), i8))
    y = tb.rescale(b, x, 1 << 14, 14, -1, 128, i8, scale32=False, output_unsigned=True)
    multiplier = y.owner.operands[1].owner.attrs["values"]
    assert multiplier.dtype == np.int16 and y.owner.attrs["per_channel"] is False
    assert y.owner.operands[4].owner.attrs["values"].tolist() == [-128]
    assert verify(_module(graph, y)) == []


def test_layout_helpers_compute_result_shapes(graph, b):
    x = graph.add_input("x", T((2, 3, 4), i8))
    r = tb.reshape(b, x, [6, 4])
    t = tb.transpose(b, x, [2, 0, 1])
    p = tb.pad(b, x, [0, 1, 2, 0, 1, 1], pad_const=-128)
    s = tb.slice(b, x, [1, 0, 2], [1, 3, 2])
    assert (r.type.shape, t.type.shape, p.type.shape, s.type.shape) == (
        (6, 4), (4, 2, 3), (3, 5, 6), (1, 3, 2))
    assert p.owner.operands[2].owner.attrs["values"].tolist() == [-128]
    assert [v.owner.name for v in p.owner.operands[1:]] == ["tosa.const_shape", "tosa.const"]
    with pytest.raises(IRError, match="padding"):
        tb.pad(b, x, [0, 1])
    assert verify(_module(graph, r, t, p, s)) == []


def test_mul_cast_clamp(graph, b):
    x = graph.add_input("x", T((2, 3), i16))
    y = graph.add_input("y", T((1, 3), i16))
    product = tb.mul(b, x, y)
    assert product.type == T((2, 3), i32)  # MUL of i16 gives i32
    shifted = tb.mul(b, product, product, shift=15)
    assert shifted.owner.operands[2].owner.attrs["values"].tolist() == [15]
    back = tb.cast(b, shifted, i16)
    clipped = tb.clamp(b, back, -100, 100)
    assert clipped.owner.attrs == {"min_val": -100, "max_val": 100, "nan_mode": "PROPAGATE"}
    assert verify(_module(graph, clipped)) == []
    with pytest.raises(IRError, match="equal ranks"):
        tb.mul(b, x, graph.add_input("z", T((3,), i16)))


def test_one_value_and_small_constants_are_made_once_per_op_list(graph, b):
    """Zero points and per-tensor multipliers repeat op after op: the second
    request returns the first constant, and burns the name a copy would have
    taken, so later names are those a CSE of copies would leave."""
    first = tb.zero_point(b, 3, i8)
    again = tb.zero_point(b, 3, i8)
    other = tb.zero_point(b, 4, i8)
    assert again is first and other is not first
    assert [op.opname for op in graph.ops].count("const") == 2
    wider = tb.const(b, np.array([3], dtype=np.int16), i16)
    assert wider is not first                       # same value, other type
    # Small arrays (per-channel multipliers and shifts) are shared the same way;
    # weights are one op per request, left to CSE.
    vector = tb.const(b, np.array([3, 3], dtype=np.int8), i8)
    assert tb.const(b, np.array([3, 3], dtype=np.int8), i8) is vector
    assert tb.const(b, np.array([3, 3], dtype=np.int16), i16) is not vector
    weights = np.zeros(8192, np.int8)
    assert tb.const(b, weights, i8) is not tb.const(b, weights, i8)
    assert tb.const(b, np.array([5], dtype=np.int8)).name == "const_9"


def test_shape_constants_are_made_once_per_op_list(graph, b):
    """Reshapes and slices ask for the same shapes again and again: the second
    request returns the first `tosa.const_shape` and burns the name a copy would
    have taken (the name CSE's merge of copies would leave the next op)."""
    first = tb.const_shape(b, [1, 4])
    assert tb.const_shape(b, (1, 4)) is first
    other = tb.const_shape(b, [4, 1])
    assert other is not first and other.name == "const_shape_2"
    assert [op.name for op in graph.ops] == ["tosa.const_shape"] * 2
    # A one-value constant of the same numbers is another op.
    assert tb.const(b, np.array([1, 4], dtype=np.int64), i32).owner.name == "tosa.const"


def test_a_discarded_constant_is_not_handed_out_again(graph, b):
    from tfl2tosa.ir.rewrite import discard_since

    mark = len(graph.ops)
    dropped = tb.zero_point(b, 7, i8)
    discard_since(graph.ops, mark)
    again = tb.zero_point(b, 7, i8)
    assert again is not dropped and again.owner in graph.ops


def test_a_repeated_one_value_request_is_still_checked_and_kept_apart(graph, b):
    """A request seen before skips its conversion, never its outcome: values that
    do not fit still raise, equal values given in another dtype are the same
    constant, and each graph's constant holds its own array."""
    for _ in range(2):
        with pytest.raises(IRError, match="do not fit i8"):
            tb.const(b, np.array([300], dtype=np.int64), i8)
    first = tb.const(b, np.array([44], dtype=np.int64), i8)
    assert tb.const(b, np.array([44], dtype=np.int32), i8) is first
    other_graph = Graph("other")
    elsewhere = tb.const(Builder(other_graph), np.array([44], dtype=np.int64), i8)
    assert elsewhere is not first
    assert elsewhere.owner.attrs["values"] is not first.owner.attrs["values"]
    assert first.owner.attrs["values"].dtype == np.int8
    assert first.owner.attrs["values"].tolist() == [44]


def test_elementwise_scalars_keep_their_sign_and_broadcast(graph, b):
    """Scalars repeat in expressions and are handed out again; -0.0 is a value of
    its own (its reciprocal is -inf), and a [1, 1] scalar broadcasts to the other
    operand's shape."""
    e = tb.Elementwise(b, 2)
    x = graph.add_input("x", T((2, 3), f32))
    negative_zero, zero = e.like(-0.0, x), e.like(0.0, x)
    assert np.signbit(negative_zero.owner.attrs["values"]).all()
    assert not np.signbit(zero.owner.attrs["values"]).any()
    assert e.like(0.5, x) is e.like(0.5, x)
    assert e.add(x, e.like(0.5, x)).type == T((2, 3), f32)
    assert e.add(e.like(0.5, x), e.like(1.5, x)).type == T((1, 1), f32)
    assert e.equal(e.like(0.5, x), x).type == T((2, 3), i1)
    with pytest.raises(IRError, match="do not broadcast"):
        e.add(x, graph.add_input("y", T((3, 2), f32)))
