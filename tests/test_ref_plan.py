"""Execution plans: compile once, run many times; prepared kernels on whole models.

Every architecture of the model zoo (models/arch) is converted, written to a
`.tosa` file and run from those bytes on Arm's reference model and on ours
(compiled, with the prepared kernels): integer outputs must be identical, float
outputs close. Ours must also give the same bits with the prepared kernels
switched off, so a prepared kernel never changes a result the kernel gives.
The rest are small graphs worked out by hand.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from types import CodeType, FunctionType
from typing import NamedTuple

import numpy as np
import pytest
from arm import run_arm

import reference_model
from reference_model.evaluator import CompiledModel
from tfl2tosa.errors import ReferenceModelError, SpecErrorIf, SpecRequire, Tfl2TosaError
from tfl2tosa.ir import Graph, Module, Op, TensorType, scalar_type
from tfl2tosa.ir.types import numpy_dtype, storage_type
from tfl2tosa.tosa.writer import write_tosa

ARCH_MODELS = sorted((Path(__file__).resolve().parents[1] / "models" / "arch").glob("*.tflite"))
I32, I8 = scalar_type("i32"), scalar_type("i8")


def _random_inputs(module: Module, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = []
    for value in module.main.inputs:
        shape = tuple(1 if d < 0 else d for d in value.type.shape)
        dtype = numpy_dtype(storage_type(value.type.element))
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            feeds.append(rng.integers(max(info.min, -128), min(info.max, 127), size=shape,
                                      endpoint=True).astype(dtype))
        else:
            feeds.append(rng.standard_normal(shape).astype(dtype))
    return feeds


@pytest.mark.parametrize("path", ARCH_MODELS, ids=[p.stem for p in ARCH_MODELS])
def test_zoo_model_from_bytes_matches_arm_and_the_unprepared_kernels(path, monkeypatch):
    from tfl2tosa.pipeline import convert

    module, _ = convert(path)
    data = write_tosa(module)
    feeds = _random_inputs(module, seed=len(path.stem))
    compiled = reference_model.compile(data)
    ours = list(compiled.run(feeds).values())
    again = list(compiled.run(feeds).values())          # a plan is reusable
    with monkeypatch.context() as patch:
        patch.setattr("reference_model.kernels.PREPARERS", {})
        patch.setattr("reference_model.plan.PREPARERS", {})
        plain = list(reference_model.run(data, feeds).values())
    arm = run_arm(data, feeds, [a.dtype for a in ours])
    assert arm.status == "valid", arm.message
    for mine, second, kernel, theirs in zip(ours, again, plain, arm.outputs):
        np.testing.assert_array_equal(mine, second)
        np.testing.assert_array_equal(mine, kernel)
        theirs = np.asarray(theirs).reshape(mine.shape)
        if mine.dtype.kind in "iub":
            np.testing.assert_array_equal(mine, theirs)
        else:
            # Float convolutions give Arm's bits; MATMUL, TRANSPOSE_CONV2D and the
            # pools sum in another order than Arm's, within the specification's bounds.
            np.testing.assert_allclose(mine.astype(np.float64), theirs.astype(np.float64),
                                       rtol=1e-3, atol=1e-3)


def _add_graph() -> Graph:
    graph = Graph("main")
    x = graph.add_input("x", TensorType((2,), I32))
    one = graph.append(Op("tosa.const", [], [TensorType((2,), I32)],
                          {"values": np.int32([1, 1])}, result_names=["one"]))
    total = graph.append(Op("tosa.add", [x, one.result], [TensorType((2,), I32)],
                            result_names=["total"]))
    graph.set_outputs([total.result])
    return graph


def test_a_compiled_model_runs_many_inputs():
    compiled = reference_model.compile(_add_graph())
    assert isinstance(compiled, CompiledModel)
    assert compiled.run([np.int32([1, 2])])["total"].tolist() == [2, 3]
    assert compiled.run([np.int32([-5, 7])])["total"].tolist() == [-4, 8]
    assert reference_model.run(compiled, {"x": [0, 0]})["total"].tolist() == [1, 1]


def test_intermediates_include_folded_constants_in_order():
    result = reference_model.run(_add_graph(), [np.int32([3, 4])], keep_intermediates=True)
    assert list(result) == ["total", "x", "one"]
    assert result["one"].tolist() == [1, 1]


def test_variables_start_afresh_on_every_run_of_a_compiled_model():
    graph = Graph("main")
    x = graph.add_input("x", TensorType((1,), I8))
    graph.append(Op("tosa.variable", [], [], {"name": "state", "var_shape": [1], "type": "i8",
                                              "initial_value": np.int8([5])}))
    before = graph.append(Op("tosa.variable_read", [], [TensorType((1,), I8)],
                             {"name": "state"}, result_names=["before"]))
    graph.append(Op("tosa.variable_write", [x], [], {"name": "state"}))
    graph.set_outputs([before.result])
    compiled = reference_model.compile(graph)
    assert compiled.run([np.int8([9])])["before"].tolist() == [5]
    assert compiled.run([np.int8([7])])["before"].tolist() == [5]


def test_errors_found_while_compiling_are_raised_when_the_op_runs():
    # ADD has no i8 type mode: compiling succeeds, the run reports the ERROR_IF.
    graph = Graph("main")
    x = graph.add_input("x", TensorType((1,), I8))
    bad = graph.append(Op("tosa.add", [x, x], [TensorType((1,), I8)], loc="bad"))
    graph.set_outputs([bad.result])
    compiled = reference_model.compile(graph)
    with pytest.raises(SpecErrorIf, match="no TOSA 1.0 type mode of ADD"):
        compiled.run([np.int8([1])])


def test_a_zero_point_of_two_values_is_refused_after_one_of_one_value_passed():
    # The type-mode check is made once per op name, element types and [1]-ness of
    # each argument: the spec's ERROR_IF on a zero point that is not [1] must still
    # fire for an op whose types differ from a passed one only by that shape.
    graph = Graph("main")
    x = graph.add_input("x", TensorType((2,), I8))
    one = graph.add_input("one", TensorType((1,), I8))
    two = graph.add_input("two", TensorType((2,), I8))
    good = graph.append(Op("tosa.negate", [x, one, one], [TensorType((2,), I8)], loc="good"))
    bad = graph.append(Op("tosa.negate", [x, two, one], [TensorType((2,), I8)], loc="bad"))
    graph.set_outputs([good.result, bad.result])
    compiled = reference_model.compile(graph)
    with pytest.raises(SpecErrorIf, match=r"\(bad\).*'input1_zp' must have shape \[1\]"):
        compiled.run([np.int8([1, 2]), np.int8([0]), np.int8([0, 0])])


def test_ops_of_one_signature_are_named_by_their_own_location():
    # Both INTDIVs share a name and types (one step template); a failing REQUIRE
    # (INTDIV's divisor != 0) must still name the op that failed, by its location.
    graph = Graph("main")
    x, y, z = (graph.add_input(name, TensorType((2,), I32)) for name in "xyz")
    first = graph.append(Op("tosa.intdiv", [x, y], [TensorType((2,), I32)], loc="first"))
    second = graph.append(Op("tosa.intdiv", [first.result, z], [TensorType((2,), I32)],
                             loc="second"))
    graph.set_outputs([second.result])
    compiled = reference_model.compile(graph)
    # 7 / 2 = 3, 3 / 3 = 1; -7 / 2 = -3 (toward zero), -3 / 3 = -1.
    assert compiled.run([np.int32([7, -7]), np.int32([2, 2]),
                         np.int32([3, 3])])[second.result.name].tolist() == [1, -1]
    with pytest.raises(SpecRequire, match=r"^INTDIV \(second\)"):
        compiled.run([np.int32([7, -7]), np.int32([2, 2]), np.int32([3, 0])])
    with pytest.raises(SpecRequire, match=r"^INTDIV \(first\)"):
        compiled.run([np.int32([7, -7]), np.int32([0, 2]), np.int32([3, 3])])


def test_ops_share_a_prepared_kernel_only_when_every_static_fact_is_equal(monkeypatch):
    # Ops that differ in nothing but a bound's sign of zero (CLAMP), `round` (right
    # shift) or the value of a constant operand (MUL's shift) each get their own
    # prepared kernel and their kernel's bits; ops equal in all of it share one.
    from reference_model.plan import compile_graph

    f32, i32, i8 = (scalar_type(name) for name in ("f32", "i32", "i8"))
    graph = Graph("main")
    x = graph.add_input("x", TensorType((6,), f32))
    n = graph.add_input("n", TensorType((6,), i32))

    def append(opname: str, operands: list, attrs: dict | None = None) -> Op:
        element = operands[0].type.element
        return graph.append(Op(opname, operands, [TensorType((6,), element)], attrs or {},
                               result_names=[f"out{len(graph.ops)}"]))

    def constant(values: np.ndarray, element) -> object:
        return graph.append(Op("tosa.const", [], [TensorType(values.shape, element)],
                               {"values": values})).result

    def clamp(low: float) -> Op:
        return append("tosa.clamp", [x], {"min_val": low, "max_val": 6.0,
                                          "nan_mode": "PROPAGATE"})

    def right_shift(rounding: bool) -> Op:
        return append("tosa.arithmetic_right_shift", [n, constant(np.int32([1] * 6), i32)],
                      {"round": rounding})

    def multiply(shift: int) -> Op:
        return append("tosa.mul", [n, n, constant(np.int8([shift]), i8)])

    ops = {"clamp +0": clamp(0.0), "clamp -0": clamp(-0.0), "clamp +0 again": clamp(0.0),
           "shift": right_shift(False), "shift rounding": right_shift(True),
           "shift again": right_shift(False), "mul >> 0": multiply(0),
           "mul >> 1": multiply(1), "mul >> 1 again": multiply(1)}
    graph.set_outputs([op.result for op in ops.values()])
    prepared = {step.op: step.prepared for step in compile_graph(graph).steps}
    form = {name: prepared[op] for name, op in ops.items()}
    assert None not in form.values()
    assert form["clamp +0"] is form["clamp +0 again"] is not form["clamp -0"]
    assert form["shift"] is form["shift again"] is not form["shift rounding"]
    assert form["mul >> 1"] is form["mul >> 1 again"] is not form["mul >> 0"]

    feeds = [np.float32([-0.0, 0.0, -1.0, 7.0, np.nan, 2.5]),
             np.int32([3, -3, 5, -5, 7, 46341])]
    ours = reference_model.run(graph, feeds)
    with monkeypatch.context() as patch:
        patch.setattr("reference_model.kernels.PREPARERS", {})
        patch.setattr("reference_model.plan.PREPARERS", {})
        kernel = reference_model.run(graph, feeds)
    assert ours.keys() == kernel.keys()
    for name in ours:
        assert ours[name].dtype == kernel[name].dtype
        assert ours[name].tobytes() == kernel[name].tobytes(), name
    # The bounds' zeros differ in the result's zeros (apply_clip_s keeps the bound).
    assert ours[ops["clamp +0"].result.name].tobytes() \
        != ours[ops["clamp -0"].result.name].tobytes()


def test_an_empty_module_cannot_be_compiled():
    with pytest.raises(ReferenceModelError, match="no graphs"):
        reference_model.compile(Module())


# ---------------------------------------------------------------------------
# Every prepared form held to its registered kernel on one case table: the
# single-op graphs of tests/tosa_graphs.py (every type mode of every operator
# with a preparer) and the corners below, which those graphs do not reach.
# Each case runs compiled (prepared) and with the preparers switched off, and
# must give the same bits or raise the same error.


class PreparedCase(NamedTuple):
    id: str
    module: Module
    inputs: list[np.ndarray]
    error: str = ""     # what the run's error must say; "" when it must run


def _single_op_module(opname: str, operands: list, result_type: TensorType,
                      attrs: dict | None = None) -> tuple[Module, list]:
    """A module of one op: an ndarray operand becomes a graph input, a (values,
    element) pair a tosa.const; returns it with its inputs."""
    graph = Graph("main")
    values, feeds = [], []
    for i, operand in enumerate(operands):
        if isinstance(operand, tuple):
            array, element = operand
            values.append(graph.append(Op("tosa.const", [], [TensorType(array.shape, element)],
                                          {"values": array})).result)
        else:
            element = scalar_type({"bool": "i1", "float32": "f32", "float16": "f16"}.get(
                operand.dtype.name, operand.dtype.name.replace("int", "i")))
            values.append(graph.add_input(f"x{i}", TensorType(operand.shape, element)))
            feeds.append(operand)
    op = graph.append(Op(opname, values, [result_type], attrs or {}, result_names=["y"]))
    graph.set_outputs([op.result])
    module = Module()
    module.add_graph(graph)
    return module, feeds


def _clamp_corners() -> list[PreparedCase]:
    # Signed zeros and NaNs: the prepared form must give the kernel's apply_clip_s
    # bit for bit (which zero, which NaN), not just values that compare equal.
    cases = []
    for element in ("f32", "f16"):
        dtype = numpy_dtype(scalar_type(element))
        x = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 7.5, -7.5, 6.0, -1.0,
                      1e-8, -1e-8], dtype=dtype)
        for nan_mode in ("PROPAGATE", "IGNORE"):
            for low, high in ((0.0, 6.0), (-0.0, 0.0), (0.0, 0.0), (-0.0, -0.0), (-1.0, -1.0),
                              (-np.inf, np.inf)):
                module, feeds = _single_op_module(
                    "tosa.clamp", [x], TensorType(x.shape, scalar_type(element)),
                    {"min_val": low, "max_val": high, "nan_mode": nan_mode})
                cases.append(PreparedCase(f"clamp_{element}_{nan_mode}_{low}_{high}",
                                          module, feeds))
    return cases


def _float_matmul_corners() -> list[PreparedCase]:
    # A -0.0 zero point is not one the prepared form takes (x - -0.0 turns -0.0 into
    # +0.0); signed zeros in both operands.
    cases = []
    for element in ("f32", "f16"):
        el = scalar_type(element)
        dtype = numpy_dtype(el)
        rng = np.random.default_rng(7)
        a = rng.standard_normal((2, 3, 4)).astype(dtype)
        b = rng.standard_normal((2, 4, 5)).astype(dtype)
        a[0, 0] = [0.0, -0.0, 3.0, 1.0]
        b[1, :, 0] = -0.0
        a[1, 2] = -0.0
        for zero_point in (0.0, -0.0):
            zp = (np.array([zero_point], dtype), el)
            module, feeds = _single_op_module("tosa.matmul", [a, b, zp, zp],
                                              TensorType((2, 3, 5), el))
            cases.append(PreparedCase(f"matmul_{element}_zp{zero_point}", module, feeds))
    return cases


def _integer_matmul_corners() -> list[PreparedCase]:
    # The largest products, zero points, and a constant B (centred once).
    cases = []
    for element, a_zp, b_zp in (("i8", -3, 5), ("i8", 0, 0), ("i16", 0, 0)):
        el = scalar_type(element)
        dtype = numpy_dtype(el)
        out = scalar_type("i32" if element == "i8" else "i48")
        info = np.iinfo(dtype)
        rng = np.random.default_rng(11)
        a = rng.integers(info.min, info.max, size=(2, 3, 6), endpoint=True).astype(dtype)
        b = rng.integers(info.min, info.max, size=(2, 6, 4), endpoint=True).astype(dtype)
        a[0, 0], b[1, :, 0] = info.min, info.min
        zps = [(np.array([zp], dtype), el) for zp in (a_zp, b_zp)]
        for constant_b in (False, True):
            module, feeds = _single_op_module(
                "tosa.matmul", [a, (b, el) if constant_b else b, *zps],
                TensorType((2, 3, 4), out))
            cases.append(PreparedCase(
                f"matmul_{element}_zp{a_zp}_{b_zp}{'_constant_b' if constant_b else ''}",
                module, feeds))
    return cases


def _right_shift_corners() -> list[PreparedCase]:
    # Shifts by constants, one for all (0, 1, half the bits, bits - 1) or one per
    # column, at the type's extremes.
    cases = []
    for element in ("i8", "i16", "i32"):
        el = scalar_type(element)
        dtype = numpy_dtype(el)
        bits = dtype.itemsize * 8
        info = np.iinfo(dtype)
        x = np.array([[info.min, info.max, -1, 0, 1], [-5, 5, -6, 6, 3],
                      [info.min + 1, info.max - 1, -2, 2, 7]], dtype=dtype)
        amounts = [[0], [1], [bits // 2], [bits - 1], [0, 1, 2, bits // 2, bits - 1]]
        for shifts in amounts:
            shift = (np.array([shifts], dtype=dtype), el)
            for rounding in (False, True):
                module, feeds = _single_op_module("tosa.arithmetic_right_shift", [x, shift],
                                                  TensorType(x.shape, el), {"round": rounding})
                cases.append(PreparedCase(
                    f"arithmetic_right_shift_{element}_by_{'_'.join(map(str, shifts))}"
                    f"_round{rounding}", module, feeds))
    return cases


def _mul_corners() -> list[PreparedCase]:
    # i32 with shift 0 keeps the low 32 bits of products that leave int32.
    x = np.int32([[2**31 - 1, -2**31, 65536, -3, 0, 46341]])
    module, feeds = _single_op_module("tosa.mul", [x, x, (np.int8([0]), scalar_type("i8"))],
                                      TensorType(x.shape, I32))
    return [PreparedCase("mul_i32_shift0_wrapping", module, feeds)]


def _gather_corners() -> list[PreparedCase]:
    # An index out of range: the prepared form must raise the kernel's REQUIRE.
    table = np.arange(8, dtype=np.int32).reshape(1, 4, 2)
    cases = []
    for name, indices, error in (("in_range", [[3, 0, 3]], ""),
                                 ("index_out_of_range", [[0, 4, 1]], "REQUIRE 0 <= index < K=4")):
        module, feeds = _single_op_module("tosa.gather", [table, np.int32(indices)],
                                          TensorType((1, 3, 2), I32))
        cases.append(PreparedCase(f"gather_{name}", module, feeds, error))
    return cases


F32 = scalar_type("f32")
# fp32 edge values: NaNs of both signs, infinities, signed zeros, ties, the smallest
# subnormal and the largest finite value.
_FP32_EDGES = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -2.5,
                        1e-45, -1e-45, 3.4028235e38, -3.4028235e38, 7.0, -3.0], np.float32)


def _fp32_unary_corners() -> list[PreparedCase]:
    cases = []
    for name in ("abs", "ceil", "floor", "reciprocal"):
        x = _FP32_EDGES.reshape(4, 4)
        module, feeds = _single_op_module(f"tosa.{name}", [x], TensorType(x.shape, F32))
        cases.append(PreparedCase(f"{name}_f32_edges", module, feeds))
    return cases


def _fp32_min_max_corners() -> list[PreparedCase]:
    # Every pair of edge values (one with NaNs, one without: a NaN anywhere sends the
    # whole op to the kernel's helper), and a [4,1] operand against a [1,1] one.
    edges = _FP32_EDGES
    finite = edges[~np.isnan(edges)]
    pairs = {"nan": (np.repeat(edges, edges.size), np.tile(edges, edges.size)),
             "no_nan": (np.repeat(finite, finite.size), np.tile(finite, finite.size)),
             "broadcast": (np.float32([[0.0], [-0.0], [2.0], [-2.0]]), np.float32([[-0.0]]))}
    cases = []
    for name in ("maximum", "minimum"):
        for nan_mode in ("PROPAGATE", "IGNORE"):
            for kind, (a, b) in pairs.items():
                module, feeds = _single_op_module(
                    f"tosa.{name}", [a, b], TensorType(np.broadcast_shapes(a.shape, b.shape),
                                                       F32), {"nan_mode": nan_mode})
                cases.append(PreparedCase(f"{name}_f32_{nan_mode}_{kind}", module, feeds))
    return cases


def _fp32_reduce_extreme_corners() -> list[PreparedCase]:
    # Rows of signed zeros in both orders, with NaNs, all NaN, and infinities.
    x = np.float32([[0.0, -0.0, -0.0], [-0.0, 0.0, -0.0], [np.nan, 1.0, -np.nan],
                    [np.nan, np.nan, np.nan], [-np.inf, np.inf, 3.0], [-1.0, -0.0, 5.0]])
    no_nan = x[[0, 1, 4, 5]]
    cases = []
    for name in ("reduce_max", "reduce_min"):
        for nan_mode in ("PROPAGATE", "IGNORE"):
            for kind, values in (("nan", x), ("no_nan", no_nan)):
                for axis in (0, 1):
                    shape = (1, 3) if axis == 0 else (values.shape[0], 1)
                    module, feeds = _single_op_module(
                        f"tosa.{name}", [values], TensorType(shape, F32),
                        {"axis": axis, "nan_mode": nan_mode})
                    cases.append(PreparedCase(f"{name}_f32_{nan_mode}_{kind}_axis{axis}",
                                              module, feeds))
    return cases


def _fp32_cast_corners() -> list[PreparedCase]:
    # fp32 -> int: ties, saturation at each type's ends, infinities, signed zero, and
    # NaN on its own. int -> fp32: the ends of each type and ties of fp32's rounding.
    ties = np.float32([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.0, 0.0, np.inf, -np.inf,
                       126.5, 127.5, 128.0, -128.5, -129.0, 32767.5, -32768.5, 40000.0,
                       2147483520.0, 2147483648.0, -2147483648.0, -2147483904.0, 1e38])
    cases = []
    for target in ("i8", "i16", "i32"):
        element = scalar_type(target)
        for kind, x in (("edges", ties), ("nan", np.float32([1.5, np.nan, -2.5]))):
            module, feeds = _single_op_module("tosa.cast", [x], TensorType(x.shape, element))
            cases.append(PreparedCase(f"cast_f32_to_{target}_{kind}", module, feeds))
    big = [2**24 + 1, 2**24 + 3, 2**25 + 2, 2**25 + 6, 2**31 - 1, 2**31 - 64, 2**31 - 65,
           2**31 - 192, -2**31, -2**31 + 1, -2**24 - 1, 123456789, 0, -1]
    for source in ("i8", "i16", "i32"):
        info = np.iinfo(numpy_dtype(scalar_type(source)))
        x = np.array([v for v in big if info.min <= v <= info.max] + [info.min, info.max],
                     dtype=info.dtype)
        module, feeds = _single_op_module("tosa.cast", [x], TensorType(x.shape, F32))
        cases.append(PreparedCase(f"cast_{source}_to_f32_edges", module, feeds))
    return cases


def _intdiv_corners() -> list[PreparedCase]:
    # Signs of both operands, INT32_MIN / 1 and / -1 (a REQUIRE), a zero divisor.
    low, high = -2**31, 2**31 - 1
    cases = []
    for name, a, b, error in (
            ("signs", [[7], [-7], [7], [-7], [low], [high], [0], [low]],
             [[2], [2], [-2], [-2], [1], [-1], [-5], [-2]], ""),
            ("broadcast", [[7], [-7], [low], [high]], [[-3]], ""),
            ("min_by_minus_one", [[5], [low]], [[-1], [-1]], "INTDIV quotient"),
            ("zero_divisor", [[5], [6]], [[2], [0]], "INTDIV divisor != 0"),
            ("rank_0", -100, 70, "")):
        a, b = np.int32(a), np.int32(b)
        module, feeds = _single_op_module("tosa.intdiv", [a, b], TensorType(a.shape, I32))
        cases.append(PreparedCase(f"intdiv_i32_{name}", module, feeds, error))
    return cases


def _prepared_cases() -> list[PreparedCase]:
    from reference_model.kernels import PREPARERS
    from tosa_graphs import single_op_cases

    return ([PreparedCase(c.id, c.module, c.inputs)
             for c in single_op_cases(ops=sorted(PREPARERS))]
            + _clamp_corners() + _float_matmul_corners() + _integer_matmul_corners()
            + _right_shift_corners() + _mul_corners() + _gather_corners()
            + _fp32_unary_corners() + _fp32_min_max_corners()
            + _fp32_reduce_extreme_corners() + _fp32_cast_corners() + _intdiv_corners())


PREPARED_CASES = _prepared_cases()


def _outcome(module: Module, feeds: list[np.ndarray]) -> list[np.ndarray] | tuple[type, str]:
    """The run's outputs, or the class and text of the project error it raised."""
    try:
        return list(reference_model.run(module, feeds).values())
    except Tfl2TosaError as exc:
        return type(exc), str(exc)


