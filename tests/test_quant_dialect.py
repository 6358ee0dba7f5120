"""The quant dialect's casts: verification rules, builders and custom-form printing.

Each verification case is judged twice: by `verify_quant_op`, and by MLIR's
own quant dialect verifier (TensorFlow's embedded MLIR parses the printed op;
QuantOps.cpp in llvm-project holds the rules). They must agree.
"""

from __future__ import annotations

import pytest

from tfl2tosa.errors import IRError
from tfl2tosa.ir.builder import Builder
from tfl2tosa.ir.core import Graph, Module, Op
from tfl2tosa.ir.printer import print_module
from tfl2tosa.ir.types import (
    DYNAMIC,
    ShapeType,
    TensorType,
    UniformQuantized,
    UniformQuantizedPerAxis,
    f16,
    f32,
    i4,
    i8,
    i16,
    i32,
    u8,
    u16,
)
from tfl2tosa.quant import (
    dcast,
    qcast,
    scast,
    storage_integer,
    stripped_type,
    verify_quant_op,
    verify_quant_ops,
)

Q = UniformQuantized(i8, f32, 2.0, 10)
Q16 = UniformQuantized(i16, f32, 0.5)
QU8 = UniformQuantized(u8, f32, 0.5, 128)
QF16 = UniformQuantized(i8, f16, 0.5)
PA = UniformQuantizedPerAxis(i8, f32, 1, (2.0, 3.0, 4.0), (0, 1, -1))


def t(shape, element):
    return TensorType(shape, element)


# (id, op, operand type, result type, valid)
CASES = [
    ("dcast_ranked", "quant.dcast", t((2, 3), Q), t((2, 3), f32), True),
    ("dcast_scalar", "quant.dcast", Q, f32, True),
    ("dcast_rank0", "quant.dcast", t((), Q), t((), f32), True),
    ("dcast_dynamic", "quant.dcast", t((DYNAMIC, 3), Q), t((DYNAMIC, 3), f32), True),
    ("dcast_unranked", "quant.dcast", t(None, Q), t(None, f32), True),
    ("dcast_per_axis", "quant.dcast", t((5, 3), PA), t((5, 3), f32), True),
    ("dcast_per_axis_dynamic", "quant.dcast", t((5, DYNAMIC), PA), t((5, DYNAMIC), f32), True),
    ("dcast_per_axis_unranked", "quant.dcast", t(None, PA), t(None, f32), True),
    ("dcast_f16", "quant.dcast", t((4,), QF16), t((4,), f16), True),
    ("dcast_u8", "quant.dcast", t((4,), QU8), t((4,), f32), True),
    ("dcast_shape_mismatch", "quant.dcast", t((2, 3), Q), t((3, 2), f32), False),
    ("dcast_static_vs_dynamic", "quant.dcast", t((2, 3), Q), t((DYNAMIC, 3), f32), False),
    ("dcast_ranked_vs_unranked", "quant.dcast", t((2, 3), Q), t(None, f32), False),
    ("dcast_scalar_vs_tensor", "quant.dcast", Q, t((), f32), False),
    ("dcast_wrong_expressed", "quant.dcast", t((4,), Q), t((4,), f16), False),
    ("dcast_integer_result", "quant.dcast", t((4,), Q), t((4,), i8), False),
    ("dcast_float_input", "quant.dcast", t((4,), f32), t((4,), f32), False),
    ("dcast_per_axis_scalar", "quant.dcast", PA, f32, False),
    ("qcast_ranked", "quant.qcast", t((3, 5), f32), t((3, 5), Q), True),
    ("qcast_scalar", "quant.qcast", f32, Q, True),
    ("qcast_dynamic_per_axis", "quant.qcast", t((DYNAMIC, 3), f32), t((DYNAMIC, 3), PA), True),
    ("qcast_unranked", "quant.qcast", t(None, f32), t(None, Q16), True),
    ("qcast_shape_mismatch", "quant.qcast", t((3, 5), f32), t((5, 3), Q), False),
    ("qcast_wrong_expressed", "quant.qcast", t((4,), f16), t((4,), Q), False),
    ("qcast_integer_input", "quant.qcast", t((4,), i8), t((4,), Q), False),
    ("qcast_float_result", "quant.qcast", t((4,), f32), t((4,), f32), False),
    ("qcast_per_axis_scalar", "quant.qcast", f32, PA, False),
    ("scast_to_storage", "quant.scast", t((4,), Q), t((4,), i8), True),
    ("scast_from_storage", "quant.scast", t((4,), i8), t((4,), Q), True),
    ("scast_scalar", "quant.scast", i16, Q16, True),
    ("scast_u8_is_stored_in_i8", "quant.scast", t((4,), QU8), t((4,), i8), True),
    ("scast_per_axis_unranked", "quant.scast", t(None, i8), t(None, PA), True),
    ("scast_dynamic", "quant.scast", t((DYNAMIC, 3), PA), t((DYNAMIC, 3), i8), True),
    ("scast_width_mismatch", "quant.scast", t((4,), Q16), t((4,), i8), False),
    ("scast_quant_to_quant", "quant.scast", t((4,), Q), t((4,), Q), False),
    ("scast_int_to_int", "quant.scast", t((4,), i8), t((4,), i8), False),
    ("scast_float_to_quant", "quant.scast", t((4,), f32), t((4,), Q), False),
    ("scast_shape_mismatch", "quant.scast", t((4,), Q), t((5,), i8), False),
    ("scast_per_axis_scalar", "quant.scast", i8, PA, False),
]


