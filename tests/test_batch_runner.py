"""The batch runner's orchestration: isolation, timeouts, memory limits, atomic
outputs, resume, baselines, shards and Kaggle inputs.

The per-model job is `scripted_job` (tests/fixtures/batch): each "model" is a
small text file saying what the job should do (pass, crash, hang, ...), so
these tests exercise the worker processes for real without the converter.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "batch"
sys.path.insert(0, str(FIXTURES))  # workers inherit sys.path and import scripted_job

from scripted_job import scripted_job  # noqa: E402

from tfl2tosa.batch import BatchOptions, UsageError, run_batch  # noqa: E402
from tfl2tosa.batch.kaggle import KaggleError  # noqa: E402
from tfl2tosa.batch.worker import TEST_CRASH_VARIABLE  # noqa: E402


def make_models(directory: Path, scripts: dict[str, str]) -> Path:
    for name, script in scripts.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(script)
    return directory


def options(tmp_path: Path, inputs: list[str], **changes) -> BatchOptions:
    settings = dict(inputs=inputs, out_dir=str(tmp_path / "out"), jobs=2, timeout=30.0,
                    memory_limit=2 << 30, root=str(tmp_path))
    settings.update(changes)
    return BatchOptions(**settings)


def by_id(report: dict) -> dict[str, dict]:
    return {r["id"]: r for r in report["models"]}


class Recorder:
    """A listener that keeps the order of events."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def planned(self, total: int, resumed: int) -> None:
        self.events.append(("planned", f"{total}/{resumed}"))

    def started(self, model) -> None:
        self.events.append(("started", model.id))

    def finished(self, model, record) -> None:
        self.events.append(("finished", model.id))


def test_each_failure_kind_is_reported_and_the_batch_goes_on(tmp_path):
    models = make_models(tmp_path / "zoo", {
        "a_pass.tflite": "pass",
        "b_mismatch.tflite": "mismatch 0.25",
        "c_unsupported.tflite": "unsupported",
        "d_raise.tflite": "raise",
        "e_segv.tflite": "segv",
        "f_abort.tflite": "abort",
        "g_exit.tflite": "exit",
        "h_hang.tflite": "hang",
        "i_oom.tflite": "oom",
        "j_halfwrite.tflite": "halfwrite",
        "k_pass.tflite": "pass",
    })
    result = run_batch(options(tmp_path, [str(models)], timeout=4.0, memory_limit=1 << 30),
                       job=scripted_job)
    records = by_id(result.report)
    status = {name.split("/")[-1]: r["status"] for name, r in records.items()}
    assert status == {
        "a_pass.tflite": "pass", "b_mismatch.tflite": "mismatch",
        "c_unsupported.tflite": "unsupported", "d_raise.tflite": "error",
        "e_segv.tflite": "crash", "f_abort.tflite": "crash", "g_exit.tflite": "crash",
        "h_hang.tflite": "timeout", "i_oom.tflite": "oom", "j_halfwrite.tflite": "crash",
        "k_pass.tflite": "pass"}
    assert result.exit_code == 1
    segv = records["zoo/e_segv.tflite"]
    assert segv["error"] == "the worker died with SIGSEGV"
    assert "Segmentation fault" in segv["log_tail"]  # faulthandler's dump, from the log
    assert records["zoo/f_abort.tflite"]["error"] == "the worker died with SIGABRT"
    assert "code 3" in records["zoo/g_exit.tflite"]["error"]
    assert "4 s" in records["zoo/h_hang.tflite"]["error"]
    assert records["zoo/i_oom.tflite"]["error"].startswith("MemoryError")
    assert "ValueError: scripted converter bug" in records["zoo/d_raise.tflite"]["traceback"]
    assert result.report["summary"]["by_status"] == {
        "pass": 2, "mismatch": 1, "unsupported": 1, "error": 1, "crash": 4, "timeout": 1,
        "oom": 1}

    out = tmp_path / "out" / "zoo"
    # .tosa only where the job wrote one; no temp file of an interrupted write left.
    assert sorted(p.name for p in out.glob("*.tosa")) == [
        "a_pass.tosa", "b_mismatch.tosa", "k_pass.tosa"]
    assert [p.name for p in out.iterdir() if p.name.startswith(".")] == []
    assert (out / "a_pass.tosa").read_bytes() == b"pass"
    for name, record in records.items():
        on_disk = json.loads((tmp_path / "out" / (name[:-len(".tflite")] + ".report.json"))
                             .read_text())
        assert on_disk["status"] == record["status"]
        assert on_disk["sha256"] == record["sha256"]


def test_models_run_in_parallel(tmp_path):
    # Each model waits for its partner to be running: serially, both would fail.
    models = make_models(tmp_path / "zoo", {"a.tflite": "meet b.tflite",
                                            "b.tflite": "meet a.tflite"})
    result = run_batch(options(tmp_path, [str(models)], jobs=2), job=scripted_job)
    assert [r["status"] for r in result.report["models"]] == ["pass", "pass"]


