"""The work done for one model inside a worker process.

A job is any importable function `job(path, options) -> dict` returning a
partial record: `status` (one of records.STATUSES), `error` (first error line
or None), `conversion` and `validation` sections, and optionally `traceback`.
It writes its `.tosa` itself, atomically, to `options.output`. The default
job converts and validates with the library; tests inject others.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from tfl2tosa.batch.records import (
    conversion_failure,
    conversion_summary,
    describe_unsupported,
    first_line,
    short,
    validation_failure,
    validation_summary,
)


@dataclass(frozen=True)
class JobOptions:
    output: str | None = None          # the .tosa to write; None: write nothing
    validate: bool = True
    fallback: bool = True
    disabled: tuple[str, ...] = ()
    runs: int = 3
    seed: int = 0
    # validate's --input-range texts ([NAME|INDEX=]LOW:HIGH), for every model.
    input_ranges: tuple[str, ...] = ()
    hybrid: str = "emulate"            # convert's --hybrid
    # convert's --kernels; None: those of the TFLite kernels that validate the model
    # (the reference ones without validation), so the .tosa written is the one judged.
    kernels: str | None = None

    def fingerprint(self) -> dict[str, Any]:
        """The options a model's result depends on (what --resume must match)."""
        data = asdict(self)
        del data["output"]
        data["disabled"] = sorted(self.disabled)
        data["input_ranges"] = list(self.input_ranges)
        return data


Job = Callable[[str, JobOptions], dict[str, Any]]


def warm_up_modules(job: Job, validate: bool) -> tuple[str, ...]:
    """What a worker imports before its first model (see worker.import_for_jobs):
    the converter and, to validate, the TFLite runtime; an injected job's module."""
    if job is not convert_and_validate:
        return (job.__module__,)
    # What convert() and emit() import when first called, and every module
    # they import on demand (pattern families, TFLite schema tables): imported
    # in a fork, a module would be imported again for every model.
    modules = ("tfl2tosa.pipeline", "legalize", "legalize.calls",
               "tfl2tosa.passes.inline_calls", "tfl2tosa.passes.resource_variables",
               "tfl2tosa.passes.simplify", "tfl2tosa.passes.lower_quant",
               "tfl2tosa.passes.strip_quant_types", "tfl2tosa.quant", "tfl2tosa.tflite_import",
               "tfl2tosa.tosa.verify", "tfl2tosa.tosa.writer", "tfl2tosa.tosa.mlir",
               "tfl2tosa.tflite_import.structure", "tfl2tosa.quant.canonicalize",
               "tfl2tosa.tflite_import:load_whole_schema", *_pattern_families())
    if validate:
        modules += ("tfl2tosa.validation", "reference_model", "numpy.random",
                    "tensorflow|ai_edge_litert.interpreter")
    return modules


def _pattern_families() -> list[str]:
    from legalize.pattern_index import PATTERNS

    return sorted({module for entries in PATTERNS.values() for module, _ in entries})


def convert_and_validate(path: str, options: JobOptions) -> dict[str, Any]:
    """Convert `path`, write the `.tosa`, then validate against TFLite."""
    from tfl2tosa.pipeline import convert, emit, write_atomically
    from tfl2tosa.errors import ConversionError, Tfl2TosaError

    start = time.perf_counter()
    try:
        module, report = convert(path, fallback=options.fallback,
                                 disabled=frozenset(options.disabled),
                                 hybrid=options.hybrid, kernels=options.kernels or "reference")
        if options.validate and options.kernels is None:
            judging = _judging_kernels(path, report)
            if judging != report.kernels:
                module, report = convert(path, fallback=options.fallback,
                                         disabled=frozenset(options.disabled),
                                         hybrid=options.hybrid, kernels=judging)
        if options.output is not None:
            write_atomically(options.output, emit(module, "tosa"))
    except MemoryError:
        raise
    except ConversionError as exc:
        message = describe_unsupported(exc.failures) if exc.failures else first_line(exc)
        return {"status": "unsupported", "error": message,
                "conversion": conversion_failure(message, time.perf_counter() - start,
                                                 exc.failures)}
    except Tfl2TosaError as exc:
        message = f"{type(exc).__name__}: {first_line(exc)}"
        return {"status": "error", "error": message,
                "conversion": conversion_failure(message, time.perf_counter() - start)}
    except Exception as exc:  # a bug in the converter: keep the traceback for the report
        message = f"{type(exc).__name__}: {first_line(exc)}"
        return {"status": "error", "error": message, "traceback": traceback.format_exc(),
                "conversion": conversion_failure(message, time.perf_counter() - start)}
    conversion = conversion_summary(report, time.perf_counter() - start)
    if not options.validate:
        return {"status": "pass", "error": None, "conversion": conversion,
                "validation": {"verdict": "skipped"}}
    return {"conversion": conversion, **_validate(path, options, module, report)}


def _judging_kernels(path: str, conversion: Any) -> str:
    """The kernels validate will judge the model by; the conversion's own when TFLite
    cannot load the model (validation then says why)."""
    from tfl2tosa.errors import Tfl2TosaError
    from tfl2tosa.validation import judging_kernels

    try:
        return judging_kernels(path, conversion)
    except Tfl2TosaError:
        return conversion.kernels


def _validate(path: str, options: JobOptions, module: Any, conversion: Any) -> dict[str, Any]:
    from tfl2tosa.errors import Tfl2TosaError
    from tfl2tosa.validation import parse_input_range, validate

    start = time.perf_counter()
    try:
        ranges = dict(parse_input_range(text) for text in options.input_ranges)
        report = validate(path, runs=options.runs, seed=options.seed, module=module,
                          conversion=conversion, input_ranges=ranges)
    except MemoryError:
        raise
    except Exception as exc:
        message = f"validation: {type(exc).__name__}: {first_line(exc)}"
        result: dict[str, Any] = {"status": "error", "error": message,
                                  "validation": validation_failure(message,
                                                                   time.perf_counter() - start)}
        if not isinstance(exc, Tfl2TosaError):
            result["traceback"] = traceback.format_exc()
        return result
    validation = validation_summary(report, time.perf_counter() - start)
    if report.passed:
        return {"status": "pass", "error": None, "validation": validation}
    worst = max(report.outputs, key=lambda o: (not o.within_tolerance, o.max_abs_error),
                default=None)
    message = short("; ".join(report.errors) or (
        f"output {worst.name}: max abs error {worst.max_abs_error:.3g} "
        f"exceeds {worst.tolerance}" if worst is not None else "validation failed"))
    return {"status": "mismatch", "error": message, "validation": validation}
