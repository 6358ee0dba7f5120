"""Data-layout ops (legalize/shape.py and the families beside it: slicing,
joining, padding, space_batch, reverse, updates) against the TFLite interpreter.

Each case is a one-op model written with the TFLite builder, reaching corners
the converter rarely emits: -1 sizes, masks and negative strides, bool and
int32 data, quantized tensors with non-zero zero points. `check_model`
compares our reference model with TFLite's reference kernels (exact for these
moves) and runs the `.tosa` file on Arm's reference model. The zoo models of
these ops are covered by tests/test_float_zoo.py.

`Tensor`, `Case` and `write_case` are shared with the gather and resize tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from e2e import check_model
from tflite_ref import reference_outputs

from tfl2tosa.errors import ConversionError, ModelError
from tfl2tosa.pipeline import convert

NUMPY_OF = {"FLOAT32": np.float32, "FLOAT16": np.float16, "INT32": np.int32,
            "INT64": np.int64, "INT8": np.int8, "UINT8": np.uint8, "INT16": np.int16,
            "BOOL": np.bool_}


@dataclass(frozen=True)
class Tensor:
    """One tensor of a one-op model: a graph input, or a constant when `data` is given."""

    shape: tuple[int, ...]
    dtype: str = "FLOAT32"
    data: Any = None
    scale: float | None = None
    zero_point: int = 0


def q8(shape: tuple[int, ...], scale: float = 0.05, zero_point: int = -7, data: Any = None
       ) -> Tensor:
    return Tensor(shape, "INT8", data, scale, zero_point)


@dataclass
class Case:
    op: str
    inputs: list[Tensor | None]          # None: an omitted optional operand
    outputs: list[Tensor]
    options: tuple[str, dict[str, Any]] | None = None
    feeds: list[Any] | None = None       # fixed values of the graph inputs, in order
    paths: tuple[str, ...] = ("float",)  # conversion paths the op must take
    version: int = 1                     # operator version (BROADCAST_TO starts at 2)


def _tensor(builder, t: Tensor, name: str) -> int:
    data = None if t.data is None else np.asarray(t.data, dtype=NUMPY_OF[t.dtype])
    quantized = t.scale is not None
    return builder.tensor(list(t.shape), t.dtype, name, data=data,
                          scale=[t.scale] if quantized else None,
                          zero_point=[t.zero_point] if quantized else None)


def write_case(builder, case: Case, path: Path) -> Path:
    operands, graph_inputs = [], []
    for i, t in enumerate(case.inputs):
        if t is None:
            operands.append(-1)
            continue
        index = _tensor(builder, t, f"x{i}")
        operands.append(index)
        if t.data is None:
            graph_inputs.append(index)
    outputs = [_tensor(builder, t, f"y{i}") for i, t in enumerate(case.outputs)]
    options = builder.options(case.options[0], **case.options[1]) if case.options else None
    builder.op(case.op, operands, outputs, options=options)
    builder.model.operatorCodes[-1].version = case.version
    builder.io(graph_inputs, outputs)
    path.write_bytes(builder.to_bytes())
    return path


def run_case(builder, case: Case, path: Path):
    """Convert and check `case` against TFLite (and Arm's reference model)."""
    write_case(builder, case, path)
    feeds = None
    if case.feeds is not None:
        graph_inputs = [t for t in case.inputs if t is not None and t.data is None]
        feeds = [[np.asarray(f, dtype=NUMPY_OF[t.dtype]) for f, t in zip(case.feeds,
                                                                          graph_inputs)]]
    # Constants take "float" or "integer" by their own type; the op's path is checked below.
    conversion, report = check_model(path, allowed_paths=case.paths + ("float", "integer"),
                                     inputs=feeds)
    took = {o["path"] for o in conversion.outcomes if o["op_name"] != "tfl.pseudo_const"}
    assert took == set(case.paths), f"took {took}, expected {set(case.paths)}"
    return conversion, report


def i32(values: Any) -> Tensor:
    array = np.asarray(values, dtype=np.int32)
    return Tensor(array.shape, "INT32", array)


F = Tensor
X = F((2, 3, 4))
INTEGER = ("integer",)


CASES: dict[str, Case] = {
    # RESHAPE / SQUEEZE / EXPAND_DIMS
    "reshape_minus_one": Case("RESHAPE", [X, i32([4, -1])], [F((4, 6))]),
    "reshape_new_shape_attribute_only": Case("RESHAPE", [X], [F((6, 4))],
                                             ("ReshapeOptions", {"newShape": [6, -1]})),
    "reshape_to_scalar": Case("RESHAPE", [F((1, 1)), i32(np.zeros([0]))], [F(())]),
    "reshape_bool": Case("RESHAPE", [F((2, 6), "BOOL"), i32([3, 4])], [F((3, 4), "BOOL")]),
    "reshape_int8": Case("RESHAPE", [q8((2, 6)), i32([12])], [q8((12,))], paths=INTEGER),
    "squeeze_all_unit_dims": Case("SQUEEZE", [F((1, 3, 1, 2))], [F((3, 2))],
                                  ("SqueezeOptions", {"squeezeDims": []})),
    "expand_dims_negative_axis": Case("EXPAND_DIMS", [F((3, 2), "INT32"), i32(-1)],
                                      [F((3, 2, 1), "INT32")]),
    # TRANSPOSE
    "transpose_rank5": Case("TRANSPOSE", [F((2, 1, 3, 2, 4)), i32([4, 2, 0, 3, 1])],
                            [F((4, 3, 2, 2, 1))]),
    "transpose_bool": Case("TRANSPOSE", [F((2, 3), "BOOL"), i32([1, 0])], [F((3, 2), "BOOL")]),
    "transpose_int8": Case("TRANSPOSE", [q8((2, 3, 4)), i32([2, 0, 1])], [q8((4, 2, 3))],
                           paths=INTEGER),
    # CONCATENATION / PACK / UNPACK
    "concatenation_negative_axis": Case(
        "CONCATENATION", [F((2, 3)), F((2, 2)), F((2, 1))], [F((2, 6))],
        ("ConcatenationOptions", {"axis": -1})),
    "concatenation_int32_axis0": Case(
        "CONCATENATION", [F((1, 3), "INT32"), F((2, 3), "INT32")], [F((3, 3), "INT32")],
        ("ConcatenationOptions", {"axis": 0})),
    "concatenation_bool": Case(
        "CONCATENATION", [F((2, 2), "BOOL"), F((2, 1), "BOOL")], [F((2, 3), "BOOL")],
        ("ConcatenationOptions", {"axis": 1})),
    "concatenation_int8_same_quantization": Case(
        "CONCATENATION", [q8((2, 2)), q8((2, 3))], [q8((2, 5))],
        ("ConcatenationOptions", {"axis": 1}), paths=INTEGER),
    "concatenation_int16": Case(
        "CONCATENATION", [Tensor((2, 1), "INT16", None, 0.001, 0),
                          Tensor((2, 2), "INT16", None, 0.001, 0)],
        [Tensor((2, 3), "INT16", None, 0.001, 0)], ("ConcatenationOptions", {"axis": 1}),
        paths=INTEGER),
    "pack_last_axis": Case("PACK", [F((2, 3)), F((2, 3)), F((2, 3))], [F((2, 3, 3))],
                           ("PackOptions", {"valuesCount": 3, "axis": 2})),
    "pack_negative_axis_int32": Case("PACK", [F((3,), "INT32"), F((3,), "INT32")],
                                     [F((3, 2), "INT32")],
                                     ("PackOptions", {"valuesCount": 2, "axis": -1})),
    "unpack_first_axis_int8": Case("UNPACK", [q8((3, 2, 2))], [q8((2, 2))] * 3,
                                   ("UnpackOptions", {"num": 3, "axis": 0}), paths=INTEGER),
    # SPLIT / SPLIT_V
    "split_negative_axis": Case("SPLIT", [i32(-1), F((2, 6))], [F((2, 2))] * 3,
                                ("SplitOptions", {"numSplits": 3})),
    "split_v_minus_one_size": Case("SPLIT_V", [F((7, 2)), i32([2, -1, 1]), i32(0)],
                                   [F((2, 2)), F((4, 2)), F((1, 2))],
                                   ("SplitVOptions", {"numSplits": 3})),
    # SLICE
    "slice_size_minus_one": Case("SLICE", [F((3, 4, 5)), i32([1, 0, 2]), i32([-1, 2, -1])],
                                 [F((2, 2, 3))]),
    "slice_bool": Case("SLICE", [F((4, 4), "BOOL"), i32([1, 1]), i32([2, 3])],
                       [F((2, 3), "BOOL")]),
    # TILE / BROADCAST_TO
    "tile_int32": Case("TILE", [F((2, 3), "INT32"), i32([3, 2])], [F((6, 6), "INT32")]),
    "tile_bool": Case("TILE", [F((1, 2), "BOOL"), i32([2, 1])], [F((2, 2), "BOOL")]),
    "broadcast_to_higher_rank": Case("BROADCAST_TO", [F((3, 1)), i32([2, 3, 4])],
                                     [F((2, 3, 4))], version=2),
    "broadcast_to_int8": Case("BROADCAST_TO", [q8((1, 3)), i32([2, 3])], [q8((2, 3))],
                              paths=INTEGER, version=2),
    # PAD / PADV2 / MIRROR_PAD
    "pad_float_asymmetric": Case("PAD", [F((2, 3)), i32([[1, 0], [2, 3]])], [F((3, 8))]),
    # The pad value of quantized data is the zero point (real 0), not the stored 0.
    "pad_int8_nonzero_zero_point": Case("PAD", [q8((2, 3), 0.1, 37), i32([[1, 2], [0, 1]])],
                                        [q8((5, 4), 0.1, 37)], paths=INTEGER),
    "pad_int16_symmetric": Case(
        "PAD", [Tensor((2, 3), "INT16", None, 0.001, 0), i32([[0, 1], [2, 0]])],
        [Tensor((3, 5), "INT16", None, 0.001, 0)], paths=INTEGER),
    "padv2_value_operand": Case("PADV2", [F((2, 2)), i32([[1, 1], [0, 2]]),
                                          F((), data=np.float32(-3.5))], [F((4, 4))]),
    "padv2_int8_value_operand": Case(
        "PADV2", [q8((2, 2)), i32([[1, 0], [0, 1]]), q8((), data=np.int8(90))], [q8((3, 3))],
        paths=INTEGER),
    "mirror_pad_symmetric_int32": Case("MIRROR_PAD", [F((3, 4), "INT32"),
                                                      i32([[3, 2], [0, 4]])],
                                       [F((8, 8), "INT32")], ("MirrorPadOptions", {"mode": 1})),
    "mirror_pad_reflect_rank3": Case("MIRROR_PAD", [F((2, 3, 4)), i32([[1, 0], [2, 2], [0, 3]])],
                                     [F((3, 7, 7))], ("MirrorPadOptions", {"mode": 0})),
    # REVERSE_V2
    "reverse_v2_negative_axes": Case("REVERSE_V2", [F((2, 3, 4)), i32([-1, -2])],
                                     [F((2, 3, 4))]),
    "reverse_v2_bool": Case("REVERSE_V2", [F((3, 2), "BOOL"), i32([0])], [F((3, 2), "BOOL")]),
    # Space / depth / batch
    "space_to_depth_int8": Case("SPACE_TO_DEPTH", [q8((1, 4, 6, 2))], [q8((1, 2, 3, 8))],
                                ("SpaceToDepthOptions", {"blockSize": 2}), paths=INTEGER),
    "depth_to_space_block3": Case("DEPTH_TO_SPACE", [F((2, 1, 2, 18))], [F((2, 3, 6, 2))],
                                  ("DepthToSpaceOptions", {"blockSize": 3})),
    "space_to_batch_nd_rank3": Case("SPACE_TO_BATCH_ND", [F((2, 5, 3)), i32([3]),
                                                          i32([[1, 0]])], [F((6, 2, 3))]),
    # Padding of quantized data: TFLite pads with the output zero point.
    "space_to_batch_nd_int8_padding": Case(
        "SPACE_TO_BATCH_ND", [q8((1, 3, 3, 2), 0.1, 25), i32([2, 2]), i32([[1, 0], [0, 1]])],
        [q8((4, 2, 2, 2), 0.1, 25)], paths=INTEGER),
    "batch_to_space_nd_crops": Case("BATCH_TO_SPACE_ND", [F((6, 2, 2, 1)), i32([2, 3]),
                                                          i32([[1, 0], [2, 1]])],
                                    [F((1, 3, 3, 1))]),
    # Shape-valued ops fold to constants.
    "shape_int32": Case("SHAPE", [F((2, 5, 3))], [F((3,), "INT32")],
                        ("ShapeOptions", {"outType": 2})),
    "rank_of_rank4": Case("RANK", [F((1, 2, 3, 4))], [F((), "INT32")]),
    "broadcast_args_constants": Case("BROADCAST_ARGS", [i32([2, 1, 3]), i32([4, 1])],
                                     [F((3,), "INT32")]),
    # Diagonals, sequences, updates
    "matrix_diag_batched": Case("MATRIX_DIAG", [F((2, 3))], [F((2, 3, 3))]),
    "matrix_diag_int8": Case("MATRIX_DIAG", [q8((1, 4), 0.1, 12)], [q8((1, 4, 4), 0.1, 12)],
                             paths=INTEGER),
    "matrix_set_diag_wide": Case("MATRIX_SET_DIAG", [F((2, 3, 5)), F((2, 3))], [F((2, 3, 5))]),
    "matrix_set_diag_tall_int32": Case("MATRIX_SET_DIAG", [F((5, 2), "INT32"), F((2,), "INT32")],
                                       [F((5, 2), "INT32")]),
    # TFLite copies the stored diagonal values even when they are quantized differently.
    "matrix_set_diag_int8_other_quantization": Case(
        "MATRIX_SET_DIAG", [q8((3, 3), 0.05, -7), q8((3,), 0.02, 40)], [q8((3, 3), 0.05, -7)],
        paths=INTEGER),
    "reverse_sequence_lengths": Case("REVERSE_SEQUENCE", [F((4, 5, 2)), i32([0, 1, 3, 5])],
                                     [F((4, 5, 2))],
                                     ("ReverseSequenceOptions", {"seqDim": 1, "batchDim": 0})),
    "reverse_sequence_batch_after_seq": Case(
        "REVERSE_SEQUENCE", [F((3, 2, 2), "INT32"), i32([2, 3])], [F((3, 2, 2), "INT32")],
        ("ReverseSequenceOptions", {"seqDim": 0, "batchDim": 1})),
    # Start indices are clamped so that the update fits (TFLite ClampStartIndices).
    "dynamic_update_slice_clamped_start": Case(
        "DYNAMIC_UPDATE_SLICE", [F((4, 5)), F((2, 3)), i32([3, -2])], [F((4, 5))]),
    "dynamic_update_slice_bool": Case(
        "DYNAMIC_UPDATE_SLICE", [F((3, 3), "BOOL"), F((1, 2), "BOOL"), i32([1, 1])],
        [F((3, 3), "BOOL")]),
}


@pytest.mark.parametrize("name", list(CASES))
def test_data_layout_matches_tflite(name: str, builder, tmp_path: Path) -> None:
    run_case(builder, CASES[name], tmp_path / f"{name}.tflite")


def _strided(shape, begin, end, strides, out_shape, dtype="FLOAT32", **masks) -> Case:
    options = {"beginMask": 0, "endMask": 0, "ellipsisMask": 0, "newAxisMask": 0,
               "shrinkAxisMask": 0, "offset": False}
    options.update(masks)
    return Case("STRIDED_SLICE", [F(shape, dtype), i32(begin), i32(end), i32(strides)],
                [F(out_shape, dtype)], ("StridedSliceOptions", options))


STRIDED = {
    "negative_stride_full_axis": _strided((5, 3), [-1, 0], [0, 3], [-1, 1], (5, 3),
                                          beginMask=0, endMask=1),
    "negative_stride_two": _strided((7, 2), [6, 0], [0, 2], [-2, 1], (3, 2)),
    "stride_three_not_a_multiple": _strided((2, 10), [0, 1], [2, 9], [1, 3], (2, 3)),
    "stride_larger_than_extent": _strided((3, 4), [0, 1], [3, 4], [1, 5], (3, 1)),
    "end_beyond_bounds_and_masks": _strided((4, 6), [9, 2], [100, -1], [1, 2], (4, 2),
                                            beginMask=1),
    "every_axis_strided_rank4": _strided((5, 6, 7, 4), [0, 1, 6, 0], [5, 6, 0, 4],
                                         [2, 2, -3, 3], (3, 3, 2, 2)),
    "shrink_negative_index": _strided((3, 4), [-1, 1], [0, 3], [1, 1], (2,),
                                      shrinkAxisMask=1),
    "ellipsis_then_index": _strided((2, 3, 4), [0, 2], [0, 3], [1, 1], (2, 3),
                                    ellipsisMask=1, shrinkAxisMask=2),
    "new_axis_in_the_middle": _strided((3, 4), [0, 0, 1], [3, 0, 4], [1, 1, 2], (3, 1, 2),
                                       newAxisMask=2),
    "ellipsis_with_new_axis_int32": _strided((2, 3, 4), [0, 0], [0, 0], [1, 1], (2, 3, 4, 1),
                                             "INT32", ellipsisMask=1, newAxisMask=2),
    "bool_reverse": _strided((4,), [0], [0], [-1], (4,), "BOOL", beginMask=1, endMask=1),
    "offset_end_is_a_length": _strided((6, 3), [1, 0], [3, 2], [1, 1], (3, 2), offset=True),
}


@pytest.mark.parametrize("name", list(STRIDED))
def test_strided_slice_matches_tflite(name: str, builder, tmp_path: Path) -> None:
    run_case(builder, STRIDED[name], tmp_path / f"strided_slice_{name}.tflite")


def u8(shape: tuple[int, ...], scale: float, zero_point: int) -> Tensor:
    return Tensor(shape, "UINT8", None, scale, zero_point)


# uint8 data is stored in i8 once quantized types are stripped; these cases are
# compared bit pattern for bit pattern (the shared harness feeds and compares
# the stripped i8 types, which TFLite's uint8 tensors do not accept).
UINT8_CASES = {
    # A u8 zero point of 128 is the i8 pad value -128.
    "pad_uint8_zero_point_128": (Case(
        "PAD", [u8((2, 2), 0.1, 128), i32([[1, 1], [1, 1]])], [u8((4, 4), 0.1, 128)],
        paths=INTEGER), [[[0, 255], [128, 7]]], 0),
    # uint8 CONCATENATION requantizes inputs of other scales: not a move; the integer
    # pattern (legalize/joining.py) rescales them exactly.
    "concatenation_uint8_different_scales_rescaled": (Case(
        "CONCATENATION", [u8((2, 2), 0.05, 128), u8((2, 3), 0.02, 100)], [u8((2, 5), 0.05, 128)],
        ("ConcatenationOptions", {"axis": 1}), paths=INTEGER),
        [[[0, 255], [128, 7]], [[1, 254, 100], [128, 99, 3]]], 0),
}


@pytest.mark.parametrize("name", list(UINT8_CASES))
def test_uint8_data_layout_matches_tflite(name: str, builder, tmp_path: Path) -> None:
    import reference_model

    case, feeds, lsb = UINT8_CASES[name]
    path = write_case(builder, case, tmp_path / f"{name}.tflite")
    module, conversion = convert(path)
    took = {o["path"] for o in conversion.outcomes if o["op_name"] != "tfl.pseudo_const"}
    assert took == set(case.paths)
    arrays = [np.asarray(f, dtype=np.uint8) for f in feeds]
    expected = reference_outputs(path, arrays)[0]
    ours = next(iter(reference_model.run(module, [a.view(np.int8) for a in arrays]).values()))
    difference = np.abs(ours.view(np.uint8).astype(np.int32) - expected.astype(np.int32))
    assert difference.max() <= lsb, f"ours {ours.view(np.uint8)} vs TFLite {expected}"


def test_pad_int8_pads_with_the_zero_point(builder, tmp_path: Path) -> None:
    """The TOSA PAD of a zp=37 int8 tensor carries pad_const 37 (real 0), and every
    padded output element TFLite returns is 37 too."""
    case = CASES["pad_int8_nonzero_zero_point"]
    path = write_case(builder, case, tmp_path / "pad_int8.tflite")
    module, _ = convert(path)
    pads = [op for _, op in module.ops() if op.name == "tosa.pad"]
    assert len(pads) == 1
    pad_const = pads[0].operands[2].owner.attrs["values"]
    assert pad_const.tolist() == [37]
    feed = np.arange(-3, 3, dtype=np.int8).reshape(2, 3)
    _, report = check_model(path, allowed_paths=("integer", "float"), inputs=[[feed]])
    assert report.outputs[0].exact


# ---------------------------------------------------------------------------
# Run-time positions: the start indices are a graph input, fed many values
# (negative and out of range where TFLite defines the result: DYNAMIC_UPDATE_SLICE
# clamps them; SLICE and STRIDED_SLICE fail outside the tensor).


def run_positions(builder, case: Case, path: Path, position: int,
                  starts: list[list[int]]) -> None:
    """check_model on `case` (graph input `position` holds the start indices)
    with one run per start vector, other inputs seeded."""
    write_case(builder, case, path)
    graph_inputs = [t for t in case.inputs if t is not None and t.data is None]
    rng = np.random.default_rng(len(starts))
    feeds = []
    for start in starts:
        run = []
        for i, t in enumerate(graph_inputs):
            dtype = NUMPY_OF[t.dtype]
            if i == position:
                run.append(np.asarray(start, dtype=dtype))
            elif dtype == np.bool_:
                run.append(rng.random(t.shape) < 0.5)
            elif np.issubdtype(dtype, np.integer):
                info = np.iinfo(dtype)
                run.append(rng.integers(info.min, info.max, t.shape, endpoint=True, dtype=dtype))
            else:
                run.append(rng.normal(size=t.shape).astype(dtype))
        feeds.append(run)
    conversion, report = check_model(path, allowed_paths=case.paths + ("float", "integer"),
                                     inputs=feeds)
    assert all(o.exact for o in report.outputs)
    took = {o["path"] for o in conversion.outcomes if o["op_name"] != "tfl.pseudo_const"}
    assert took == set(case.paths), f"took {took}, expected {set(case.paths)}"


def grid(*axes: list[int]) -> list[list[int]]:
    return [list(p) for p in np.array(np.meshgrid(*axes, indexing="ij")).reshape(len(axes), -1).T]


OUT_OF_RANGE = [-2**31, -9, -1, 0, 1, 2, 3, 4, 7, 2**31 - 1]
DYNAMIC_UPDATES = {
    # x [4, 5, 3], update [2, 3, 3]: the last axis is whole, rows of 3 values.
    "f32_rows": (Case("DYNAMIC_UPDATE_SLICE", [F((4, 5, 3)), F((2, 3, 3)), F((3,), "INT32")],
                      [F((4, 5, 3))]),
                 grid(OUT_OF_RANGE[1:-1], [-3, 0, 2, 5, 2**31 - 1], [0, -4, 2])),
    # Every axis at a run-time position: rows of one value.
    "i32_every_axis": (Case("DYNAMIC_UPDATE_SLICE", [F((3, 4), "INT32"), F((2, 2), "INT32"),
                                                      F((2,), "INT32")], [F((3, 4), "INT32")]),
                       grid(OUT_OF_RANGE, [-1, 0, 1, 2, 3, 9])),
    # TFLite copies the update's stored values whatever its quantization.
    "int8_other_quantization": (Case(
        "DYNAMIC_UPDATE_SLICE", [q8((2, 6, 4), 0.05, -7), q8((1, 2, 4), 0.02, 40),
                                 F((3,), "INT32")], [q8((2, 6, 4), 0.05, -7)], paths=INTEGER),
        grid([-1, 0, 1, 5], [-3, 0, 1, 4, 5, 6, 100], [0, 3])),
    "bool": (Case("DYNAMIC_UPDATE_SLICE", [F((3, 3), "BOOL"), F((1, 2), "BOOL"),
                                           F((2,), "INT32")], [F((3, 3), "BOOL")]),
             grid([-1, 0, 1, 2, 3], [-1, 0, 1, 2])),
    # A KV cache [batch, positions, heads, depth] written at one run-time position.
    "kv_cache_position": (Case("DYNAMIC_UPDATE_SLICE",
                               [F((1, 8, 2, 4)), F((1, 1, 2, 4)), F((4,), "INT32")],
                               [F((1, 8, 2, 4))]),
                          [[0, p, 0, 0] for p in range(-2, 11)] + [[3, 2, 1, -1]]),
}


@pytest.mark.parametrize("name", list(DYNAMIC_UPDATES))
def test_dynamic_update_slice_at_run_time_positions(name: str, builder, tmp_path: Path) -> None:
    case, starts = DYNAMIC_UPDATES[name]
    run_positions(builder, case, tmp_path / f"dus_{name}.tflite", 2, starts)


def test_dynamic_update_slice_run_time_position_is_a_scatter(builder, tmp_path: Path) -> None:
    case, _ = DYNAMIC_UPDATES["kv_cache_position"]
    module, _ = convert(write_case(builder, case, tmp_path / "kv.tflite"))
    ops = [op.name for _, op in module.ops()]
    assert "tosa.scatter" in ops and "tosa.select" not in ops


def test_dynamic_update_slice_run_time_int64_start_is_refused(builder, tmp_path: Path) -> None:
    case = Case("DYNAMIC_UPDATE_SLICE", [F((4, 5)), F((2, 3)), F((2,), "INT64")], [F((4, 5))])
    with pytest.raises(ConversionError, match="run-time i64 start indices"):
        convert(write_case(builder, case, tmp_path / "dus_i64.tflite"))


def test_dynamic_update_slice_run_time_start_of_the_wrong_length_is_refused(builder,
                                                                           tmp_path: Path
                                                                           ) -> None:
    case = Case("DYNAMIC_UPDATE_SLICE", [F((4, 5)), F((2, 3)), F((1,), "INT32")], [F((4, 5))])
    # Refused at the door by the structural check (tfl2tosa/tflite_import/structure.py).
    with pytest.raises(ModelError, match=r"start indices \[1\] do not fit operand \[4, 5\]"):
        convert(write_case(builder, case, tmp_path / "dus_short.tflite"))


def test_dynamic_update_slice_larger_than_the_operand_is_refused(builder, tmp_path: Path
                                                                  ) -> None:
    case = Case("DYNAMIC_UPDATE_SLICE", [F((4, 5)), F((2, 6)), F((2,), "INT32")], [F((4, 5))])
    with pytest.raises(ModelError, match=r"update \[2, 6\] and start indices \[2\] do not fit "
                       r"operand \[4, 5\]"):
        convert(write_case(builder, case, tmp_path / "dus_large.tflite"))


def _runtime_strided(shape, end, strides, out_shape, dtype="FLOAT32", **masks) -> Case:
    case = _strided(shape, [0] * len(end), end, strides, out_shape, dtype, **masks)
    case.inputs[1] = F((len(end),), "INT32")
    return case


DYNAMIC_SLICES = {
    "slice_rows": (Case("SLICE", [F((5, 4, 3)), F((3,), "INT32"), i32([2, 3, 3])],
                        [F((2, 3, 3))]), grid([0, 1, 2, 3], [0, 1], [0])),
    "slice_int8_every_axis": (Case("SLICE", [q8((4, 6)), F((2,), "INT32"), i32([3, 2])],
                                   [q8((3, 2))], paths=INTEGER), grid([0, 1], [0, 2, 3, 4])),
    # x[:, i] and x[i, :, ::2]: only shrunk axes read the run-time begin (negative
    # ones count from the end); begin-masked axes ignore it, whatever it holds.
    "strided_shrink_middle": (_runtime_strided((4, 5, 3), [0, 0, 0], [1, 1, 1], (4, 3),
                                               beginMask=5, endMask=5, shrinkAxisMask=2),
                              grid([0, 99], [-5, -2, -1, 0, 1, 4], [-7])),
    "strided_shrink_first_strided_rest_int32": (
        _runtime_strided((3, 4, 6), [0, 0, 6], [1, 1, 2], (4, 3), "INT32",
                         beginMask=6, endMask=2, shrinkAxisMask=1),
        grid([-3, -1, 0, 2], [5], [1])),
    "strided_shrink_reversed_rest": (
        _runtime_strided((4, 5), [0, 0], [1, -1], (5,), beginMask=2, endMask=2,
                         shrinkAxisMask=1), grid([-4, 0, 3], [0])),
}


@pytest.mark.parametrize("name", list(DYNAMIC_SLICES))
def test_slice_at_run_time_positions(name: str, builder, tmp_path: Path) -> None:
    case, starts = DYNAMIC_SLICES[name]
    run_positions(builder, case, tmp_path / f"{name}.tflite", 1, starts)


@pytest.mark.parametrize("name", ["kv_cache_position", "bool", "int8_other_quantization",
                                  "slice_int8_every_axis", "strided_shrink_middle"])
def test_run_time_positions_pass_tosa_opt(name: str, builder, tmp_path: Path) -> None:
    import subprocess
    import sysconfig

    from tfl2tosa.pipeline import emit

    case, _ = {**DYNAMIC_UPDATES, **DYNAMIC_SLICES}[name]
    module, _ = convert(write_case(builder, case, tmp_path / f"{name}.tflite"))
    mlir = tmp_path / f"{name}.mlir"
    mlir.write_bytes(emit(module, "mlir"))
    tosa_opt = Path(sysconfig.get_paths()["scripts"]) / "tosa-opt"
    result = subprocess.run(
        [str(tosa_opt), str(mlir), "--tosa-attach-target=profiles=pro_int,pro_fp",
         "--tosa-validate=strict-op-spec-alignment", "-o", "/dev/null"],
        check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_strided_slice_run_time_begin_with_offset_is_refused(builder, tmp_path: Path) -> None:
    case = _runtime_strided((5, 6), [2, 3], [1, 1], (2, 3), offset=True)
    with pytest.raises(ConversionError, match="offset with a run-time begin"):
        convert(write_case(builder, case, tmp_path / "strided_slice_offset.tflite"))


def test_strided_slice_run_time_begin_with_a_run_time_size_is_refused(builder, tmp_path: Path
                                                                       ) -> None:
    case = Case("STRIDED_SLICE", [F((4,)), F((1,), "INT32"), i32([4]), i32([1])], [F((2,))],
                ("StridedSliceOptions", {}))
    path = write_case(builder, case, tmp_path / "strided_slice_dynamic.tflite")
    with pytest.raises(ConversionError, match="size along axis 0 is known only at run time"):
        convert(path)



KV_CACHE_MODEL = Path(__file__).resolve().parents[1] / "models/toolchains/litert_torch"


@pytest.mark.parametrize("name", ["kv_cache_decode_float32", "kv_cache_decode_hlfb_float32"])
def test_litert_torch_kv_cache_decoder_at_each_position(name: str) -> None:
    # LiteRT Torch's KV-cache decoder writes both caches with DYNAMIC_UPDATE_SLICE
    # at [0, input_pos, 0, 0] and reads its RoPE and mask rows with GATHER_ND at
    # input_pos; the caches hold 16 positions.
    path = KV_CACHE_MODEL / f"{name}.tflite"
    rng = np.random.default_rng(9)
    feeds = [[np.array([[rng.integers(0, 64)]], np.int32), np.array([position], np.int32),
              rng.uniform(-1, 1, (1, 16, 2, 8)).astype(np.float32),
              rng.uniform(-1, 1, (1, 16, 2, 8)).astype(np.float32)]
             for position in (0, 1, 6, 14, 15)]
    module, _ = convert(path)
    assert sum(op.name == "tosa.scatter" for _, op in module.ops()) == 2
    _, report = check_model(path, allowed_paths=("float",), inputs=feeds)
    assert report.passed
