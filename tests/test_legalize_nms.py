"""NON_MAX_SUPPRESSION_V4 and V5 (legalize/nms.py), judged by TFLite's own
kernel (BUILTIN_REF) and by Arm's reference model running the written `.tosa`.

Each case builds the op alone with the TFLite builder: boxes drawn around a
few centres (so that they overlap), with corners in either order, and scores
in [0, 1); some cases plant identical boxes, boxes of zero area, or scores
all below the threshold. Thresholds and sigma are constants or run-time
inputs. Ties are the one documented difference: TFLite's priority queue
leaves equal scores in its heap's order, the lowering (like TensorFlow's own
kernels) takes the lower index first.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from conftest import TfliteBuilder
from e2e import check_model, model_path
from tflite_ref import reference_outputs, write_model

import reference_model
from tfl2tosa.errors import ConversionError
from tfl2tosa.pipeline import convert

V4, V5 = "NON_MAX_SUPPRESSION_V4", "NON_MAX_SUPPRESSION_V5"


def nms_model(code: str, n: int, max_output_size: int, *, iou: float | None = 0.5,
              score: float | None = 0.2, sigma: float | None = 0.0,
              box_type: str = "FLOAT32", constant_size: bool = True) -> TfliteBuilder:
    """The op alone; a threshold or sigma given as None is a run-time input
    (after boxes and scores, in operand order)."""
    b = TfliteBuilder()
    boxes = b.tensor([n, 4], box_type, "boxes",
                     **({} if box_type == "FLOAT32" else {"scale": [0.05], "zero_point": [0]}))
    scores = b.tensor([n], "FLOAT32", "scores")
    size = b.tensor([], "INT32", "max_output_size",
                    data=np.array(max_output_size, np.int32) if constant_size else None)
    inputs = [boxes, scores] + ([] if constant_size else [size])

    def scalar(name: str, value: float | None) -> int:
        t = b.tensor([], "FLOAT32", name,
                     data=None if value is None else np.array(value, np.float32))
        if value is None:
            inputs.append(t)
        return t

    operands = [boxes, scores, size, scalar("iou_threshold", iou),
                scalar("score_threshold", score)]
    outputs = [b.tensor([max_output_size], "INT32", "selected_indices")]
    if code == V5:
        operands.append(scalar("soft_nms_sigma", sigma))
        outputs.append(b.tensor([max_output_size], "FLOAT32", "selected_scores"))
    outputs.append(b.tensor([], "INT32", "num_selected"))
    b.op(code, operands, outputs)
    b.io(inputs, outputs)
    return b


def clustered_boxes(rng: np.random.Generator, n: int) -> np.ndarray:
    """[n, 4] boxes around four centres, each corner pair in random order."""
    centres = rng.uniform(0.2, 0.8, (4, 2))[rng.integers(0, 4, n)]
    centres += rng.normal(0, 0.05, (n, 2))
    half = rng.uniform(0.05, 0.2, (n, 2))
    lo, hi = centres - half, centres + half
    boxes = np.concatenate([lo, hi], 1)           # y1, x1, y2, x2
    flip = rng.random(n) < 0.3                 # (y2, x2, y1, x1): the kernel takes min/max
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    return boxes.astype(np.float32)


def feeds(rng: np.random.Generator, n: int, runs: int, extra: tuple[float, ...] = (),
          low: float = 0.0, high: float = 1.0) -> list[list[np.ndarray]]:
    return [[clustered_boxes(rng, n), rng.uniform(low, high, n).astype(np.float32),
             *(np.array(v, np.float32) for v in extra)] for _ in range(runs)]


CASES = {
    # (op, boxes, max_output_size, model options, feed options)
    "v4_more_candidates_than_outputs": (V4, 24, 6, {}, {}),
    "v4_fewer_candidates_than_outputs": (V4, 24, 20, {"score": 0.7}, {}),
    "v4_max_output_size_above_boxes": (V4, 5, 8, {"score": 0.0}, {}),
    "v4_all_below_threshold": (V4, 12, 4, {"score": 0.5}, {"high": 0.5}),
    "v4_iou_threshold_0": (V4, 12, 4, {"iou": 0.0}, {}),
    "v4_iou_threshold_1": (V4, 12, 6, {"iou": 1.0}, {}),
    "v4_iou_threshold_above_1": (V4, 12, 5, {"iou": 1.5}, {}),
    "v4_score_threshold_lowest": (V4, 16, 5, {"score": float(np.finfo(np.float32).min)}, {}),
    "v4_runtime_thresholds": (V4, 16, 6, {"iou": None, "score": None},
                              {"extra": (0.4, 0.3)}),
    "v5_sigma_0": (V5, 24, 6, {"sigma": 0.0}, {}),
    "v5_sigma_half": (V5, 24, 8, {"sigma": 0.5}, {}),
    "v5_sigma_small": (V5, 24, 8, {"sigma": 0.05, "score": 0.1}, {}),
    "v5_soft_only": (V5, 16, 10, {"sigma": 0.3, "iou": 1.0, "score": 0.05}, {}),
    "v5_soft_iou_above_1": (V5, 8, 8, {"sigma": 0.5, "iou": 1.5}, {}),
    "v5_runtime_sigma_positive": (V5, 16, 6, {"sigma": None}, {"extra": (0.5,)}),
    "v5_runtime_sigma_0": (V5, 16, 6, {"sigma": None}, {"extra": (0.0,)}),
    "v5_runtime_everything": (V5, 16, 6, {"iou": None, "score": None, "sigma": None},
                              {"extra": (0.6, 0.25, 0.4)}),
}


# TFLite's counts where they are not simply positive: no candidate at all, or
# every box overlapping the first selected one with IoU >= 0.
COUNTS = {"v4_all_below_threshold": [0, 0, 0], "v4_iou_threshold_0": [1, 1, 1]}


@pytest.mark.parametrize("case", CASES)
def test_nms_matches_tflite(tmp_path, case):
    code, n, size, options, feed_options = CASES[case]
    path = write_model(nms_model(code, n, size, **options), tmp_path / "m.tflite")
    runs = feeds(np.random.default_rng(7), n, 3, **feed_options)
    conversion, report = check_model(path, inputs=runs, allowed_paths=("float",))
    assert [o["pattern"] for o in conversion.outcomes] == ["non_max_suppression"]
    counts = [int(reference_outputs(path, run)[-1]) for run in runs]
    if case in COUNTS:
        assert counts == COUNTS[case]
    else:
        assert min(counts) > 0


def _run_both(path, run: list[np.ndarray]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    module, _ = convert(path)
    return reference_outputs(path, run), list(reference_model.run(module, run).values())


def test_identical_boxes_hand_derived(tmp_path):
    """By hand, IoU threshold 1: box 1 equals box 0 (IoU 1 >= 1, dropped);
    box 2 is box 0 with its corners swapped (the same box, dropped); box 3 is
    apart: [0, 3], count 2."""
    boxes = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [1, 1, 0, 0], [5, 5, 6, 6]], np.float32)
    scores = np.array([0.9, 0.8, 0.75, 0.7], np.float32)
    path = write_model(nms_model(V4, 4, 4, iou=1.0, score=0.0), tmp_path / "m.tflite")
    theirs, ours = _run_both(path, [boxes, scores])
    for result in (theirs, ours):
        np.testing.assert_array_equal(result[0], [0, 3, 0, 0])
        assert int(result[1]) == 2
    check_model(path, inputs=[[boxes, scores]])


@pytest.mark.parametrize("iou", [0.5, 1.5], ids=["zero_area_box", "iou_threshold_above_1"])
def test_a_box_that_cannot_suppress_itself_is_selected_again(tmp_path, iou):
    """The kernel pushes a selected box back into its queue; popped again, it
    is compared with itself. A box of zero area (IoU 0 with everything) or any
    box under an IoU threshold above 1 survives that and is selected again, up
    to the number of candidates: by hand [0, 0, 0], count 3."""
    boxes = np.array([[0, 0, 1, 1], [5, 5, 6, 6], [9, 9, 10, 10]], np.float32)
    if iou < 1:
        boxes[0, 2] = 0                      # y2 = y1: no area
    scores = np.array([0.9, 0.8, 0.7], np.float32)
    path = write_model(nms_model(V4, 3, 5, iou=iou, score=0.0), tmp_path / "m.tflite")
    theirs, ours = _run_both(path, [boxes, scores])
    for result in (theirs, ours):
        np.testing.assert_array_equal(result[0], [0, 0, 0, 0, 0])
        assert int(result[1]) == 3
    check_model(path, inputs=[[boxes, scores]])


def test_soft_nms_hand_derived(tmp_path):
    """sigma 0.5 (scale -1): box 1 overlaps box 0 with IoU 0.8 / 1.2 = 2/3, so
    its 0.8 decays to 0.8 * exp(-4/9) = 0.51294; box 2 (0.7) is apart and comes
    first: indices [0, 2, 1], scores [0.9, 0.7, 0.51294]."""
    boxes = np.array([[0, 0, 1, 1], [0, 0.2, 1, 1.2], [9, 9, 10, 10]], np.float32)
    scores = np.array([0.9, 0.8, 0.7], np.float32)
    path = write_model(nms_model(V5, 3, 3, iou=1.0, score=0.0, sigma=0.5),
                       tmp_path / "m.tflite")
    theirs, ours = _run_both(path, [boxes, scores])
    expected = 0.8 * np.exp(-4 / 9)
    for result in (theirs, ours):
        np.testing.assert_array_equal(result[0], [0, 2, 1])
        np.testing.assert_allclose(result[1], [0.9, 0.7, expected], rtol=1e-6)
    check_model(path, inputs=[[boxes, scores]])


@pytest.mark.parametrize("code", [V4, V5])
def test_ties_take_the_lower_index_first(tmp_path, code):
    """Disjoint boxes, scores tied in two groups: TFLite selects the same
    boxes, but in its heap's order within a tie (std::priority_queue compares
    scores only); the lowering takes the lower index first, as TensorFlow's
    NonMaxSuppressionV4/V5 kernels do."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    boxes = np.array([[10 * i, 0, 10 * i + 1, 1] for i in range(8)], np.float32)
    scores = np.array([0.5, 0.7, 0.5, 0.7, 0.5, 0.5, 0.7, 0.5], np.float32)
    path = write_model(nms_model(code, 8, 8, score=0.0), tmp_path / "m.tflite")
    theirs, ours = _run_both(path, [boxes, scores])
    tensorflow = tf.raw_ops.NonMaxSuppressionV5(
        boxes=boxes, scores=scores, max_output_size=8, iou_threshold=0.5, score_threshold=0.0,
        soft_nms_sigma=0.0, pad_to_max_output_size=True)
    np.testing.assert_array_equal(ours[0], tensorflow.selected_indices.numpy())
    np.testing.assert_array_equal(ours[0], [1, 3, 6, 0, 2, 4, 5, 7])
    assert sorted(theirs[0][:3]) == [1, 3, 6] and sorted(theirs[0][3:]) == [0, 2, 4, 5, 7]
    assert int(theirs[-1]) == int(ours[-1]) == 8
    if code == V5:
        np.testing.assert_array_equal(ours[1], theirs[1])