def _same_bits(mine: np.ndarray, kernel: np.ndarray) -> bool:
    if mine.dtype != kernel.dtype or mine.shape != kernel.shape:
        return False
    return np.asarray(mine).tobytes() == np.asarray(kernel).tobytes()


@pytest.mark.parametrize("case", PREPARED_CASES, ids=[c.id for c in PREPARED_CASES])
def test_prepared_form_gives_the_kernels_bits(case, monkeypatch):
    ours = _outcome(case.module, case.inputs)
    with monkeypatch.context() as patch:
        patch.setattr("reference_model.kernels.PREPARERS", {})
        patch.setattr("reference_model.plan.PREPARERS", {})
        kernel = _outcome(case.module, case.inputs)
    if case.error:
        assert isinstance(ours, tuple) and case.error in ours[1], ours
        assert ours == kernel, case.id
        return
    assert not isinstance(ours, tuple) and not isinstance(kernel, tuple), (ours, kernel)
    assert len(ours) == len(kernel)
    for mine, theirs in zip(ours, kernel):
        assert _same_bits(mine, theirs), (case.id, mine, theirs)


def _prepared_forms() -> dict[str, CodeType]:
    """Every prepared form the kernel modules define, by qualified name: each
    function nested in a module's function that takes `operands` alone (the
    Prepared signature), which a preparer returns."""
    import reference_model.kernels as kernels

    forms: dict[str, CodeType] = {}

    def nested(code: CodeType, module: str) -> None:
        for constant in code.co_consts:
            if isinstance(constant, CodeType):
                if constant.co_varnames[:constant.co_argcount] == ("operands",):
                    forms[f"{module}.{constant.co_qualname}"] = constant
                nested(constant, module)

    for info in pkgutil.iter_modules(kernels.__path__):
        module = importlib.import_module(f"reference_model.kernels.{info.name}")
        for function in vars(module).values():
            if isinstance(function, FunctionType) and function.__module__ == module.__name__:
                nested(function.__code__, info.name)
    return forms


