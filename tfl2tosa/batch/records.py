"""Per-model records: what one model's run produced, in the report schema's terms.

A record is a plain dict (it is JSON as written, read back by `--resume`,
`--baseline` and `report merge`); docs/batch-report-schema.md lists every
field. Statuses, from best to worst kind of outcome:

    pass         converted (and, unless --no-validate, validated within tolerance)
    mismatch     converted, but an output differs from TFLite beyond tolerance
    unsupported  some op has no lowering (ConversionError)
    error        any other error: unreadable model, verifier, validation could not run
    crash        the worker process died (signal or exit) while on this model
    timeout      the model ran past --timeout and its worker was killed
    oom          the model exceeded --memory-limit (MemoryError) or was OOM-killed
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from tfl2tosa.pipeline import CONSTANT_OPS

SCHEMA_VERSION = 1
STATUSES = ("pass", "mismatch", "unsupported", "error", "crash", "timeout", "oom")
ABNORMAL_STATUSES = frozenset({"crash", "timeout", "oom"})
# A record's `error` is one readable line (reports, JUnit messages, tables); the
# whole story is in its conversion/validation sections.
MAX_ERROR_CHARACTERS = 300
_PER_AXIS_LIST = re.compile(r"\{[^{}]*\}")


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return short(text.splitlines()[0] if text else type(exc).__name__)


def short(text: str) -> str:
    if len(text) <= MAX_ERROR_CHARACTERS:
        return text
    return text[:MAX_ERROR_CHARACTERS - 3] + "..."


def compact_types(types: str) -> str:
    """Per-axis scale lists can run to thousands of characters: `{...}` keeps the
    type readable (`!quant.uniform<i8:f32:0, {...}>`)."""
    return _PER_AXIS_LIST.sub("{...}", types)


def json_safe(value: Any) -> Any:
    """Recursively replace non-finite floats by None: strict JSON has no inf/NaN
    (an infinite error is a shape mismatch, which the verdict already fails)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def _max_of(values: Iterable[float | int | None]) -> float | int | None:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def conversion_summary(report: Any, seconds: float) -> dict[str, Any]:
    """A converted model's ConversionReport (tfl2tosa.pipeline) in record form."""
    outcomes = [o for o in report.outcomes if o["op_name"] not in CONSTANT_OPS]

    def where(path: str) -> list[str]:
        return [f"{o['op_name']} at {o['loc']}" for o in outcomes if o["path"] == path]

    return {
        "ok": True,
        "ops": len(outcomes),
        "op_counts": {k: v for k, v in report.ops_in.items() if k not in CONSTANT_OPS},
        "tosa_ops": sum(v for k, v in report.ops_out.items() if k not in CONSTANT_OPS),
        "integer": sum(1 for o in outcomes if o["path"] == "integer"),
        "float": sum(1 for o in outcomes if o["path"] == "float"),
        "fallback": sum(1 for o in outcomes if o["path"] == "fallback"),
        "unsupported": 0,
        "kernels": report.kernels,
        "fallback_ops": where("fallback"),
        "unsupported_ops": [],
        "time_s": seconds,
        "errors": list(report.errors),
    }


def describe_unsupported(failures: list[Any]) -> str:
    """One line for a ConversionError: how many ops, which kinds, the first one."""
    kinds = sorted({getattr(f, "op_name", str(f)) for f in failures})
    first = failures[0]
    return short(f"{len(failures)} op(s) could not be converted ({', '.join(kinds)}); first: "
                 f"{getattr(first, 'op_name', first)} at {getattr(first, 'loc', '?')}: "
                 f"{getattr(first, 'reason', '')}")


def conversion_failure(error: str, seconds: float, failures: list[Any] = ()) -> dict[str, Any]:
    """A conversion that raised; `failures` are the unconvertible ops (OpOutcome)."""
    unsupported = [f"{getattr(f, 'op_name', f)} ({compact_types(getattr(f, 'types', ''))}) at "
                   f"{getattr(f, 'loc', '?')}: {getattr(f, 'reason', '')}" for f in failures]
    return {"ok": False, "ops": None, "op_counts": {}, "tosa_ops": None, "integer": None,
            "float": None, "fallback": None, "unsupported": len(unsupported),
            "fallback_ops": [], "unsupported_ops": unsupported, "time_s": seconds,
            "errors": [error]}


def validation_summary(report: Any, seconds: float) -> dict[str, Any]:
    """A ValidationReport (tfl2tosa.validation) in record form: the worst output decides."""
    from dataclasses import asdict

    outputs = [asdict(o) for o in report.outputs]
    return {
        "verdict": "pass" if report.passed else "fail",
        "runs": report.runs,
        "resolver": report.resolver,
        "backend": report.backend,
        "kernels": report.kernels,
        "max_abs_error": _max_of(o["max_abs_error"] for o in outputs),
        "max_rel_error": _max_of(o["max_rel_error"] for o in outputs),
        "max_lsb": _max_of(o["max_lsb"] for o in outputs),
        "max_ulp": _max_of(o["max_ulp"] for o in outputs),
        "first_divergence": report.first_divergence,
        "anchored_runs": report.anchored_runs,
        "anchored_inputs": report.anchored_inputs,
        "anchored_max_ulp": report.anchored_max_ulp,
        "outputs": outputs,
        "errors": list(report.errors),
        "time_s": seconds,
    }


def validation_failure(error: str, seconds: float) -> dict[str, Any]:
    return {"verdict": "error", "runs": 0, "resolver": "", "max_abs_error": None,
            "max_rel_error": None, "max_lsb": None, "max_ulp": None, "first_divergence": None,
            "anchored_runs": 0, "anchored_inputs": 0, "anchored_max_ulp": None, "outputs": [], "errors": [error], "time_s": seconds}


def converted(record: dict[str, Any]) -> bool:
    return bool((record.get("conversion") or {}).get("ok"))


def verdict(record: dict[str, Any]) -> str | None:
    """pass / fail / error / skipped, or None when validation was never reached."""
    return (record.get("validation") or {}).get("verdict")


def max_error(record: dict[str, Any]) -> float | None:
    validation = record.get("validation") or {}
    if validation.get("verdict") not in ("pass", "fail"):
        return None
    return validation.get("max_abs_error")


def format_size(size: int | None) -> str:
    if size is None:
        return "-"
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def summary_row(record: dict[str, Any]) -> dict[str, str]:
    """One record as the summary table's cells (console and Markdown)."""
    conversion = record.get("conversion") or {}

    def count(key: str) -> str:
        value = conversion.get(key)
        return "-" if value is None else str(value)

    validation = record.get("validation") or {}
    error = max_error(record)
    lsb = validation.get("max_lsb")
    time_s = conversion.get("time_s")
    return {
        "model": record["id"],
        "size": format_size(record.get("size_bytes")),
        "ops": count("ops"),
        "integer": count("integer"),
        "fallback": count("fallback"),
        "unsupported": count("unsupported"),
        "convert": "-" if time_s is None else f"{time_s:.2f} s",
        "validation": validation.get("verdict") or "-",
        "max error": "-" if error is None else (f"{lsb} LSB" if lsb is not None
                                                 else f"{error:.3g}"),
        "status": record["status"],
    }
