"""Integer patterns closing gaps of issue 6: SUM (int8, int16), uint8
AVERAGE_POOL_2D, QUANTIZE int8/int16 -> int32.

Every case converts a quantized model, requires the op under test to take its
integer pattern, and requires our reference model to equal TFLite exactly and
the written `.tosa` to give the same integers on Arm's reference model
(tests/e2e.py check_model).

SUM is judged against TFLite's OPTIMIZED kernels, not BUILTIN_REF: TFLite
2.20's reference SUM is broken for quantized data (reduce.cc hands int8 tensors
to the uint8 overload, int16 results vary between invocations), so
tfl2tosa.validation runs models with a quantized SUM on
BUILTIN_WITHOUT_DEFAULT_DELEGATES. The optimized kernel is what TFLite users
get; its recipe scales in float32 (legalize/reduce.py), and the
lowering reproduces it, so exact equality is required here even though
validation would allow 1 LSB on that resolver.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from conftest import TfliteBuilder
from e2e import check_model, model_path

NUMPY = {"INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16, "INT32": np.int32}


def check_exact(path, op_name: str, label: str, **kwargs) -> None:
    """check_model on the integer path only, the op on `label`, every output exact."""
    conversion, report = check_model(path, allowed_paths=("integer",), **kwargs)
    found = [o for o in conversion.outcomes if o["op_name"] == op_name]
    assert found and all(o["pattern"] == label for o in found), conversion.outcomes
    assert all(o.exact for o in report.outputs), report.outputs


def full_range(rng: np.random.Generator, shape, type_name: str) -> np.ndarray:
    info = np.iinfo(NUMPY[type_name])
    return rng.integers(info.min, int(info.max) + 1, shape).astype(NUMPY[type_name])


# ---------------------------------------------------------------------------
# SUM


@dataclass(frozen=True)
class SumCase:
    id: str
    type: str
    shape: tuple[int, ...]
    axes: tuple[int, ...]
    keep_dims: bool
    in_q: tuple[float, int]
    out_q: tuple[float, int]


SUM_CASES = [
    SumCase("int8_rescaled", "INT8", (2, 5, 7), (1,), False, (0.1, 3), (0.5, -2)),
    SumCase("int8_same_quantization", "INT8", (2, 5, 7), (1,), False, (0.3, 7), (0.3, 7)),
    # s_in / s_out = 0.5, zp_in 0: every odd sum is a tie, of both signs.
    SumCase("int8_ties", "INT8", (4, 3), (1,), False, (0.5, 0), (1.0, 0)),
    SumCase("int8_ties_keep_dims", "INT8", (3, 2, 5), (0, 2), True, (0.25, 0), (1.0, 1)),
    SumCase("int8_extreme_zero_points", "INT8", (2, 6, 3), (2, 0), False, (0.02, -128),
            (0.3, 127)),
    SumCase("int8_saturates_both_ends", "INT8", (3, 16), (1,), False, (0.05, 0), (0.01, 0)),
    SumCase("int8_negative_axis_all", "INT8", (2, 3, 4), (-1, 0, 1), False, (0.07, -5),
            (0.9, 10)),
    SumCase("int8_large_count", "INT8", (1, 4096), (1,), True, (0.003, 11), (0.9, -3)),
    SumCase("int16_same_quantization", "INT16", (3, 40), (1,), False, (0.01, 0), (0.01, 0)),
    SumCase("int16_rescaled", "INT16", (2, 3, 5), (0, 2), False, (0.001, 0), (0.0037, 0)),
    SumCase("int16_ties", "INT16", (5, 4), (0,), True, (0.5, 0), (1.0, 0)),
]


def sum_model(tmp_path, case: SumCase):
    b = TfliteBuilder()
    rank = len(case.shape)
    resolved = {a % rank for a in case.axes}
    out_shape = [1 if i in resolved else d for i, d in enumerate(case.shape)] \
        if case.keep_dims else [d for i, d in enumerate(case.shape) if i not in resolved]
    x = b.tensor(list(case.shape), case.type, "x", scale=[case.in_q[0]],
                 zero_point=[case.in_q[1]])
    axes = b.tensor([len(case.axes)], "INT32", "axes", data=np.array(case.axes, np.int32))
    y = b.tensor(out_shape, case.type, "y", scale=[case.out_q[0]], zero_point=[case.out_q[1]])
    b.op("SUM", [x, axes], [y], options=b.options("ReducerOptions", keepDims=case.keep_dims))
    b.io([x], [y])
    path = tmp_path / f"sum_{case.id}.tflite"
    path.write_bytes(b.to_bytes())
    return path


@pytest.mark.parametrize("case", SUM_CASES, ids=lambda c: c.id)
def test_sum(tmp_path, case: SumCase) -> None:
    rng = np.random.default_rng(len(case.id))
    feeds = [[full_range(rng, case.shape, case.type)] for _ in range(3)]
    check_exact(sum_model(tmp_path, case), "tfl.sum", "sum_int", inputs=feeds)


@pytest.mark.parametrize("relative", ["unit/int8/sum.tflite", "unit/int16x8/sum.tflite"])
def test_sum_zoo(relative: str) -> None:
    check_exact(model_path(relative), "tfl.sum", "sum_int", runs=3)


# ---------------------------------------------------------------------------
# uint8 AVERAGE_POOL_2D (BUILTIN_REF: reference_ops::AveragePool rounds the
# stored uint8 halves up)


@dataclass(frozen=True)
class PoolCase:
    id: str
    shape: tuple[int, int, int, int]
    kernel: tuple[int, int]
    stride: tuple[int, int]
    padding: str = "VALID"
    activation: str = "NONE"
    zero_point: int = 128
    scale: float = 0.05


POOL_CASES = [
    # Windows of 2 and 4 elements: every odd sum is an exact half.
    PoolCase("ties_window_2", (1, 4, 6, 3), (1, 2), (1, 1)),
    PoolCase("ties_window_4", (2, 6, 6, 2), (2, 2), (2, 2)),
    PoolCase("same_3x3_border_counts", (1, 5, 7, 2), (3, 3), (1, 1), "SAME"),
    PoolCase("zero_point_0", (1, 4, 4, 3), (2, 2), (1, 1), zero_point=0),
    PoolCase("zero_point_255", (1, 4, 4, 3), (2, 2), (1, 1), zero_point=255),
    PoolCase("relu6", (1, 6, 6, 2), (2, 2), (2, 2), "SAME", "RELU6", zero_point=100,
             scale=0.03),
    PoolCase("stride_above_kernel", (1, 7, 7, 1), (2, 2), (3, 3)),
]


def uint8_pool_model(tmp_path, case: PoolCase):
    b = TfliteBuilder()
    n, h, w, c = case.shape
    if case.padding == "SAME":
        out_h, out_w = -(-h // case.stride[0]), -(-w // case.stride[1])
    else:
        out_h = (h - case.kernel[0]) // case.stride[0] + 1
        out_w = (w - case.kernel[1]) // case.stride[1] + 1
    quant = {"scale": [case.scale], "zero_point": [case.zero_point]}
    x = b.tensor(list(case.shape), "UINT8", "x", **quant)
    y = b.tensor([n, out_h, out_w, c], "UINT8", "y", **quant)
    b.op("AVERAGE_POOL_2D", [x], [y], options=b.options(
        "Pool2DOptions", padding=getattr(b.s.Padding, case.padding), strideH=case.stride[0],
        strideW=case.stride[1], filterHeight=case.kernel[0], filterWidth=case.kernel[1],
        fusedActivationFunction=getattr(b.s.ActivationFunctionType, case.activation)))
    b.io([x], [y])
    path = tmp_path / f"avg_pool_uint8_{case.id}.tflite"
    path.write_bytes(b.to_bytes())
    return path


@pytest.mark.parametrize("case", POOL_CASES, ids=lambda c: c.id)
def test_average_pool_2d_uint8(tmp_path, case: PoolCase) -> None:
    rng = np.random.default_rng(len(case.id))
    feeds = [[full_range(rng, case.shape, "UINT8")] for _ in range(3)]
    check_exact(uint8_pool_model(tmp_path, case), "tfl.average_pool_2d",
                "average_pool_2d_uint8", inputs=feeds)


# ---------------------------------------------------------------------------
# QUANTIZE int16 -> int32 (TFLite's quantize.cc refuses int8 -> int32)


QUANTIZE_I32_CASES = [
    pytest.param((0.5, 0), (0.25, 0), id="double"),
    pytest.param((0.1, 0), (0.3, 0), id="thirds"),
    pytest.param((0.5, 0), (1.0, 0), id="halves_ties_both_signs"),
    pytest.param((0.3, 0), (1.2, 0), id="quarters_ties_both_signs"),
    pytest.param((0.1, 0), (0.0001, 0), id="widening_x1000"),
        pytest.param((0.1, 3), (0.0001, 0), id="input_zero_point"),
    pytest.param((0.1, 0), (0.3, 5), id="output_zero_point"),
    pytest.param((0.02, -7), (0.05, -100000), id="both_zero_points"),
    pytest.param((1.0, 0), (1 / 16000, 0), id="x16000_near_the_shift_limit"),
]


def quantize_model(tmp_path, source, target, shape=(4, 64)):
    b = TfliteBuilder()
    x = b.tensor(list(shape), "INT16", "x", scale=[source[0]], zero_point=[source[1]])
    y = b.tensor(list(shape), "INT32", "y", scale=[target[0]], zero_point=[target[1]])
    b.op("QUANTIZE", [x], [y])
    b.io([x], [y])
    path = tmp_path / "quantize_i16_i32.tflite"
    path.write_bytes(b.to_bytes())
    return path


@pytest.mark.parametrize("source, target", QUANTIZE_I32_CASES)
def test_quantize_int16_to_int32(tmp_path, source, target) -> None:
    rng = np.random.default_rng(0)
    extremes = np.array([-32768, 32767, -1, 0, 1, 2, -2, 3], dtype=np.int16)
    feeds = []
    for _ in range(3):
        x = full_range(rng, (4, 64), "INT16")
        x.reshape(-1)[:extremes.size] = extremes
        feeds.append([x])
    check_exact(quantize_model(tmp_path, source, target), "tfl.quantize", "quantize_int",
                inputs=feeds)


def test_quantize_int16_to_int32_overflowing_scale_is_refused(tmp_path) -> None:
    """x * 2^20 leaves int32 for |x| >= 2^11 (TFLite overflows): a named refusal
    (the float fallback has no QUANTIZE of its own to offer)."""
    from tfl2tosa.errors import ConversionError
    from tfl2tosa.pipeline import convert

    with pytest.raises(ConversionError, match="overflows int32"):
        convert(quantize_model(tmp_path, (1.0, 0), (2.0 ** -20, 0)))
