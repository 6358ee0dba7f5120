"""What explains a difference between TFLite and our reference model, and the
per-tensor errors the HTML page draws.

Tensors pair by name: TOSA values keep the TFLite tensor names they were lowered
from.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from tfl2tosa.validation.judge import as_tflite_output, float_difference
from tfl2tosa.validation.report import ValidationDetails


def _clear_unwritten_rows(path: str, expected: list[np.ndarray]) -> list[str]:
    """Custom ops whose TFLite kernel leaves output elements unwritten
    (TFLite_Detection_PostProcess): those elements zeroed, as the lowering
    writes them; a note per op."""
    from legalize.detection import clear_unwritten_rows
    from tfl2tosa.tflite_import import load

    return clear_unwritten_rows(load(path).main, expected)


def _quantized_nan(interp: Any, path: str) -> str | None:
    """The TFLite op ("main:op2:FLOOR_MOD") whose NaN a QUANTIZE of the model turned
    into an integer on the last run, if any. TFLite's QUANTIZE casts NaN as x86 does
    (INT32_MIN, plus the zero point, clamped): a platform's answer, not a number."""
    from tfl2tosa.tflite_import import load

    graph = load(path).main
    producers = {result.name: op for op in graph.ops for result in op.results}
    by_name = {d["name"]: d["index"] for d in interp.get_tensor_details()}
    for op in graph.ops:
        if op.name != "tfl.quantize" or op.operands[0].name not in by_name:
            continue
        values = interp.get_tensor(by_name[op.operands[0].name])
        if np.issubdtype(values.dtype, np.floating) and np.isnan(values).any():
            producer = producers.get(op.operands[0].name)
            return producer.loc if producer else op.operands[0].name
    return None


NMS_OPS = frozenset({"tfl.non_max_suppression_v4", "tfl.non_max_suppression_v5"})


TIED_NMS_NOTE = ("its scores had ties on a run that differs: TFLite takes tied boxes in "
                 "its priority queue's order, the conversion lowest index first "
                 "(TensorFlow's order)")


def _tied_nms_scores(interp: Any, path: str) -> list[str]:
    """A note for each non-max suppression whose scores (TFLite's tensor on the last
    run) hold equal values: the one place where the lowering orders otherwise."""
    from tfl2tosa.tflite_import import load

    by_name = {d["name"]: d["index"] for d in interp.get_tensor_details()}
    notes = []
    for op in load(path).main.ops:
        if op.name not in NMS_OPS or op.operands[1].name not in by_name:
            continue
        scores = interp.get_tensor(by_name[op.operands[1].name]).ravel()
        if np.unique(scores).size < scores.size:
            notes.append(f"{op.loc}: {TIED_NMS_NOTE}")
    return notes


def _paired_tensors(interp: Any, module: Any, ours: dict[str, np.ndarray]
                    ) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(name, TFLite's value, ours) for each tensor of `module`'s main graph, in graph
    order, that both sides hold with the same shape (TOSA values keep the TFLite
    tensor names they were lowered from)."""
    by_name = {d["name"]: d["index"] for d in interp.get_tensor_details()}
    for value in module.main.values():
        index = by_name.get(value.name)
        if index is None or value.name not in ours:
            continue
        try:
            theirs = interp.get_tensor(index)
        except ValueError:
            continue
        if theirs.shape == ours[value.name].shape:
            yield value.name, theirs, ours[value.name]


def _first_divergence(interp: Any, module: Any, ours: dict[str, np.ndarray]) -> str | None:
    """The first tensor, in graph order, whose value differs from TFLite's tensor of
    the same name."""
    for name, theirs, mine in _paired_tensors(interp, module, ours):
        if np.issubdtype(theirs.dtype, np.floating):
            if not np.allclose(theirs, mine.astype(theirs.dtype), rtol=1e-4, atol=1e-5,
                               equal_nan=True):
                return name
        elif not np.array_equal(theirs, mine):
            return name
    return None


def _keep_details(details: ValidationDetails, interp: Any, module: Any,
                  ours: dict[str, np.ndarray], out_details: list[dict[str, Any]],
                  expected: list[np.ndarray]) -> None:
    def difference(theirs: np.ndarray, mine: np.ndarray) -> np.ndarray:
        # Equal infinities (an attention mask's -inf) agree.
        return float_difference(theirs, as_tflite_output(mine, theirs.dtype))

    for name, theirs, mine in _paired_tensors(interp, module, ours):
        if theirs.size == 0:
            continue
        error = float(np.nan_to_num(difference(theirs, mine).max(), nan=np.inf))
        details.tensor_errors[name] = max(error, details.tensor_errors.get(name, 0.0))
    for detail, value, theirs in zip(out_details, module.main.outputs, expected):
        if value.name in ours and theirs.shape == ours[value.name].shape:
            diff = difference(theirs, ours[value.name]).ravel()
            kept = details.output_errors.get(detail["name"])
            details.output_errors[detail["name"]] = (diff if kept is None
                                                     else np.concatenate([kept, diff]))