def test_every_prepared_form_runs_on_some_case_of_the_table():
    """A form that no case reaches is held to its kernel by nothing."""
    from reference_model.plan import compile_graph

    seen = set()
    for case in PREPARED_CASES:
        seen.update(s.prepared.__code__ for s in compile_graph(case.module.main).steps
                    if s.prepared is not None)
    forms = _prepared_forms()
    assert forms, "no prepared forms found: the scan is broken"
    assert sorted(name for name, code in forms.items() if code not in seen) == []


def test_no_prepared_form_keeps_the_op_it_was_made_for():
    """A compile gives one prepared form to every op with the same static facts, so
    a form must not reach its StaticOp at run time (its location is one op's): it
    hands operands to the op's own kernel with KernelNeeded instead."""
    keeping = sorted(name for name, code in _prepared_forms().items()
                     if "op" in code.co_freevars)
    assert keeping == []


def test_integer_matmul_is_the_exact_product():
    # The exact sum of products of the centred operands, which the prepared form
    # (float work dtype) and the kernel (int64) must both give.
    for case in _integer_matmul_corners():
        ours = list(reference_model.run(case.module, case.inputs).values())[0]
        op = case.module.main.ops[-1]
        a, b = (case.inputs[0], case.inputs[1] if len(case.inputs) > 1
                else op.operands[1].owner.attrs["values"])
        a_zp, b_zp = (int(v.owner.attrs["values"][0]) for v in op.operands[2:4])
        expected = np.einsum("nhc,ncw->nhw", a.astype(np.int64) - a_zp,
                             b.astype(np.int64) - b_zp)
        np.testing.assert_array_equal(ours, expected)