@pytest.mark.parametrize("flavour", ["float32", "int8"])
def test_zoo_model(flavour):
    """tf.image.non_max_suppression_padded as TFLiteConverter emits it; in the
    int8 model the NMS runs on the DEQUANTIZE of int8 boxes and scores."""
    conversion, _ = check_model(model_path(f"unit/{flavour}/non_max_suppression_v4.tflite"),
                                runs=3)
    nms = [o for o in conversion.outcomes if o["op_name"] == "tfl.non_max_suppression_v4"]
    assert [(o["path"], o["pattern"]) for o in nms] == [("float", "non_max_suppression")]


def test_runtime_max_output_size_is_refused(tmp_path):
    """A run-time max_output_size sizes the outputs when the model runs."""
    path = write_model(nms_model(V4, 6, 3, constant_size=False), tmp_path / "m.tflite")
    with pytest.raises(ConversionError, match="max_output_size is a run-time value"):
        convert(path)


def test_negative_sigma_is_refused(tmp_path):
    path = write_model(nms_model(V5, 6, 3, sigma=-0.5), tmp_path / "m.tflite")
    run = feeds(np.random.default_rng(0), 6, 1)[0]
    with pytest.raises(RuntimeError):
        reference_outputs(path, run)
    with pytest.raises(ConversionError, match="soft_nms_sigma -0.5 is negative"):
        convert(path)


