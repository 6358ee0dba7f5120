"""The reader's fast paths and the IR constructors they use.

Oracles: values and names written down by hand (what went into the file, and
Graph.unique_name's documented `base`, `base_1`, ... rule); each fast path is
checked on the cases it takes and on a neighbour it leaves to the general path.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tfl2tosa.ir.core import Graph, Module, Op, Value
from tfl2tosa.ir.types import TensorType, numpy_dtype, scalar_type
from tfl2tosa.tosa.reader import read_tosa
from tfl2tosa.tosa.writer import write_tosa

I8 = scalar_type("i8")


def test_assemble_links_operands_and_results() -> None:
    t = TensorType((2,), I8)
    x, y = Value("x", t), Value("y", t)
    operands = [x, y, x]
    attrs = {"round": True}
    op = Op.assemble("tosa.thing", operands, [t, TensorType((3,), I8)], ["a", "b"], attrs,
                     "here")
    assert op.operands is operands and op.attrs is attrs  # kept, not copied
    assert x.uses == [(op, 0), (op, 2)] and y.uses == [(op, 1)]
    assert [(v.name, v.type, v.owner, v.index) for v in op.results] == [
        ("a", t, op, 0), ("b", TensorType((3,), I8), op, 1)]
    assert op.loc == "here" and op.name == "tosa.thing"
    single = Op.assemble("tosa.const", [], [t], ["c"], {})
    assert single.result.name == "c" and single.result.owner is single
    assert single.result.index == 0 and single.loc == ""


def test_extend_names_results_like_append() -> None:
    t = TensorType((1,), I8)
    graph = Graph("g")
    graph.add_input("a", t)
    ops = [Op("tosa.const", [], [t], result_names=[name]) for name in ("a", "b", "", "a")]
    graph.extend(ops)
    assert graph.ops == ops
    # Taken names get the next free suffix; an unnamed result is named after its op.
    assert [op.result.name for op in ops] == ["a_1", "b", "const", "a_2"]
    assert graph.unique_name("const") == "const_1"


def _const_module(arrays: dict[str, tuple[np.ndarray, str]]) -> Module:
    module = Module()
    graph = module.add_graph(Graph("main"))
    results = []
    for name, (values, element) in arrays.items():
        t = TensorType(np.shape(values), scalar_type(element))
        results.append(graph.append(Op("tosa.const", [], [t], {"values": values},
                                       result_names=[name])).result)
    graph.set_outputs(results)
    return module


@pytest.mark.parametrize("element", ["i8", "i16", "i32", "f16", "f32"])
@pytest.mark.parametrize("shape", [(), (5,), (2, 3), (1, 2, 1, 2)])
def test_plain_constants_are_read_only_views_of_the_file(element: str,
                                                         shape: tuple[int, ...]) -> None:
    dtype = numpy_dtype(scalar_type(element))
    values = (np.arange(int(np.prod(shape))) - 3).astype(dtype).reshape(shape)
    data = write_tosa(_const_module({"c": (values, element)}))
    back = read_tosa(data).main.ops[0].attrs["values"]
    assert back.dtype == dtype and back.shape == shape
    assert back.tobytes() == values.tobytes()
    assert not back.flags.writeable
    assert np.shares_memory(back, np.frombuffer(data, np.uint8))


def test_constants_of_other_storage_are_decoded() -> None:
    """bf16, i4 and i48 constants go through the general decoder (no plain view)."""
    arrays = {"b": (np.array([1.5, -2.0], ml_dtypes.bfloat16), "bf16"),
              "n": (np.array([[-8, 7, 1]], np.int8), "i4"),
              "w": (np.array([-(1 << 40), 5]), "i48")}
    ops = read_tosa(write_tosa(_const_module(arrays))).main.ops
    assert ops[0].attrs["values"].astype(np.float32).tolist() == [1.5, -2.0]
    assert ops[1].attrs["values"].tolist() == [[-8, 7, 1]]
    assert ops[2].attrs["values"].tolist() == [-(1 << 40), 5]


def _clamps(element: str, bounds: list[tuple[float, float]]) -> Module:
    module = Module()
    graph = module.add_graph(Graph("main"))
    t = TensorType((3,), scalar_type(element))
    value = graph.add_input("x", t)
    for low, high in bounds:
        value = graph.append(Op("tosa.clamp", [value], [t],
                                {"min_val": low, "max_val": high,
                                 "nan_mode": "PROPAGATE"})).result
    graph.set_outputs([value])
    return module


@pytest.mark.parametrize("element, bounds", [
    ("i8", [(-128, 127), (-5, 6)]),
    ("i16", [(-32768, 32767), (-300, 299)]),
    ("i32", [(-(1 << 31), (1 << 31) - 1)]),
    ("f32", [(-1.5, 0.25), (-3.0e38, 3.0e38)]),
    ("f16", [(-0.5, 65504.0)]),
    ("bf16", [(-2.0, 0.5)]),  # not plainly stored: the general decoder
])
def test_clamp_bounds_read_back(element: str, bounds: list[tuple[float, float]]) -> None:
    ops = read_tosa(write_tosa(_clamps(element, bounds))).main.ops
    dtype = numpy_dtype(scalar_type(element))
    # The bounds as the element type holds them (3.0e38 in float32 is not 3.0e38).
    expected = [(np.array(low, dtype).item(), np.array(high, dtype).item())
                for low, high in bounds]
    assert [(op.attrs["min_val"], op.attrs["max_val"]) for op in ops] == expected
    assert all(type(op.attrs["min_val"]) is type(expected[0][0]) for op in ops)


def test_inline_attribute_tables_give_each_op_its_own_values_and_dict() -> None:
    """Repeated attribute tables are decoded once per file; equal tables give equal
    values, different ones their own, and every op a dict of its own."""
    module = Module()
    graph = module.add_graph(Graph("main"))
    t = TensorType((4,), scalar_type("i32"))
    x = graph.add_input("x", t)
    value = x
    rounds = [True, False, True, True, False]
    for flag in rounds:
        value = graph.append(Op("tosa.arithmetic_right_shift", [value, x], [t],
                                {"round": flag})).result
    graph.set_outputs([value])
    ops = read_tosa(write_tosa(module)).main.ops
    assert [op.attrs for op in ops] == [{"round": flag} for flag in rounds]
    ops[0].attrs["round"] = "changed"
    assert ops[2].attrs == {"round": True} and ops[3].attrs == {"round": True}
    assert len({id(op.attrs) for op in ops}) == len(ops)
