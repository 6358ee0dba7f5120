"""TFLite_Detection_PostProcess (the custom op ending SSD-style detectors):
box decoding and non-max suppression from TOSA arithmetic, selection and
gathers, with fixed-size outputs.

The semantics follow TFLite's kernel (tensorflow/lite/kernels/detection_postprocess.cc):

- Decoding: each box encoding (y, x, h, w) is decoded against its anchor
  (ya, xa, ha, wa): ycenter = y / y_scale * ha + ya, half_h = 0.5 * exp(h /
  h_scale) * ha (x and w alike); the box is (ycenter - half_h, xcenter -
  half_w, ycenter + half_h, xcenter + half_w) = (ymin, xmin, ymax, xmax).
- Single-class greedy NMS: the boxes scoring at least `nms_score_threshold`,
  in decreasing score order (a stable sort: equal scores by anchor index),
  each kept unless a box kept before it overlaps it with IoU above
  `nms_iou_threshold`; at most a given number kept. IoU is intersection /
  (area_i + area_j - intersection), 0 when either area is not positive.
  Here: repeatedly take the ARGMAX of the scores still active (the first of
  equal ones, the kernel's order) and deactivate it and every box it
  suppresses, a bounded unrolled loop (legalize/nms.py's `Boxes`, shared with
  NON_MAX_SUPPRESSION_V4/V5).
- Fast NMS (`use_regular_nms` false): one NMS on each anchor's best class
  score, `max_detections` kept; each kept anchor reports its
  min(max_classes_per_detection, num_classes) best classes in row
  `max_classes_per_detection * k + c`. With one class per detection (the
  detectors' setting) the kernel takes the ARGMAX, first of equal scores, as
  here. With more, it orders them with std::partial_sort, which leaves equal
  scores in an order the C++ standard does not fix (libstdc++'s heap order);
  here equal scores list the lower class first, so only the order of tied
  classes can differ.
- Regular NMS: one NMS per class, min(detections_per_class, max_detections)
  kept per class (done for all classes at once), then the `max_detections`
  best of all kept by score (equal scores: lower class, then NMS order, which
  is what TFLite's kernel gave in every tie tried).
- Outputs: boxes [1, D, 4], classes [1, D], scores [1, D], count [1]
  (float32), D = max_detections * max_classes_per_detection; count is the
  number of rows (fast: of anchors) filled. Rows the kernel does not write
  (fast NMS leaves them as they were, regular NMS writes zeros up to
  max_detections) are zeros here.

Quantized (uint8) box, score or anchor inputs are dequantized as the kernel
dequantizes them, (q - zp) * scale in float; the input types the kernel
refuses (int8 encodings or predictions) are refused here too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from legalize.common import require_static, tensor_type
from legalize.fallback import dequantized
from legalize.nms import Boxes
from legalize.registry import custom_op, pattern
from legalize.shape import concat, fresh, reshape_to, shape_of, slice_of
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import TensorType, f32, i1, i32, is_quantized, storage_type
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise

DETECTION_POSTPROCESS = "TFLite_Detection_PostProcess"
# The kernel's default when the options leave detections_per_class out.
DEFAULT_DETECTIONS_PER_CLASS = 100


def detection_options(raw: bytes) -> dict[str, Any] | Failure:
    """The op's flexbuffer map, with the kernel's defaults and checks."""
    from flatbuffers import flexbuffers

    try:
        options = flexbuffers.Loads(bytes(raw)) if raw else {}
    except Exception as exc:  # any malformed byte string: a named refusal
        return Failure(f"{DETECTION_POSTPROCESS}: unreadable flexbuffer options ({exc})")
    if not isinstance(options, dict):
        return Failure(f"{DETECTION_POSTPROCESS}: its options are not a flexbuffer map")
    required = ("max_detections", "max_classes_per_detection", "nms_score_threshold",
                "nms_iou_threshold", "num_classes", "y_scale", "x_scale", "h_scale", "w_scale")
    missing = [k for k in required if k not in options]
    if missing:
        return Failure(f"{DETECTION_POSTPROCESS}: options lack {', '.join(missing)}")
    parsed = {k: options[k] for k in required}
    parsed["detections_per_class"] = options.get("detections_per_class",
                                                 DEFAULT_DETECTIONS_PER_CLASS)
    parsed["use_regular_nms"] = bool(options.get("use_regular_nms", False))
    for k in ("max_detections", "max_classes_per_detection", "num_classes",
              "detections_per_class"):
        parsed[k] = int(parsed[k])
    for k in ("nms_score_threshold", "nms_iou_threshold", "y_scale", "x_scale", "h_scale",
              "w_scale"):
        parsed[k] = float(np.float32(parsed[k]))
    # The kernel refuses these at run time (TF_LITE_ENSURE).
    if not 0.0 < parsed["nms_iou_threshold"] <= 1.0:
        return Failure(f"{DETECTION_POSTPROCESS}: nms_iou_threshold "
                       f"{parsed['nms_iou_threshold']} is outside (0, 1]")
    if parsed["max_detections"] < 1 or parsed["num_classes"] < 1:
        return Failure(f"{DETECTION_POSTPROCESS}: max_detections and num_classes must be "
                       "positive")
    if parsed["max_classes_per_detection"] < 1:
        return Failure(f"{DETECTION_POSTPROCESS}: max_classes_per_detection must be positive")
    if parsed["use_regular_nms"] and parsed["detections_per_class"] < 1:
        return Failure(f"{DETECTION_POSTPROCESS}: detections_per_class must be positive")
    return parsed


def _decode(rw: Rewriter, encodings: Value, anchors: Value, o: dict[str, Any]) -> Value:
    """Box encodings [N, >=4] and anchors [N, 4] (y, x, h, w) -> corners [N, 4]."""
    e = Elementwise(rw, 2)
    n = shape_of(encodings)[0]

    def col(x: Value, k: int) -> Value:
        return slice_of(rw, x, (0, k), (n, 1))

    ty, tx, th, tw = (col(encodings, k) for k in range(4))
    ya, xa, ha, wa = (col(anchors, k) for k in range(4))

    def scaled(t: Value, key: str) -> Value:
        return e.divide(t, e.const(o[key], f32))

    ycenter = e.add(e.mul(scaled(ty, "y_scale"), ha), ya)
    xcenter = e.add(e.mul(scaled(tx, "x_scale"), wa), xa)
    half = e.const(0.5, f32)
    half_h = e.mul(e.mul(half, e.unary("tosa.exp", scaled(th, "h_scale"))), ha)
    half_w = e.mul(e.mul(half, e.unary("tosa.exp", scaled(tw, "w_scale"))), wa)
    return concat(rw, [e.sub(ycenter, half_h), e.sub(xcenter, half_w),
                       e.add(ycenter, half_h), e.add(xcenter, half_w)], 1)


def _where(e: Elementwise, valid: Value, x: Value) -> Value:
    """x where valid, else zero (valid broadcasts)."""
    zero = e.const(0, tensor_type(x).element) if tensor_type(x).element == i32 \
        else e.const(0.0, tensor_type(x).element)
    return e.select(valid, x, zero)


def _greedy_nms(d: Boxes, scores: Value, o: dict[str, Any], keep: int
                ) -> tuple[list[Value], list[Value], list[Value]]:
    """The kernel's single-class NMS on each row of scores [R, N]: boxes
    scoring at least nms_score_threshold, the picked box and those overlapping
    it with IoU above nms_iou_threshold leave (see Boxes.greedy_nms)."""
    e = d.e
    iou_threshold = e.const(o["nms_iou_threshold"], f32)

    def suppress(scores: Value, active: Value, is_picked: Value, iou: Value
                 ) -> tuple[Value, Value]:
        gone = e.logical_or(is_picked, e.greater(iou, iou_threshold))
        return scores, e.logical_and(active, e.logical_not(gone))

    active = e.greater_equal(scores, e.const(o["nms_score_threshold"], f32))
    return d.greedy_nms(scores, active, keep, suppress)


def _fast_nms(d: Boxes, scores: Value, o: dict[str, Any]) -> tuple[Value, ...]:
    """scores [N, C] (background dropped) -> the four outputs, fast NMS."""
    rw, e = d.rw, d.e
    n, classes = shape_of(scores)
    per_anchor = min(o["max_classes_per_detection"], classes)
    width, keep = o["max_classes_per_detection"], o["max_detections"]
    # Each anchor's best classes, best first (ARGMAX: lower class on equal scores).
    class_index = build.const(rw, np.arange(classes, dtype=np.int32)[None, :], i32)
    remaining, top_classes, top_scores = scores, [], []
    for _ in range(per_anchor):
        best = build.op(rw, "tosa.argmax", [remaining], TensorType((n,), i32), axis=1,
                        nan_mode="PROPAGATE")
        best_score = build.op(rw, "tosa.reduce_max", [remaining], TensorType((n, 1), f32),
                              axis=1, nan_mode="PROPAGATE")
        top_classes.append(reshape_to(rw, best, (n, 1)))
        top_scores.append(best_score)
        taken = e.equal(class_index, reshape_to(rw, best, (n, 1)))
        remaining = e.select(taken, e.const(-np.inf, f32), remaining)
    best_scores = reshape_to(rw, top_scores[0], (1, n))
    picks, _, found = _greedy_nms(d, best_scores, o, keep)
    anchor = concat(rw, picks, 0)                                   # [keep]
    valid = reshape_to(rw, concat(rw, found, 0), (keep, 1))         # [keep, 1]
    table = concat(rw, [e.cast(concat(rw, top_classes, 1), f32), *top_scores], 1)
    chosen = d.gather_rows(table, anchor)                           # [keep, 2 * per_anchor]
    boxes = d.gather_rows(d.boxes, anchor)                          # [keep, 4]
    cls = _where(e, valid, slice_of(rw, chosen, (0, 0), (keep, per_anchor)))
    score = _where(e, valid, slice_of(rw, chosen, (0, per_anchor), (keep, per_anchor)))
    boxes = reshape_to(rw, _where(e, valid, boxes), (keep, 1, 4))
    boxes = build.op(rw, "tosa.tile", [boxes, build.const_shape(rw, (1, per_anchor, 1))],
                     TensorType((keep, per_anchor, 4), f32))
    if per_anchor < width:  # slots past num_classes: the kernel writes nothing there
        cls = build.pad(rw, cls, (0, 0, 0, width - per_anchor))
        score = build.pad(rw, score, (0, 0, 0, width - per_anchor))
        boxes = build.pad(rw, boxes, (0, 0, 0, width - per_anchor, 0, 0))
    count = Elementwise(rw, 2).cast(valid, i32)
    count = build.op(rw, "tosa.reduce_sum", [count], TensorType((1, 1), i32), axis=0)
    return (reshape_to(rw, boxes, (1, keep * width, 4)), reshape_to(rw, cls, (1, keep * width)),
            reshape_to(rw, score, (1, keep * width)),
            reshape_to(rw, build.cast(rw, count, f32), (1,)))


def _regular_nms(d: Boxes, scores: Value, o: dict[str, Any]) -> tuple[Value, ...]:
    """scores [N, C] (background dropped) -> the four outputs, per-class NMS."""
    rw, e = d.rw, d.e
    n, classes = shape_of(scores)
    per_class = min(o["detections_per_class"], o["max_detections"])
    keep, width = o["max_detections"], o["max_classes_per_detection"]
    by_class = build.transpose(rw, scores, (1, 0))                  # [C, N]
    picks, picked_scores, found = _greedy_nms(d, by_class, o, per_class)
    total = classes * per_class
    # Candidates in the kernel's tie order: class by class, each in NMS order.
    anchor = reshape_to(rw, concat(rw, [reshape_to(rw, p, (classes, 1)) for p in picks], 1),
                        (total, 1))
    score = reshape_to(rw, concat(rw, picked_scores, 1), (1, total))
    live = reshape_to(rw, concat(rw, found, 1), (1, total))
    class_of = build.const(rw, (np.arange(total, dtype=np.float32) // per_class)[:, None], f32)
    table = concat(rw, [e.cast(anchor, f32), class_of, reshape_to(rw, score, (total, 1))], 1)
    slot = build.const(rw, np.arange(total, dtype=np.int32)[None, :], i32)
    lowest = e.const(-np.inf, f32)
    order, valid = [], []
    for _ in range(min(keep, total)):
        best = build.op(rw, "tosa.argmax", [e.select(live, score, lowest)], TensorType((1,), i32),
                        axis=1, nan_mode="PROPAGATE")
        valid.append(build.op(rw, "tosa.reduce_any", [live], TensorType((1, 1), i1), axis=1))
        live = e.logical_and(live, e.logical_not(e.equal(slot, reshape_to(rw, best, (1, 1)))))
        order.append(best)
    rows = len(order)
    chosen = d.gather_rows(table, concat(rw, order, 0))            # [rows, 3]
    ok = reshape_to(rw, concat(rw, valid, 0), (rows, 1))
    boxes = _where(e, ok, d.gather_rows(d.boxes, e.cast(slice_of(rw, chosen, (0, 0), (rows, 1)),
                                                         i32)))
    boxes = reshape_to(rw, boxes, (rows, 4))
    cls = _where(e, ok, slice_of(rw, chosen, (0, 1), (rows, 1)))
    best_score = _where(e, ok, slice_of(rw, chosen, (0, 2), (rows, 1)))
    pad_rows = keep * width - rows                                  # the kernel's padding rows
    if pad_rows:
        boxes = build.pad(rw, boxes, (0, pad_rows, 0, 0))
        cls = build.pad(rw, cls, (0, pad_rows, 0, 0))
        best_score = build.pad(rw, best_score, (0, pad_rows, 0, 0))
    count = build.op(rw, "tosa.reduce_sum", [e.cast(ok, i32)], TensorType((1, 1), i32), axis=0)
    size = keep * width
    return (reshape_to(rw, boxes, (1, size, 4)), reshape_to(rw, cls, (1, size)),
            reshape_to(rw, best_score, (1, size)),
            reshape_to(rw, build.cast(rw, count, f32), (1,)))


def _kernel_types(op: Op) -> Failure | None:
    """The input types TFLite's kernel runs: float32 or uint8 box encodings and
    class predictions, anchors of the encodings' type. It fails on int8
    encodings or predictions, and on quantized anchors beside float encodings;
    beside uint8 encodings it reads float or int8 anchors as uint8 (garbage)."""
    names = [storage_type(tensor_type(v).element).name for v in op.operands]
    encodings, predictions, anchors = names
    if encodings in ("f32", "ui8") and predictions in ("f32", "ui8") and anchors == encodings:
        return None
    return Failure(f"{DETECTION_POSTPROCESS}: TFLite's kernel does not run box encodings, "
                   f"class predictions and anchors of types {', '.join(names)} (it takes "
                   "float32 or uint8 encodings and predictions, and reads the anchors as "
                   "the encodings' type)")


@pattern(custom_op(DETECTION_POSTPROCESS), kind="any", types=("f32", "u8"))
def detection_postprocess(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Decode the boxes against the anchors, then fast or regular NMS (see
    the module docstring) with fixed-size outputs."""
    if op is not rw.matched:
        # The fallback's float stand-in (see legalize/fallback.py): the kernel
        # dequantizes the input types it runs itself, handled below; the others
        # it refuses, and so must we.
        return Failure(f"{DETECTION_POSTPROCESS}: no dequantize/float fallback (the kernel "
                       "dequantizes its own inputs)")
    o = detection_options(op.attrs.get("custom_options", b""))
    if isinstance(o, Failure):
        return o
    if len(op.operands) != 3 or len(op.results) != 4:
        return Failure(f"{DETECTION_POSTPROCESS} takes 3 inputs (box encodings, class "
                       "predictions, anchors) and gives 4 outputs")
    failure = require_static(op) or _kernel_types(op)
    if failure is not None:
        return failure
    encodings, predictions, anchors = (
        dequantized(rw, v) if is_quantized(tensor_type(v).element) else v for v in op.operands)
    (batch, n, code), (batch2, n2, with_background) = shape_of(encodings), shape_of(predictions)
    if batch != 1 or batch2 != 1 or n2 != n or code < 4 or shape_of(anchors) != (n, 4):
        return Failure(f"{DETECTION_POSTPROCESS}: needs box encodings [1, N, >=4], class "
                       f"predictions [1, N, C] and anchors [N, 4], not "
                       f"{shape_of(encodings)}, {shape_of(predictions)}, {shape_of(anchors)}")
    label_offset = with_background - o["num_classes"]
    if label_offset < 0:
        return Failure(f"{DETECTION_POSTPROCESS}: num_classes {o['num_classes']} exceeds the "
                       f"{with_background} score columns")
    boxes = _decode(rw, reshape_to(rw, slice_of(rw, encodings, (0, 0, 0), (1, n, 4)), (n, 4)),
                    anchors, o)
    scores = reshape_to(rw, slice_of(rw, predictions, (0, 0, label_offset),
                                     (1, n, o["num_classes"])), (n, o["num_classes"]))
    d = Boxes(rw, boxes)
    outputs = (_regular_nms if o["use_regular_nms"] else _fast_nms)(d, scores, o)
    return [fresh(rw, v) for v in outputs]


