"""The batch report as Markdown, for a CI job summary ($GITHUB_STEP_SUMMARY)."""

from __future__ import annotations

from typing import Any

from tfl2tosa.batch.records import summary_row

COLUMNS = ("model", "status", "size", "ops", "integer", "fallback", "unsupported", "convert",
           "validation", "max error")
# GitHub truncates a step summary past 1 MiB; the details section stops well before.
MAX_DETAILS = 200


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def to_markdown(report: dict[str, Any]) -> str:
    summary = report["summary"]
    lines = [f"## tfl2tosa batch: {'PASS' if summary['passed'] else 'FAIL'}", ""]
    counts = ", ".join(f"{n} {s}" for s, n in summary["by_status"].items() if n)
    lines.append(f"{summary['models']} model(s): {counts or 'none'}.")
    shards = report["shards"]
    if any(s["count"] > 1 for s in shards):
        names = ", ".join(f"{s['index']}/{s['count']}" for s in shards)
        lines.append(f"Shards: {names}.")
    lines.extend(f"- **{reason}**" for reason in summary["reasons"])
    lines.append("")
    changes = report.get("baseline")
    if changes is not None:
        lines.append(f"Compared with `{changes['source'] or 'baseline'}`: "
                     + ", ".join(f"{len(changes[k])} {k}" for k in ("regressed", "improved",
                                                                    "new", "missing")) + ".")
        lines.append("")
        by_id = {r["id"]: r for r in report["models"]}
        for key, title in (("regressed", "Regressed"), ("improved", "Improved"),
                           ("new", "New")):
            if changes[key]:
                lines.append(f"### {title}")
                for model_id in changes[key]:
                    record = by_id.get(model_id, {})
                    reasons = "; ".join((record.get("baseline") or {}).get("reasons", []))
                    status = record.get("status", "?")
                    lines.append(f"- `{model_id}`: {status}" + (f" ({reasons})" if reasons
                                                                else ""))
                lines.append("")
    if report["input_errors"]:
        lines.append("### Inputs that could not be read")
        lines.extend(f"- `{e['input']}`: {_cell(e['error'])}" for e in report["input_errors"])
        lines.append("")
    # Failures first: a reader looks for what broke, not for hundreds of passes.
    failing = [r for r in report["models"] if r["status"] != "pass"]
    if failing:
        lines += ["### Errors", ""]
        for record in failing[:MAX_DETAILS]:
            lines.append(f"- `{record['id']}` ({record['status']}): "
                         f"{_cell(record.get('error') or '')}")
        if len(failing) > MAX_DETAILS:
            lines.append(f"- ... and {len(failing) - MAX_DETAILS} more (see the JSON report)")
        lines.append("")
    lines.append("| " + " | ".join(COLUMNS) + " |")
    lines.append("| " + " | ".join("---" for _ in COLUMNS) + " |")
    passing = [r for r in report["models"] if r["status"] == "pass"]
    for record in failing + passing:
        row = summary_row(record)
        lines.append("| " + " | ".join(_cell(row[c]) for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"
