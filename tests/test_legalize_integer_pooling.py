"""Integer AVERAGE_POOL_2D and MAX_POOL_2D (int8, int16) against TFLite's
builtin reference kernels, bit exact, and against Arm's reference model.

Cases: the zoo's pooling models and models written field by field for what
the converter does not emit: windows of 2 and 4 elements (exact halves in
every other output, where TFLite rounds away from zero), a non-zero zero
point (where taking the zero point out before averaging would move those
ties), SAME windows cut by the border (counts 1..9), stride above the
kernel, VALID remainders, fused activations, the int16 range, and outputs
quantized otherwise than the input (which TFLite's kernels ignore).
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TfliteBuilder
from e2e import model_path
from tflite_ref import check_patterns, write_model

import legalize.integer  # noqa: F401  (registers the integer patterns)

LABELS = {"tfl.average_pool_2d": "average_pool_2d_int", "tfl.max_pool_2d": "max_pool_2d_int"}


def check_pool(path, **kwargs) -> None:
    """Exact against TFLite and Arm, every pool through its integer pattern."""
    check_patterns(path, LABELS, **kwargs)


ZOO = [f"unit/{kind}/{name}.tflite" for kind in ("int8", "int16x8") for name in (
    "average_pool_2d", "average_pool_2d_same_3x3", "max_pool_2d", "max_pool_2d_same_3x3")]


@pytest.mark.parametrize("relative", ZOO)
def test_zoo_model(relative: str) -> None:
    check_pool(model_path(relative), runs=3)


def pool_model(tmp_path, op_name: str, *, shape, kernel, stride, padding="VALID",
               activation="NONE", type_name="INT8", scale=0.05, zero_point=0,
               out_params=None):
    b = TfliteBuilder()
    n, h, w, c = shape
    if padding == "SAME":
        out_h, out_w = -(-h // stride[0]), -(-w // stride[1])
    else:
        out_h, out_w = (h - kernel[0]) // stride[0] + 1, (w - kernel[1]) // stride[1] + 1
    out_scale, out_zp = out_params or (scale, zero_point)
    x = b.tensor(list(shape), type_name, "x", scale=[scale], zero_point=[zero_point])
    y = b.tensor([n, out_h, out_w, c], type_name, "y", scale=[out_scale], zero_point=[out_zp])
    b.op(op_name, [x], [y], options=b.options(
        "Pool2DOptions", padding=getattr(b.s.Padding, padding), strideH=stride[0],
        strideW=stride[1], filterHeight=kernel[0], filterWidth=kernel[1],
        fusedActivationFunction=getattr(b.s.ActivationFunctionType, activation)))
    b.io([x], [y])
    return write_model(b, tmp_path / "pool.tflite")


POOL_CASES = [
    # Two elements per window: every odd sum is an exact half.
    pytest.param("AVERAGE_POOL_2D", {"shape": (2, 6, 8, 5), "kernel": (1, 2),
                                     "stride": (1, 2)}, id="avg_pairs_ties"),
    # zero point 5: TFLite averages stored values, (0 + 1) / 2 -> 1, not 5 + round(-4.5).
    pytest.param("AVERAGE_POOL_2D", {"shape": (1, 8, 8, 4), "kernel": (2, 2),
                                     "stride": (2, 2), "zero_point": 5},
                 id="avg_2x2_ties_zero_point_5"),
    pytest.param("AVERAGE_POOL_2D", {"shape": (1, 7, 9, 3), "kernel": (3, 3),
                                     "stride": (2, 2), "padding": "SAME",
                                     "zero_point": -128}, id="avg_same_border_counts"),
    pytest.param("AVERAGE_POOL_2D", {"shape": (1, 10, 10, 2), "kernel": (2, 2),
                                     "stride": (3, 3), "padding": "SAME"},
                 id="avg_same_stride_above_kernel"),
    pytest.param("AVERAGE_POOL_2D", {"shape": (2, 9, 11, 3), "kernel": (3, 2),
                                     "stride": (2, 3), "zero_point": 17},
                 id="avg_valid_remainder"),
    pytest.param("AVERAGE_POOL_2D", {"shape": (1, 6, 6, 4), "kernel": (2, 2),
                                     "stride": (1, 1), "activation": "RELU6",
                                     "scale": 0.03, "zero_point": -20},
                 id="avg_relu6"),
    pytest.param("AVERAGE_POOL_2D", {"shape": (1, 8, 8, 3), "kernel": (4, 4),
                                     "stride": (2, 2), "padding": "SAME",
                                     "type_name": "INT16", "scale": 2.0 ** -10},
                 id="avg_int16_same"),
    pytest.param("AVERAGE_POOL_2D", {"shape": (1, 5, 6, 2), "kernel": (1, 2),
                                     "stride": (1, 1), "type_name": "INT16",
                                     "scale": 1e-4, "activation": "RELU_N1_TO_1"},
                 id="avg_int16_pairs_relu_n1_to_1"),
    pytest.param("MAX_POOL_2D", {"shape": (2, 7, 9, 3), "kernel": (3, 3), "stride": (2, 2),
                                 "padding": "SAME", "zero_point": 100},
                 id="max_same_zero_point_100"),
    pytest.param("MAX_POOL_2D", {"shape": (1, 10, 10, 2), "kernel": (2, 2), "stride": (3, 3),
                                 "padding": "SAME"}, id="max_same_stride_above_kernel"),
    pytest.param("MAX_POOL_2D", {"shape": (1, 8, 8, 4), "kernel": (2, 3), "stride": (2, 2),
                                 "activation": "RELU", "zero_point": -10},
                 id="max_valid_relu"),
    pytest.param("MAX_POOL_2D", {"shape": (1, 6, 7, 3), "kernel": (3, 3), "stride": (1, 2),
                                 "padding": "SAME", "type_name": "INT16",
                                 "scale": 2.0 ** -12, "activation": "RELU6"},
                 id="max_int16_relu6"),
]


@pytest.mark.parametrize(("op_name", "params"), POOL_CASES)
def test_pool(tmp_path, op_name: str, params: dict) -> None:
    check_pool(pool_model(tmp_path, op_name, **params), runs=3)


def test_average_of_negative_ties(tmp_path) -> None:
    """Pairs summing to -1, -3, ..., 1, 3: halves on both sides of zero, plus
    the extremes of int8 (-128 + -128, 127 + 127)."""
    path = pool_model(tmp_path, "AVERAGE_POOL_2D", shape=(1, 1, 16, 1), kernel=(1, 2),
                      stride=(1, 2), zero_point=3)
    row = np.array([-1, 0, -2, -1, -5, 2, 0, 1, 1, 2, -128, -128, 127, 127, -128, 127],
                   dtype=np.int8).reshape(1, 1, 16, 1)
    check_pool(path, inputs=[[row]])


DIFFERENT_QUANTIZATION_CASES = [
    pytest.param("AVERAGE_POOL_2D", {"shape": (1, 6, 6, 3), "kernel": (2, 2), "stride": (2, 2),
                                     "out_params": (0.1, 3)}, id="avg_i8_coarser_output"),
    pytest.param("AVERAGE_POOL_2D", {"shape": (1, 7, 9, 2), "kernel": (3, 3), "stride": (2, 2),
                                     "padding": "SAME", "zero_point": -20,
                                     "out_params": (0.01, 40), "activation": "RELU6"},
                 id="avg_i8_finer_output_relu6"),
    pytest.param("MAX_POOL_2D", {"shape": (1, 6, 6, 3), "kernel": (2, 2), "stride": (2, 2),
                                 "out_params": (0.02, -10)}, id="max_i8_finer_output"),
    pytest.param("MAX_POOL_2D", {"shape": (1, 8, 8, 2), "kernel": (3, 3), "stride": (1, 1),
                                 "padding": "SAME", "zero_point": 7, "out_params": (0.2, -100),
                                 "activation": "RELU"}, id="max_i8_coarser_output_relu"),
    pytest.param("AVERAGE_POOL_2D", {"shape": (1, 5, 6, 2), "kernel": (1, 2), "stride": (1, 1),
                                     "type_name": "INT16", "scale": 1e-4,
                                     "out_params": (3e-4, 0)}, id="avg_i16_coarser_output"),
    pytest.param("MAX_POOL_2D", {"shape": (1, 6, 7, 3), "kernel": (3, 3), "stride": (1, 2),
                                 "padding": "SAME", "type_name": "INT16", "scale": 2.0 ** -12,
                                 "out_params": (2.0 ** -14, 0), "activation": "RELU_N1_TO_1"},
                 id="max_i16_finer_output_relu_n1_to_1"),
]


@pytest.mark.parametrize(("op_name", "params"), DIFFERENT_QUANTIZATION_CASES)
def test_output_quantized_differently_keeps_the_raw_values(tmp_path, op_name: str,
                                                           params: dict) -> None:
    """TFLite's kernels (reference and builtin) ignore the quantization, and
    pooling.cc only DCHECKs that it agrees: the output holds the input's raw
    values (maxima, averages) read with the output's parameters; the fused
    activation clamps to the output's range."""
    check_pool(pool_model(tmp_path, op_name, **params), runs=3)


def test_uint8_average_with_output_quantized_differently(tmp_path) -> None:
    """reference_ops::AveragePool on uint8 likewise averages the stored values."""
    path = pool_model(tmp_path, "AVERAGE_POOL_2D", shape=(1, 6, 8, 3), kernel=(2, 2),
                      stride=(2, 2), type_name="UINT8", zero_point=128, out_params=(0.2, 90),
                      activation="RELU")
    check_patterns(path, {"tfl.average_pool_2d": "average_pool_2d_uint8"}, runs=3)
