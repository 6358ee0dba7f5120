"""Batch reports: the JSON schema, JUnit XML, Markdown, baseline comparison, merging.

Records here are written by hand, so every expected count is read off the
inputs, not produced by the code under test.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from tfl2tosa.batch.baseline import compare_record
from tfl2tosa.batch.junit import to_junit
from tfl2tosa.batch.markdown import to_markdown
from tfl2tosa.batch.records import SCHEMA_VERSION
from tfl2tosa.batch.report import ReportError, build_report, exit_code, merge_reports

SCHEMA = json.loads((Path(__file__).resolve().parent.parent / "tfl2tosa" / "batch"
                     / "report.schema.json").read_text())


def record(model_id: str, status: str, *, error: float | None = None,
           verdict: str | None = None, message: str | None = None) -> dict:
    converted = status in ("pass", "mismatch") or verdict == "error"
    if verdict is None:
        verdict = {"pass": "pass", "mismatch": "fail"}.get(status)
    return {
        "schema_version": SCHEMA_VERSION, "id": model_id, "path": f"/m/{model_id}",
        "source": "/m", "sha256": "0" * 64, "size_bytes": 2048, "status": status,
        "error": message if message is not None else (None if status == "pass"
                                                      else f"{status} happened"),
        "output": model_id.replace(".tflite", ".tosa") if converted else None,
        "conversion": ({"ok": True, "ops": 5, "integer": 4, "float": 0, "fallback": 1,
                        "unsupported": 0, "time_s": 0.5, "errors": []} if converted else
                       {"ok": False, "ops": None, "integer": None, "float": None,
                        "fallback": None, "unsupported": 2, "time_s": 0.1, "errors": ["x"]}
                       if status == "unsupported" else None),
        "validation": None if verdict is None else {"verdict": verdict,
                                                    "max_abs_error": error},
        "duration_s": 1.25, "max_rss_bytes": 1 << 20,
        "options": {"validate": True, "fallback": True, "disabled": [], "runs": 3, "seed": 0},
        "limits": {"timeout_s": 300.0, "memory_limit_bytes": None}, "resumed": False,
    }


def report_of(records, *, shard=(1, 1), baseline=None, input_errors=(), missing=()):
    return build_report(list(records), input_errors=list(input_errors), options={},
                        shards=[{"index": shard[0], "count": shard[1], "models": len(records),
                                 "discovered": len(records)}],
                        baseline=baseline, baseline_source="prev.json",
                        missing_shards=list(missing))


MIXED = [record("a.tflite", "pass", error=0.0), record("b.tflite", "mismatch", error=3.0),
         record("c.tflite", "unsupported"), record("d.tflite", "crash"),
         record("e.tflite", "timeout"), record("f.tflite", "pass", error=1.0),
         record("g.tflite", "error", verdict="error")]


def test_a_report_follows_its_json_schema():
    report = report_of(MIXED, input_errors=[{"input": "kaggle:a/b/tfLite/c", "error": "404"}])
    jsonschema.validate(report, SCHEMA)
    baseline_report = report_of(MIXED[:3], baseline=report_of(MIXED))
    jsonschema.validate(baseline_report, SCHEMA)
    assert report["summary"]["by_status"] == {"pass": 2, "mismatch": 1, "unsupported": 1,
                                              "error": 1, "crash": 1, "timeout": 1, "oom": 0}


def test_infinite_errors_become_null_so_the_json_stays_strict():
    report = report_of([record("a.tflite", "mismatch", error=float("inf"))])
    text = json.dumps(report, allow_nan=False)  # raises on inf/NaN
    assert json.loads(text)["models"][0]["validation"]["max_abs_error"] is None


def test_junit_has_one_testcase_per_model_and_failures_carry_the_first_error():
    report = report_of(MIXED, input_errors=[{"input": "kaggle:a/b/tfLite/c", "error": "404"}])
    root = ET.fromstring(to_junit(report))
    suite = root.find("testsuite")
    # 7 models + 1 input error; failures: mismatch, unsupported; errors: crash,
    # timeout, error, the input.
    for element in (root, suite):
        assert {k: element.get(k) for k in ("tests", "failures", "errors")} == {
            "tests": "8", "failures": "2", "errors": "4"}
    assert suite.get("skipped") == "0"
    cases = {case.get("name"): case for case in suite.iter("testcase")}
    assert list(cases) == [r["id"] for r in MIXED] + ["kaggle:a/b/tfLite/c"]
    assert cases["a.tflite"].find("failure") is None and cases["a.tflite"].find("error") is None
    assert cases["b.tflite"].find("failure").get("message") == "mismatch: mismatch happened"
    assert cases["d.tflite"].find("error").get("type") == "crash"
    assert cases["a.tflite"].get("time") == "1.250"


def test_junit_stays_valid_xml_with_control_characters_in_errors():
    bad = record("a.tflite", "error", message="bad byte \x00\x1b[31m and <tag> & 'quotes'")
    root = ET.fromstring(to_junit(report_of([bad])))
    message = root.find("testsuite/testcase/error").get("message")
    assert message == "error: bad byte ??[31m and <tag> & 'quotes'"


def test_with_a_baseline_junit_fails_only_regressions_and_skips_known_failures():
    before = report_of([record("a.tflite", "pass", error=0.0), record("b.tflite", "crash")])
    now = report_of([record("a.tflite", "crash"), record("b.tflite", "crash"),
                     record("n.tflite", "unsupported")], baseline=before)
    root = ET.fromstring(to_junit(now))
    suite = root.find("testsuite")
    assert {k: suite.get(k) for k in ("tests", "failures", "errors", "skipped")} == {
        "tests": "3", "failures": "0", "errors": "1", "skipped": "2"}
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["a.tflite"].find("error").get("message").startswith(
        "regressed: no longer converts (pass -> crash)")
    assert cases["b.tflite"].find("skipped").get("message").startswith("known failure")
    assert cases["n.tflite"].find("skipped").get("message").startswith("new model")
    assert exit_code(now) == 1


@pytest.mark.parametrize("old, new, change, reasons", [
    (record("m", "pass", error=0.0), record("m", "pass", error=0.0), "unchanged", []),
    (record("m", "pass", error=0.0), record("m", "unsupported"), "regressed",
     ["no longer converts (pass -> unsupported)"]),
    (record("m", "pass", error=0.0), record("m", "oom"), "regressed",
     ["no longer converts (pass -> oom)"]),
    (record("m", "pass", error=1.0), record("m", "mismatch", error=1.0), "regressed",
     ["no longer validates (pass -> mismatch)"]),
    (record("m", "pass", error=0.0), record("m", "error", verdict="error"), "regressed",
     ["no longer validates (pass -> error)"]),
    (record("m", "mismatch", error=2.0), record("m", "mismatch", error=3.0), "regressed",
     ["max error grew from 2 to 3"]),
    (record("m", "mismatch", error=2.0), record("m", "mismatch", error=2.0), "unchanged", []),
    (record("m", "crash"), record("m", "timeout"), "unchanged", []),
    (record("m", "unsupported"), record("m", "pass", error=0.0), "improved",
     ["now converts (unsupported -> pass)"]),
    (record("m", "mismatch", error=3.0), record("m", "pass", error=1.0), "improved",
     ["now validates (mismatch -> pass)", "max error shrank from 3 to 1"]),
    # Validation switched off now: nothing to compare but conversion.
    (record("m", "pass", error=1.0), record("m", "pass", verdict="skipped"), "unchanged", []),
    (None, record("m", "crash"), "new", []),
])
def test_baseline_comparison(old, new, change, reasons):
    result = compare_record(old, new)
    assert (result["change"], result["reasons"]) == (change, reasons)


def test_the_gate_without_and_with_a_baseline():
    failing = [record("a.tflite", "pass", error=0.0), record("b.tflite", "crash")]
    assert exit_code(report_of(failing)) == 1
    assert exit_code(report_of(failing, baseline=report_of(failing))) == 0
    assert exit_code(report_of(failing[:1])) == 0
    assert exit_code(report_of(failing[:1], input_errors=[{"input": "x", "error": "y"}])) == 1


def test_missing_baseline_models_are_listed_only_for_a_whole_run():
    before = report_of([record("a.tflite", "pass", error=0.0), record("b.tflite", "pass")])
    whole = report_of([record("a.tflite", "pass", error=0.0)], baseline=before)
    shard = report_of([record("a.tflite", "pass", error=0.0)], baseline=before, shard=(1, 2))
    assert whole["baseline"]["missing"] == ["b.tflite"]
    assert shard["baseline"]["missing"] == []
    assert exit_code(whole) == 0  # a model that went away is news, not a failure


def write(path: Path, report: dict) -> str:
    path.write_text(json.dumps(report))
    return str(path)


def test_merging_shards_gives_the_report_of_the_whole(tmp_path):
    one = write(tmp_path / "1.json", report_of(MIXED[:4], shard=(1, 2)))
    two = write(tmp_path / "2.json", report_of(MIXED[4:], shard=(2, 2)))
    merged = merge_reports([two, one])
    jsonschema.validate(merged, SCHEMA)
    assert [r["id"] for r in merged["models"]] == [r["id"] for r in MIXED]
    assert [(s["index"], s["count"]) for s in merged["shards"]] == [(1, 2), (2, 2)]
    assert merged["missing_shards"] == []
    assert merged["summary"]["by_status"] == report_of(MIXED)["summary"]["by_status"]
    root = ET.fromstring(to_junit(merged))
    assert root.get("tests") == "7"


def test_a_merge_with_a_shard_missing_fails_and_says_which(tmp_path):
    one = write(tmp_path / "1.json", report_of([record("a.tflite", "pass", error=0.0)],
                                               shard=(1, 3)))
    three = write(tmp_path / "3.json", report_of([record("c.tflite", "pass", error=0.0)],
                                                 shard=(3, 3)))
    merged = merge_reports([one, three])
    assert merged["missing_shards"] == ["2/3"]
    assert exit_code(merged) == 1
    assert "shard report(s) missing: 2/3" in merged["summary"]["reasons"]
    cases = [c.get("name") for c in ET.fromstring(to_junit(merged)).iter("testcase")]
    assert cases == ["a.tflite", "c.tflite", "shard 2/3"]


def test_a_merge_of_reports_of_different_schema_versions_is_refused(tmp_path):
    one = write(tmp_path / "1.json", report_of([record("a.tflite", "pass")], shard=(1, 2)))
    future = report_of([record("b.tflite", "pass")], shard=(2, 2))
    future["schema_version"] = SCHEMA_VERSION + 1
    two = write(tmp_path / "2.json", future)
    with pytest.raises(ReportError) as caught:
        merge_reports([one, two])
    assert str(caught.value) == (f"cannot merge reports of different schema versions "
                                 f"({one}: {SCHEMA_VERSION}, {two}: {SCHEMA_VERSION + 1})")


def test_a_merge_of_future_reports_names_the_version(tmp_path):
    future = report_of([record("b.tflite", "pass")])
    future["schema_version"] = 99
    with pytest.raises(ReportError, match="schema version 99, this tfl2tosa reads version 1"):
        merge_reports([write(tmp_path / "f.json", future)])


def test_a_merge_refuses_a_model_in_two_shards(tmp_path):
    one = write(tmp_path / "1.json", report_of([record("a.tflite", "pass")], shard=(1, 2)))
    two = write(tmp_path / "2.json", report_of([record("a.tflite", "pass")], shard=(2, 2)))
    with pytest.raises(ReportError, match="a.tflite is in both"):
        merge_reports([one, two])


@pytest.mark.parametrize("content, message", [
    ("{", "not JSON"), ("[]", "not a tfl2tosa batch report"),
    ('{"kind": "something else"}', "not a tfl2tosa batch report")])
def test_files_that_are_not_reports_are_refused(tmp_path, content, message):
    path = tmp_path / "r.json"
    path.write_text(content)
    with pytest.raises(ReportError, match=message):
        merge_reports([str(path)])


def test_a_merge_with_a_baseline_compares_the_whole(tmp_path):
    before = report_of([record("a.tflite", "pass", error=0.0), record("b.tflite", "pass"),
                        record("z.tflite", "pass")])
    one = write(tmp_path / "1.json", report_of([record("a.tflite", "crash")], shard=(1, 2)))
    two = write(tmp_path / "2.json", report_of([record("b.tflite", "pass")], shard=(2, 2)))
    merged = merge_reports([one, two], baseline=before, baseline_source="prev.json")
    assert merged["baseline"]["regressed"] == ["a.tflite"]
    assert merged["baseline"]["missing"] == ["z.tflite"]


def test_markdown_summary_lists_every_model_and_the_regressions():
    before = report_of([record("a.tflite", "pass", error=0.0)])
    now = report_of([record("a.tflite", "crash", message="the worker died with SIGSEGV"),
                     record("b|c.tflite", "pass", error=0.5)], baseline=before)
    text = to_markdown(now)
    lines = text.splitlines()
    assert lines[0] == "## tfl2tosa batch: FAIL"
    assert "### Regressed" in lines
    assert "- `a.tflite`: crash (no longer converts (pass -> crash))" in lines
    header = "| model | status | size | ops | integer | fallback | unsupported | convert | " \
             "validation | max error |"
    assert header in lines
    assert "| b\\|c.tflite | pass | 2.0 KiB | 5 | 4 | 1 | 0 | 0.50 s | pass | 0.5 |" in lines
    assert "- `a.tflite` (crash): the worker died with SIGSEGV" in lines


# The attributes the common JUnit schema (Jenkins' junit-10.xsd, which CI test-report
# viewers follow) allows on each element, and the children it allows; restated from
# that schema.
JUNIT_ATTRIBUTES = {
    "testsuites": {"name", "time", "tests", "failures", "disabled", "errors"},
    "testsuite": {"name", "tests", "failures", "errors", "group", "time", "disabled",
                  "skipped", "timestamp", "hostname", "id", "package", "file", "log", "url",
                  "version"},
    "properties": set(), "property": {"name", "value"},
    "testcase": {"name", "assertions", "time", "classname", "status", "file", "line"},
    "skipped": {"message"}, "error": {"message", "type"}, "failure": {"message", "type"},
    "system-out": set(), "system-err": set(),
}
JUNIT_REQUIRED = {"testsuite": {"name", "tests"}, "testcase": {"name"},
                  "property": {"name", "value"}}
JUNIT_CHILDREN = {
    "testsuites": {"testsuite"}, "testsuite": {"properties", "testcase", "system-out",
                                               "system-err"},
    "properties": {"property"}, "property": set(),
    "testcase": {"skipped", "error", "failure", "system-out", "system-err"},
    "skipped": set(), "error": set(), "failure": set(),
}


def junit_schema_problems(element: ET.Element) -> list[str]:
    problems = []
    extra = set(element.attrib) - JUNIT_ATTRIBUTES[element.tag]
    missing = JUNIT_REQUIRED.get(element.tag, set()) - set(element.attrib)
    if extra or missing:
        problems.append(f"<{element.tag}>: extra {sorted(extra)}, missing {sorted(missing)}")
    for child in element:
        if child.tag not in JUNIT_CHILDREN[element.tag]:
            problems.append(f"<{child.tag}> inside <{element.tag}>")
        problems += junit_schema_problems(child)
    return problems


@pytest.mark.parametrize("gated", [False, True], ids=["plain", "baseline"])
def test_junit_follows_the_common_junit_schema(gated):
    report = report_of(MIXED, input_errors=[{"input": "kaggle:a/b/tfLite/c", "error": "404"}],
                       missing=["2/2"], shard=(1, 2))
    if gated:
        report = report_of(MIXED[:4], baseline=report_of(MIXED[1:]))
    root = ET.fromstring(to_junit(report))
    assert root.tag == "testsuites"
    assert junit_schema_problems(root) == []


def test_junit_classnames_group_models_by_directory():
    report = report_of([record("unit/int8/add.tflite", "pass", error=0.0),
                        record("arch/net.tflite", "mismatch", error=2.0),
                        record("top.tflite", "pass", error=0.0)])
    cases = {c.get("name"): c.get("classname") for c in ET.fromstring(to_junit(report))
             .iter("testcase")}
    assert cases == {"arch/net.tflite": "tfl2tosa.batch.arch",
                     "top.tflite": "tfl2tosa.batch",
                     "unit/int8/add.tflite": "tfl2tosa.batch.unit.int8"}


def test_markdown_lists_failures_before_passes():
    passes = [record(f"p{i:03}.tflite", "pass", error=0.0) for i in range(50)]
    text = to_markdown(report_of([*passes, record("z_broken.tflite", "crash")]))
    lines = text.splitlines()
    first_broken = next(i for i, line in enumerate(lines) if "z_broken.tflite" in line)
    first_pass = next(i for i, line in enumerate(lines) if "p000.tflite" in line)
    assert first_broken < first_pass
    rows = [line for line in lines if line.startswith("| ") and ".tflite" in line]
    assert "z_broken.tflite" in rows[0] and all("pass" in r for r in rows[1:])
