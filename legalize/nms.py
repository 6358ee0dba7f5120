"""Greedy non-max suppression in TOSA, and NON_MAX_SUPPRESSION_V4 / V5.

`Boxes` holds the builders every NMS lowering shares: the IoU of each box with
a picked one, and the greedy loop unrolled a fixed number of times (each step
takes the ARGMAX of the scores still active, the first of equal ones, then
lets the picked box suppress or decay the others). TFLite_Detection_PostProcess
(legalize/detection.py) and the two builtin ops below use them.

NON_MAX_SUPPRESSION_V4 and V5 follow TFLite's kernel
(tensorflow/lite/kernels/non_max_suppression.cc and
internal/reference/non_max_suppression.h), float32 only:

- Inputs: boxes [N, 4] as two corners (y1, x1, y2, x2) in either order (the
  kernel takes min and max of each pair), scores [N], max_output_size (int32),
  iou_threshold and score_threshold (float32 scalars, constants or run-time
  values), and for V5 soft_nms_sigma.
- Candidates are the boxes scoring above score_threshold (strictly). The
  kernel pops them from a priority queue by score; a popped box is dropped if
  a box selected since it was last looked at overlaps it with IoU >= the IoU
  threshold (IoU 0 when either area is not positive), else (V5, sigma > 0) its
  score decays by exp(-0.5 / sigma * IoU^2) per such box. A box whose score
  did not change is selected and, still above the threshold, pushed back, so it
  meets itself next: with IoU 1 it is dropped when iou_threshold <= 1, and a box
  of zero area, or any box when iou_threshold > 1, is selected again.
- The queue is lazy: a box's score is brought up to date when it reaches the
  top. Selecting the best current score and then letting the selected box
  suppress or decay every active box (itself included) selects the same boxes
  in the same order; the lowering does that, min(max_output_size, N) steps.
  It departs from the kernel in two ways: the decays of one box are
  multiplied in selection order, where the kernel multiplies the ones it
  catches up on at one pop newest first (float rounding of the selected
  scores); and equal scores are taken lowest index first (as TensorFlow's own
  NonMaxSuppressionV4/V5 kernels do), where TFLite's std::priority_queue,
  comparing scores only, leaves them in its heap's order, so tied boxes can be
  listed (and, when they overlap, kept) otherwise.
- At most min(candidates, max_output_size) boxes are selected. Outputs:
  selected indices [max_output_size] (int32), V5's selected scores
  [max_output_size] (the decayed score at selection), and their count; unused
  slots hold 0.

max_output_size must be a constant (it sizes the outputs); otherwise, or
with a constant sigma below zero (the kernel fails), the op is refused. A
run-time sigma below zero, on which the kernel fails, gives hard NMS here.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from legalize.common import constant_value, require_static, tensor_type
from legalize.registry import pattern
from legalize.shape import concat, fresh, reshape_to, shape_of, slice_of
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import TensorType, f32, i1, i32
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise

# (scores, active, is_picked, iou) of one step -> the next (scores, active); all [R, N].
Suppress = Callable[[Value, Value, Value, Value], tuple[Value, Value]]


class Boxes:
    """TOSA builders over boxes [N, 4] (ymin, xmin, ymax, xmax) and score rows [R, N]."""

    def __init__(self, rw: Rewriter, boxes: Value) -> None:
        self.rw = rw
        self.e = Elementwise(rw, 2)
        self.boxes = boxes
        self.n = shape_of(boxes)[0]
        ymin, xmin, ymax, xmax = (self.column(boxes, k) for k in range(4))
        self.corners = ymin, xmin, ymax, xmax   # each [1, N]
        e = self.e
        self.area = e.mul(e.sub(ymax, ymin), e.sub(xmax, xmin))
        self.index = build.const(rw, np.arange(self.n, dtype=np.int32)[None, :], i32)

    def column(self, x: Value, k: int) -> Value:
        """Column k of [N, C] as a row [1, N]."""
        return reshape_to(self.rw, slice_of(self.rw, x, (0, k), (self.n, 1)), (1, self.n))

    def gather_rows(self, table: Value, index: Value) -> Value:
        """table [N, C] rows at index [W] -> [W, C]."""
        n, c = shape_of(table)
        w = shape_of(index)[0]
        values = reshape_to(self.rw, table, (1, n, c))
        rows = build.op(self.rw, "tosa.gather", [values, reshape_to(self.rw, index, (1, w))],
                        TensorType((1, w, c), tensor_type(table).element))
        return reshape_to(self.rw, rows, (w, c))

    def iou_with(self, picked: Value) -> Value:
        """[R, N]: the IoU of every box with row r's picked box [R, 4],
        intersection / (area_picked + area - intersection), and 0 where either
        area is not positive (as both of TFLite's NMS kernels compute it)."""
        e = self.e
        ymin, xmin, ymax, xmax = self.corners
        rows = shape_of(picked)[0]
        p_ymin, p_xmin, p_ymax, p_xmax = (slice_of(self.rw, picked, (0, k), (rows, 1))
                                          for k in range(4))
        p_area = e.mul(e.sub(p_ymax, p_ymin), e.sub(p_xmax, p_xmin))
        zero = e.const(0.0, f32)
        height = e.maximum(e.sub(e.minimum(p_ymax, ymax), e.maximum(p_ymin, ymin)), zero)
        width = e.maximum(e.sub(e.minimum(p_xmax, xmax), e.maximum(p_xmin, xmin)), zero)
        intersection = e.mul(height, width)
        union = e.sub(e.add(p_area, self.area), intersection)
        positive = e.logical_and(e.greater(p_area, zero), e.greater(self.area, zero))
        return e.select(positive, e.divide(intersection, union), zero)

    def greedy_nms(self, scores: Value, active: Value, keep: int, suppress: Suppress
                   ) -> tuple[list[Value], list[Value], list[Value]]:
        """NMS on each row of scores [R, N] from the boxes marked `active`,
        unrolled `keep` times: per step the picked box [R] (i32), its score
        [R, 1] and whether there was one [R, 1]; `suppress` gives the scores
        and active boxes after each pick."""
        e, rw = self.e, self.rw
        rows = shape_of(scores)[0]
        lowest = e.const(-np.inf, f32)
        picks, picked_scores, found = [], [], []
        for _ in range(keep):
            masked = e.select(active, scores, lowest)
            index = build.op(rw, "tosa.argmax", [masked], TensorType((rows,), i32), axis=1,
                             nan_mode="PROPAGATE")
            any_active = build.op(rw, "tosa.reduce_any", [active], TensorType((rows, 1), i1),
                                  axis=1)
            score = build.op(rw, "tosa.reduce_max", [masked], TensorType((rows, 1), f32),
                             axis=1, nan_mode="PROPAGATE")
            is_picked = e.equal(self.index, reshape_to(rw, index, (rows, 1)))
            iou = self.iou_with(self.gather_rows(self.boxes, index))
            scores, active = suppress(scores, active, is_picked, iou)
            picks.append(index)
            picked_scores.append(score)
            found.append(any_active)
        return picks, picked_scores, found


def _scalar_row(rw: Rewriter, value: Value) -> Value:
    """A rank-0 float operand as [1, 1], to broadcast against [1, N]."""
    return reshape_to(rw, value, (1, 1))


def _kernel_inputs(op: Op) -> Failure | None:
    """The inputs TFLite's kernel runs: float32 boxes [N, 4] and scores [N],
    scalar int32 max_output_size and float32 thresholds and sigma."""
    names = [tensor_type(v).element for v in op.operands]
    floats = [t for k, t in enumerate(names) if k != 2]
    if any(t != f32 for t in floats) or names[2] != i32:
        return Failure("TFLite's kernel runs float32 boxes, scores and thresholds and an "
                       f"int32 max_output_size only, not {', '.join(map(str, names))}")
    shapes = [shape_of(v) for v in op.operands]
    if len(shapes[0]) != 2 or shapes[0][1] != 4 or shapes[1] != (shapes[0][0],) \
            or any(s != () for s in shapes[2:]):
        return Failure("needs boxes [N, 4], scores [N] and scalar max_output_size, "
                       f"thresholds and sigma, not {', '.join(map(str, shapes))}")
    return None


def _soft_decay(rw: Rewriter, op: Op) -> Callable[[Value, Value], Value] | Failure | None:
    """V5's score decay (scores, iou) -> scores * exp(scale * iou * iou), scale
    = -0.5 / sigma, where sigma > 0; None when there is none (V4, or a constant
    sigma of 0). The kernel's scale, float(-0.5 / double(sigma)), is the
    correctly rounded float quotient."""
    if op.name != "tfl.non_max_suppression_v5":
        return None
    e = Elementwise(rw, 2)
    sigma = op.operands[5]
    known = constant_value(sigma)
    soft = None                             # a run-time sigma: decay only where sigma > 0
    if known is not None:
        value = np.float32(known.reshape(()))
        if value < 0:
            return Failure(f"soft_nms_sigma {value} is negative (TFLite's kernel fails on it)")
        if not value > 0:                   # 0 (or NaN): hard NMS, as in the kernel
            return None
        scale = e.const(float(np.float32(-0.5) / value), f32)
    else:
        sigma = _scalar_row(rw, sigma)
        scale = e.divide(e.const(-0.5, f32), sigma)
        soft = e.greater(sigma, e.const(0.0, f32))

    def decay(scores: Value, iou: Value) -> Value:
        decayed = e.mul(scores, e.unary("tosa.exp", e.mul(e.mul(scale, iou), iou)))
        return decayed if soft is None else e.select(soft, decayed, scores)

    return decay


@pattern("tfl.non_max_suppression_v4", "tfl.non_max_suppression_v5", kind="any",
         types=("f32",))
def non_max_suppression(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """Greedy (V5: soft) NMS unrolled max_output_size times, outputs padded
    with zeros (see the module docstring)."""
    if op is not rw.matched:
        # The fallback's float stand-in for quantized operands, which the kernel refuses.
        return Failure("TFLite's kernel runs float32 inputs only")
    failure = _kernel_inputs(op)
    if failure is not None:
        return failure
    limit = constant_value(op.operands[2])
    if limit is None:
        return Failure("max_output_size is a run-time value, so the length of the outputs "
                       "is known only when the model runs (TOSA shapes are fixed when the "
                       "graph is built)")
    failure = require_static(op)
    if failure is not None:
        return failure
    size = int(limit.reshape(()))
    n = shape_of(op.operands[0])[0]
    if size < 1 or n < 1:
        return Failure(f"max_output_size {size} with {n} boxes gives empty outputs, which "
                       "TOSA tensors cannot be")
    for result in op.results[:-1]:
        if int(np.prod(shape_of(result))) != size:
            return Failure(f"output {result.type} does not hold "
                           f"max_output_size {size} elements")
    decay = _soft_decay(rw, op)
    if isinstance(decay, Failure):
        return decay
    e = Elementwise(rw, 2)
    raw = op.operands[0]
    y1, x1, y2, x2 = (slice_of(rw, raw, (0, k), (n, 1)) for k in range(4))
    boxes = Boxes(rw, concat(rw, [e.minimum(y1, y2), e.minimum(x1, x2),
                                  e.maximum(y1, y2), e.maximum(x1, x2)], 1))
    scores = reshape_to(rw, op.operands[1], (1, n))
    iou_threshold = _scalar_row(rw, op.operands[3])
    score_threshold = _scalar_row(rw, op.operands[4])
    active = e.greater(scores, score_threshold)
    candidates = build.op(rw, "tosa.reduce_sum", [e.cast(active, i32)],
                          TensorType((1, 1), i32), axis=1)

    def suppress(scores: Value, active: Value, is_picked: Value, iou: Value
                 ) -> tuple[Value, Value]:
        # The picked box suppresses itself like any other (IoU 1, or 0 for an
        # empty box), as the kernel's push-back and second look do.
        kept = e.logical_and(active, e.logical_not(e.greater_equal(iou, iou_threshold)))
        if decay is None:
            return scores, kept
        scores = decay(scores, iou)
        return scores, e.logical_and(kept, e.greater(scores, score_threshold))

    keep = min(size, n)   # no more selections than candidates, at most n
    picks, picked_scores, found = boxes.greedy_nms(scores, active, keep, suppress)
    step = build.const(rw, np.arange(keep, dtype=np.int32)[:, None], i32)
    valid = e.logical_and(reshape_to(rw, concat(rw, found, 0), (keep, 1)),
                          e.greater(reshape_to(rw, candidates, (1, 1)), step))
    indices = e.select(valid, reshape_to(rw, concat(rw, picks, 0), (keep, 1)),
                       e.const(0, i32))
    count = build.op(rw, "tosa.reduce_sum", [e.cast(valid, i32)], TensorType((1, 1), i32),
                     axis=0)
    outputs = [indices]
    if op.name == "tfl.non_max_suppression_v5":
        outputs.append(e.select(valid, concat(rw, picked_scores, 0), e.const(0.0, f32)))
    if keep < size:
        outputs = [build.pad(rw, v, (0, size - keep, 0, 0)) for v in outputs]
    outputs.append(count)
    return [fresh(rw, reshape_to(rw, v, shape_of(r))) for v, r in zip(outputs, op.results)]
