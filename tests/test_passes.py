"""canonicalize / cse / dce / strip_func_quant_types, with golden MLIR text.

The three golden examples follow the quant dialect's documented uses:
`multiply_add` (per-channel {2.0, 3.0, 4.0}: canonicalization removes the
qcast/dcast pair between the multiplication and the addition), `division`
(CSE removes the second pair of dcasts) and `predict` (function signature
stripping). Each is built with our IR, run through our pass, printed, and
compared three ways:

- with the golden file under tests/golden/quant/ (regenerate with
  `UPDATE_GOLDEN=1 pytest tests/test_passes.py`, or `--update-golden` where
  the conftest defines it, and review the diff);
- with explicit assertions on the lines the documented behaviour implies, so
  a wrong golden cannot pass;
- with MLIR's own pass (canonicalize, cse, strip-func-quant-types, run by
  TensorFlow's embedded MLIR) applied to our printed input: both results,
  re-printed by MLIR, must be identical.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tfl2tosa.ir.builder import Builder
from tfl2tosa.ir.core import Graph, Module, Op
from tfl2tosa.ir.printer import print_module
from tfl2tosa.ir.types import (
    DYNAMIC,
    TensorType,
    UniformQuantized,
    UniformQuantizedPerAxis,
    f32,
    i8,
    i32,
    u8,
)
from tfl2tosa.passes.simplify import canonicalize, cse, dce
from tfl2tosa.passes.strip_quant_types import strip_func_quant_types
from tfl2tosa.quant import dcast, qcast, scast

GOLDEN = Path(__file__).parent / "golden" / "quant"


@pytest.fixture
def check_golden(request):
    """Compare text with tests/golden/quant/<name>.mlir, or rewrite it when asked to.

    Asked by `UPDATE_GOLDEN=1`, or by `--update-golden` where tests/conftest.py
    defines that option.
    """
    update = (os.environ.get("UPDATE_GOLDEN") == "1"
              or bool(request.config.getoption("--update-golden", default=False)))

    def check(name: str, text: str) -> None:
        compare_golden(name, text, update)

    return check


def compare_golden(name: str, text: str, update: bool) -> None:
    path = GOLDEN / f"{name}.mlir"
    if update:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden {path}; run with UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(), f"{name}: output differs from {path} (UPDATE_GOLDEN=1)"


def body(text: str) -> list[str]:
    """The op lines of a printed single-function module, stripped."""
    return [line.strip() for line in text.splitlines()[2:-2]]


def ops_of(module: Module) -> list[str]:
    return [op.name for _, op in module.ops()]


# ---------------------------------------------------------------------------
# multiply_add: canonicalization

PER_CHANNEL = UniformQuantizedPerAxis(i8, f32, 1, (2.0, 3.0, 4.0), (0, 0, 0))
T_Q = TensorType((DYNAMIC, 3), PER_CHANNEL)
T_F = TensorType((DYNAMIC, 3), f32)


def multiply_add() -> Module:
    """(a * b) + c on per-channel quantized tensors, each op in float between casts."""
    module = Module()
    graph = module.add_graph(Graph("multiply_add"))
    a, b_, c = (graph.add_input(name, T_Q) for name in ("a", "b", "c"))
    b = Builder(graph)
    product = b.op("arith.mulf", [dcast(b, a), dcast(b, b_)], T_F)
    product = qcast(b, product, PER_CHANNEL)
    total = b.op("arith.addf", [dcast(b, product), dcast(b, c)], T_F)
    graph.set_outputs([qcast(b, total, PER_CHANNEL)])
    return module


def test_multiply_add_canonicalize(mlir, check_golden):
    module = multiply_add()
    before = print_module(module, locations=False)
    assert canonicalize(module) == 1
    after = print_module(module, locations=False)
    check_golden("multiply_add", after)

    lines = body(after)
    # The qcast/dcast pair between mulf and addf is gone: addf reads mulf directly.
    assert lines[2].startswith('%2 = "arith.mulf"(%0, %1)')
    assert lines[4].startswith('%4 = "arith.addf"(%2, %3)')
    assert ops_of(module) == ["quant.dcast", "quant.dcast", "arith.mulf", "quant.dcast",
                              "arith.addf", "quant.qcast"]
    assert "{2.0,3.0,4.0}" in after
    assert mlir(after) == mlir(before, "canonicalize")


# ---------------------------------------------------------------------------
# division: CSE

Q = UniformQuantized(i8, f32, 0.5, -3)


def division() -> Module:
    """a / b and b / a, each division dequantizing its own operands."""
    module = Module()
    graph = module.add_graph(Graph("division"))
    t_q, t_f = TensorType((4,), Q), TensorType((4,), f32)
    a, b_ = graph.add_input("a", t_q), graph.add_input("b", t_q)
    b = Builder(graph)
    quotient = b.op("arith.divf", [dcast(b, a), dcast(b, b_)], t_f)
    inverse = b.op("arith.divf", [dcast(b, b_), dcast(b, a)], t_f)
    graph.set_outputs([qcast(b, quotient, Q), qcast(b, inverse, Q)])
    return module


def test_division_cse(mlir, check_golden):
    module = division()
    before = print_module(module, locations=False)
    assert cse(module) == 2
    after = print_module(module, locations=False)
    check_golden("division", after)

    lines = body(after)
    assert lines[:4] == [
        "%0 = quant.dcast %arg0 : tensor<4x!quant.uniform<i8:f32, 0.5:-3>> to tensor<4xf32>",
        "%1 = quant.dcast %arg1 : tensor<4x!quant.uniform<i8:f32, 0.5:-3>> to tensor<4xf32>",
        '%2 = "arith.divf"(%0, %1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>',
        '%3 = "arith.divf"(%1, %0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>',
    ]
    assert after.count("quant.dcast") == 2 and after.count("quant.qcast") == 2
    assert mlir(after) == mlir(before, "cse")


# ---------------------------------------------------------------------------
# predict: function signature stripping

Q_IN = UniformQuantized(i8, f32, 0.5, -3)
Q_OUT = UniformQuantized(u8, f32, 0.25, 128)


def predict() -> Module:
    """A quantized input and a float input in, a u8-quantized and a float output out."""
    module = Module()
    graph = module.add_graph(Graph("predict"))
    x = graph.add_input("x", TensorType((1, 4), Q_IN))
    bias = graph.add_input("bias", TensorType((1, 4), f32))
    b = Builder(graph)
    total = b.op("arith.addf", [dcast(b, x), bias], TensorType((1, 4), f32))
    graph.set_outputs([qcast(b, total, Q_OUT), total])
    return module


def test_predict_strip_func_quant_types(mlir, check_golden):
    module = predict()
    before = print_module(module, locations=False)
    strip_func_quant_types(module)
    after = print_module(module, locations=False)
    check_golden("predict", after)

    lines = after.splitlines()
    # Quantized arguments and results take their storage types (u8 in i8, as
    # in MLIR); float ones are untouched; scasts sit at the boundaries.
    assert lines[1] == ("  func.func @predict(%arg0: tensor<1x4xi8>, %arg1: tensor<1x4xf32>) "
                        "-> (tensor<1x4xi8>, tensor<1x4xf32>) {")
    assert lines[2] == ("    %0 = quant.scast %arg0 : tensor<1x4xi8> to "
                        "tensor<1x4x!quant.uniform<i8:f32, 0.5:-3>>")
    assert lines[-4] == ("    %4 = quant.scast %3 : tensor<1x4x!quant.uniform<u8:f32, 0.25:128>> "
                         "to tensor<1x4xi8>")
    assert lines[-3] == "    func.return %4, %2 : tensor<1x4xi8>, tensor<1x4xf32>"
    assert mlir(after) == mlir(before, "strip-func-quant-types")


def test_strip_keeps_input_names_and_is_idempotent():
    module = predict()
    strip_func_quant_types(module)
    assert [v.name for v in module.main.inputs] == ["x", "bias"]
    once = print_module(module)
    strip_func_quant_types(module)
    assert print_module(module) == once


def test_strip_makes_no_casts_that_fold_straight_back():
    # Quantized values read only by non-quant ops and graph outputs: every one
    # is retyped to storage in place, with no scast to or from it, so
    # canonicalize has nothing to fold.
    module = Module()
    graph = module.add_graph(Graph("f"))
    x = graph.add_input("x", TensorType((1, 4), Q_IN))
    b = Builder(graph)
    doubled = b.op("test.double", [x, x], TensorType((1, 4), Q_IN))
    out = b.op("test.requantize", [doubled], TensorType((1, 4), Q_OUT))
    graph.set_outputs([out, doubled])
    strip_func_quant_types(module)
    assert [op.name for op in graph.ops] == ["test.double", "test.requantize"]
    assert graph.ops[0].operands == [x, x] and graph.ops[1].operands == [doubled]
    assert graph.outputs == [out, doubled]
    assert [str(v.type) for v in (x, doubled, out)] == ["tensor<1x4xi8>"] * 3
    assert canonicalize(module) == 0


@pytest.mark.parametrize("quantized_input", [False, True], ids=["float_graph", "quantized_graph"])
def test_strip_holds_unsigned_constants_as_signless_storage(quantized_input):
    # TOSA's integers are signless: ui8 bytes 200 and 3 are read as i8 -56 and 3
    # (two's complement), whether or not the graph has a quantized value.
    module = Module()
    graph = module.add_graph(Graph("f"))
    x = graph.add_input("x", TensorType((2,), Q_IN if quantized_input else f32))
    b = Builder(graph)
    weights = b.create("tosa.const", [], [TensorType((2,), u8)],
                       {"values": np.array([200, 3], np.uint8)}).result
    out = b.op("test.use", [x, weights], TensorType((2,), f32))
    graph.set_outputs([out])
    assert strip_func_quant_types(module)  # changed, so CSE runs again
    payload = weights.owner.attrs["values"]
    assert payload.dtype == np.int8 and payload.tolist() == [-56, 3]
    assert [op.name for op in graph.ops] == ["tosa.const", "test.use"]


def test_strip_tells_whether_a_float_module_changed():
    # Nothing quantized or unsigned: the module is left as it was, and says so
    # (the pipeline then skips a CSE and DCE that would find nothing to do).
    module = Module()
    graph = module.add_graph(Graph("f"))
    x = graph.add_input("x", TensorType((2,), f32))
    b = Builder(graph)
    weights = b.create("tosa.const", [], [TensorType((2,), i8)],
                       {"values": np.array([-56, 3], np.int8)}).result
    graph.set_outputs([b.op("test.use", [x, weights], TensorType((2,), f32))])
    before = print_module(module)
    assert not strip_func_quant_types(module)
    assert print_module(module) == before


# ---------------------------------------------------------------------------
# canonicalize: each fold and each non-fold of MLIR's canonicalize.mlir


def cast_chain(input_type, *steps) -> Module:
    """main(x) = steps applied in order; each step is (op name, result type)."""
    module = Module()
    graph = module.add_graph(Graph("f"))
    value = graph.add_input("x", input_type)
    for name, result_type in steps:
        value = graph.append(Op(name, [value], [result_type])).result
    graph.set_outputs([value])
    return module


QA = TensorType((4,), UniformQuantized(u8, f32, 2.0, 128))
QB = TensorType((4,), UniformQuantized(u8, f32, 3.0, 128))
F4, I4 = TensorType((4,), f32), TensorType((4,), i8)

FOLD_CASES = [
    ("dcast_fold", F4, [("quant.qcast", QA), ("quant.dcast", F4)], []),
    ("dcast_no_fold_source", I4, [("quant.scast", QA), ("quant.dcast", F4)],
     ["quant.scast", "quant.dcast"]),
    ("qcast_fold", QA, [("quant.dcast", F4), ("quant.qcast", QA)], []),
    ("qcast_no_fold_type", QA, [("quant.dcast", F4), ("quant.qcast", QB)],
     ["quant.dcast", "quant.qcast"]),
    ("scast_fold", QA, [("quant.scast", I4), ("quant.scast", QA)], []),
    ("scast_no_fold_source", F4, [("quant.qcast", QA), ("quant.scast", I4)],
     ["quant.qcast", "quant.scast"]),
    ("scast_no_fold_type", QA, [("quant.scast", I4), ("quant.scast", QB)],
     ["quant.scast", "quant.scast"]),
    ("chain_to_fixpoint", QA, [("quant.dcast", F4), ("quant.qcast", QA), ("quant.dcast", F4),
                               ("quant.qcast", QA), ("quant.scast", I4), ("quant.scast", QA)],
     []),
]


@pytest.mark.parametrize("input_type, steps, expected", [c[1:] for c in FOLD_CASES],
                         ids=[c[0] for c in FOLD_CASES])
def test_canonicalize_folds(mlir, input_type, steps, expected):
    module = cast_chain(input_type, *steps)
    before = print_module(module, locations=False)
    canonicalize(module)
    assert ops_of(module) == expected
    if not expected:
        assert module.main.outputs == module.main.inputs
    assert mlir(print_module(module, locations=False)) == mlir(before, "canonicalize")


def test_canonicalize_keeps_a_cast_still_in_use():
    module = cast_chain(F4, ("quant.qcast", QA), ("quant.dcast", F4))
    graph = module.main
    graph.set_outputs([graph.outputs[0], graph.ops[0].result])
    canonicalize(module)
    assert ops_of(module) == ["quant.qcast"]
    assert graph.outputs == [graph.inputs[0], graph.ops[0].result]


# ---------------------------------------------------------------------------
# cse and dce


def const(graph: Graph, array: np.ndarray, element=f32, **attrs) -> Op:
    return graph.append(Op("tosa.const", [], [TensorType(array.shape, element)],
                           {"values": array, **attrs}))


def test_cse_merges_equal_constants_only():
    module = Module()
    graph = module.add_graph(Graph("main"))
    a = const(graph, np.array([1.0, 2.0], np.float32))
    b = const(graph, np.array([1.0, 2.0], np.float32))               # same: merged
    c = const(graph, np.array([1, 2], np.int32), i32)                # other dtype
    d = const(graph, np.array([[1.0, 2.0]], np.float32))             # other shape
    e = const(graph, np.array([0.0, 2.0], np.float32))
    f = const(graph, np.array([-0.0, 2.0], np.float32))              # -0.0 is not 0.0
    g = const(graph, np.array([np.nan, 2.0], np.float32))
    h = const(graph, np.array([np.nan, 2.0], np.float32))            # same bits: merged
    k = const(graph, np.array(2.5, np.float32))                      # rank 0
    m = const(graph, np.array(2.5, np.float32))                      # merged
    n = const(graph, np.arange(4, dtype=np.float32).reshape(2, 2).T)  # not contiguous
    p = const(graph, np.array([[0.0, 2.0], [1.0, 3.0]], np.float32))  # same values: merged
    graph.set_outputs([op.result for op in (a, b, c, d, e, f, g, h, k, m, n, p)])
    assert cse(module) == 4
    assert graph.ops == [a, c, d, e, f, g, k, n]
    assert graph.outputs[1] is a.result and graph.outputs[7] is g.result
    assert graph.outputs[9] is k.result and graph.outputs[11] is n.result


def test_cse_tells_large_constants_apart_beyond_their_sampled_bytes():
    # A large array's key holds a sample of its bytes: arrays equal at every
    # sampled byte but one value elsewhere must stay apart, and a later copy of
    # either merges into that one.
    module = Module()
    graph = module.add_graph(Graph("main"))
    zeros = np.zeros(1024, np.float32)
    other = zeros.copy()
    other[1] = 1.0  # bytes 4-7: between samples
    a = const(graph, zeros)
    b = const(graph, other)
    c = const(graph, other.copy())                                   # merged into b
    d = const(graph, zeros.copy())                                   # merged into a
    graph.set_outputs([op.result for op in (a, b, c, d)])
    assert cse(module) == 2
    assert graph.ops == [a, b]
    assert graph.outputs == [a.result, b.result, b.result, a.result]


def test_cse_leaves_constants_of_python_objects_apart():
    module = Module()
    graph = module.add_graph(Graph("main"))
    small = np.array(["a", "b"], dtype=object)
    large = np.array([str(i) for i in range(100)], dtype=object)
    ops = [const(graph, array) for array in (small, small, large, large)]
    graph.set_outputs([op.result for op in ops])
    assert cse(module) == 0 and graph.ops == ops


def test_cse_compares_operands_attributes_and_result_types():
    module = Module()
    graph = module.add_graph(Graph("main"))
    x, y = graph.add_input("x", F4), graph.add_input("y", F4)

    def add(name, operands, result_type=F4, **attrs):
        return graph.append(Op(name, operands, [result_type], attrs))

    ops = [
        add("tosa.add", [x, y]),
        add("tosa.add", [x, y]),                                  # duplicate of 0
        add("tosa.add", [y, x]),                                  # operand order matters
        add("tosa.clamp", [x], min_val=0.0, max_val=6.0),
        add("tosa.clamp", [x], min_val=-0.0, max_val=6.0),        # -0.0 bound differs
        add("tosa.clamp", [x], min_val=0.0, max_val=6.0),         # duplicate of 3
        add("test.flag", [x], flag=True),
        add("test.flag", [x], flag=1),                            # True is not 1
        add("tosa.cast", [x], TensorType((4,), i32)),
        add("tosa.cast", [x], TensorType((4,), i8)),              # other result type
    ]
    graph.set_outputs([op.result for op in ops])
    assert cse(module) == 2
    assert graph.ops == [ops[i] for i in (0, 2, 3, 4, 6, 7, 8, 9)]
    assert graph.outputs[1] is ops[0].result and graph.outputs[5] is ops[3].result


def test_cse_chains_through_merged_operands():
    module = Module()
    graph = module.add_graph(Graph("main"))
    x = graph.add_input("x", F4)
    first = [graph.append(Op("tosa.abs", [x], [F4]))]
    first.append(graph.append(Op("tosa.floor", [first[0].result], [F4])))
    second = graph.append(Op("tosa.abs", [x], [F4]))
    second_floor = graph.append(Op("tosa.floor", [second.result], [F4]))
    graph.set_outputs([first[1].result, second_floor.result])
    assert cse(module) == 2
    assert graph.ops == first and graph.outputs == [first[1].result] * 2
    assert x.uses == [(first[0], 0)]


def test_cse_never_merges_side_effects_or_control_flow():
    module = Module()
    graph = module.add_graph(Graph("main"))
    x = graph.add_input("x", F4)
    ops = [graph.append(Op(name, [x], [F4], attrs)) for name, attrs in [
        ("test.random", {"side_effect": True}), ("test.random", {"side_effect": True}),
        ("tosa.cond_if", {"then_graph": "a", "else_graph": "b"}),
        ("tosa.cond_if", {"then_graph": "a", "else_graph": "b"}),
        ("tosa.custom", {"operator_name": "x"}), ("tosa.custom", {"operator_name": "x"}),
    ]]
    graph.set_outputs([op.result for op in ops])
    assert cse(module) == 0 and graph.ops == ops


def test_cse_merges_multi_result_ops_and_keeps_unhashable_attrs_apart():
    module = Module()
    graph = module.add_graph(Graph("main"))
    x = graph.add_input("x", F4)
    s1 = graph.append(Op("tfl.split", [x], [F4, F4], {"num_splits": 2}))
    s2 = graph.append(Op("tfl.split", [x], [F4, F4], {"num_splits": 2}))
    u1 = graph.append(Op("test.odd", [x], [F4], {"payload": {1, 2}}))
    u2 = graph.append(Op("test.odd", [x], [F4], {"payload": {1, 2}}))
    graph.set_outputs([*s2.results, u1.result, u2.result])
    assert cse(module) == 1
    assert graph.outputs[:2] == s1.results and graph.ops == [s1, u1, u2]


def test_cse_merges_into_the_first_op_with_the_same_result_types():
    # The first op met with a key may have other result types: a later op merges
    # into the first with its own types, for ops with operands and without.
    module = Module()
    graph = module.add_graph(Graph("main"))
    x = graph.add_input("x", F4)
    I32 = TensorType((4,), i32)
    casts = [graph.append(Op("tosa.cast", [x], [t])) for t in (I32, I4, I4, I32)]
    small = [const(graph, np.zeros(4, np.int8), element) for element in (i8, u8, u8, i8)]
    large = [const(graph, np.zeros(512, np.int8), element) for element in (i8, u8, u8, i8)]
    ops = [*casts, *small, *large]
    graph.set_outputs([op.result for op in ops])
    assert cse(module) == 6
    assert graph.ops == [casts[0], casts[1], small[0], small[1], large[0], large[1]]
    assert graph.outputs == [op.result for op in
                             (casts[0], casts[1], casts[1], casts[0], small[0], small[1],
                              small[1], small[0], large[0], large[1], large[1], large[0])]


def _large(one_at: int | None) -> np.ndarray:
    array = np.zeros(1024, np.float32)
    if one_at is not None:
        array[one_at] = 1.0  # index 1 lies between a sample's elements, index 0 on one
    return array


# Attributes CSE must tell apart or see as equal, made afresh for every op.
_ATTRS = (
    lambda: {}, lambda: {"k": 1}, lambda: {"k": True}, lambda: {"k": 0.0},
    lambda: {"k": -0.0}, lambda: {"k": [1, 2]}, lambda: {"k": (1, 2)},
    lambda: {"k": np.array([1, 2], np.int32)}, lambda: {"k": np.array([1, 2], np.int64)},
    lambda: {"k": 1, "j": "a"}, lambda: {"j": "a", "k": 1}, lambda: {"side_effect": True},
    lambda: {"k": _large(None)}, lambda: {"k": _large(1)},
)


# Constant payloads, made afresh for every op.
_ARRAYS = (
    lambda: np.array([0.0, 2.0], np.float32), lambda: np.array([-0.0, 2.0], np.float32),
    lambda: np.array([[0.0, 2.0]], np.float32), lambda: np.array([0, 2], np.int32),
    lambda: _large(None), lambda: _large(1), lambda: _large(0),
)


def _same_attribute(a, b) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, float):
        return a.hex() == b.hex()
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(_same_attribute, a, b))
    return a == b


def _first_equal_op(ops, operands_of, op, operands):
    """By the definition: the first kept op with the same name, operands,
    attributes and result types (pure ones only)."""
    if op.attrs.get("side_effect"):
        return None
    for other in ops:
        if (other.name == op.name and not other.attrs.get("side_effect")
                and len(operands_of[id(other)]) == len(operands)
                and all(a is b for a, b in zip(operands_of[id(other)], operands))
                and other.attrs.keys() == op.attrs.keys()
                and all(_same_attribute(v, op.attrs[k]) for k, v in other.attrs.items())
                and [v.type for v in other.results] == [v.type for v in op.results]):
            return other
    return None


_OP_SPECS = st.lists(st.tuples(st.sampled_from(("const", "tosa.abs", "tosa.add", "tfl.split")),
                               st.integers(0, 30), st.integers(0, 30),
                               st.integers(0, len(_ATTRS) - 1), st.booleans()),
                     max_size=40)


@settings(max_examples=150, deadline=None)
@given(_OP_SPECS)
def test_cse_matches_its_definition_on_random_graphs(specs):
    module = Module()
    graph = module.add_graph(Graph("main"))
    values = [graph.add_input("x", F4), graph.add_input("y", F4)]
    for kind, a, b, attrs, int_result in specs:
        result = I4 if int_result else F4
        if kind == "const":
            array = _ARRAYS[a % len(_ARRAYS)]()
            op = Op("tosa.const", [], [TensorType(array.shape, i8 if int_result else f32)],
                    {"values": array})
        else:
            operands = {"tosa.abs": [values[a % len(values)]],
                        "tosa.add": [values[a % len(values)], values[b % len(values)]],
                        "tfl.split": [values[a % len(values)]]}[kind]
            results = [result, result] if kind == "tfl.split" else [result]
            op = Op(kind, operands, results, _ATTRS[attrs]())
        values.extend(graph.append(op).results)
    graph.set_outputs(values)
    # The expected graph, worked out before CSE changes the ops.
    replaced, kept, operands_of = {}, [], {}
    for op in graph.ops:
        operands = [replaced.get(id(v), v) for v in op.operands]
        first = _first_equal_op(kept, operands_of, op, operands)
        if first is None:
            kept.append(op)
            operands_of[id(op)] = operands
        else:
            replaced.update((id(old), new) for old, new in zip(op.results, first.results))
    outputs = [replaced.get(id(v), v) for v in values]
    assert cse(module) == len(specs) - len(kept)
    assert graph.ops == kept and graph.outputs == outputs
    assert all(op.operands == operands_of[id(op)] for op in kept)
    graph.verify_structure()
    # One pass leaves nothing to merge: the pipeline skips a second one on a
    # module nothing changed since.
    assert cse(module) == 0 and graph.ops == kept


def test_dce_removes_dead_chains_in_every_graph():
    module = Module()
    for name in ("main", "body"):
        graph = module.add_graph(Graph(name))
        x = graph.add_input("x", F4)
        dead = graph.append(Op("tosa.abs", [x], [F4]))
        graph.append(Op("tosa.floor", [dead.result], [F4]))
        graph.set_outputs([x])
    assert dce(module) == 4
    assert ops_of(module) == []


def test_scast_builders_fold_back(mlir):
    module = Module()
    graph = module.add_graph(Graph("f"))
    x = graph.add_input("x", QA)
    b = Builder(graph)
    graph.set_outputs([scast(b, scast(b, x, i8), QA.element)])
    canonicalize(module)
    assert graph.ops == [] and graph.outputs == [x]
