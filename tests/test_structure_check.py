"""The structural check at the door (tfl2tosa/tflite_import/structure.py), one case
per kind of fault the fuzz tests found escaping as an internal error.

Each case is a small hand-built model broken in one way; conversion must refuse it
with a ModelError that names the op, its location and the fault, before any
pattern runs. The well-formed twin of a case converts (so the check is what
refuses it, not something else). The zoo itself passes the check (test_zoo's
conversions), and every op with a pattern has a row in the table.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from conftest import TfliteBuilder

from tfl2tosa.errors import ModelError
from tfl2tosa.pipeline import convert
from tfl2tosa.tflite_import.structure import SIGNATURES, options_table

F = "FLOAT32"


def unary(b: TfliteBuilder, code: str, shape=(1, 4), out_shape=None, options=None,
          x_type=F, out_type=F, **tensor) -> None:
    x = b.tensor(list(shape), x_type, "x", **tensor)
    y = b.tensor(list(shape if out_shape is None else out_shape), out_type, "y")
    b.op(code, [x], [y], options=options)
    b.io([x], [y])


def binary(b: TfliteBuilder, a_shape, b_shape, out_shape) -> None:
    x, z = b.tensor(list(a_shape), F, "x"), b.tensor(list(b_shape), F, "z")
    y = b.tensor(list(out_shape), F, "y")
    b.op("ADD", [x, z], [y], options=b.options("AddOptions"))
    b.io([x, z], [y])


def conv(b: TfliteBuilder, w_shape=(2, 3, 3, 4), out_channels=2, stride=1,
         x_shape=(1, 8, 8, 4), bias=True) -> None:
    x = b.tensor(list(x_shape), F, "x")
    w = b.tensor(list(w_shape), F, "w", np.zeros(w_shape, np.float32))
    operands = [x, w]
    if bias:
        operands.append(b.tensor([w_shape[0]], F, "bias", np.zeros(w_shape[0], np.float32)))
    y = b.tensor([1, 8, 8, out_channels], F, "y")
    b.op("CONV_2D", operands, [y], options=b.options(
        "Conv2DOptions", padding=0, strideW=stride, strideH=stride))
    b.io([x], [y])


def concat(b: TfliteBuilder, second=(1, 3), out=(1, 6), axis=1) -> None:
    x, z = b.tensor([1, 3], F, "x"), b.tensor(list(second), F, "z")
    y = b.tensor(list(out), F, "y")
    b.op("CONCATENATION", [x, z], [y], options=b.options("ConcatenationOptions", axis=axis))
    b.io([x, z], [y])


def fully_connected(b: TfliteBuilder, x_shape=(2, 4), w_shape=(3, 4), out=(2, 3)) -> None:
    x = b.tensor(list(x_shape), F, "x")
    w = b.tensor(list(w_shape), F, "w", np.zeros(w_shape, np.float32))
    y = b.tensor(list(out), F, "y")
    b.op("FULLY_CONNECTED", [x, w, -1], [y], options=b.options("FullyConnectedOptions"))
    b.io([x], [y])


def quantized_relu(b: TfliteBuilder, scale=0.5, zero_point=0) -> None:
    x = b.tensor([1, 4], "INT8", "x", scale=[scale], zero_point=[zero_point])
    y = b.tensor([1, 4], "INT8", "y", scale=[0.5], zero_point=[0])
    b.op("RELU", [x], [y])
    b.io([x], [y])


def mean(b: TfliteBuilder, shape=(2, 3), axis=1) -> None:
    x = b.tensor(list(shape), F, "x")
    axes = b.tensor([1], "INT32", "axes", np.int32([axis]))
    y = b.tensor([shape[0]], F, "y")
    b.op("MEAN", [x, axes], [y], options=b.options("ReducerOptions"))
    b.io([x], [y])


def pool(b: TfliteBuilder, filter_size=2, options_table="Pool2DOptions") -> None:
    x = b.tensor([1, 4, 4, 1], F, "x")
    y = b.tensor([1, 2, 2, 1], F, "y")
    fields = ({"filterWidth": filter_size, "filterHeight": filter_size, "strideW": 2,
               "strideH": 2} if options_table == "Pool2DOptions" else {})
    b.op("AVERAGE_POOL_2D", [x], [y], options=b.options(options_table, **fields))
    b.io([x], [y])


def while_loop(b: TfliteBuilder, body: int) -> None:
    x, y = b.tensor([1], F, "x"), b.tensor([1], F, "y")
    b.op("WHILE", [x], [y], options=b.options("WhileOptions", condSubgraphIndex=1,
                                                  bodySubgraphIndex=body))
    b.io([x], [y])
    for name in ("cond", "body"):
        g = b.subgraph(name)
        a = b.tensor([1], F, "a", graph=g)
        r = b.tensor([1], F if name == "body" else "BOOL", "r", graph=g)
        b.op("RELU" if name == "body" else "CAST", [a], [r], graph=g)
        b.io([a], [r], graph=g)


def per_channel_relu(b: TfliteBuilder, scales=(0.5, 0.25, 0.5, 0.125),
                     zero_points=(0, 1, -1, 0)) -> None:
    """Per-channel parameters on the input: checked element by element."""
    x = b.tensor([1, 4], "INT8", "x", scale=list(scales), zero_point=list(zero_points), axis=1)
    y = b.tensor([1, 4], "INT8", "y", scale=[0.5], zero_point=[0])
    b.op("RELU", [x], [y])
    b.io([x], [y])


# (id, builder of the broken model, builder of its well-formed twin or None, message)
CASES: list[tuple[str, Callable, Callable | None, str]] = [
    ("too_few_operands", lambda b: unary(b, "ADD", options=b.options("AddOptions")),
     lambda b: binary(b, (1, 4), (1, 4), (1, 4)), "has 1 operands, expected 2"),
    ("options_of_another_op", lambda b: pool(b, options_table="Conv2DOptions"),
     lambda b: pool(b), "carries options"),
    ("absent_options_get_defaults_and_zero_filter_is_refused",
     lambda b: pool(b, filter_size=0), lambda b: pool(b), "filter_width is 0"),
    ("conv_input_rank", lambda b: conv(b, x_shape=(8, 8, 4)), lambda b: conv(b),
     "operand 0 'x' has rank 3; CONV_2D needs rank 4"),
    ("conv_filter_channels", lambda b: conv(b, w_shape=(2, 3, 3, 0)), lambda b: conv(b),
     "filter [2, 3, 3, 0] does not fit"),
    ("conv_stride_zero", lambda b: conv(b, stride=0), lambda b: conv(b),
     "option stride_w is 0"),
    ("broadcast_mismatch", lambda b: binary(b, (1, 4, 15), (1, 4, 3), (1, 4, 15)),
     lambda b: binary(b, (1, 4, 3), (1, 1, 3), (1, 4, 3)), "do not broadcast"),
    ("broadcast_wrong_result", lambda b: binary(b, (1, 4), (1, 4), (2, 4)),
     lambda b: binary(b, (1, 4), (1, 4), (1, 4)), "result shape [2, 4] should be [1, 4]"),
    ("concat_rank", lambda b: concat(b, second=(3,), out=(1, 6)), lambda b: concat(b),
     "does not join"),
    ("concat_axis", lambda b: concat(b, axis=2), lambda b: concat(b),
     "axis 2 is out of range for rank 2"),
    ("fully_connected_depth", lambda b: fully_connected(b, w_shape=(3, 5)),
     lambda b: fully_connected(b), "do not fit weights [3, 5]"),
    ("scale_subnormal", lambda b: quantized_relu(b, scale=1e-45),
     lambda b: quantized_relu(b), "quantization scale"),
    ("per_channel_scale_subnormal",
     lambda b: per_channel_relu(b, scales=(0.5, 0.25, 1e-45, 0.125)),
     lambda b: per_channel_relu(b), "quantization scale 1.401298464324817e-45 is outside"),
    ("per_channel_zero_point", lambda b: per_channel_relu(b, zero_points=(0, -129, 0, 0)),
     lambda b: per_channel_relu(b), "zero point -129 is outside the range of i8"),
    ("zero_point_out_of_storage", lambda b: quantized_relu(b, zero_point=300),
     lambda b: quantized_relu(b, zero_point=3), "zero point 300 is outside the range of i8"),
    ("mean_of_empty_dimension", lambda b: mean(b, shape=(2, 0)), lambda b: mean(b),
     "reduces dimension 1 of [2, 0], which is empty"),
    ("mean_axis", lambda b: mean(b, axis=5), lambda b: mean(b),
     "axis 5 (operand 1) is out of range for rank 2"),
    ("dequantize_to_integer",
     lambda b: unary(b, "DEQUANTIZE", x_type="INT8", out_type="INT8", scale=[0.5]),
     lambda b: unary(b, "DEQUANTIZE", x_type="INT8", scale=[0.5]), "not a float tensor"),
    ("rank_result_shape", lambda b: unary(b, "RANK", out_shape=(1, 4), out_type="INT32"),
     lambda b: unary(b, "RANK", out_shape=(), out_type="INT32"), "has rank 2"),
    ("unary_result_shape", lambda b: unary(b, "TANH", out_shape=(4, 4)),
     lambda b: unary(b, "TANH"), "result shape [4, 4] should be [1, 4]"),
    ("graphs_in_a_cycle", lambda b: while_loop(b, body=0), lambda b: while_loop(b, body=2),
     "subgraphs call each other in a cycle"),
]


@pytest.mark.parametrize("build, twin, message", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_a_malformed_op_is_refused_at_the_door(build, twin, message, tmp_path):
    b = TfliteBuilder()
    build(b)
    with pytest.raises(ModelError) as refused:
        convert(b.to_bytes())
    text = str(refused.value)
    assert message in text, text
    assert "\n" not in text
    assert text.startswith(("main:", "cond:", "body:", "corrupt model")), text
    if twin is not None:
        good = TfliteBuilder()
        twin(good)
        convert(good.to_bytes())


def test_required_operands_may_not_be_omitted():
    b = TfliteBuilder()
    x, y = b.tensor([2, 4], F, "x"), b.tensor([2, 3], F, "y")
    b.op("FULLY_CONNECTED", [x, -1, -1], [y], options=b.options("FullyConnectedOptions"))
    b.io([x], [y])
    with pytest.raises(ModelError, match=r"main:op0:FULLY_CONNECTED .*operand 1 is required"):
        convert(b.to_bytes())


def test_every_op_with_a_pattern_has_a_signature():
    from legalize.pattern_index import PATTERNS

    schema_names = {name[len("tfl."):].upper() for name in PATTERNS}
    # Not TFLite builtins: the importer's constants, variables and omitted operands, and
    # the schema's placeholder code.
    schema_names -= {"PSEUDO_CONST", "VARIABLE", "NO_VALUE", "PLACEHOLDER_FOR_GREATER_OP_CODES"}
    # Custom ops (`tfl.custom:CODE`) are found by their code; StableHLO ops are not TFLite's.
    missing = {n for n in schema_names if n not in SIGNATURES
               and not n.startswith(("STABLEHLO", "CUSTOM:"))}
    assert missing == set()


@pytest.mark.parametrize("op, table", [
    ("CONV_2D", "Conv2DOptions"), ("AVERAGE_POOL_2D", "Pool2DOptions"),
    ("MEAN", "ReducerOptions"), ("ATAN2", "ATan2Options"), ("LSTM", "LSTMOptions"),
    ("UNIDIRECTIONAL_SEQUENCE_RNN", "SequenceRNNOptions"), ("RELU", None)])
def test_options_tables_follow_the_schema(op, table):
    assert options_table(op) == table
