"""The batch keeps every record under faults: Ctrl-C, stale temporaries, malformed
reports given to it. Orchestration is tested with the scripted job
(tests/fixtures/batch/scripted_job.py); report checks are judged by `jsonschema`
on the shipped schema, which tfl2tosa itself does not depend on."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "batch"
sys.path.insert(0, str(FIXTURES))  # workers inherit sys.path and import scripted_job

from scripted_job import scripted_job  # noqa: E402

from tfl2tosa.batch import BatchOptions, UsageError, run_batch  # noqa: E402
from tfl2tosa.batch.report import ReportError, load_report, merge_reports  # noqa: E402
from tfl2tosa.batch.schema_check import first_violation, report_schema  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def make_models(directory: Path, scripts: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, script in scripts.items():
        (directory / name).write_text(script)
    return directory


def options(tmp_path: Path, inputs: list[str], **changes) -> BatchOptions:
    settings = dict(inputs=inputs, out_dir=str(tmp_path / "out"), jobs=1, timeout=60.0,
                    memory_limit=2 << 30, root=str(tmp_path))
    settings.update(changes)
    return BatchOptions(**settings)


class InterruptAfterFirst:
    """A listener that presses Ctrl-C (in the parent) once the first model finished."""

    def planned(self, total: int, resumed: int) -> None:
        pass

    def started(self, model) -> None:
        pass

    def finished(self, model, record) -> None:
        raise KeyboardInterrupt


# -- Ctrl-C


def test_an_interrupted_batch_reports_what_finished(tmp_path):
    models = make_models(tmp_path / "zoo", {"a.tflite": "pass", "b.tflite": "pass",
                                            "c.tflite": "pass"})
    result = run_batch(options(tmp_path, [str(models)]), job=scripted_job,
                       listener=InterruptAfterFirst())
    assert result.interrupted and result.exit_code == 1
    written = json.loads(Path(result.written["json"]).read_text())
    jsonschema.validate(written, report_schema())
    assert [r["id"] for r in written["models"]] == ["zoo/a.tflite"]
    assert written["interrupted"] == {"not_run": ["zoo/b.tflite", "zoo/c.tflite"]}
    assert "interrupted: 2 model(s) not run" in written["summary"]["reasons"]
    assert (tmp_path / "out" / "zoo" / "a.report.json").is_file()
    # The next run resumes from the records the interrupted one kept.
    resumed = run_batch(options(tmp_path, [str(models)], resume=True), job=scripted_job)
    assert resumed.exit_code == 0 and "interrupted" not in resumed.report
    assert [r["resumed"] for r in resumed.report["models"]] == [True, False, False]


_BATCH_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from scripted_job import scripted_job
from tfl2tosa.batch import BatchOptions, run_batch
options = BatchOptions(inputs=[sys.argv[2]], out_dir=sys.argv[3], jobs=1, timeout=600.0,
                       memory_limit=2 << 30, root=sys.argv[4])
result = run_batch(options, job=scripted_job)
print(json.dumps({"interrupted": result.interrupted, "written": result.written}))
"""


