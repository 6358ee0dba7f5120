"""Anchored judging of emulated hybrid models.

An emulated hybrid op is bit exact given the same input, but its run-time
quantization is discontinuous: an ulp of difference in a float op before it
(summation order, which TOSA leaves free) can move one int8 rounding, and its
output then differs by a quantization step, beyond the float bounds. So when a
run of an emulated hybrid model misses the bounds, our reference model runs
again *anchored*: each float input of an emulated hybrid op (a TOSA value that
keeps its TFLite tensor name) is replaced, as it is computed, by TFLite's
tensor, where ours is within the float bound of the ops computing it since the
model's inputs and the previous anchors (`emulated_hybrid_inputs`). The run
passes when none was further off and the anchored outputs are within the
ordinary bounds; the report keeps the un-anchored errors and says how many
inputs were anchored and how far apart they were. A hybrid op computing
wrongly, or a float op off by more than its bound, still fails.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tfl2tosa.validation.judge import _FLOAT_NAMES, float_difference, float_tolerance, hybrid_mode


# Why an emulated hybrid model passes although its outputs missed the float bounds.
ANCHORED_NOTE = (
    "hybrid ops quantize their float inputs to int8 at run time, so an ulp of difference "
    "(summation order) in a float op before one can move an int8 rounding, and the output "
    "by a quantization step: {runs} run(s) missed the float bounds (the errors above) and "
    "are within them with TFLite's own values at the {inputs} hybrid-op input(s) where "
    "ours differed, each within the float bound of the ops computing it (by at most {ulp} "
    "ulp of the tensor's largest value)")


@dataclass
class AnchoredRun:
    """A run of our reference model with TFLite's tensors at emulated hybrid ops'
    float inputs (each where ours was within the float bounds of the ops computing it)."""

    outputs: dict[str, np.ndarray]
    anchored: set[str] = field(default_factory=set)   # those that differed from TFLite's
    # The largest difference anchored, in ulps of its tensor's largest magnitude.
    max_ulp: int = 0
    # Inputs where ours was beyond those bounds: name -> (family, max abs error).
    refused: dict[str, tuple[str, float]] = field(default_factory=dict)


def emulated_hybrid_inputs(path: str, outcomes: list[dict[str, str]]
                           ) -> dict[str, tuple[str, tuple[float, float]]]:
    """The TFLite tensor name of each run-time float input of an emulated hybrid
    op -> the float bound (family, (atol, rtol)) of the ops that compute it from
    the model's inputs, constants and the other such inputs."""
    from tfl2tosa.ir.types import TensorType
    from tfl2tosa.passes.inline_calls import inline_calls
    from tfl2tosa.tflite_import import load

    module = load(path)
    inline_calls(module)
    locations = {o["loc"] for o in outcomes if hybrid_mode(o) == "emulate"}
    inputs = {value for op in module.main.ops if op.loc in locations for value in op.operands
              if value.owner is not None and value.owner.name != "tfl.pseudo_const"
              and isinstance(value.type, TensorType) and str(value.type.element) in _FLOAT_NAMES}
    bounds = {}
    for value in inputs:
        ops: set[str] = set()
        pending, seen = [value.owner], set()
        while pending:
            op = pending.pop()
            if id(op) in seen:
                continue
            seen.add(id(op))
            ops.add(op.name)
            pending += [v.owner for v in op.operands
                        if v.owner is not None and v not in inputs]
        bounds[value.name] = float_tolerance(ops)
    return bounds


def anchored_run(compiled: Any, feeds: list[np.ndarray], interp: Any,
                 hybrid_inputs: dict[str, tuple[str, tuple[float, float]]]) -> AnchoredRun:
    """Our reference model again on `feeds`, each of `hybrid_inputs` replaced, as it is
    computed, by TFLite's tensor of that name when ours is within its bound (so
    every comparison sees only the difference since the previous anchors)."""
    by_name = {d["name"]: d["index"] for d in interp.get_tensor_details()}
    run = AnchoredRun(outputs={})

    def anchor(name: str) -> Callable[[np.ndarray], np.ndarray]:
        family, (atol, rtol) = hybrid_inputs[name]

        def substitute(ours: np.ndarray) -> np.ndarray:
            try:
                theirs = interp.get_tensor(by_name[name])
            except ValueError:  # a tensor the interpreter did not keep
                return ours
            if theirs.shape != ours.shape or theirs.dtype != ours.dtype:
                return ours
            diff = float_difference(theirs, ours)
            if not np.all((diff == 0) | (diff <= atol + rtol * np.abs(theirs))):
                run.refused[name] = (family, float(diff.max()))
                return ours
            if not diff.any():
                return ours
            run.anchored.add(name)
            run.max_ulp = max(run.max_ulp, _ulps_of_largest(diff, theirs))
            return theirs
        return substitute

    run.outputs = compiled.run(feeds, substitute={name: anchor(name) for name in hybrid_inputs
                                                  if name in by_name})
    return run


def _ulps_of_largest(diff: np.ndarray, theirs: np.ndarray) -> int:
    """The largest difference in ulps of the tensor's largest finite magnitude: the
    scale of a summation-order difference (an element near zero is many of its
    own ulps away for the same difference)."""
    finite = np.abs(theirs[np.isfinite(theirs)])
    ulp = float(np.spacing(finite.max(initial=0).astype(theirs.dtype)))
    largest = float(np.nan_to_num(diff, nan=0.0).max(initial=0.0))
    return int(np.ceil(largest / ulp)) if ulp else 0


def _failed_anchoring_note(run: AnchoredRun, error: float) -> str:
    """Why an emulated hybrid model fails although anchoring was tried."""
    if run.refused:
        name, (family, worst) = next(iter(run.refused.items()))
        return (f"hybrid-op input {name!r} differs from TFLite's by {worst:.3g}, beyond the "
                f"{family} bound of the ops computing it: a real difference, not an ulp "
                "moving a hybrid op's run-time quantization")
    return (f"with TFLite's own values at the {len(run.anchored)} hybrid-op input(s) where "
            f"ours differed, the outputs still miss the float bounds (by up to {error:.3g}): "
            "not an ulp upstream moving a hybrid op's run-time quantization")
