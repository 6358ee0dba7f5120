"""`validate`: run the TFLite interpreter and our reference model on the same inputs.

TFLite runs with its builtin reference kernels (`OpResolverType.BUILTIN_REF`):
those are the kernels TOSA's integer semantics reproduce (the optimized and
XNNPACK kernels round differently; tfl2tosa.kernels says where).
When the reference resolver lacks an op version the model falls back, as a
whole, to the builtin kernels without default delegates; the report names the
resolver used, and a model `validate` converts itself is then lowered for those
kernels of the runtime that runs it (`convert(kernels="optimized")` for
TensorFlow's, "litert-optimized" for LiteRT's; see tfl2tosa.kernels).

The package:

- judge.py: which TFLite runtime and kernels judge a model, the float bounds
  by op family, and the comparison of one output;
- inputs.py: seeded inputs over each input type's range, or from a real range;
- anchoring.py: the anchored re-run of emulated hybrid models;
- diagnosis.py: what explains a difference (the first diverging tensor, a NaN
  TFLite quantized, tied non-max suppression scores) and the per-tensor errors;
- report.py: ValidationReport and what it holds.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from tfl2tosa.errors import InputDomainError, Tfl2TosaError, UsageError
from tfl2tosa.float_twin import float_twin
from tfl2tosa.validation.anchoring import (
    ANCHORED_NOTE,
    AnchoredRun,
    _failed_anchoring_note,
    anchored_run,
    emulated_hybrid_inputs,
)
from tfl2tosa.validation.diagnosis import (
    NMS_OPS,
    TIED_NMS_NOTE,
    _clear_unwritten_rows,
    _first_divergence,
    _keep_details,
    _quantized_nan,
    _tied_nms_scores,
)
from tfl2tosa.validation.inputs import (
    InputRanges,
    _draw_input,
    _range_for,
    parse_input_range,
    random_input,
    ranged_input,
)
from tfl2tosa.validation.judge import (
    BACKENDS,
    BLOCKWISE_NOTE,
    BLOCKWISE_PATTERN,
    FLOAT_TOLERANCES,
    NARROW_FLOAT_ULPS,
    RAW_CHOICE_NOTE,
    RAW_CHOICE_OPS,
    _interpreter,
    _kernels_for,
    _needs_builtin_kernels,
    as_graph_input,
    as_tflite_output,
    compare,
    float_difference,
    float_tolerance,
    hybrid_mode,
    is_hybrid,
    judging_kernels,
)
from tfl2tosa.validation.report import OutputComparison, ValidationDetails, ValidationReport

__all__ = [
    "BACKENDS", "FLOAT_TOLERANCES", "NARROW_FLOAT_ULPS", "TIED_NMS_NOTE", "InputRanges",
    "OutputComparison", "ValidationDetails", "ValidationReport", "as_graph_input",
    "as_tflite_output", "compare", "float_difference", "float_tolerance", "hybrid_mode",
    "is_hybrid", "judging_kernels", "parse_input_range", "random_input", "ranged_input",
    "validate",
]


def validate(model_path: str | os.PathLike, *, runs: int = 3, seed: int = 0,
             inputs: list[list[np.ndarray]] | None = None, module: Any = None,
             conversion: Any = None, fallback: bool = True,
             lsb_tolerance: int | None = None,
             input_ranges: InputRanges | None = None,
             backend: str | None = None,
             on_progress: Callable[[str], None] | None = None,
             keep_details: bool = False,
             hybrid: str = "emulate") -> ValidationReport:
    """Compare the converted model with TFLite on `runs` seeded inputs (or `inputs`).

    Converts the model unless `module` (and its `conversion` report, which says
    which ops took which path) is given. `input_ranges` draws the inputs it names
    (by index or name; key None: all) from a real-valued range instead of the
    type's whole range, for models whose ops have a domain (a divisor, RSQRT).
    `backend` picks the TFLite runtime (BACKENDS; default: the first installed).
    `on_progress` is told what is happening ("legalize", "run 2/10").
    `keep_details` fills `report.details` (per-tensor and per-element errors).
    Raises InputDomainError when TFLite itself cannot run the model on an input, or
    quantizes a NaN it computed on one (checked on runs that do not match).
    """
    import reference_model
    from tfl2tosa.pipeline import convert
    from tfl2tosa.tflite_import.source import open_source

    if inputs is None and runs < 1:
        raise UsageError(f"runs must be at least 1 (got {runs}): nothing would be compared")
    if inputs is not None and not inputs:
        raise UsageError("no input sets given: nothing would be compared")
    path = os.fspath(model_path)
    report = ValidationReport(model=path)
    model_bytes = bytes(open_source(path)[0])
    converted_here = module is None
    if converted_here:
        # Lower for the kernels that will judge: the reference ones unless the
        # reference resolver lacks one of the model's op versions.
        try:
            _, resolver, backend_name = _interpreter(model_bytes, backend=backend)
        except Tfl2TosaError:
            # A model our own checks refuse (a tensor over the budget) says why first.
            convert(path, fallback=fallback, hybrid=hybrid)
            raise
        module, conversion = convert(path, fallback=fallback,
                                     kernels=_kernels_for(resolver, backend_name),
                                     hybrid=hybrid, on_stage=on_progress)
    outcomes = conversion.outcomes if conversion is not None else []
    if keep_details:
        report.details = ValidationDetails(conversion=conversion)
    report.fallback_ops = [f"{o['op_name']} at {o['loc']}" for o in outcomes
                           if o["path"] == "fallback"]
    report.notes = [f"{o['op_name']} at {o['loc']}: {RAW_CHOICE_NOTE}" for o in outcomes
                    if o["path"] == "fallback" and o["op_name"] in RAW_CHOICE_OPS]
    tfl_ops = {o["op_name"] for o in outcomes}
    family, bounds = float_tolerance(tfl_ops)
    modes = [(o, hybrid_mode(o)) for o in outcomes]
    emulated = sum(mode == "emulate" for _, mode in modes)
    dequantized = [o for o, mode in modes if mode == "float"]
    if emulated:
        report.notes.append(f"{emulated} hybrid op(s) emulate TFLite's hybrid kernels: judged "
                            "on its builtin kernels (the emulation follows them)")
    blockwise = sum(o.get("pattern") == BLOCKWISE_PATTERN for o in outcomes)
    if blockwise:
        report.notes.append(f"{blockwise} of them with blockwise int4 weights, as the builtin "
                            f"{BLOCKWISE_NOTE}")
    if dequantized:
        model_bytes = float_twin(model_bytes, dequantized)
        report.notes.append(f"{len(dequantized)} hybrid op(s) computed on dequantized weights: "
                            "judged against TFLite running the model with those weights "
                            "dequantized, not against its hybrid kernels")
    reference = not _needs_builtin_kernels(outcomes)
    interp, report.resolver, report.backend = _interpreter(model_bytes, reference=reference,
                                                           backend=backend)
    judging = _kernels_for(report.resolver, report.backend)
    if converted_here and conversion.kernels != judging:
        module, conversion = convert(path, fallback=fallback, kernels=judging, hybrid=hybrid)
    if conversion is not None:
        report.kernels = conversion.kernels
        if conversion.kernels != judging and any(o["path"] == "integer" for o in outcomes):
            report.notes.append(f"converted for TFLite's {conversion.kernels} kernels, judged "
                                f"by {report.backend} on {report.resolver} ({judging}): "
                                "their integer convolutions and matrix products may round "
                                "otherwise")
    if lsb_tolerance is None:
        lsb_tolerance = 1 if report.fallback_ops or report.resolver != "BUILTIN_REF" else 0
    in_details = interp.get_input_details()
    out_details = interp.get_output_details()
    rng = np.random.default_rng(seed)
    ranges = input_ranges or {}
    known = {*range(len(in_details)), *(d["name"] for d in in_details), None}
    if set(ranges) - known:
        raise UsageError(f"no model input {sorted(map(str, set(ranges) - known))} "
                         f"(inputs: {', '.join(d['name'] for d in in_details)})")
    if inputs is None:
        inputs = [[_draw_input(rng, d, _range_for(ranges, i, d["name"]))
                   for i, d in enumerate(in_details)]
                  for _ in range(runs)]
    # TFLite cannot reset resource variables (reset_all_variables only resets the
    # variable tensors of recurrent ops): a stateful model gets a fresh interpreter
    # per run, as the TOSA graph starts from the initial values every run.
    stateful = conversion is not None and "tfl.var_handle" in conversion.ops_in
    compiled = reference_model.compile(module)  # once for every run

    def judge(outputs: dict[str, np.ndarray], expected: list[np.ndarray]
              ) -> list[OutputComparison]:
        return [compare(detail["name"], theirs, as_tflite_output(outputs[value.name],
                                                                  theirs.dtype),
                        lsb_tolerance=lsb_tolerance, float_bounds=bounds, family=family)
                for detail, value, theirs in zip(out_details, module.main.outputs, expected)]

    worst: dict[str, OutputComparison] = {}
    # Anchoring (emulated hybrid models whose outputs miss the bounds): made on
    # first need, then what the runs it rescued anchored, and the first run it
    # did not rescue.
    hybrid_inputs: dict[str, tuple[str, tuple[float, float]]] | None = None
    anchored_errors: dict[str, float] = {}
    anchored_names: set[str] = set()
    anchored_ulp = 0
    failed_anchoring: tuple[AnchoredRun, float] | None = None
    for run_inputs in inputs:
        if on_progress is not None:
            on_progress(f"run {report.runs + 1}/{len(inputs)}")
        if stateful and report.runs:
            interp, _, _ = _interpreter(model_bytes, reference=reference,
                                        backend=report.backend)
        # Recurrent ops keep state in variable tensors across invocations; the TOSA
        # graph starts from the initial state every run, so TFLite must too.
        interp.reset_all_variables()
        for detail, array in zip(in_details, run_inputs):
            interp.set_tensor(detail["index"], array)
        try:
            interp.invoke()
        except RuntimeError as exc:
            # TFLite's message: "<file:line> <check>Node number N (OP) failed to invoke."
            reason = " ".join(str(exc).split())
            # TFLite appends "Node number N ..." to the kernel's message with no space.
            reason = re.sub(r"(?<=\S)(?=Node number \d)", "; ", reason)
            raise InputDomainError(
                f"TFLite cannot run the model on input set {report.runs + 1}: {reason} "
                "(give inputs in the model's domain: --input-range [NAME=]LOW:HIGH or "
                "--inputs)") from None
        expected = [interp.get_tensor(d["index"]) for d in out_details]
        if "tfl.custom" in tfl_ops:
            notes = _clear_unwritten_rows(path, expected)
            report.notes += [n for n in notes if n not in report.notes]
        feeds = [as_graph_input(a, v) for a, v in zip(run_inputs, module.main.inputs)]
        ours = compiled.run(feeds, keep_intermediates=True)
        results = judge(ours, expected)
        if not all(r.exact for r in results) and \
                (source := _quantized_nan(interp, path)) is not None:
            raise InputDomainError(
                f"TFLite's {source} gives NaN on input set {report.runs + 1} (an input "
                "outside its domain, such as a zero divisor) and a QUANTIZE turns it into "
                "an integer, which is no number to compare (give inputs in the model's "
                "domain: --input-range [NAME=]LOW:HIGH or --inputs)")
        if NMS_OPS & tfl_ops and not all(r.exact for r in results):
            notes = _tied_nms_scores(interp, path)
            report.notes += [n for n in notes if n not in report.notes]
        if emulated and not all(r.within_tolerance for r in results):
            if hybrid_inputs is None:
                hybrid_inputs = emulated_hybrid_inputs(path, outcomes)
            anchoring = anchored_run(compiled, feeds, interp, hybrid_inputs)
            anchored = judge(anchoring.outputs, expected)
            if not anchoring.refused and all(a.within_tolerance for a in anchored):
                for result, fixed in zip(results, anchored):
                    result.within_tolerance = True
                    anchored_errors[result.name] = max(fixed.max_abs_error,
                                                       anchored_errors.get(result.name, 0.0))
                report.anchored_runs += 1
                anchored_names |= anchoring.anchored
                anchored_ulp = max(anchored_ulp, anchoring.max_ulp)
            elif failed_anchoring is None:
                failed_anchoring = (anchoring, max(a.max_abs_error for a in anchored))
        for result in results:
            previous = worst.get(result.name)
            if previous is None or result.max_abs_error > previous.max_abs_error or (
                    not result.within_tolerance and previous.within_tolerance):
                worst[result.name] = result
        if report.details is not None:
            _keep_details(report.details, interp, module, ours, out_details, expected)
        if report.first_divergence is None and not all(w.exact for w in worst.values()):
            report.first_divergence = _first_divergence(interp, module, ours)
        report.runs += 1
    report.outputs = list(worst.values())
    for output in report.outputs:
        output.anchored_max_abs_error = anchored_errors.get(output.name)
    if report.anchored_runs:
        report.anchored_inputs = len(anchored_names)
        report.anchored_max_ulp = anchored_ulp
        report.notes.append(ANCHORED_NOTE.format(runs=report.anchored_runs,
                                                 inputs=report.anchored_inputs,
                                                 ulp=anchored_ulp))
    if failed_anchoring is not None:
        report.notes.append(_failed_anchoring_note(*failed_anchoring))
    return report
