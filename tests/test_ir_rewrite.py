"""The rewrite driver, the Builder and the graph bookkeeping it relies on."""

from __future__ import annotations

import pytest

from tfl2tosa.errors import IRError
from tfl2tosa.ir.builder import Builder
from tfl2tosa.ir.core import Graph, Module, Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter, rewrite_graph, rewrite_module
from tfl2tosa.ir.types import TensorType, f32, i32

T = TensorType((4,), f32)


def chain(*names: str) -> tuple[Graph, list[Op]]:
    """main(x) -> ops[-1](...ops[0](x)) with one-operand ops named `names`."""
    graph = Graph("main")
    value = graph.add_input("x", T)
    ops = []
    for i, name in enumerate(names):
        op = graph.append(Op(name, [value], [T], result_names=[f"t{i}"], loc=f"main:op{i}"))
        ops.append(op)
        value = op.result
    graph.set_outputs([value])
    return graph, ops


def op_names(graph: Graph) -> list[str]:
    return [op.name for op in graph.ops]


def uses_are_consistent(graph: Graph) -> None:
    """Every operand is recorded in its value's use list and nothing else is."""
    graph.verify_structure()
    live = {id(op) for op in graph.ops}
    for value in graph.values():
        for user, index in value.uses:
            assert id(user) in live, f"{value.name} is used by a removed op {user}"
            assert user.operands[index] is value


def to_tosa_negate(op: Op, rw: Rewriter) -> list[Value]:
    return [rw.op("tosa.negate", [op.operands[0]], op.result.type)]


def test_pattern_applies_and_replaces_uses():
    graph, (relu, _) = chain("tfl.relu", "tfl.abs")
    record = rewrite_graph(graph, {"tfl.relu": to_tosa_negate})
    assert op_names(graph) == ["tosa.negate", "tfl.abs"]
    assert graph.ops[1].operands[0].owner is graph.ops[0]
    assert [(op.name, name) for op, name in record.applied] == [("tfl.relu", "to_tosa_negate")]
    assert not relu.result.uses
    uses_are_consistent(graph)


def test_ops_without_patterns_are_kept_in_order():
    graph, ops = chain("tfl.a", "tfl.b", "tfl.c")
    record = rewrite_graph(graph, {})
    assert graph.ops == ops and not record.applied and not record.failures


def test_first_matching_pattern_wins():
    graph, _ = chain("tfl.relu")
    calls = []

    def no_match(op, rw):
        calls.append("no_match")
        return Failure("relu: not this one")

    def first(op, rw):
        calls.append("first")
        return [rw.op("tosa.first", [op.operands[0]], T)]

    def second(op, rw):
        calls.append("second")
        return [rw.op("tosa.second", [op.operands[0]], T)]

    rewrite_graph(graph, {"tfl.relu": [no_match, first, second]})
    assert calls == ["no_match", "first"]
    assert op_names(graph) == ["tosa.first"]


def test_failure_reasons_are_recorded_and_op_kept():
    graph, (relu,) = chain("tfl.relu")

    def needs_int(op, rw):
        return Failure("relu: float input is not supported")

    def silent(op, rw):
        return None

    record = rewrite_graph(graph, {"tfl.relu": [needs_int, silent]})
    assert graph.ops == [relu]
    assert record.failures == [(relu, "relu: float input is not supported; "
                                      "silent does not apply")]
    assert not record.applied
    # A Failure is truthy so that `if failed := check(op): return failed` works.
    assert Failure("x")
    assert (None or Failure("first") or Failure("second")) == Failure("first")


def test_ops_a_failed_pattern_created_are_discarded():
    graph, (relu,) = chain("tfl.relu")
    x = graph.inputs[0]

    def half_done(op, rw):
        rw.op("tosa.abs", [x], T)
        rw.op("tosa.floor", [x], T)
        return Failure("gave up after creating two ops")

    rewrite_graph(graph, {"tfl.relu": [half_done, to_tosa_negate]})
    assert op_names(graph) == ["tosa.negate"]
    # The discarded ops no longer count as users of x.
    assert [user.name for user, _ in x.uses] == ["tosa.negate"]
    uses_are_consistent(graph)


def test_replacement_takes_the_replaced_tensor_name():
    graph, (relu, add) = chain("tfl.relu", "tfl.add")

    def two_steps(op, rw):
        a = rw.op("tosa.abs", [op.operands[0]], T)
        return [rw.op("tosa.negate", [a], T)]

    rewrite_graph(graph, {"tfl.relu": two_steps})
    abs_op, negate, _ = graph.ops
    # Intermediates are named after the TFLite tensor they help compute; the
    # final value takes the tensor's own name; locations are carried over.
    assert abs_op.result.name == "t0/abs"
    assert negate.result.name == "t0"
    assert relu.result.name.startswith("t0/")
    assert abs_op.loc == negate.loc == "main:op0"
    assert len({v.name for v in graph.values()}) == len(list(graph.values()))