def test_one_job_runs_models_one_at_a_time(tmp_path):
    models = make_models(tmp_path / "zoo", {"a.tflite": "meet b.tflite",
                                            "b.tflite": "pass"})
    result = run_batch(options(tmp_path, [str(models)], jobs=1, timeout=3.0),
                       job=scripted_job)
    assert result.report["models"][0]["status"] == "timeout"  # b never ran beside a


def test_a_model_does_not_see_what_an_earlier_model_left_in_its_worker(tmp_path):
    """Each "leave" model fails if an earlier model's global state (and 200 MB of
    memory) is still there; one worker runs all three, one after the other."""
    models = make_models(tmp_path / "zoo", {f"{n}.tflite": "leave" for n in "abc"})
    result = run_batch(options(tmp_path, [str(models)], jobs=1), job=scripted_job)
    assert [(r["status"], r["error"]) for r in result.report["models"]] == [("pass", None)] * 3


def test_worker_start_up_does_not_count_against_the_timeout(tmp_path, monkeypatch):
    """The job's module takes 3 s to import in each fresh worker; every model's own
    work is instant, so a 1 s timeout must time out none of them."""
    from slow_start_job import slow_start_job

    monkeypatch.setenv("TFL2TOSA_TEST_IMPORT_DELAY", "3")
    models = make_models(tmp_path / "zoo", {f"{n}.tflite": "pass" for n in "abcd"})
    result = run_batch(options(tmp_path, [str(models)], jobs=2, timeout=1.0),
                       job=slow_start_job)
    assert [r["status"] for r in result.report["models"]] == ["pass"] * 4
    # The timeout still holds once the worker is ready.
    models = make_models(tmp_path / "zoo2", {"slow.tflite": "sleep 30"})
    result = run_batch(options(tmp_path, [str(models)], jobs=1, timeout=1.0,
                               out_dir=str(tmp_path / "out2")), job=slow_start_job)
    assert result.report["models"][0]["status"] == "timeout"


def test_a_worker_stuck_in_start_up_is_killed_after_the_start_up_limit(tmp_path, monkeypatch):
    import slow_start_job  # here, before the delay below is set

    from tfl2tosa.batch import pool

    monkeypatch.setenv("TFL2TOSA_TEST_IMPORT_DELAY", "3600")
    monkeypatch.setattr(pool, "STARTUP_LIMIT", 2.0)
    models = make_models(tmp_path / "zoo", {"a.tflite": "pass"})
    result = run_batch(options(tmp_path, [str(models)], jobs=1, timeout=1.0),
                       job=slow_start_job.slow_start_job)
    record = result.report["models"][0]
    assert record["status"] == "timeout"
    assert "did not start within 2 s" in record["error"]


def test_the_crash_hook_variable_crashes_the_named_model_only(tmp_path, monkeypatch):
    monkeypatch.setenv(TEST_CRASH_VARIABLE, "victim.tflite")
    models = make_models(tmp_path / "zoo", {"victim.tflite": "pass", "other.tflite": "pass"})
    result = run_batch(options(tmp_path, [str(models)]), job=scripted_job)
    records = by_id(result.report)
    assert records["zoo/victim.tflite"]["status"] == "crash"
    assert f"SIG{signal.SIGSEGV.name[3:]}" in records["zoo/victim.tflite"]["error"]
    assert records["zoo/other.tflite"]["status"] == "pass"


def test_a_rerun_removes_stale_outputs_of_a_model_that_now_fails(tmp_path):
    models = make_models(tmp_path / "zoo", {"m.tflite": "pass"})
    run_batch(options(tmp_path, [str(models)]), job=scripted_job)
    assert (tmp_path / "out" / "zoo" / "m.tosa").exists()
    (models / "m.tflite").write_text("abort")
    result = run_batch(options(tmp_path, [str(models)]), job=scripted_job)
    assert result.report["models"][0]["status"] == "crash"
    assert not (tmp_path / "out" / "zoo" / "m.tosa").exists()


def test_resume_skips_complete_unchanged_models(tmp_path):
    models = make_models(tmp_path / "zoo", {"a.tflite": "pass", "b.tflite": "pass",
                                            "c.tflite": "segv"})
    run_batch(options(tmp_path, [str(models)]), job=scripted_job)
    (models / "b.tflite").write_text("pass 0.5")            # input changed: runs again
    (tmp_path / "out" / "zoo" / "a.tosa").unlink()         # output gone: runs again
    recorder = Recorder()
    result = run_batch(options(tmp_path, [str(models)], resume=True), job=scripted_job,
                       listener=recorder)
    started = sorted(name for kind, name in recorder.events if kind == "started")
    assert started == ["zoo/a.tflite", "zoo/b.tflite"]
    assert ("planned", "3/1") in recorder.events
    records = by_id(result.report)
    assert records["zoo/c.tflite"]["resumed"] is True
    assert records["zoo/c.tflite"]["status"] == "crash"
    assert records["zoo/b.tflite"]["validation"]["max_abs_error"] == 0.5

    recorder = Recorder()
    run_batch(options(tmp_path, [str(models)], resume=True, validate=False),
              job=scripted_job, listener=recorder)
    assert len([e for e in recorder.events if e[0] == "started"]) == 3  # options changed


