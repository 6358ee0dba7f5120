"""A batch's `report.html`: status summary, error distribution, regressions
against the baseline, and the models that did not pass."""

from __future__ import annotations

import math
from typing import Any

from tfl2tosa.batch.records import STATUSES
from tfl2tosa.html.charts import bar_chart, value_histogram
from tfl2tosa.html.page import escape, page, table

STATUS_COLORS = {"pass": "#2da44e", "mismatch": "#d4a72c", "unsupported": "#bf8700",
                 "error": "#cf222e", "crash": "#a40e26", "timeout": "#8250df", "oom": "#6e7781"}


def render(report: dict[str, Any]) -> str:
    summary = report["summary"]
    verdict = "PASS" if summary["passed"] else "FAIL"
    body = [f'<h1>tfl2tosa batch: <span class="{verdict.lower()}">{verdict}</span></h1>',
            f"<p>{summary['models']} model(s), created {escape(report.get('created', ''))}."
            + "".join(f" <b>{escape(r)}</b>." for r in summary["reasons"]) + "</p>"]
    body += _status_section(summary)
    body += _baseline_section(report)
    body += _failures_section(report)
    body += _error_section(report)
    return page("tfl2tosa batch report", body)


def _status_section(summary: dict[str, Any]) -> list[str]:
    counts = [summary["by_status"].get(s, 0) for s in STATUSES]
    return ["<h2>Status</h2>",
            '<div class="chart status-chart">'
            + bar_chart("models by status", STATUSES, counts,
                        [STATUS_COLORS[s] for s in STATUSES]) + "</div>",
            table(["status", "models"], [[escape(s), str(n)] for s, n in zip(STATUSES, counts)])]


def _baseline_section(report: dict[str, Any]) -> list[str]:
    changes = report.get("baseline")
    if changes is None:
        return ["<h2>Against the baseline</h2><p>No baseline given (--baseline).</p>"]
    by_id = {r["id"]: r for r in report["models"]}
    rows = []
    for key in ("regressed", "improved", "new", "missing"):
        for model_id in changes[key]:
            record = by_id.get(model_id, {})
            reasons = "; ".join((record.get("baseline") or {}).get("reasons", []))
            rows.append([escape(key), escape(model_id), escape(record.get("status", "-")),
                         escape(reasons)])
    counts = ", ".join(f"{len(changes[k])} {k}" for k in ("regressed", "improved", "new",
                                                          "missing"))
    parts = ["<h2>Against the baseline</h2>",
             f"<p>Compared with <code>{escape(changes.get('source') or 'baseline')}</code>: "
             f"{counts}.</p>"]
    if rows:
        parts.append(table(["change", "model", "status", "why"], rows,
                           ["unsupported" if r[0] == "regressed" else "" for r in rows]))
    return parts


def _failures_section(report: dict[str, Any]) -> list[str]:
    failing = [r for r in report["models"] if r["status"] != "pass"]
    rows = [[escape(r["id"]), escape(r["status"]), escape(r.get("error") or "")]
            for r in failing]
    rows += [[escape(e["input"]), "input error", escape(e["error"])]
             for e in report.get("input_errors", [])]
    if not rows:
        return ["<h2>Failures</h2><p>None.</p>"]
    return ["<h2>Failures</h2>", table(["model", "status", "first error"], rows,
                                       ["unsupported"] * len(rows))]


def _error_section(report: dict[str, Any]) -> list[str]:
    """Each validated model's largest error: in LSB for integer outputs, as log10 of
    the absolute error for float outputs (exact ones counted apart)."""
    lsb, float_log, exact = [], [], 0
    for record in report["models"]:
        validation = record.get("validation") or {}
        if validation.get("verdict") not in ("pass", "fail"):
            continue
        if validation.get("max_lsb") is not None and validation.get("max_ulp") is None:
            lsb.append(validation["max_lsb"])
        elif validation.get("max_abs_error"):
            float_log.append(math.log10(validation["max_abs_error"]))
        else:
            exact += 1
    parts = ["<h2>Error distribution</h2>",
             f"<p>{len(lsb)} integer model(s), {len(float_log)} float model(s) with an error, "
             f"{exact} float model(s) exact.</p>"]
    if lsb:
        parts.append('<div class="chart error-chart">' + value_histogram(
            "integer models: largest error", lsb, "LSB") + "</div>")
    if float_log:
        parts.append('<div class="chart error-chart">' + value_histogram(
            "float models: largest error", float_log, "log10 |ours - TFLite|") + "</div>")
    return parts
