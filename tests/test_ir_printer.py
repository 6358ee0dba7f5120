"""The MLIR printer: generic op form, constants (elided or not), locations, attributes.

Expected texts are written by hand in MLIR's generic syntax; TensorFlow's
embedded MLIR (arith, func and quant dialects registered) parses the output
as the independent check that it is valid MLIR meaning what we intended.
"""

from __future__ import annotations


import numpy as np
import pytest

from tfl2tosa.ir.core import Graph, Module, Op
from tfl2tosa.ir.printer import format_dense, format_value, print_graph, print_module
from tfl2tosa.ir.types import DYNAMIC, TensorType, f32, i8, i32

T = TensorType((2, 3), f32)


def add_module() -> Module:
    module = Module()
    graph = module.add_graph(Graph("main"))
    x = graph.add_input("serving_default_x:0", T)
    c = graph.append(Op("arith.constant", [], [T], {"value": np.arange(6, dtype=np.float32)
                                                    .reshape(2, 3) / 4}, result_names=["c"]))
    s = graph.append(Op("arith.addf", [x, c.result], [T], result_names=["StatefulCall:0"]))
    graph.set_outputs([s.result])
    return module


ADD_TEXT = """module {
  func.func @main(%arg0: tensor<2x3xf32> loc("serving_default_x:0")) -> (tensor<2x3xf32>) {
    %0 = "arith.constant"() <{value = dense<[[0.0, 0.25, 0.5], [0.75, 1.0, 1.25]]> : tensor<2x3xf32>}> : () -> tensor<2x3xf32> loc("c")
    %1 = "arith.addf"(%arg0, %0) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32> loc("StatefulCall:0")
    func.return %1 : tensor<2x3xf32>
  }
}
"""


def test_generic_form_with_locations():
    assert print_module(add_module()) == ADD_TEXT


def test_without_locations():
    text = print_module(add_module(), locations=False)
    assert "loc(" not in text
    assert '    %1 = "arith.addf"(%arg0, %0) : (tensor<2x3xf32>, tensor<2x3xf32>) -> ' \
           'tensor<2x3xf32>\n' in text


def test_mlir_parses_the_output_and_reads_the_same_program(mlir):
    expected = """module {
      func.func @main(%arg0: tensor<2x3xf32>) -> tensor<2x3xf32> {
        %cst = arith.constant dense<[[0.0, 0.25, 0.5], [0.75, 1.0, 1.25]]> : tensor<2x3xf32>
        %0 = arith.addf %arg0, %cst : tensor<2x3xf32>
        return %0 : tensor<2x3xf32>
      }
    }"""
    assert mlir(print_module(add_module())) == mlir(expected)


def test_mlir_reads_our_locations(mlir):
    out = mlir(print_module(add_module()), locations=True)
    for name in ("serving_default_x:0", "c", "StatefulCall:0"):
        assert f'loc("{name}")' in out


def constant_module(array: np.ndarray, element=f32, elide: int | None = 16) -> str:
    module = Module()
    graph = module.add_graph(Graph("main"))
    c = graph.append(Op("arith.constant", [], [TensorType(array.shape, element)],
                        {"value": array}, result_names=["c"]))
    graph.set_outputs([c.result])
    return print_module(module, elide=elide, locations=False)


def test_large_constants_are_elided():
    text = constant_module(np.arange(17, dtype=np.float32))
    assert 'value = dense_resource<__elided__> : tensor<17xf32>' in text
    assert "dense<[0.0, 1.0" in constant_module(np.arange(17, dtype=np.float32), elide=None)


def test_elision_threshold_is_inclusive():
    assert "dense_resource" not in constant_module(np.arange(16, dtype=np.float32))


def test_elided_constant_parses(mlir):
    out = mlir(constant_module(np.arange(17, dtype=np.float32)))
    assert "dense_resource<__elided__> : tensor<17xf32>" in out


@pytest.mark.parametrize("array, element, body", [
    (np.full((2, 2), 3, np.int32), i32, "dense<3> : tensor<2x2xi32>"),
    (np.array([1, -2], np.int8), i8, "dense<[1, -2]> : tensor<2xi8>"),
    (np.array([np.nan, np.inf, -np.inf], np.float32), f32,
     "dense<[0x7FC00000, 0x7F800000, 0xFF800000]> : tensor<3xf32>"),
    (np.array([1e-05, 0.1], np.float64).astype(np.float32), f32,
     "dense<[9.999999747378752e-06, 0.10000000149011612]> : tensor<2xf32>"),
    (np.array(2.5, np.float32), f32, "dense<2.5> : tensor<f32>"),
])
def test_dense_constants(mlir, array, element, body):
    text = constant_module(array, element)
    assert f"value = {body}" in text
    mlir(text)  # parses


def test_dense_float_literal_needs_a_dot(mlir):
    text = constant_module(np.array([1e-05, 2.0]), f32)
    assert "dense<[1.0e-05, 2.0]>" in text
    assert "dense<[9.99999974E-6, 2.000000e+00]>" in mlir(text)  # f32 nearest to 1e-05


def test_empty_dense():
    assert format_dense(np.zeros((0, 3), np.float32), "tensor<0x3xf32>", 16) == \
        "dense<> : tensor<0x3xf32>"


@pytest.mark.parametrize("value, text", [
    (True, "true"), (3, "3 : i32"), (np.int64(-1), "-1 : i32"), (0.5, "0.5 : f32"),
    (1e-05, "1.0e-05 : f32"), ("SINGLE_ROUND", '"SINGLE_ROUND"'),
    ([1, 2, 3], "array<i32: 1, 2, 3>"),
    ([], "[]"), (None, "unit"), ([0.5, "a"], '[0.5 : f32, "a"]'),
])
def test_attribute_values(value, text):
    assert format_value(value) == text


def test_multi_result_zero_result_and_dynamic_types():
    graph = Graph("body")
    x = graph.add_input("x", TensorType((DYNAMIC, 3), f32))
    split = graph.append(Op("test.split", [x], [T, T], {"axis": 0}, result_names=["a", "b"]))
    graph.append(Op("test.sink", [split.results[1]], [], loc="main:op2"))
    graph.set_outputs([])
    text = print_graph(graph)
    assert ('%0, %1 = "test.split"(%arg0) <{axis = 0 : i32}> : (tensor<?x3xf32>) -> '
            '(tensor<2x3xf32>, tensor<2x3xf32>) loc("a")') in text
    assert '"test.sink"(%1) : (tensor<2x3xf32>) -> () loc("main:op2")' in text
    assert text.endswith("    func.return\n  }")
    assert "func.func @body(%arg0: tensor<?x3xf32> loc(\"x\")) -> () {" in text


def test_graph_names_that_are_not_identifiers_are_quoted():
    graph = Graph("while/body:0")
    assert 'func.func @"while/body:0"()' in print_graph(graph)


def test_values_print_by_position_not_by_name():
    # TFLite names carry characters MLIR identifiers cannot; names live in loc().
    text = print_module(add_module())
    assert "%arg0" in text and "%serving" not in text
