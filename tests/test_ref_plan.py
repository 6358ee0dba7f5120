"""Execution plans: compile once, run many times; prepared kernels on whole models.

Every architecture of the model zoo (models/arch) is converted, written to a
`.tosa` file and run from those bytes on Arm's reference model and on ours
(compiled, with the prepared kernels): integer outputs must be identical, float
outputs close. Ours must also give the same bits with the prepared kernels
switched off, so a prepared kernel never changes a result the kernel gives.
The rest are small graphs worked out by hand.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from arm import run_arm

import reference_model
from reference_model.evaluator import CompiledModel
from tfl2tosa.errors import ReferenceModelError, SpecErrorIf, SpecRequire
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


def test_an_empty_module_cannot_be_compiled():
    with pytest.raises(ReferenceModelError, match="no graphs"):
        reference_model.compile(Module())


def _clamp_module(element: str, low: float, high: float, nan_mode: str) -> Module:
    graph = Graph("main")
    x = graph.add_input("x", TensorType((12,), scalar_type(element)))
    clamp = graph.append(Op("tosa.clamp", [x], [TensorType((12,), scalar_type(element))],
                            {"min_val": low, "max_val": high, "nan_mode": nan_mode},
                            result_names=["y"]))
    graph.set_outputs([clamp.result])
    module = Module()
    module.add_graph(graph)
    return module


@pytest.mark.parametrize("element", ["f32", "f16"])
@pytest.mark.parametrize("nan_mode", ["PROPAGATE", "IGNORE"])
@pytest.mark.parametrize("low, high", [(0.0, 6.0), (-0.0, 0.0), (0.0, 0.0), (-0.0, -0.0),
                                       (-1.0, -1.0), (-np.inf, np.inf)])
def test_prepared_float_clamp_gives_the_kernels_bits(element, nan_mode, low, high,
                                                     monkeypatch):
    # Signed zeros and NaNs included: the prepared form must reproduce the kernel's
    # apply_clip_s bit for bit (which zero, which NaN), not just compare equal.
    dtype = numpy_dtype(scalar_type(element))
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 7.5, -7.5, 6.0, -1.0,
                  1e-8, -1e-8], dtype=dtype)
    module = _clamp_module(element, low, high, nan_mode)
    compiled = CompiledModel(module)
    assert compiled.plan("main").steps[0].prepared is not None
    prepared = compiled.run([x])["y"]
    with monkeypatch.context() as patch:
        patch.setattr("reference_model.plan.PREPARERS", {})
        kernel = reference_model.run(module, [x])["y"]
    bits = np.dtype(f"u{dtype.itemsize}")
    np.testing.assert_array_equal(prepared.view(bits), kernel.view(bits))


def _matmul_module(element: str, zero_point: float) -> Module:
    el = scalar_type(element)
    graph = Graph("main")
    a = graph.add_input("a", TensorType((2, 3, 4), el))
    b = graph.add_input("b", TensorType((2, 4, 5), el))
    dtype = numpy_dtype(el)
    zps = [graph.append(Op("tosa.const", [], [TensorType((1,), el)],
                           {"values": np.array([zero_point], dtype)})).result
           for _ in range(2)]
    product = graph.append(Op("tosa.matmul", [a, b, *zps], [TensorType((2, 3, 5), el)],
                              result_names=["y"]))
    graph.set_outputs([product.result])
    module = Module()
    module.add_graph(graph)
    return module


@pytest.mark.parametrize("element", ["f32", "f16"])
@pytest.mark.parametrize("zero_point", [0.0, -0.0])
def test_prepared_float_matmul_gives_the_kernels_bits(element, zero_point, monkeypatch):
    dtype = numpy_dtype(scalar_type(element))
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 3, 4)).astype(dtype)
    b = rng.standard_normal((2, 4, 5)).astype(dtype)
    a[0, 0] = [0.0, -0.0, 3.0, 1.0]
    b[1, :, 0] = [-0.0, -0.0, -0.0, -0.0]
    a[1, 2] = [-0.0, -0.0, -0.0, -0.0]
    module = _matmul_module(element, zero_point)
    compiled = CompiledModel(module)
    # -0.0 is not a zero point the prepared form takes (x - -0.0 turns -0.0 into +0.0).
    prepared_step = compiled.plan("main").steps[0].prepared is not None
    assert prepared_step == (not np.signbit(zero_point))
    prepared = compiled.run([a, b])["y"]
    with monkeypatch.context() as patch:
        patch.setattr("reference_model.plan.PREPARERS", {})
        kernel = reference_model.run(module, [a, b])["y"]
    bits = np.dtype(f"u{dtype.itemsize}")
    np.testing.assert_array_equal(prepared.view(bits), kernel.view(bits))


def _unprepared(module: Module, feeds: list[np.ndarray], monkeypatch) -> dict:
    with monkeypatch.context() as patch:
        patch.setattr("reference_model.plan.PREPARERS", {})
        return reference_model.run(module, feeds)


@pytest.mark.parametrize("element", ["i8", "i16", "i32"])
@pytest.mark.parametrize("rounding", [False, True])
@pytest.mark.parametrize("shift_shape", [(1, 1), (1, 5)])
def test_prepared_arithmetic_right_shift_by_constants_gives_the_kernels_results(
        element, rounding, shift_shape, monkeypatch):
    el = scalar_type(element)
    dtype = numpy_dtype(el)
    bits = dtype.itemsize * 8
    info = np.iinfo(dtype)
    x = np.array([[info.min, info.max, -1, 0, 1], [-5, 5, -6, 6, 3],
                  [info.min + 1, info.max - 1, -2, 2, 7]], dtype=dtype)
    shifts = np.array([0, 1, 2, bits // 2, bits - 1], dtype=dtype)[:shift_shape[1]]
    graph = Graph("main")
    value = graph.add_input("x", TensorType(x.shape, el))
    amount = graph.append(Op("tosa.const", [], [TensorType(shift_shape, el)],
                             {"values": shifts.reshape(shift_shape)})).result
    shifted = graph.append(Op("tosa.arithmetic_right_shift", [value, amount],
                              [TensorType(x.shape, el)], {"round": rounding},
                              result_names=["y"]))
    graph.set_outputs([shifted.result])
    module = Module()
    module.add_graph(graph)
    compiled = CompiledModel(module)
    assert compiled.plan("main").steps[0].prepared is not None
    ours = compiled.run([x])["y"]
    assert ours.dtype == dtype
    np.testing.assert_array_equal(ours, _unprepared(module, [x], monkeypatch)["y"])


def test_prepared_gather_reports_an_index_out_of_range_as_the_kernel(monkeypatch):
    graph = Graph("main")
    values = graph.add_input("values", TensorType((1, 4, 2), I32))
    indices = graph.add_input("indices", TensorType((1, 3), I32))
    gathered = graph.append(Op("tosa.gather", [values, indices], [TensorType((1, 3, 2), I32)],
                               result_names=["y"]))
    graph.set_outputs([gathered.result])
    module = Module()
    module.add_graph(graph)
    table = np.arange(8, dtype=np.int32).reshape(1, 4, 2)
    compiled = CompiledModel(module)
    assert compiled.plan("main").steps[0].prepared is not None
    np.testing.assert_array_equal(compiled.run([table, np.int32([[3, 0, 3]])])["y"],
                                  [[[6, 7], [0, 1], [6, 7]]])
    with pytest.raises(SpecRequire, match="0 <= index < K=4") as prepared:
        compiled.run([table, np.int32([[0, 4, 1]])])
    with pytest.raises(SpecRequire) as kernel:
        _unprepared(module, [table, np.int32([[0, 4, 1]])], monkeypatch)
    assert str(prepared.value) == str(kernel.value)


@pytest.mark.parametrize("element, a_zp, b_zp", [("i8", -3, 5), ("i8", 0, 0), ("i16", 0, 0)])
@pytest.mark.parametrize("constant_b", [False, True])
def test_prepared_integer_matmul_gives_the_kernels_results(element, a_zp, b_zp, constant_b,
                                                           monkeypatch):
    el = scalar_type(element)
    dtype = numpy_dtype(el)
    out = scalar_type("i32" if element == "i8" else "i48")
    info = np.iinfo(dtype)
    rng = np.random.default_rng(11)
    a = rng.integers(info.min, info.max, size=(2, 3, 6), endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, size=(2, 6, 4), endpoint=True).astype(dtype)
    a[0, 0], b[1, :, 0] = info.min, info.min       # the largest products
    graph = Graph("main")
    a_value = graph.add_input("a", TensorType(a.shape, el))
    feeds = [a]
    if constant_b:
        b_value = graph.append(Op("tosa.const", [], [TensorType(b.shape, el)],
                                  {"values": b})).result
    else:
        b_value = graph.add_input("b", TensorType(b.shape, el))
        feeds.append(b)
    zps = [graph.append(Op("tosa.const", [], [TensorType((1,), el)],
                           {"values": np.array([zp], dtype)})).result for zp in (a_zp, b_zp)]
    product = graph.append(Op("tosa.matmul", [a_value, b_value, *zps],
                              [TensorType((2, 3, 4), out)], result_names=["y"]))
    graph.set_outputs([product.result])
    module = Module()
    module.add_graph(graph)
    compiled = CompiledModel(module)
    assert compiled.plan("main").steps[-1].prepared is not None
    ours = compiled.run(feeds)["y"]
    expected = np.einsum("nhc,ncw->nhw", a.astype(np.int64) - a_zp, b.astype(np.int64) - b_zp)
    np.testing.assert_array_equal(ours, expected)
    np.testing.assert_array_equal(ours, _unprepared(module, feeds, monkeypatch)["y"])


# ---------------------------------------------------------------------------
# Every prepared form held to its registered kernel on one shared case table:
# the single-op graphs of tests/tosa_graphs.py (every operator and type mode).


def _prepared_op_cases():
    from reference_model.kernels import PREPARERS
    from tosa_graphs import single_op_cases

    return single_op_cases(ops=sorted(PREPARERS))


PREPARED_CASES = _prepared_op_cases()


def _same_bits(mine: np.ndarray, kernel: np.ndarray) -> bool:
    if mine.dtype != kernel.dtype or mine.shape != kernel.shape:
        return False
    return np.asarray(mine).tobytes() == np.asarray(kernel).tobytes()


@pytest.mark.parametrize("case", PREPARED_CASES, ids=[c.id for c in PREPARED_CASES])
def test_prepared_form_gives_the_kernels_bits(case, monkeypatch):
    ours = list(reference_model.run(case.module, case.inputs).values())
    with monkeypatch.context() as patch:
        patch.setattr("reference_model.kernels.PREPARERS", {})
        patch.setattr("reference_model.plan.PREPARERS", {})
        kernel = list(reference_model.run(case.module, case.inputs).values())
    for mine, theirs in zip(ours, kernel):
        assert _same_bits(mine, theirs), (case.id, mine, theirs)


def test_every_preparer_prepares_some_case_of_the_table():
    """A preparer that declines every case of the table is held to its kernel by
    nothing: each must prepare at least one."""
    from reference_model.kernels import PREPARERS
    from reference_model.plan import compile_graph

    seen = set()
    for case in PREPARED_CASES:
        seen.update(s.spec_name for s in compile_graph(case.module.main).steps
                    if s.prepared is not None)
    assert set(PREPARERS) - seen == set()


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
