"""Gather/scatter ops (legalize/gather.py) against the TFLite interpreter.

One-op models from the TFLite builder: batch_dims and middle axes, 2-D and
scalar indices, run-time and constant (int64) indices, bool and quantized
data, out-of-range one-hot indices, empty and skipped segments. Each is
compared with TFLite's reference kernels and run on Arm's reference model
(`check_model`); the zoo models are covered by tests/test_float_zoo.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_legalize_shape import INTEGER, Case, Tensor, i32, q8, run_case, write_case

from tfl2tosa.pipeline import convert
from tfl2tosa.errors import ConversionError

F = Tensor
RNG = np.random.default_rng(7)


def const(shape: tuple[int, ...], dtype: str = "FLOAT32") -> Tensor:
    """A constant tensor of random values (int8: the full range)."""
    if dtype == "FLOAT32":
        data = RNG.uniform(-2, 2, size=shape).astype(np.float32)
    else:
        data = RNG.integers(-128, 128, size=shape)
    return Tensor(shape, dtype, data)


def gather(axis: int, batch_dims: int = 0) -> tuple[str, dict[str, int]]:
    return ("GatherOptions", {"axis": axis, "batchDims": batch_dims})


CASES: dict[str, Case] = {
    # GATHER (run-time int32 indices are drawn from [0, 4))
    "gather_negative_axis_constant_indices": Case(
        "GATHER", [F((3, 4, 5)), i32([2, 0, 3])], [F((3, 3, 5))], gather(-2)),
    "gather_two_dimensional_indices": Case(
        "GATHER", [F((5, 3)), i32([[4, 0], [1, 1]])], [F((2, 2, 3))], gather(0)),
    "gather_scalar_index": Case("GATHER", [F((3, 4)), i32(2)], [F((3,))], gather(1)),
    "gather_batch_dims": Case(
        "GATHER", [F((2, 4, 3)), F((2, 3), "INT32")], [F((2, 3, 3))], gather(1, 1)),
    "gather_batch_dims_middle_axis": Case(
        "GATHER", [F((2, 3, 4, 2)), F((2, 5), "INT32")], [F((2, 3, 5, 2))], gather(2, 1)),
    "gather_bool": Case("GATHER", [F((4, 3), "BOOL"), i32([3, 3, 0])], [F((3, 3), "BOOL")],
                        gather(0)),
    "gather_int32_params": Case("GATHER", [F((2, 6), "INT32"), i32([5, 1])],
                                [F((2, 2), "INT32")], gather(1)),
    "gather_int64_constant_indices": Case(
        "GATHER", [F((4, 2)), Tensor((3,), "INT64", np.array([3, 0, 2]))], [F((3, 2))],
        gather(0)),
    "gather_int8_run_time_indices": Case(
        "GATHER", [q8((4, 3), 0.1, 19), F((5,), "INT32")], [q8((5, 3), 0.1, 19)], gather(0),
        paths=INTEGER),
    "gather_int16": Case(
        "GATHER", [Tensor((3, 4), "INT16", None, 0.001, 0), i32([1, 2])],
        [Tensor((3, 2), "INT16", None, 0.001, 0)], gather(1), paths=INTEGER),
    # GATHER_ND
    "gather_nd_run_time_depth2": Case("GATHER_ND", [F((4, 5, 3)), F((2, 2), "INT32")],
                                      [F((2, 3))]),
    "gather_nd_full_depth": Case("GATHER_ND", [F((3, 4)), i32([[2, 3], [0, 1], [1, 0]])],
                                 [F((3,))]),
    "gather_nd_int8_batched_indices": Case(
        "GATHER_ND", [q8((3, 2, 2)), i32([[[2], [0]], [[1], [1]]])], [q8((2, 2, 2, 2))],
        paths=INTEGER),
    # EMBEDDING_LOOKUP
    "embedding_lookup_run_time_ids": Case("EMBEDDING_LOOKUP", [F((3,), "INT32"),
                                                               const((5, 2, 3))],
                                          [F((3, 2, 3))]),
    # Hybrid table (int8 values, float output): TFLite multiplies each value by
    # the scale, and so does the emulation (legalize.hybrid; tests/test_hybrid.py).
    "embedding_lookup_hybrid_int8_table": Case(
        "EMBEDDING_LOOKUP",
        [F((4,), "INT32"), q8((6, 3), 0.03, 0, RNG.integers(-128, 128, (6, 3)))],
        [F((4, 3))], paths=("float",)),
    # SCATTER_ND
    "scatter_nd_depth2": Case("SCATTER_ND", [i32([[1, 0], [3, 2]]), F((2, 2)), i32([4, 3, 2])],
                              [F((4, 3, 2))]),
    "scatter_nd_int32_rows": Case("SCATTER_ND", [i32([[2], [0]]), F((2, 3), "INT32"),
                                                 i32([3, 3])], [F((3, 3), "INT32")]),
    "scatter_nd_bool": Case("SCATTER_ND", [i32([[2], [0]]), F((2, 3), "BOOL"), i32([3, 3])],
                            [F((3, 3), "BOOL")]),
    "scatter_nd_int8": Case("SCATTER_ND", [i32([[2], [0]]), q8((2, 3)), i32([3, 3])],
                            [q8((3, 3))], paths=INTEGER),
    # ONE_HOT (indices -1 and 4 are outside [0, depth): all "off")
    "one_hot_axis0_out_of_range": Case(
        "ONE_HOT", [F((2, 3), "INT32"), i32(4), F((), data=np.float32(2.5)),
                    F((), data=np.float32(-1.0))], [F((4, 2, 3))], ("OneHotOptions", {"axis": 0}),
        feeds=[[[0, 3, -1], [4, 2, 2]]]),
    "one_hot_int32_values_last_axis": Case(
        "ONE_HOT", [F((3,), "INT32"), i32(5), i32(7), i32(0)], [F((3, 5), "INT32")],
        ("OneHotOptions", {"axis": -1})),
    "one_hot_bool_constant_indices": Case(
        "ONE_HOT", [i32([[1, 0], [2, 2]]), i32(3), F((), "BOOL", True), F((), "BOOL", False)],
        [F((2, 3, 2), "BOOL")], ("OneHotOptions", {"axis": 1})),
    "one_hot_int8_values": Case(
        "ONE_HOT", [F((3,), "INT32"), i32(4), q8((), data=5), q8((), data=-7)], [q8((3, 4))],
        ("OneHotOptions", {"axis": -1}), paths=INTEGER),
    # Segment reductions (constant ids)
    "segment_sum_rank3": Case("SEGMENT_SUM", [F((5, 2, 2)), i32([0, 0, 1, 2, 2])],
                              [F((3, 2, 2))]),
    # A negative id drops its row (unsorted_segment.cc skips it).
    "unsorted_segment_sum_negative_id": Case(
        "UNSORTED_SEGMENT_SUM", [F((4, 2)), i32([1, -1, 0, 1]), i32(2)], [F((2, 2))]),
    "segment_sum_int32": Case("SEGMENT_SUM", [F((4, 3), "INT32"), i32([0, 1, 1, 1])],
                              [F((2, 3), "INT32")]),
    "unsorted_segment_sum_two_dimensional_ids": Case(
        "UNSORTED_SEGMENT_SUM", [F((2, 3, 4)), i32([[2, 0, 2], [1, 0, 2]]), i32(3)],
        [F((3, 4))]),
    # Segment 1 is empty: TFLite leaves numeric_limits<float>::lowest() there.
    "unsorted_segment_max_empty_segment": Case(
        "UNSORTED_SEGMENT_MAX", [F((4, 2)), i32([0, 2, 0, 2]), i32(3)], [F((3, 2))]),
    "unsorted_segment_min_int32": Case(
        "UNSORTED_SEGMENT_MIN", [F((5,), "INT32"), i32([1, 0, 1, 1, 3]), i32(4)],
        [F((4,), "INT32")]),
    "unsorted_segment_prod_empty_segment": Case(
        "UNSORTED_SEGMENT_PROD", [F((3, 2)), i32([2, 2, 0]), i32(3)], [F((3, 2))]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_gather_scatter_matches_tflite(name: str, builder, tmp_path: Path) -> None:
    run_case(builder, CASES[name], tmp_path / f"{name}.tflite")


def test_scatter_nd_duplicate_indices_are_refused(builder, tmp_path: Path) -> None:
    """TFLite sums updates that hit the same index; a TOSA SCATTER cannot."""
    case = Case("SCATTER_ND", [i32([[1], [1]]), F((2, 3)), i32([3, 3])], [F((3, 3))])
    path = write_case(builder, case, tmp_path / "scatter_nd_duplicates.tflite")
    with pytest.raises(ConversionError, match="duplicate indices"):
        convert(path)


def test_gather_run_time_int64_indices_are_refused(builder, tmp_path: Path) -> None:
    case = Case("GATHER", [F((4, 2)), F((3,), "INT64")], [F((3, 2))], gather(0))
    path = write_case(builder, case, tmp_path / "gather_int64.tflite")
    with pytest.raises(ConversionError, match="run-time i64 indices"):
        convert(path)


def test_int32_segment_product_is_refused(builder, tmp_path: Path) -> None:
    case = Case("UNSORTED_SEGMENT_PROD", [F((3,), "INT32"), i32([0, 1, 0]), i32(2)],
                [F((2,), "INT32")])
    path = write_case(builder, case, tmp_path / "segment_prod_int32.tflite")
    with pytest.raises(ConversionError, match="no integer REDUCE_PRODUCT"):
        convert(path)
