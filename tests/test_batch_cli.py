"""`tfl2tosa batch` and `tfl2tosa report merge` on the command line: options,
outputs, exit codes (0 pass, 1 failed or regressed, 2 usage error).

The batch's per-model job is replaced by `scripted_job` (tests/fixtures/batch),
which the runner looks up at call time and sends to the workers by reference.
"""

from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "batch"
sys.path.insert(0, str(FIXTURES))  # workers inherit sys.path and import scripted_job

import scripted_job  # noqa: E402

import tfl2tosa.cli.batch  # noqa: E402,F401  (registers the commands)
from tfl2tosa.batch import runner  # noqa: E402
from tfl2tosa.cli import app  # noqa: E402
from tfl2tosa.cli.batch import parse_size  # noqa: E402


@pytest.fixture(autouse=True)
def scripted(monkeypatch):
    monkeypatch.setattr(runner, "default_job", scripted_job.scripted_job)


def invoke(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def make_models(directory: Path, scripts: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, script in scripts.items():
        (directory / name).write_text(script)
    return directory


def test_a_passing_batch_writes_outputs_and_reports_and_exits_0(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_models(tmp_path / "zoo", {"a.tflite": "pass", "b.tflite": "pass 0.125"})
    result = invoke("batch", "zoo", "--out", "out", "--jobs", "2", "--no-progress")
    assert result.exit_code == 0, result.output
    out = tmp_path / "out"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()) == [
        "report.html", "report.json", "report.md", "report.xml", "zoo/a.report.json", "zoo/a.tosa",
        "zoo/b.report.json", "zoo/b.tosa"]
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["passed"] is True
    assert report["options"]["jobs"] == 2
    # The summary table names every model and its verdict.
    assert "zoo/a.tflite" in result.output and "zoo/b.tflite" in result.output
    assert "PASS 2 model(s): 2 pass" in result.output


def test_a_failing_model_makes_exit_code_1(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_models(tmp_path / "zoo", {"a.tflite": "pass", "b.tflite": "segv"})
    result = invoke("batch", "zoo", "--out", "out", "--no-progress")
    assert result.exit_code == 1
    assert "FAIL 2 model(s): 1 pass, 1 crash" in result.output


def test_no_validate_reaches_the_job(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_models(tmp_path / "zoo", {"a.tflite": "pass"})
    assert invoke("batch", "zoo", "--out", "out", "--no-validate").exit_code == 0
    record = json.loads((tmp_path / "out" / "zoo" / "a.report.json").read_text())
    assert record["validation"] == {"verdict": "skipped"}
    assert record["options"]["validate"] is False


def test_timeout_and_memory_limit_options_reach_the_workers(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_models(tmp_path / "zoo", {"hang.tflite": "hang", "oom.tflite": "oom"})
    result = invoke("batch", "zoo", "--out", "out", "--timeout", "2", "--memory-limit", "1G",
                    "--no-progress")
    assert result.exit_code == 1
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [r["status"] for r in report["models"]] == ["timeout", "oom"]
    assert report["models"][0]["limits"] == {"timeout_s": 2.0, "memory_limit_bytes": 1 << 30}


def test_custom_report_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_models(tmp_path / "zoo", {"a.tflite": "pass"})
    result = invoke("batch", "zoo", "--out", "out", "--json", "r/x.json", "--junit",
                    "r/x.xml", "--markdown", "r/x.md")
    assert result.exit_code == 0
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["x.json", "x.md", "x.xml"]
    assert not (tmp_path / "out" / "report.json").exists()


@pytest.mark.parametrize("args, message", [
    (["missing_dir"], "no such file or directory"),
    (["empty"], "no .tflite models found"),
    (["zoo", "--shard", "3/2"], "need 1 <= K <= N"),
    (["zoo", "--shard", "x"], "expected K/N"),
    (["zoo", "--memory-limit", "lots"], "expected a size"),
    (["zoo", "--jobs", "0"], "--jobs"),
    (["zoo", "--input-range", "5:1"], "LOW must be below HIGH"),
    (["zoo", "--input-range", "x=a:b"], "is not [NAME=]LOW:HIGH"),
])
def test_usage_errors_exit_2(tmp_path, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    make_models(tmp_path / "zoo", {"a.tflite": "pass"})
    (tmp_path / "empty").mkdir()
    result = invoke("batch", *args, "--out", "out")
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not (tmp_path / "out" / "report.json").exists()


def test_no_inputs_at_all_is_a_usage_error(tmp_path):
    assert invoke("batch", "--out", str(tmp_path / "out")).exit_code == 2


@pytest.mark.parametrize("text, size", [("8G", 8 << 30), ("512M", 512 << 20),
                                        ("1.5GiB", 3 << 29), ("4096", 4096), ("64k", 65536),
                                        ("none", None), ("0", None)])
def test_memory_limit_sizes(text, size):
    assert parse_size(text) == size


def test_sharded_runs_merge_into_the_whole(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_models(tmp_path / "zoo", {"a.tflite": "pass", "b.tflite": "unsupported",
                                   "c.tflite": "pass", "d.tflite": "mismatch 1"})
    # Sorted ids a, b, c, d: shard 1/2 takes a and c, shard 2/2 takes b and d.
    codes = [invoke("batch", "zoo", "--out", f"s{k}", "--shard", f"{k}/2",
                    "--no-progress").exit_code for k in (1, 2)]
    assert codes == [0, 1]
    result = invoke("report", "merge", "s1/report.json", "s2/report.json", "-o", "all.json",
                    "--junit", "all.xml", "--markdown", "all.md", "--html", "all.html")
    assert result.exit_code == 1
    page = (tmp_path / "all.html").read_text()
    assert page.count("<svg") >= 2 and "zoo/b.tflite" in page and "zoo/d.tflite" in page
    merged = json.loads((tmp_path / "all.json").read_text())
    assert [r["id"] for r in merged["models"]] == [f"zoo/{m}.tflite" for m in "abcd"]
    root = ET.parse(tmp_path / "all.xml").getroot()
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "2", "0")
    assert (tmp_path / "all.md").read_text().startswith("## tfl2tosa batch: FAIL")

    # The same shards against a baseline of themselves: nothing regressed, exit 0.
    result = invoke("report", "merge", "s1/report.json", "s2/report.json", "-o", "gate.json",
                    "--baseline", "all.json")
    assert result.exit_code == 0, result.output


def test_merging_reports_of_different_schema_versions_exits_2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_models(tmp_path / "zoo", {"a.tflite": "pass", "b.tflite": "pass"})
    for k in (1, 2):
        invoke("batch", "zoo", "--out", f"s{k}", "--shard", f"{k}/2", "--no-progress")
    report = json.loads((tmp_path / "s2" / "report.json").read_text())
    report["schema_version"] = 2
    (tmp_path / "s2" / "report.json").write_text(json.dumps(report))
    result = invoke("report", "merge", "s1/report.json", "s2/report.json", "-o", "all.json")
    assert result.exit_code == 2
    assert "cannot merge reports of different schema versions" in result.output
    assert not (tmp_path / "all.json").exists()


def test_merge_needs_an_output(tmp_path):
    assert invoke("report", "merge", str(tmp_path / "x.json")).exit_code == 2


def test_baseline_and_resume_on_the_command_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make_models(tmp_path / "zoo", {"a.tflite": "pass", "b.tflite": "unsupported"})
    assert invoke("batch", "zoo", "--out", "first", "--no-progress").exit_code == 1
    # Known failure only: green against the baseline, and everything is resumed.
    result = invoke("batch", "zoo", "--out", "first", "--resume", "--baseline",
                    "first/report.json")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "first" / "report.json").read_text())
    assert [r["resumed"] for r in report["models"]] == [True, True]
    # a now crashes: a regression.
    (tmp_path / "zoo" / "a.tflite").write_text("abort")
    result = invoke("batch", "zoo", "--out", "second", "--baseline", "first/report.json",
                    "--no-progress")
    assert result.exit_code == 1
    assert "regressed: zoo/a.tflite" in result.output


def test_the_example_ci_workflow_uses_only_options_the_commands_have():
    workflow = (Path(__file__).resolve().parent.parent / "examples"
                / "github-actions-batch.yml").read_text()
    used = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", workflow))
    group = typer.main.get_command(app)
    commands = [group.commands["batch"], group.commands["report"].commands["merge"]]
    known = {opt for command in commands for param in command.params
             for opt in (*param.opts, *param.secondary_opts)}
    assert {"--shard", "--junit", "--markdown", "--html", "--baseline"} <= used
    assert used - known == set()