def test_existing_value_as_replacement_keeps_its_name():
    graph, (identity, _) = chain("tfl.identity", "tfl.abs")
    rewrite_graph(graph, {"tfl.identity": lambda op, rw: [op.operands[0]]})
    assert op_names(graph) == ["tfl.abs"]
    assert graph.ops[0].operands[0] is graph.inputs[0]
    assert graph.inputs[0].name == "x"


def test_graph_outputs_are_replaced():
    graph, (relu,) = chain("tfl.relu")
    rewrite_graph(graph, {"tfl.relu": to_tosa_negate})
    assert graph.outputs == [graph.ops[0].result]
    assert graph.outputs[0].name == "t0"


def test_output_replaced_by_input():
    graph, _ = chain("tfl.identity")
    rewrite_graph(graph, {"tfl.identity": lambda op, rw: [op.operands[0]]})
    assert graph.ops == [] and graph.outputs == graph.inputs


def test_single_pass_does_not_revisit_new_ops():
    graph, _ = chain("tfl.a")
    patterns = {"tfl.a": lambda op, rw: [rw.op("tfl.b", [op.operands[0]], T)],
                "tfl.b": lambda op, rw: [rw.op("tfl.c", [op.operands[0]], T)]}
    rewrite_graph(graph, patterns)
    assert op_names(graph) == ["tfl.b"]


def test_fixpoint_revisits_new_ops_until_nothing_changes():
    graph, _ = chain("tfl.a")
    patterns = {"tfl.a": lambda op, rw: [rw.op("tfl.b", [op.operands[0]], T)],
                "tfl.b": lambda op, rw: [rw.op("tfl.c", [op.operands[0]], T)]}
    rewrite_graph(graph, patterns, fixpoint=True)
    assert op_names(graph) == ["tfl.c"]
    assert graph.outputs[0].name == "t0"


def test_fixpoint_that_never_converges_raises():
    graph, _ = chain("tfl.a")
    flip = {"tfl.a": lambda op, rw: [rw.op("tfl.b", [op.operands[0]], T)],
            "tfl.b": lambda op, rw: [rw.op("tfl.a", [op.operands[0]], T)]}
    with pytest.raises(IRError, match="did not converge"):
        rewrite_graph(graph, flip, fixpoint=True, max_iterations=5)


def split_graph() -> tuple[Graph, Op]:
    graph = Graph("main")
    x = graph.add_input("x", T)
    split = graph.append(Op("tfl.split", [x], [T, T], result_names=["lo", "hi"]))
    graph.append(Op("tfl.add", split.results, [T], result_names=["sum"]))
    graph.set_outputs([split.results[1], graph.ops[-1].result])
    return graph, split


def test_multi_result_op_replaced_one_for_one_with_names():
    graph, split = split_graph()

    def lower_split(op, rw):
        x = op.operands[0]
        return [rw.op("tosa.slice", [x], T), rw.op("tosa.slice", [x], T)]

    rewrite_graph(graph, {"tfl.split": lower_split})
    first, second, add = graph.ops
    assert op_names(graph) == ["tosa.slice", "tosa.slice", "tfl.add"]
    # Each replacement is named after the TFLite tensor it replaces.
    assert (first.result.name, second.result.name) == ("lo", "hi")
    assert add.operands == [first.result, second.result]
    assert graph.outputs == [second.result, add.result]
    uses_are_consistent(graph)


def test_multi_result_same_value_for_both_results():
    graph, split = split_graph()
    rewrite_graph(graph, {"tfl.split": lambda op, rw: [rw.op("tosa.identity",
                                                             [op.operands[0]], T)] * 2})
    identity, add = graph.ops
    assert identity.result.name == "lo"
    assert add.operands == [identity.result, identity.result]


def test_wrong_number_of_replacements_raises():
    graph, _ = split_graph()
    with pytest.raises(IRError, match="returned 1 values for 2 results"):
        rewrite_graph(graph, {"tfl.split": lambda op, rw: [op.operands[0]]})


def test_rewrite_module_covers_every_graph():
    module = Module()
    for name in ("main", "body"):
        graph, _ = chain("tfl.relu")
        graph.name = name
        module.add_graph(graph)
    record = rewrite_module(module, {"tfl.relu": to_tosa_negate})
    assert len(record.applied) == 2
    assert all(op_names(g) == ["tosa.negate"] for g in module.graphs.values())


