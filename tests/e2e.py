"""End-to-end checks for legalization tests: convert a `.tflite`, then judge the result.

`check_model(path)` converts the model and requires that
1. our reference model's outputs match the TFLite interpreter's (builtin
   reference kernels) within the validation tolerance for the model's ops
   (exact for integer paths), and
2. the written `.tosa` file, run on Arm's reference model with the same
   inputs, gives the same outputs as ours (integers identical, floats within
   the same tolerance).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

import reference_model
from arm import run_arm
from tfl2tosa.pipeline import ConversionReport, convert
from tfl2tosa.ir.types import TensorType, numpy_dtype
from tfl2tosa.tflite_import import load
from tfl2tosa.tosa.writer import write_tosa
from tfl2tosa.validation import (
    ValidationReport,
    as_graph_input,
    compare,
    float_tolerance,
    random_input,
    validate,
)

MODELS = Path(__file__).resolve().parent.parent / "models"


def model_path(relative: str) -> Path:
    return MODELS / relative


def seeded_inputs(path: str | os.PathLike, runs: int, seed: int) -> list[list[np.ndarray]]:
    """Inputs typed as the TFLite model declares them (uint8 stays uint8)."""
    graph = load(path).main
    rng = np.random.default_rng(seed)
    feeds = []
    for _ in range(runs):
        run = []
        for value in graph.inputs:
            t: TensorType = value.type
            run.append(random_input(rng, list(t.shape), numpy_dtype(t.element)))
        feeds.append(run)
    return feeds


def check_model(path: str | os.PathLike, *, runs: int = 2, seed: int = 0, arm: bool = True,
                allowed_paths: tuple[str, ...] = ("integer", "float", "fallback"),
                inputs: list[list[np.ndarray]] | None = None,
                ) -> tuple[ConversionReport, ValidationReport]:
    module, conversion = convert(path)
    took = {o["path"] for o in conversion.outcomes}
    assert took <= set(allowed_paths), (
        f"ops took {sorted(took - set(allowed_paths))}: "
        + "; ".join(f"{o['op_name']} {o['path']}" for o in conversion.outcomes
                    if o["path"] not in allowed_paths))
    feeds = inputs if inputs is not None else seeded_inputs(path, runs, seed)
    # The judge is TensorFlow's TFLite, as in tflite_ref.py: the lowerings follow its
    # kernels. LiteRT 2.3 (validate's default runtime) differs on edge cases: its
    # CAST saturates float -> int8 and sends NaN to the type's maximum, and its
    # TRANSPOSE_CONV refuses output shapes TensorFlow 2.20 accepts.
    report = validate(path, module=module, conversion=conversion, inputs=feeds,
                      backend="tensorflow")
    assert report.passed, _describe(report)
    if arm:
        check_against_arm(module, conversion, feeds)
    return conversion, report


def check_against_arm(module, conversion: ConversionReport, feeds: list[list[np.ndarray]]) -> None:
    data = write_tosa(module)
    family, bounds = float_tolerance({o["op_name"] for o in conversion.outcomes})
    # A fallback op computes in float, where the spec allows Arm's model and ours a
    # few ulp apart; the quantize after it can then land one step apart.
    lsb = 1 if any(o["path"] == "fallback" for o in conversion.outcomes) else 0
    for tflite_run in feeds:
        run = [as_graph_input(a, v) for a, v in zip(tflite_run, module.main.inputs)]
        ours = reference_model.run(module, run)
        dtypes = [a.dtype for a in ours.values()]
        theirs = run_arm(data, run, dtypes)
        assert theirs.status == "valid", f"Arm's reference model: {theirs.status} {theirs.message}"
        for (name, mine), arm_out in zip(ours.items(), theirs.outputs):
            result = compare(name, arm_out, mine, lsb_tolerance=lsb, float_bounds=bounds,
                             family=family)
            assert result.within_tolerance, f"ours vs Arm on {name}: {result}"


def _describe(report: ValidationReport) -> str:
    lines = [f"{report.model} does not match TFLite ({report.resolver}):"]
    for o in report.outputs:
        lines.append(f"  {o.name}: exact={o.exact} max_abs={o.max_abs_error:g} "
                     f"ulp={o.max_ulp} lsb={o.max_lsb} mismatched={o.mismatched_elements} "
                     f"tolerance={o.tolerance}")
    if report.first_divergence:
        lines.append(f"  first diverging tensor: {report.first_divergence}")
    return "\n".join(lines)