def test_ctrl_c_in_a_running_batch_writes_the_report_and_kills_the_hung_worker(tmp_path):
    """A real SIGINT to the batch process while a worker hangs on the second model."""
    models = make_models(tmp_path / "zoo", {"a.tflite": "pass", "b.tflite": "hang"})
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    batch = subprocess.Popen([sys.executable, "-c", _BATCH_SCRIPT, str(FIXTURES), str(models),
                              str(out), str(tmp_path)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 60
    while not (out / "zoo" / "a.report.json").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # the worker is on b (which hangs)
    batch.send_signal(signal.SIGINT)
    stdout, stderr = batch.communicate(timeout=60)
    assert batch.returncode == 0, stderr
    result = json.loads(stdout.strip().splitlines()[-1])
    assert result["interrupted"] is True
    report = json.loads((out / "report.json").read_text())
    assert [r["id"] for r in report["models"]] == ["zoo/a.tflite"]
    assert report["interrupted"]["not_run"] == ["zoo/b.tflite"]
    assert (out / "report.xml").is_file() and (out / "report.md").is_file()
    assert not list(out.glob("**/.*"))  # no temporaries left behind


# -- stale temporaries


def test_resume_removes_stale_temporaries(tmp_path):
    models = make_models(tmp_path / "zoo", {"a.tflite": "pass", "b.tflite": "pass"})
    run_batch(options(tmp_path, [str(models)]), job=scripted_job)
    zoo_out = tmp_path / "out" / "zoo"
    stale = [zoo_out / ".a.report.json.k3j2x", zoo_out / ".b.tosa.9fa0q",
             zoo_out / ".b.report.json.abc"]
    for path in stale:
        path.write_text("left by a killed run")
    result = run_batch(options(tmp_path, [str(models)], resume=True), job=scripted_job)
    assert all(r["resumed"] for r in result.report["models"])
    assert [p for p in stale if p.exists()] == []


# -- malformed reports, refused before any worker starts


def _valid_report(tmp_path: Path) -> dict:
    models = make_models(tmp_path / "zoo", {"a.tflite": "pass", "b.tflite": "mismatch 0.5"})
    result = run_batch(options(tmp_path, [str(models)], out_dir=str(tmp_path / "first")),
                       job=scripted_job)
    return result.report


def _breakages(report: dict) -> list[tuple[str, dict]]:
    """(id, a report broken in one field): each breaks the schema."""
    cases = []

    def broken(case_id: str, change) -> None:
        copy_ = copy.deepcopy(report)
        change(copy_)
        cases.append((case_id, copy_))

    broken("models_not_a_list", lambda r: r.__setitem__("models", {"a": 1}))
    broken("record_without_status", lambda r: r["models"][0].pop("status"))
    broken("unknown_status", lambda r: r["models"][0].__setitem__("status", "fine"))
    broken("bad_sha256", lambda r: r["models"][0].__setitem__("sha256", "xyz"))
    broken("negative_size", lambda r: r["models"][0].__setitem__("size_bytes", -1))
    broken("empty_id", lambda r: r["models"][0].__setitem__("id", ""))
    broken("summary_without_passed", lambda r: r["summary"].pop("passed"))
    broken("count_as_string", lambda r: r["summary"]["by_status"].__setitem__("pass", "1"))
    broken("no_shards", lambda r: r.__setitem__("shards", []))
    broken("bad_missing_shard", lambda r: r.__setitem__("missing_shards", ["two of three"]))
    broken("conversion_not_object", lambda r: r["models"][0].__setitem__("conversion", 3))
    broken("verdict_unknown",
           lambda r: r["models"][1]["validation"].__setitem__("verdict", "maybe"))
    broken("bool_as_count",
           lambda r: r["models"][0]["conversion"].__setitem__("ops", True))
    broken("tool_name", lambda r: r["tool"].__setitem__("name", "other"))
    return cases


def test_the_validator_agrees_with_jsonschema(tmp_path):
    report = _valid_report(tmp_path)
    assert first_violation(report) is None
    jsonschema.validate(report, report_schema())
    for case_id, broken in _breakages(report):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(broken, report_schema())
        assert first_violation(broken) is not None, case_id


def test_a_malformed_baseline_is_refused_before_any_worker_starts(tmp_path):
    report = _valid_report(tmp_path)
    models = make_models(tmp_path / "zoo2", {"c.tflite": "pass"})
    for case_id, broken in _breakages(report):
        baseline = tmp_path / f"{case_id}.json"
        baseline.write_text(json.dumps(broken))
        out = tmp_path / f"out-{case_id}"
        with pytest.raises(UsageError, match="not a valid batch report"):
            run_batch(options(tmp_path, [str(models)], out_dir=str(out),
                              baseline=str(baseline)), job=scripted_job)
        assert not out.exists(), case_id  # nothing ran, nothing was written


def test_a_malformed_shard_report_is_refused_by_merge(tmp_path):
    report = _valid_report(tmp_path)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(report))
    assert load_report(good)["summary"] == report["summary"]
    (_, broken), = [c for c in _breakages(report) if c[0] == "record_without_status"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(broken))
    with pytest.raises(ReportError, match=r"bad.json: .*\$\.models\[0\] lacks 'status'"):
        merge_reports([str(good), str(bad)])


def test_the_cli_refuses_a_malformed_baseline_with_exit_code_2(tmp_path):
    models = make_models(tmp_path / "zoo", {"a.tflite": "pass"})
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps({"schema_version": 1, "kind": "tfl2tosa-batch-report"}))
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    result = subprocess.run([sys.executable, "-m", "tfl2tosa", "batch", str(models),
                             "--out", str(tmp_path / "out"), "--baseline", str(baseline),
                             "--no-progress"], capture_output=True, text=True, env=env,
                            timeout=120)
    assert result.returncode == 2, result.stderr
    assert "not a valid batch report" in result.stderr and "lacks 'tool'" in result.stderr
    assert not (tmp_path / "out").exists()