class TestGraph:
    def test_unique_names(self):
        graph = Graph("g")
        assert [graph.unique_name("t") for _ in range(3)] == ["t", "t_1", "t_2"]
        assert graph.unique_name("") == "t_3"

    def test_append_names_results_after_the_op(self):
        graph = Graph("g")
        x = graph.add_input("x", T)
        op = graph.append(Op("tosa.abs", [x], [T]))
        assert op.result.name == "abs"
        assert graph.append(Op("tosa.abs", [x], [T])).result.name == "abs_1"

    def test_erase_dead_ops_keeps_side_effects_and_outputs(self):
        graph = Graph("g")
        x = graph.add_input("x", T)
        dead = graph.append(Op("tosa.abs", [x], [T]))
        graph.append(Op("tosa.floor", [dead.result], [T]))
        graph.append(Op("tosa.variable_write", [x], [], {"name": "v"}))
        graph.append(Op("tfl.custom_thing", [x], [T], {"side_effect": True}))
        live = graph.append(Op("tosa.negate", [x], [T]))
        graph.set_outputs([live.result])
        assert graph.erase_dead_ops() == 2
        assert op_names(graph) == ["tosa.variable_write", "tfl.custom_thing", "tosa.negate"]
        assert [u.name for u, _ in x.uses] == ["tosa.variable_write", "tfl.custom_thing",
                                               "tosa.negate"]

    def test_erase_dead_ops_judges_ops_of_several_or_no_results(self):
        graph = Graph("g")
        x = graph.add_input("x", T)
        output_pair = graph.append(Op("test.split", [x], [T, T]))
        used_pair = graph.append(Op("test.split", [x], [T, T]))
        dead_pair = graph.append(Op("test.split", [x], [T, T]))
        graph.append(Op("tosa.abs", [dead_pair.results[1]], [T]))
        graph.append(Op("test.nothing", [x], []))
        user = graph.append(Op("tosa.floor", [used_pair.results[0]], [T]))
        graph.set_outputs([output_pair.results[1], user.result])
        assert graph.erase_dead_ops() == 3
        assert graph.ops == [output_pair, used_pair, user]
        assert graph.erase_dead_ops() == 0
        assert graph.ops == [output_pair, used_pair, user]

    def test_verify_structure_finds_use_before_definition(self):
        graph = Graph("g")
        x = graph.add_input("x", T)
        a = Op("tosa.abs", [x], [T], result_names=["a"])
        b = Op("tosa.floor", [a.result], [T], result_names=["b"])
        graph.ops = [b, a]
        with pytest.raises(IRError, match="before it is defined"):
            graph.verify_structure()

    def test_operand_must_be_a_value(self):
        with pytest.raises(IRError, match="not a Value"):
            Op("tosa.abs", [3], [T])

    def test_set_operand_moves_the_use(self):
        graph = Graph("g")
        x, y = graph.add_input("x", T), graph.add_input("y", T)
        op = graph.append(Op("tosa.add", [x, x], [T]))
        op.set_operand(1, y)
        assert x.uses == [(op, 0)] and y.uses == [(op, 1)]

    def test_result_of_multi_result_op(self):
        op = Op("tfl.split", [], [T, T])
        with pytest.raises(IRError):
            op.result  # noqa: B018
        assert (op.dialect, op.opname) == ("tfl", "split")

    def test_module_graph_names_are_unique(self):
        module = Module()
        module.add_graph(Graph("main"))
        with pytest.raises(IRError):
            module.add_graph(Graph("main"))
        assert module.main.name == "main"
        with pytest.raises(IRError):
            Module().main  # noqa: B018


class TestBuilder:
    def test_names_and_location(self):
        graph = Graph("g")
        x = graph.add_input("x", T)
        b = Builder(graph, name_base="conv1", loc="main:op3")
        v = b.op("tosa.cast", [x], TensorType((4,), i32))
        w = b.op("tosa.cast", [v], T)
        assert (v.name, w.name) == ("conv1/cast", "conv1/cast_1")
        assert [op.loc for op in b.created] == ["main:op3", "main:op3"]
        assert graph.ops == b.created

    def test_attributes_and_explicit_result_names(self):
        graph = Graph("g")
        b = Builder(graph)
        op = b.create("tfl.split", [], [T, T], {"num_splits": 2}, result_names=["a", "b"])
        assert [r.name for r in op.results] == ["a", "b"] and op.attrs == {"num_splits": 2}