def written_rows(options: dict[str, Any], count: int, rows: int) -> np.ndarray:
    """bool [rows]: the output rows TFLite's kernel writes on a run reporting
    `count` detections. Fast NMS writes the classes of the `count` kept
    anchors only; regular NMS writes (or zeros) the first max_detections."""
    slot = np.arange(rows)
    if options["use_regular_nms"]:
        return slot < options["max_detections"]
    width = options["max_classes_per_detection"]
    return (slot // width < count) & (slot % width < min(width, options["num_classes"]))


def clear_unwritten_rows(graph: Any, outputs: list[np.ndarray]) -> list[str]:
    """Zero, in TFLite's `outputs` of the imported `graph`, the detection rows
    its kernel leaves unwritten (they hold whatever that memory held before,
    where the lowering writes zeros); returns a note per op that has some."""
    position = {id(v): i for i, v in enumerate(graph.outputs)}
    notes = []
    for op in graph.ops:
        if op.name != "tfl.custom" or op.attrs.get("custom_code") != DETECTION_POSTPROCESS:
            continue
        places = [position.get(id(v)) for v in op.results]
        options = detection_options(op.attrs.get("custom_options", b""))
        if None in places or isinstance(options, Failure):
            continue
        boxes, classes, scores, count = (outputs[i] for i in places)
        written = written_rows(options, int(np.ravel(count)[0]), classes.shape[-1])
        if written.all():
            continue
        for array in (boxes, classes, scores):
            array[:, ~written] = 0
        notes.append(f"{DETECTION_POSTPROCESS} at {op.loc}: TFLite leaves {int((~written).sum())} "
                     "output rows unwritten (stale memory); they are compared as zeros, "
                     "which the lowering writes there")
    return notes