def test_baseline_fails_only_on_regressions(tmp_path):
    models = make_models(tmp_path / "zoo", {"a.tflite": "pass", "b.tflite": "mismatch 0.5",
                                            "c.tflite": "pass 0.1", "d.tflite": "unsupported"})
    first = run_batch(options(tmp_path, [str(models)], out_dir=str(tmp_path / "first")),
                      job=scripted_job)
    assert first.exit_code == 1  # no baseline: every failure fails
    baseline = first.written["json"]

    # Known failures unchanged, one model improved, a new failing model: green.
    make_models(models, {"d.tflite": "pass", "e.tflite": "unsupported"})
    second = run_batch(options(tmp_path, [str(models)], baseline=baseline), job=scripted_job)
    assert second.exit_code == 0
    section = second.report["baseline"]
    assert (section["regressed"], section["improved"], section["new"]) == (
        [], ["zoo/d.tflite"], ["zoo/e.tflite"])

    # Now a converting model crashes and another one's error grows: red.
    make_models(models, {"a.tflite": "segv", "c.tflite": "pass 0.2"})
    third = run_batch(options(tmp_path, [str(models)], baseline=baseline), job=scripted_job)
    assert third.exit_code == 1
    assert third.report["baseline"]["regressed"] == ["zoo/a.tflite", "zoo/c.tflite"]
    reasons = by_id(third.report)["zoo/c.tflite"]["baseline"]["reasons"]
    assert reasons == ["max error grew from 0.1 to 0.2"]
    assert third.report["summary"]["reasons"] == ["2 model(s) regressed"]


def test_a_baseline_of_another_schema_version_is_a_usage_error(tmp_path):
    models = make_models(tmp_path / "zoo", {"a.tflite": "pass"})
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"schema_version": 0, "kind": "tfl2tosa-batch-report"}))
    with pytest.raises(UsageError, match="schema version 0"):
        run_batch(options(tmp_path, [str(models)], baseline=str(old)), job=scripted_job)


def test_shards_split_the_batch_and_cover_it(tmp_path):
    models = make_models(tmp_path / "zoo", {f"m{i}.tflite": "pass" for i in range(5)})
    seen: list[str] = []
    for k in (1, 2):
        result = run_batch(options(tmp_path, [str(models)], shard=(k, 2),
                                   out_dir=str(tmp_path / f"shard{k}")), job=scripted_job)
        ids = [r["id"] for r in result.report["models"]]
        assert result.report["shards"] == [{"index": k, "count": 2, "models": len(ids),
                                            "discovered": 5}]
        seen += ids
    assert sorted(seen) == [f"zoo/m{i}.tflite" for i in range(5)]


def test_kaggle_inputs_are_downloaded_and_a_failed_one_does_not_stop_the_batch(tmp_path):
    served = make_models(tmp_path / "cache" / "variation", {"1/model.tflite": "pass",
                                                            "1/extra/other.tflite": "pass"})
    local = make_models(tmp_path / "zoo", {"a.tflite": "pass"})
    asked: list[str] = []

    def fake_download(handle: str) -> str:
        asked.append(handle)
        if handle.startswith("owner/broken"):
            raise KaggleError(f"kaggle:{handle}: download failed: 404")
        return str(served)

    result = run_batch(options(tmp_path, ["kaggle:owner/mobilenet/tfLite/int8",
                                          "kaggle:owner/broken/tfLite/v1/2", str(local)]),
                       job=scripted_job, download=fake_download)
    assert asked == ["owner/mobilenet/tfLite/int8", "owner/broken/tfLite/v1/2"]
    assert [r["id"] for r in result.report["models"]] == [
        "kaggle/owner/mobilenet/tfLite/int8/1/extra/other.tflite",
        "kaggle/owner/mobilenet/tfLite/int8/1/model.tflite", "zoo/a.tflite"]
    assert all(r["status"] == "pass" for r in result.report["models"])
    assert result.report["input_errors"] == [
        {"input": "kaggle:owner/broken/tfLite/v1/2",
         "error": "kaggle:owner/broken/tfLite/v1/2: download failed: 404"}]
    assert result.exit_code == 1
    assert (tmp_path / "out" / "kaggle/owner/mobilenet/tfLite/int8/1/model.tosa").exists()