def test_quantized_boxes_are_refused(tmp_path):
    """TFLite's kernel runs float32 boxes only; it fails on int8 ones."""
    path = write_model(nms_model(V4, 6, 3, box_type="INT8"), tmp_path / "m.tflite")
    run = [np.zeros((6, 4), np.int8), np.zeros(6, np.float32)]
    with pytest.raises(RuntimeError):
        reference_outputs(path, run)
    with pytest.raises(ConversionError, match="float32"):
        convert(path)


def test_validate_names_tied_scores_when_a_run_differs() -> None:
    """The int8 zoo model's scores are dequantized int8, so they tie: over 200 seeded
    runs some differ from TFLite (its priority queue orders ties otherwise), and
    validate says why; a run that matches carries no such note."""
    from tfl2tosa.validation import TIED_NMS_NOTE, validate

    path = model_path("unit/int8/non_max_suppression_v4.tflite")
    differing = validate(path, runs=200, backend="tensorflow")
    assert not differing.passed
    assert any(note.endswith(TIED_NMS_NOTE) and "NON_MAX_SUPPRESSION_V4" in note
               for note in differing.notes), differing.notes
    matching = validate(path, runs=3, backend="tensorflow")
    assert matching.passed and not any(TIED_NMS_NOTE in n for n in matching.notes)