def test_a_preparer_that_raises_a_bug_is_not_hidden(monkeypatch):
    """Only the project's errors (an invalid op) send a step back to its kernel; any
    other exception out of a preparer is a bug and reaches the caller."""
    from reference_model.kernels import PREPARERS

    def broken(static):
        raise ZeroDivisionError("a bug in the preparer")

    monkeypatch.setitem(PREPARERS, "ADD", broken)
    with pytest.raises(ZeroDivisionError, match="a bug in the preparer"):
        reference_model.run(_add_graph(), [np.int32([1, 2])])


def test_a_preparer_refusing_an_invalid_op_leaves_the_error_to_the_kernel(monkeypatch):
    from reference_model.kernels import PREPARERS

    def refusing(static):
        raise SpecErrorIf("ERROR_IF raised by the preparer")

    monkeypatch.setitem(PREPARERS, "ADD", refusing)
    assert reference_model.run(_add_graph(), [np.int32([1, 2])])["total"].tolist() == [2, 3]


def test_prepared_kernels_ignore_float_errors_and_leave_the_callers_settings():
    """The evaluator runs prepared kernels with numpy's floating-point errors ignored
    (they have no np.errstate of their own): an overflow to infinity raises nothing
    even under the caller's `raise`, which is back in force after the run."""
    x = np.float32([[3e38, -3e38, 0.0]])
    module, feeds = _single_op_module("tosa.add", [x, x], TensorType(x.shape, F32))
    assert _all_steps_prepared(module)
    with np.errstate(all="raise"):
        (out,) = reference_model.run(module, feeds).values()
        assert np.geterr()["over"] == "raise"
    assert out.tolist() == [[np.inf, -np.inf, 0.0]]


def _all_steps_prepared(module: Module) -> bool:
    from reference_model.plan import compile_graph

    return all(step.prepared is not None for step in compile_graph(module.main).steps)