def single_op_module(name, operand_type, result_type) -> tuple[Module, Op]:
    module = Module()
    graph = module.add_graph(Graph("f"))
    x = graph.add_input("x", operand_type)
    op = graph.append(Op(name, [x], [result_type], loc="f:op0"))
    graph.set_outputs([op.result])
    return module, op


@pytest.mark.parametrize("name, operand, result, valid", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_verify_quant_op(name, operand, result, valid):
    _, op = single_op_module(name, operand, result)
    if valid:
        verify_quant_op(op)
    else:
        with pytest.raises(IRError, match=rf"{name} \(f:op0\): "):
            verify_quant_op(op)


@pytest.mark.parametrize("name, operand, result, valid", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_mlir_verifier_agrees(mlir, name, operand, result, valid):
    module, _ = single_op_module(name, operand, result)
    text = print_module(module, locations=False)
    if valid:
        mlir(text)
    else:
        with pytest.raises(ValueError):
            mlir(text)


def test_error_messages_name_the_rule():
    cases = [
        ("quant.dcast", t((2, 3), Q), t((3, 2), f32), "both tensors with matching shape"),
        ("quant.dcast", t((4,), Q), t((4,), f16), "expressed type f32"),
        ("quant.scast", t((4,), Q16), t((4,), i8), "storage type i16"),
        ("quant.qcast", f32, PA, "scalar types may not use per-axis quantization"),
        ("quant.scast", t((4,), i8), t((4,), i8), "input must be integer and result quantized"),
    ]
    for name, operand, result, message in cases:
        _, op = single_op_module(name, operand, result)
        with pytest.raises(IRError, match=message):
            verify_quant_op(op)


def test_structure_errors():
    _, op = single_op_module("quant.dcast", t((4,), Q), t((4,), f32))
    op.results.append(op.results[0])
    with pytest.raises(IRError, match="one operand and one result"):
        verify_quant_op(op)
    _, op = single_op_module("tosa.cast", t((4,), Q), t((4,), f32))
    with pytest.raises(IRError, match="not a quant dialect op"):
        verify_quant_op(op)
    _, op = single_op_module("quant.dcast", ShapeType(2), t((4,), f32))
    with pytest.raises(IRError, match="neither a scalar nor a tensor"):
        verify_quant_op(op)


def test_unsigned_integer_accepted_for_unsigned_storage_only():
    # MLIR has no unsigned tensors in scast (signless only); we also take
    # `ui8` for u8 storage, never for signed storage.
    _, op = single_op_module("quant.scast", t((4,), QU8), t((4,), u8))
    verify_quant_op(op)
    _, op = single_op_module("quant.scast", t((4,), Q), t((4,), u8))
    with pytest.raises(IRError, match="storage type"):
        verify_quant_op(op)


def test_verify_quant_ops_walks_a_module():
    module, _ = single_op_module("quant.dcast", t((4,), Q), t((4,), f16))
    with pytest.raises(IRError):
        verify_quant_ops(module)
    with pytest.raises(IRError):
        verify_quant_ops(module.main)


class TestBuilders:
    def setup_method(self):
        self.graph = Graph("main")
        self.b = Builder(self.graph)

    def test_qcast_then_dcast(self):
        x = self.graph.add_input("x", t((DYNAMIC, 3), f32))
        q = qcast(self.b, x, PA)
        assert q.type == t((DYNAMIC, 3), PA)
        d = dcast(self.b, q)
        assert d.type == t((DYNAMIC, 3), f32)
        assert [op.name for op in self.graph.ops] == ["quant.qcast", "quant.dcast"]

    def test_qcast_with_a_full_type_and_scalars(self):
        x = self.graph.add_input("x", f32)
        assert qcast(self.b, x, Q).type == Q
        y = self.graph.add_input("y", t((2,), f32))
        assert qcast(self.b, y, t((2,), Q)).type == t((2,), Q)

    def test_scast_both_ways(self):
        x = self.graph.add_input("x", t((4,), QU8))
        stored = scast(self.b, x, storage_integer(QU8))
        assert stored.type == t((4,), i8)
        assert scast(self.b, stored, QU8).type == t((4,), QU8)

    def test_invalid_build_leaves_nothing_behind(self):
        x = self.graph.add_input("x", t((4,), f16))
        with pytest.raises(IRError):
            qcast(self.b, x, Q)  # f16 data, f32 expressed type
        assert self.graph.ops == [] and x.uses == [] and self.b.created == []

    def test_dcast_of_float_raises(self):
        x = self.graph.add_input("x", t((4,), f32))
        with pytest.raises(IRError, match="not quantized"):
            dcast(self.b, x)


def test_storage_integer_and_stripped_type():
    assert storage_integer(Q) is i8 and storage_integer(QU8) is i8
    assert storage_integer(UniformQuantized(u16, f32, 1.0)) is i16
    assert storage_integer(UniformQuantized(i32, f32, 1.0)) is i32
    assert storage_integer(UniformQuantized(i4, f32, 1.0, 0, -7, 7)) is i4
    assert stripped_type(t((DYNAMIC, 3), PA)) == t((DYNAMIC, 3), i8)
    assert stripped_type(Q16) is i16
    assert stripped_type(t((2,), f32)) == t((2,), f32)


def test_custom_form_printing():
    module = Module()
    graph = module.add_graph(Graph("main"))
    x = graph.add_input("x", t((3, 5), f32))
    b = Builder(graph)
    q = qcast(b, x, Q)
    s = scast(b, q, i8)
    graph.set_outputs([dcast(b, scast(b, s, Q))])
    lines = print_module(module, locations=False).splitlines()
    assert lines[2:6] == [
        ("    %0 = quant.qcast %arg0 : tensor<3x5xf32> to "
         "tensor<3x5x!quant.uniform<i8:f32, 2.0:10>>"),
        "    %1 = quant.scast %0 : tensor<3x5x!quant.uniform<i8:f32, 2.0:10>> to tensor<3x5xi8>",
        "    %2 = quant.scast %1 : tensor<3x5xi8> to tensor<3x5x!quant.uniform<i8:f32, 2.0:10>>",
        "    %3 = quant.dcast %2 : tensor<3x5x!quant.uniform<i8:f32, 2.0:10>> to tensor<3x5xf32>",
    ]
    assert 'quant.dcast %2 : tensor<3x5x!quant.uniform<i8:f32, 2.0:10>> to tensor<3x5xf32> ' \
           'loc("dcast")' in print_module(module)


def test_quant_op_with_attributes_prints_generic():
    module, op = single_op_module("quant.dcast", t((4,), Q), t((4,), f32))
    op.attrs["note"] = "kept"
    assert '"quant.dcast"(%arg0) <{note = "kept"}>' in print_module(module)
