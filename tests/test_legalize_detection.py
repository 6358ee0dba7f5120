"""TFLite_Detection_PostProcess: hand-built detectors, judged by TFLite's own
kernel (its builtin reference resolver includes the op) and by Arm's
reference model running the written `.tosa`.

Each case builds a model with SSD-style anchors (a grid of centres, two box
shapes per centre) and flexbuffer options, and draws box encodings and
scores; some cases plant ties, identical boxes, scores all below the
threshold, or far more candidates than max_detections.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TfliteBuilder
from e2e import check_model
from flatbuffers import flexbuffers
from tflite_ref import reference_outputs, write_model

from tfl2tosa.errors import ConversionError
from tfl2tosa.pipeline import convert

CODE = "TFLite_Detection_PostProcess"


def flex_options(**fields: object) -> bytes:
    fbb = flexbuffers.Builder()
    with fbb.Map():
        for key, value in fields.items():
            if isinstance(value, bool):
                fbb.Bool(key, value)
            elif isinstance(value, int):
                fbb.Int(key, value)
            else:
                fbb.Float(key, float(value))
    return bytes(fbb.Finish())


def ssd_anchors(grid: int) -> np.ndarray:
    """(y, x, h, w) anchors: grid x grid centres, a square and a wide box each."""
    centres = (np.arange(grid) + 0.5) / grid
    anchors = [(y, x, h, w) for y in centres for x in centres
               for h, w in ((0.3, 0.3), (0.2, 0.4))]
    return np.asarray(anchors, dtype=np.float32)


OPTIONS = dict(max_detections=5, max_classes_per_detection=1, detections_per_class=4,
               nms_score_threshold=0.3, nms_iou_threshold=0.5, num_classes=3, y_scale=10.0,
               x_scale=10.0, h_scale=5.0, w_scale=5.0, use_regular_nms=False)

# Quantization (scale, zero point) of uint8 box encodings, scores, and anchors.
BOX_Q, SCORE_Q = (0.05, 128), (1 / 255, 0)
ANCHOR_Q = {"UINT8": (1 / 255, 0), "INT8": (1 / 255, -128)}


def detector(anchors: np.ndarray, options: dict, *, background: int = 1,
             dtype: str = "FLOAT32", anchor_dtype: str = "FLOAT32",
             code_size: int = 4) -> TfliteBuilder:
    """The op alone; `dtype` for box encodings and scores (FLOAT32 or a
    quantized type), `anchor_dtype` for the constant anchors."""
    n = len(anchors)
    columns = options["num_classes"] + background
    b = TfliteBuilder()
    if dtype == "FLOAT32":
        boxes = b.tensor([1, n, code_size], "FLOAT32", "box_encodings")
        scores = b.tensor([1, n, columns], "FLOAT32", "scores")
    else:
        zp = {"UINT8": 0, "INT8": -128}[dtype]
        boxes = b.tensor([1, n, code_size], dtype, "box_encodings", scale=[BOX_Q[0]],
                         zero_point=[BOX_Q[1] + zp])
        scores = b.tensor([1, n, columns], dtype, "scores", scale=[SCORE_Q[0]],
                          zero_point=[SCORE_Q[1] + zp])
    if anchor_dtype == "FLOAT32":
        anchor = b.tensor([n, 4], "FLOAT32", "anchors", data=anchors)
    else:
        scale, zero = ANCHOR_Q[anchor_dtype]
        storage = np.uint8 if anchor_dtype == "UINT8" else np.int8
        info = np.iinfo(storage)
        stored = np.clip(np.round(anchors / scale) + zero, info.min, info.max).astype(storage)
        anchor = b.tensor([n, 4], anchor_dtype, "anchors", data=stored, scale=[scale],
                          zero_point=[zero])
    outputs = [b.tensor([], "FLOAT32", name) for name in
               ("detection_boxes", "detection_classes", "detection_scores", "num_detections")]
    b.op("CUSTOM", [boxes, scores, anchor], outputs, custom_code=CODE,
         custom_options=flex_options(**options))
    b.io([boxes, scores], outputs)
    return b


def random_feeds(rng: np.random.Generator, n: int, columns: int, runs: int,
                 dtype: str = "FLOAT32", code_size: int = 4) -> list[list[np.ndarray]]:
    if dtype == "FLOAT32":
        return [[rng.normal(0, 2, (1, n, code_size)).astype(np.float32),
                 rng.uniform(0, 1, (1, n, columns)).astype(np.float32)] for _ in range(runs)]
    info = np.iinfo(np.uint8 if dtype == "UINT8" else np.int8)
    return [[rng.integers(info.min, info.max + 1, (1, n, code_size)).astype(info.dtype),
             rng.integers(info.min, info.max + 1, (1, n, columns)).astype(info.dtype)]
            for _ in range(runs)]


CASES = {
    # (options changed from OPTIONS, background columns, grid)
    "fast_one_class_per_box": ({}, 1, 3),
    "fast_two_classes_per_box": ({"max_classes_per_detection": 2}, 1, 3),
    "fast_more_classes_per_box_than_classes": ({"max_classes_per_detection": 4}, 1, 2),
    "fast_no_background": ({}, 0, 3),
    "fast_many_candidates": ({"max_detections": 10, "nms_score_threshold": 0.05}, 1, 4),
    "fast_low_iou": ({"nms_iou_threshold": 0.1, "max_detections": 8}, 1, 3),
    "regular": ({"use_regular_nms": True}, 1, 3),
    "regular_two_classes_per_box": ({"use_regular_nms": True,
                                     "max_classes_per_detection": 2}, 1, 3),
    "regular_per_class_above_max": ({"use_regular_nms": True, "detections_per_class": 9,
                                     "max_detections": 6}, 1, 3),
    "regular_many_candidates": ({"use_regular_nms": True, "max_detections": 10,
                                 "detections_per_class": 10, "nms_score_threshold": 0.05,
                                 "num_classes": 5}, 1, 4),
    "regular_fewer_candidates_than_rows": ({"use_regular_nms": True, "num_classes": 1,
                                            "detections_per_class": 2,
                                            "max_detections": 5}, 1, 3),
    "regular_scales_one": ({"use_regular_nms": True, "y_scale": 1.0, "x_scale": 1.0,
                            "h_scale": 1.0, "w_scale": 1.0}, 1, 3),
}


@pytest.mark.parametrize("case", CASES)
def test_float_detector_matches_tflite(tmp_path, case):
    changes, background, grid = CASES[case]
    options = {**OPTIONS, **changes}
    anchors = ssd_anchors(grid)
    path = write_model(detector(anchors, options, background=background), tmp_path / "m.tflite")
    rng = np.random.default_rng(3)
    feeds = random_feeds(rng, len(anchors), options["num_classes"] + background, 3)
    conversion, report = check_model(path, inputs=feeds, allowed_paths=("float",))
    assert [o["pattern"] for o in conversion.outcomes] == ["detection_postprocess"]
    assert report.passed


@pytest.mark.parametrize("regular", [False, True], ids=["fast", "regular"])
def test_uint8_detector_matches_tflite(tmp_path, regular):
    """uint8 box encodings, scores and anchors (a quantized SSD's output)."""
    options = {**OPTIONS, "use_regular_nms": regular, "max_classes_per_detection": 2}
    anchors = ssd_anchors(3)
    path = write_model(detector(anchors, options, dtype="UINT8", anchor_dtype="UINT8"),
                       tmp_path / "m.tflite")
    feeds = random_feeds(np.random.default_rng(5), len(anchors), 4, 3, "UINT8")
    conversion, report = check_model(path, inputs=feeds, allowed_paths=("float",))
    assert [o["pattern"] for o in conversion.outcomes] == ["detection_postprocess"]


@pytest.mark.parametrize("dtype, anchor_dtype", [("INT8", "FLOAT32"), ("INT8", "INT8"),
                                                 ("FLOAT32", "UINT8")])
def test_input_types_tflite_fails_on_are_refused(tmp_path, dtype, anchor_dtype):
    """int8 encodings and scores, or quantized anchors beside float encodings:
    TFLite's kernel fails on them, so there is no behaviour to reproduce."""
    b = detector(ssd_anchors(2), OPTIONS, dtype=dtype, anchor_dtype=anchor_dtype)
    path = write_model(b, tmp_path / "m.tflite")
    feeds = random_feeds(np.random.default_rng(0), 8, 4, 1, dtype)[0]
    with pytest.raises(RuntimeError):
        reference_outputs(path, feeds)
    with pytest.raises(ConversionError, match="TFLite's kernel does not run"):
        convert(path)


@pytest.mark.parametrize("anchor_dtype", ["FLOAT32", "INT8"])
def test_anchors_unlike_uint8_encodings_are_refused(tmp_path, anchor_dtype):
    """Beside uint8 encodings TFLite's kernel reads the anchors' bytes as
    uint8: float anchors decode to nothing, int8 ones to shifted boxes (seen
    here), so such a model has no meaning to reproduce."""
    anchors = ssd_anchors(2)
    # Nothing suppressed (IoU never above 1), equal scores: rows in anchor order.
    options = {**OPTIONS, "nms_score_threshold": 0.0, "max_detections": 8,
               "nms_iou_threshold": 1.0}
    b = detector(anchors, options, dtype="UINT8", anchor_dtype=anchor_dtype)
    path = write_model(b, tmp_path / "m.tflite")
    feeds = [np.full((1, 8, 4), 128, np.uint8), np.full((1, 8, 4), 200, np.uint8)]
    boxes = reference_outputs(path, feeds)[0][0, :4]
    # Zero encodings decode to the anchors themselves: ymin = y - h / 2.
    assert not np.allclose(boxes[:, 0], anchors[:4, 0] - anchors[:4, 2] / 2, atol=0.01)
    with pytest.raises(ConversionError, match="TFLite's kernel does not run"):
        convert(path)


def test_box_encodings_wider_than_four(tmp_path):
    """Keypoint-carrying encodings [1, N, 8]: the kernel decodes the first four."""
    anchors = ssd_anchors(2)
    path = write_model(detector(anchors, OPTIONS, code_size=8), tmp_path / "m.tflite")
    feeds = random_feeds(np.random.default_rng(1), len(anchors), 4, 2, code_size=8)
    check_model(path, inputs=feeds)


def _ties_feeds(n: int) -> list[np.ndarray]:
    """Equal scores everywhere that matters and identical encodings in pairs."""
    boxes = np.zeros((1, n, 4), np.float32)
    scores = np.zeros((1, n, 4), np.float32)
    scores[0, :, 1:] = 0.5                      # every class of every anchor ties
    scores[0, ::3, 2] = 0.75                    # class 1 better on every third anchor
    return [boxes, scores]


@pytest.mark.parametrize("changes", [{}, {"use_regular_nms": True},
                                     {"max_classes_per_detection": 3}],
                         ids=["fast", "regular", "fast_three_classes"])
def test_ties_follow_kernel_order(tmp_path, changes):
    """Anchor 0 and anchor 1 share a centre; equal scores keep the lower anchor
    (and the lower class) first, as the kernel's stable sort and ARGMAX do. (With
    three classes per box the kernel's std::partial_sort orders these ties the
    same way; with more classes it may not, see legalize/detection.py.)"""
    options = {**OPTIONS, **changes, "max_detections": 6}
    anchors = ssd_anchors(3)
    path = write_model(detector(anchors, options), tmp_path / "m.tflite")
    feeds = [_ties_feeds(len(anchors))]
    check_model(path, inputs=feeds)
    theirs = reference_outputs(path, feeds[0])
    assert theirs[3][0] == 6  # six detections made of ties


def test_ties_hand_derived(tmp_path):
    """Four anchors, two of them identical boxes: by hand, fast NMS keeps
    anchor 0 (0.9), drops anchor 1 (same box, IoU 1 > 0.5), keeps anchor 2
    (0.7) then anchor 3 (0.6; its classes tie, class 0 first)."""
    anchors = np.array([[0.5, 0.5, 0.2, 0.2], [0.5, 0.5, 0.2, 0.2],
                        [0.2, 0.2, 0.1, 0.1], [0.8, 0.8, 0.1, 0.1]], np.float32)
    options = {**OPTIONS, "num_classes": 2, "max_detections": 3, "max_classes_per_detection": 2}
    path = write_model(detector(anchors, options), tmp_path / "m.tflite")
    boxes = np.zeros((1, 4, 4), np.float32)
    scores = np.array([[[0, 0.9, 0.6], [0, 0.8, 0.8], [0, 0.7, 0.5], [0, 0.6, 0.6]]], np.float32)
    module, _ = convert(path)
    import reference_model

    ours = list(reference_model.run(module, [boxes, scores]).values())
    np.testing.assert_array_equal(ours[1], [[0, 1, 0, 1, 0, 1]])
    np.testing.assert_allclose(ours[2], [[0.9, 0.6, 0.7, 0.5, 0.6, 0.6]])
    np.testing.assert_allclose(ours[0][0, ::2], [[0.4, 0.4, 0.6, 0.6], [0.15, 0.15, 0.25, 0.25],
                                                 [0.75, 0.75, 0.85, 0.85]], rtol=1e-6)
    assert ours[3][0] == 3
    check_model(path, inputs=[[boxes, scores]])


@pytest.mark.parametrize("regular", [False, True], ids=["fast", "regular"])
def test_all_scores_below_threshold(tmp_path, regular):
    """No detection: count 0 and all-zero rows (TFLite's fast NMS leaves its
    rows unwritten; validation compares them as zeros and says so)."""
    options = {**OPTIONS, "use_regular_nms": regular}
    anchors = ssd_anchors(2)
    path = write_model(detector(anchors, options), tmp_path / "m.tflite")
    rng = np.random.default_rng(2)
    feeds = [[rng.normal(size=(1, len(anchors), 4)).astype(np.float32),
              rng.uniform(0, 0.29, (1, len(anchors), 4)).astype(np.float32)]]
    _, report = check_model(path, inputs=feeds)
    module, _ = convert(path)
    import reference_model

    ours = list(reference_model.run(module, feeds[0]).values())
    assert ours[3][0] == 0 and not ours[0].any() and not ours[1].any() and not ours[2].any()
    assert any("unwritten" in note for note in report.notes) != regular


@pytest.mark.parametrize("options, message", [
    ({**OPTIONS, "nms_iou_threshold": 0.0}, "outside (0, 1]"),
    ({k: v for k, v in OPTIONS.items() if k != "num_classes"}, "lack num_classes"),
])
def test_bad_options_are_named_errors(tmp_path, options, message):
    b = detector(ssd_anchors(2), {**OPTIONS, **options} if "num_classes" in options
                 else OPTIONS)
    b.model.subgraphs[0].operators[0].customOptions = list(flex_options(**options))
    path = write_model(b, tmp_path / "m.tflite")
    with pytest.raises(ConversionError, match=message.replace("(", r"\(").replace("]", r"\]")):
        convert(path)


def _ssd_scale(tmp_path, options: dict) -> None:
    """SSD MobileNet's sizes: 1917 anchors, 90 classes plus background."""
    rng = np.random.default_rng(9)
    n = 1917
    anchors = np.stack([rng.uniform(0, 1, n), rng.uniform(0, 1, n),
                        rng.uniform(0.05, 0.5, n), rng.uniform(0.05, 0.5, n)], 1)
    options = {**OPTIONS, "num_classes": 90, "nms_score_threshold": 1e-8,
               "nms_iou_threshold": 0.6, **options}
    path = write_model(detector(anchors.astype(np.float32), options), tmp_path / "m.tflite")
    feeds = random_feeds(rng, n, 91, 1)
    check_model(path, inputs=feeds)
    assert reference_outputs(path, feeds[0])[3][0] == options["max_detections"]


def test_ssd_scale_fast_nms(tmp_path):
    _ssd_scale(tmp_path, {"max_detections": 10})


@pytest.mark.slow
def test_ssd_scale_regular_nms(tmp_path):
    """100 detections per class and overall: the unrolled loops at full size."""
    _ssd_scale(tmp_path, {"max_detections": 100, "detections_per_class": 100,
                          "use_regular_nms": True})
