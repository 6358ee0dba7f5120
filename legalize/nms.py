"""Greedy non-max suppression in TOSA.

`Boxes` holds the builders every NMS lowering shares: the IoU of each box with
a picked one, and the greedy loop unrolled a fixed number of times (each step
takes the ARGMAX of the scores still active, the first of equal ones, then
lets the picked box suppress or decay the others). TFLite_Detection_PostProcess
(legalize/detection.py) uses them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from legalize.common import tensor_type
from legalize.elementwise import Elementwise
from legalize.shape import reshape_to, shape_of, slice_of
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Rewriter
from tfl2tosa.ir.types import TensorType, f32, i1, i32
from tfl2tosa.tosa import build

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
