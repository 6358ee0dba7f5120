"""The batch report: one JSON document per run (or per merge of shard runs).

Its layout is documented in docs/batch-report-schema.md and checked by
`report.schema.json` beside this file; `schema_version` changes whenever a
reader of the previous version would misread the new one (added fields do
not change it). Reports of different versions are never mixed: loading a
baseline or merging shards of another version is refused with the reason.
"""

from __future__ import annotations

import datetime
import json
import os
from collections import Counter
from typing import Any

from tfl2tosa import __version__
from tfl2tosa.batch.baseline import apply_baseline
from tfl2tosa.batch.records import SCHEMA_VERSION, STATUSES, json_safe
from tfl2tosa.batch.schema_check import first_violation

REPORT_KIND = "tfl2tosa-batch-report"


class ReportError(Exception):
    """A report file that cannot be used: unreadable, not a batch report, other version."""


def build_report(records: list[dict[str, Any]], *, input_errors: list[dict[str, str]],
                 options: dict[str, Any], shards: list[dict[str, Any]],
                 baseline: dict[str, Any] | None = None, baseline_source: str = "",
                 missing_shards: list[str] = (), not_run: list[str] | None = None
                 ) -> dict[str, Any]:
    """Assemble a report from per-model records (sorted by id here). `not_run`: the
    batch was interrupted before these models finished (the report says so)."""
    records = sorted(records, key=lambda r: r["id"])
    complete = all(s["count"] == 1 for s in shards) or (not missing_shards and _covers(shards))
    section = None
    if baseline is not None:
        section = apply_baseline(records, baseline, source=baseline_source, complete=complete)
    report = {
        "schema_version": SCHEMA_VERSION,
        "kind": REPORT_KIND,
        "tool": {"name": "tfl2tosa", "version": __version__},
        "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "options": options,
        "shards": shards,
        "missing_shards": list(missing_shards),
        "input_errors": input_errors,
        "baseline": section,
        "models": records,
    }
    if not_run is not None:
        report["interrupted"] = {"not_run": sorted(not_run)}
    report["summary"] = summarize(report)
    return json_safe(report)


def _covers(shards: list[dict[str, Any]]) -> bool:
    counts = {s["count"] for s in shards}
    return len(counts) == 1 and {s["index"] for s in shards} == set(range(1, counts.pop() + 1))


def summarize(report: dict[str, Any]) -> dict[str, Any]:
    """Counts, and the gate: does this report pass (exit code 0)?

    Without a baseline every model must pass; with one, only regressions fail.
    Input errors (a download that failed) and missing shards always fail: the
    models they stand for were never checked.
    """
    by_status = Counter(r["status"] for r in report["models"])
    section = report["baseline"]
    reasons: list[str] = []
    if section is None:
        failing = sum(n for s, n in by_status.items() if s != "pass")
        if failing:
            reasons.append(f"{failing} model(s) did not pass")
    elif section["regressed"]:
        reasons.append(f"{len(section['regressed'])} model(s) regressed")
    if report["input_errors"]:
        reasons.append(f"{len(report['input_errors'])} input(s) could not be read")
    if report["missing_shards"]:
        reasons.append(f"shard report(s) missing: {', '.join(report['missing_shards'])}")
    if report.get("interrupted") is not None:
        reasons.append(f"interrupted: {len(report['interrupted']['not_run'])} model(s) "
                       "not run")
    summary = {
        "models": len(report["models"]),
        "by_status": {s: by_status.get(s, 0) for s in STATUSES},
        "input_errors": len(report["input_errors"]),
        "passed": not reasons,
        "reasons": reasons,
    }
    if section is not None:
        summary["changes"] = {k: len(section[k]) for k in ("regressed", "improved", "new",
                                                            "missing")}
    return summary


def exit_code(report: dict[str, Any]) -> int:
    return 0 if report["summary"]["passed"] else 1


def load_report(path: str | os.PathLike) -> dict[str, Any]:
    """Read a batch report written by this version of the schema, or say why not."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise ReportError(f"{path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict) or data.get("kind") != REPORT_KIND:
        raise ReportError(f"{path}: not a tfl2tosa batch report")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ReportError(f"{path}: report schema version {version}, this tfl2tosa reads "
                          f"version {SCHEMA_VERSION}; re-run the batch with one version")
    violation = first_violation(data)
    if violation is not None:
        raise ReportError(f"{path}: not a valid batch report (report.schema.json): {violation}")
    return data


def merge_reports(paths: list[str], *, baseline: dict[str, Any] | None = None,
                  baseline_source: str = "") -> dict[str, Any]:
    """Merge shard reports into one report of the whole batch.

    All reports must have one schema version (else ReportError naming each
    file's version) and no model may appear twice. Shards the merge lacks are
    listed in `missing_shards` (and fail the gate). With `baseline` the
    comparison is redone over the whole; without it, each shard's per-model
    comparison is kept.
    """
    if not paths:
        raise ReportError("nothing to merge")
    versions: dict[str, Any] = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                versions[path] = json.load(f).get("schema_version")
        except (OSError, json.JSONDecodeError, AttributeError):
            versions[path] = None
    if len(set(map(repr, versions.values()))) > 1:
        listing = ", ".join(f"{p}: {v}" for p, v in versions.items())
        raise ReportError(f"cannot merge reports of different schema versions ({listing})")
    reports = [(path, load_report(path)) for path in paths]

    records: dict[str, dict[str, Any]] = {}
    owner: dict[str, str] = {}
    shards: list[dict[str, Any]] = []
    input_errors: list[dict[str, str]] = []
    for path, report in reports:
        for record in report["models"]:
            if record["id"] in records:
                raise ReportError(f"model {record['id']} is in both {owner[record['id']]} and "
                                  f"{path}: were two shards given the same --shard?")
            records[record["id"]] = record
            owner[record["id"]] = path
        shards.extend(report["shards"])
        input_errors.extend(e for e in report["input_errors"] if e not in input_errors)
    shards = sorted({(s["index"], s["count"]): s for s in shards}.values(),
                    key=lambda s: (s["count"], s["index"]))
    not_run = [i for _, r in reports for i in r.get("interrupted", {}).get("not_run", ())]
    merged = build_report(list(records.values()), input_errors=input_errors,
                          options=reports[0][1]["options"], shards=shards,
                          baseline=baseline, baseline_source=baseline_source,
                          missing_shards=_missing_shards(shards),
                          not_run=not_run if any("interrupted" in r for _, r in reports)
                          else None)
    if baseline is None:
        merged["baseline"] = _merge_baseline_sections([r for _, r in reports])
        merged["summary"] = summarize(merged)
    return merged


def _missing_shards(shards: list[dict[str, Any]]) -> list[str]:
    counts = {s["count"] for s in shards}
    if len(counts) != 1:
        raise ReportError("cannot merge shards of different splits (--shard K/N with "
                          f"N in {sorted(counts)})")
    count = counts.pop()
    present = {s["index"] for s in shards}
    return [f"{k}/{count}" for k in range(1, count + 1) if k not in present]


def _merge_baseline_sections(reports: list[dict[str, Any]]) -> dict[str, Any] | None:
    sections = [r["baseline"] for r in reports if r["baseline"] is not None]
    if not sections:
        return None
    if len(sections) != len(reports):
        raise ReportError("some shard reports were compared with a baseline and some were "
                          "not; pass --baseline to the merge to compare them all")
    merged: dict[str, Any] = {"source": sections[0]["source"]}
    for key in ("regressed", "improved", "new", "missing"):
        merged[key] = sorted({i for s in sections for i in s[key]})
    return merged
