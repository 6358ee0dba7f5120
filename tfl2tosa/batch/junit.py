"""JUnit XML for CI test-report viewers: one testcase per model.

Without a baseline: pass -> passed; mismatch and unsupported -> <failure>
(the model was checked and found wanting); error, crash, timeout, oom ->
<error> (the check itself could not finish). With a baseline the XML follows
the gate: only regressed models fail or error, and known or new failures are
<skipped> with their error, so a test-report action that fails on failures
agrees with the exit code. Inputs that could not be read and missing shard
reports are testcases with an <error> too. Each message is the first error.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from tfl2tosa.batch.baseline import REGRESSED

SUITE_NAME = "tfl2tosa batch"
SUITE_CLASS = "tfl2tosa.batch"
_FAILURE_STATUSES = frozenset({"mismatch", "unsupported"})
# XML 1.0 forbids most C0 control characters even when escaped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _clean(text: Any) -> str:
    return _NOT_XML.sub("?", str(text))


def classname(model_id: str) -> str:
    """`tfl2tosa.batch.<the model's directory, dotted>`: test-report viewers group
    testcases by class, so models group by the directory they came from."""
    directory = model_id.rpartition("/")[0].strip("/")
    return SUITE_CLASS + ("." + directory.replace("/", ".") if directory else "")


def _outcome(record: dict[str, Any], gated: bool) -> tuple[str | None, str]:
    """(None | "failure" | "error" | "skipped", message) for one model."""
    status = record["status"]
    if status == "pass":
        return None, ""
    message = f"{status}: {record.get('error') or ''}".strip()
    change = (record.get("baseline") or {}).get("change")
    if gated and change != REGRESSED:
        known = "new model" if change == "new" else "known failure"
        return "skipped", f"{known} ({message})"
    if gated:
        message = "regressed: " + "; ".join(record["baseline"]["reasons"]) + f" ({message})"
    return ("failure" if status in _FAILURE_STATUSES else "error"), message


def to_junit(report: dict[str, Any]) -> bytes:
    gated = report.get("baseline") is not None
    cases: list[ET.Element] = []
    counts = {"failure": 0, "error": 0, "skipped": 0}
    total_time = 0.0
    for record in report["models"]:
        seconds = record.get("duration_s") or 0.0
        total_time += seconds
        case = ET.Element("testcase", classname=_clean(classname(record["id"])),
                          name=_clean(record["id"]), time=f"{seconds:.3f}")
        kind, message = _outcome(record, gated)
        if kind is not None:
            counts[kind] += 1
            child = ET.SubElement(case, kind, message=_clean(message.splitlines()[0]))
            if kind != "skipped":  # the schema gives <skipped> a message only
                child.set("type", record["status"])
            detail = record.get("traceback") or record.get("log_tail") or record.get("error")
            if detail and kind != "skipped":
                child.text = _clean(detail)
        cases.append(case)
    for entry in report.get("input_errors", []):
        counts["error"] += 1
        case = ET.Element("testcase", classname="tfl2tosa.batch.inputs",
                          name=_clean(entry["input"]), time="0.000")
        ET.SubElement(case, "error", message=_clean(entry["error"]), type="input")
        cases.append(case)
    for shard in report.get("missing_shards", []):
        counts["error"] += 1
        case = ET.Element("testcase", classname="tfl2tosa.batch.shards",
                          name=f"shard {shard}", time="0.000")
        ET.SubElement(case, "error", message=f"the report of shard {shard} is missing",
                      type="missing-shard")
        cases.append(case)

    attributes = {"tests": str(len(cases)), "failures": str(counts["failure"]),
                  "errors": str(counts["error"]), "time": f"{total_time:.3f}"}
    # The common JUnit schema (Jenkins' junit-10.xsd) allows `skipped` on a
    # <testsuite> only.
    suites = ET.Element("testsuites", name=SUITE_NAME, **attributes)
    suite = ET.SubElement(suites, "testsuite", name=SUITE_NAME,
                          timestamp=report.get("created", ""), **attributes,
                          skipped=str(counts["skipped"]))
    properties = ET.SubElement(suite, "properties")
    ET.SubElement(properties, "property", name="schema_version",
                  value=str(report["schema_version"]))
    ET.SubElement(properties, "property", name="shards",
                  value=", ".join(f"{s['index']}/{s['count']}" for s in report["shards"]))
    suite.extend(cases)
    ET.indent(suites)
    return ET.tostring(suites, encoding="utf-8", xml_declaration=True) + b"\n"
