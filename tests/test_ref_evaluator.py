"""The reference-model evaluator: input binding and checking, error reporting, intermediates,
control flow and variables. Expected values are worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest

import reference_model
from reference_model.kernels import KERNELS
from tfl2tosa.errors import ReferenceModelError, SpecErrorIf, SpecRequire
from tfl2tosa.ir import Graph, Module, Op, TensorType, scalar_type
from tfl2tosa.tosa.ops import OPS

I32 = scalar_type("i32")
I8 = scalar_type("i8")
F32 = scalar_type("f32")
BOOL = scalar_type("i1")


def t(shape: tuple[int, ...], element=I32) -> TensorType:
    return TensorType(shape, element)


def add_graph(name: str = "main", shape: tuple[int, ...] = (2,), element=I32) -> Graph:
    """out = (x + y) with an intermediate `sum`, then NEGATE-free copy through IDENTITY."""
    graph = Graph(name)
    x = graph.add_input("x", t(shape, element))
    y = graph.add_input("y", t(shape, element))
    total = graph.append(Op("tosa.add", [x, y], [t(shape, element)], result_names=["sum"]))
    out = graph.append(Op("tosa.identity", [total.result], [t(shape, element)],
                          result_names=["out"]))
    graph.set_outputs([out.result])
    return graph


def test_every_tosa_operator_has_a_kernel():
    missing = sorted(name for name in OPS if name not in KERNELS)
    assert missing == []


def test_inputs_by_position_and_by_name():
    graph = add_graph()
    by_position = reference_model.run(graph, [np.int32([1, 2]), np.int32([10, 20])])
    by_name = reference_model.run(graph, {"y": np.int32([10, 20]), "x": np.int32([1, 2])})
    assert list(by_position) == ["out"]
    assert by_position["out"].tolist() == by_name["out"].tolist() == [11, 22]


def test_keep_intermediates_returns_every_tensor_outputs_first():
    result = reference_model.run(add_graph(), [np.int32([1, 2]), np.int32([3, 4])],
                                 keep_intermediates=True)
    assert list(result) == ["out", "x", "y", "sum"]
    assert result["sum"].tolist() == [4, 6]


def test_values_that_survive_conversion_are_converted():
    result = reference_model.run(add_graph(), [[1, -2], np.array([3.0, 4.0])])
    assert result["out"].dtype == np.int32 and result["out"].tolist() == [4, 2]


def test_element_types_outside_every_type_mode_are_an_error_if():
    # ADD has i32, f16, bf16 and f32 modes only (TOSA 1.0 type modes).
    with pytest.raises(SpecErrorIf, match="no TOSA 1.0 type mode of ADD"):
        reference_model.run(add_graph(element=I8), [[1, 2], [3, 4]])


@pytest.mark.parametrize("inputs,message", [
    ([np.int32([1, 2])], "takes 2 inputs"),
    ({"x": np.int32([1, 2])}, "missing input"),
    ({"x": np.int32([1, 2]), "y": np.int32([1, 2]), "z": 1}, "unknown input"),
    ([np.int32([1, 2, 3]), np.int32([1, 2, 3])], "input 'x'.*shape"),
    ([np.int32([1, 2]), np.array([0.5, 1.0])], "input 'y'.*do not fit"),
    ([np.int32([1, 2]), np.array(["a", "b"])], "input 'y'"),
])
def test_bad_inputs_raise_a_clear_error(inputs, message):
    with pytest.raises(ReferenceModelError, match=message):
        reference_model.run(add_graph(), inputs)


def test_a_wrong_operand_count_is_an_error_if():
    graph = Graph("main")
    x = graph.add_input("x", t((2,)))
    op = graph.append(Op("tosa.add", [x], [t((2,))], loc="layer_2"))
    graph.set_outputs([op.result])
    with pytest.raises(SpecErrorIf, match=r"layer_2.*expects 2 operand\(s\).*got 1"):
        reference_model.run(graph, [np.int32([1, 2])])


def test_out_of_range_values_do_not_convert():
    with pytest.raises(ReferenceModelError, match="do not fit"):
        reference_model.run(add_graph(), [[2**40, 0], [0, 0]])


def test_dynamic_dimensions_accept_any_size():
    graph = add_graph(shape=(-1,))
    out = reference_model.run(graph, [np.int32([1, 2, 3]), np.int32([1, 1, 1])])["out"]
    assert out.tolist() == [2, 3, 4]


def test_a_non_tosa_op_is_named_with_its_location():
    graph = Graph("main")
    x = graph.add_input("x", t((1,), F32))
    op = graph.append(Op("tfl.add", [x, x], [t((1,), F32)], loc="model.tflite:subgraph 0:op 3"))
    graph.set_outputs([op.result])
    with pytest.raises(ReferenceModelError, match=r"tfl\.add at model\.tflite:subgraph 0:op 3"):
        reference_model.run(graph, [np.float32([1])])


def test_require_failures_name_the_op_and_location():
    graph = Graph("main")
    x = graph.add_input("x", t((1,)))
    op = graph.append(Op("tosa.intdiv", [x, x], [t((1,))], loc="layer_7"))
    graph.set_outputs([op.result])
    with pytest.raises(SpecRequire, match=r"INTDIV \(layer_7\).*divisor"):
        reference_model.run(graph, [np.int32([0])])


def test_a_declared_shape_the_op_does_not_produce_is_an_error_if():
    graph = Graph("main")
    x = graph.add_input("x", t((2,)))
    op = graph.append(Op("tosa.add", [x, x], [t((3,))], loc="layer_1"))
    graph.set_outputs([op.result])
    with pytest.raises(SpecErrorIf, match="layer_1.*shape"):
        reference_model.run(graph, [np.int32([1, 2])])


def _branch(name: str, op_name: str | None) -> Graph:
    graph = Graph(name)
    a = graph.add_input("a", t((1,)))
    b = graph.add_input("b", t((1,)))
    op = graph.append(Op(op_name, [a, b], [t((1,))]))
    graph.set_outputs([op.result])
    return graph


def test_cond_if_runs_the_branch_the_condition_picks():
    module = Module()
    main = module.add_graph(Graph("main"))
    condition = main.add_input("c", t((), BOOL))
    a = main.add_input("a", t((1,)))
    b = main.add_input("b", t((1,)))
    op = main.append(Op("tosa.cond_if", [condition, a, b], [t((1,))],
                        {"then_graph": "then", "else_graph": "else"}))
    main.set_outputs([op.result])
    module.add_graph(_branch("then", "tosa.add"))
    module.add_graph(_branch("else", "tosa.sub"))
    inputs = [np.int32([7]), np.int32([2])]
    assert reference_model.run(module, [np.bool_(True), *inputs])[op.result.name].tolist() == [9]
    assert reference_model.run(module, [np.bool_(False), *inputs])[op.result.name].tolist() == [5]


def test_while_loop_iterates_until_the_condition_is_false():
    # while (i < 5) { i = i + 1; acc = acc + acc }  from i = 0, acc = 3  ->  i = 5, acc = 96
    module = Module()
    main = module.add_graph(Graph("main"))
    i0 = main.add_input("i", t((1,)))
    acc0 = main.add_input("acc", t((1,)))
    loop = main.append(Op("tosa.while_loop", [i0, acc0], [t((1,)), t((1,))],
                          {"cond_graph": "cond", "body_graph": "body"},
                          result_names=["i_out", "acc_out"]))
    main.set_outputs(loop.results)

    cond = module.add_graph(Graph("cond"))
    i, _acc = cond.add_input("i", t((1,))), cond.add_input("acc", t((1,)))
    five = cond.append(Op("tosa.const", [], [t((1,))], {"values": np.int32([5])}))
    less = cond.append(Op("tosa.greater", [five.result, i], [t((1,), BOOL)]))
    cond.set_outputs([less.result])

    body = module.add_graph(Graph("body"))
    i, acc = body.add_input("i", t((1,))), body.add_input("acc", t((1,)))
    one = body.append(Op("tosa.const", [], [t((1,))], {"values": np.int32([1])}))
    step = body.append(Op("tosa.add", [i, one.result], [t((1,))]))
    double = body.append(Op("tosa.add", [acc, acc], [t((1,))]))
    body.set_outputs([step.result, double.result])

    result = reference_model.run(module, [np.int32([0]), np.int32([3])])
    assert result["i_out"].tolist() == [5] and result["acc_out"].tolist() == [96]


def test_control_flow_to_a_missing_graph_is_an_error_if():
    main = Graph("main")
    c = main.add_input("c", t((1,), BOOL))
    a = main.add_input("a", t((1,)))
    op = main.append(Op("tosa.cond_if", [c, a], [t((1,))],
                        {"then_graph": "nowhere", "else_graph": "nowhere"}))
    main.set_outputs([op.result])
    with pytest.raises(SpecErrorIf, match="nowhere"):
        reference_model.run(main, [[True], [1]])


def test_variables_persist_between_ops_of_a_run():
    graph = Graph("main")
    x = graph.add_input("x", t((2,), I8))
    graph.append(Op("tosa.variable", [], [], {"name": "state", "var_shape": [2], "type": "i8",
                                              "initial_value": np.int8([5, 6])}))
    before = graph.append(Op("tosa.variable_read", [], [t((2,), I8)], {"name": "state"},
                             result_names=["before"]))
    graph.append(Op("tosa.variable_write", [x], [], {"name": "state"}))
    after = graph.append(Op("tosa.variable_read", [], [t((2,), I8)], {"name": "state"},
                            result_names=["after"]))
    graph.set_outputs([before.result, after.result])
    result = reference_model.run(graph, [np.int8([1, 2])])
    assert result["before"].tolist() == [5, 6] and result["after"].tolist() == [1, 2]


def test_reading_an_undeclared_variable_is_an_error_if():
    graph = Graph("main")
    read = graph.append(Op("tosa.variable_read", [], [t((2,), I8)], {"name": "ghost"}))
    graph.set_outputs([read.result])
    with pytest.raises(SpecErrorIf, match="ghost"):
        reference_model.run(graph, [])


def test_import_is_cheap():
    import subprocess
    import sys

    code = ("import sys, reference_model; "
            "print(any(m.startswith(('reference_model.kernels', 'tensorflow')) "
            "for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_an_error_if_after_a_require_failure_makes_the_graph_invalid():
    # op 1 divides by zero (REQUIRE), op 2 declares a wrong shape (ERROR_IF): the graph
    # is invalid whatever its data, so the ERROR_IF is what the run reports.
    graph = Graph("main")
    x = graph.add_input("x", t((2,)))
    quotient = graph.append(Op("tosa.intdiv", [x, x], [t((2,))], loc="op1"))
    bad = graph.append(Op("tosa.add", [quotient.result, x], [t((3,))], loc="op2"))
    graph.set_outputs([bad.result])
    with pytest.raises(SpecErrorIf, match="op2"):
        reference_model.run(graph, [np.int32([0, 1])])
    good = Graph("main")
    x = good.add_input("x", t((2,)))
    quotient = good.append(Op("tosa.intdiv", [x, x], [t((2,))], loc="op1"))
    fine = good.append(Op("tosa.add", [quotient.result, x], [t((2,))], loc="op2"))
    good.set_outputs([fine.result])
    with pytest.raises(SpecRequire, match="op1"):
        reference_model.run(good, [np.int32([0, 1])])
