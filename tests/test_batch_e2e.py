"""`tfl2tosa batch` end to end: the real command, the real convert + validate job,
the model zoo in `models/`, one corrupt model and one model whose worker crashes.

One test runs the whole zoo (400+ models, about 15 s with --jobs 2); another
takes a representative subset (the first model of every (kind, flavour) pair
in models/manifest.json plus the demo) twice, to check --resume and the
--baseline gate.

The corrupt model is tests/fixtures/batch/corrupt.tflite, the first 200 bytes
of a real TFLite model. The crash is provoked with the worker's test-only hook
TFL2TOSA_TEST_CRASH_ON (see tfl2tosa/batch/worker.py) on a copy of a real model.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO / "models"
CORRUPT = REPO / "tests" / "fixtures" / "batch" / "corrupt.tflite"
SCHEMA = json.loads((REPO / "tfl2tosa" / "batch" / "report.schema.json").read_text())
DEMO = "models/demo/mobilenet_tiny_int8.tflite"
CLI = "import tfl2tosa.cli.batch; from tfl2tosa.cli import main; main()"
FAILURES, ERRORS = {"mismatch", "unsupported"}, {"error", "crash", "timeout", "oom"}


def manifest_models() -> list[dict]:
    manifest = MODELS / "manifest.json"
    assert manifest.is_file(), "models/manifest.json is missing: run `make models`"
    return json.loads(manifest.read_text())["models"]


def representative_subset() -> list[str]:
    first: dict[tuple[str, str], str] = {}
    for entry in sorted(manifest_models(), key=lambda e: e["path"]):
        first.setdefault((entry["kind"], entry["flavour"]), entry["path"])
    return sorted({f"models/{p}" for p in first.values()} | {DEMO})


def batch(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    # The repository first on the path: the test runs this working tree whatever
    # was installed (an editable install made before a package gained its
    # __init__.py maps it as a namespace package outside the repository).
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "TFL2TOSA_TEST_CRASH_ON": "crash_me.tflite"}
    return subprocess.run([sys.executable, "-c", CLI, "batch", *args], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=1200)


def prepare(tmp_path: Path) -> None:
    """tmp/models -> the zoo (a symlink: ids read models/...), tmp/extra/ the two bad ones."""
    (tmp_path / "models").symlink_to(MODELS, target_is_directory=True)
    extra = tmp_path / "extra"
    extra.mkdir()
    shutil.copy(CORRUPT, extra / "corrupt.tflite")
    shutil.copy(MODELS / "unit" / "int8" / "add.tflite", extra / "crash_me.tflite")


def check_reports(out: Path, expected_ids: list[str], result: subprocess.CompletedProcess
                  ) -> dict[str, dict]:
    assert result.returncode == 1, result.stderr[-3000:]  # the corrupt and crashed models
    report = json.loads((out / "report.json").read_text())
    jsonschema.validate(report, SCHEMA)
    records = {r["id"]: r for r in report["models"]}
    assert sorted(records) == sorted(expected_ids + ["extra/corrupt.tflite",
                                                     "extra/crash_me.tflite"])

    corrupt = records["extra/corrupt.tflite"]
    assert corrupt["status"] == "error" and corrupt["error"].startswith("ModelError"), corrupt
    assert corrupt["output"] is None
    crashed = records["extra/crash_me.tflite"]
    assert (crashed["status"], crashed["error"]) == ("crash", "the worker died with SIGSEGV")

    from tfl2tosa.tosa.reader import read_tosa

    for model_id, record in records.items():
        stem = model_id[:-len(".tflite")]
        assert json.loads((out / f"{stem}.report.json").read_text())["status"] == \
            record["status"]
        assert record["sha256"] and record["size_bytes"] > 0
        if record["status"] in ("pass", "mismatch"):
            assert record["output"] == f"{stem}.tosa"
            read_tosa(out / record["output"])  # a complete, readable TOSA flatbuffer
        elif record["output"] is None:
            assert not (out / f"{stem}.tosa").exists()
    assert not [p for p in out.rglob(".*") if p.is_file()]  # no temp files left

    root = ET.parse(out / "report.xml").getroot()
    statuses = [r["status"] for r in records.values()]
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == (
        str(len(records)), str(sum(s in FAILURES for s in statuses)),
        str(sum(s in ERRORS for s in statuses)))
    assert (out / "report.md").read_text().startswith("## tfl2tosa batch: FAIL")
    for model_id in records:
        assert model_id in result.stdout  # the summary table
    return records


def test_batch_on_every_flavour_of_the_zoo_with_a_corrupt_and_a_crashing_model(tmp_path):
    prepare(tmp_path)
    subset = representative_subset()
    assert len(subset) >= 9  # 5 arch flavours, 3 unit flavours, the demo
    result = batch(tmp_path, *subset, "extra", "--out", "out", "--jobs", "2")
    records = check_reports(tmp_path / "out", subset, result)

    # Run again, resuming, gated on the first run: nothing re-runs, nothing regressed.
    again = batch(tmp_path, *subset, "extra", "--out", "out", "--jobs", "2", "--resume",
                  "--baseline", "out/report.json", "--json", "out/gate.json")
    assert again.returncode == 0, again.stdout[-3000:]
    gate = json.loads((tmp_path / "out" / "gate.json").read_text())
    assert all(r["resumed"] for r in gate["models"])
    assert gate["baseline"]["regressed"] == []

    # The project's promise: the demo model converts and matches TFLite.
    demo = records[DEMO]
    assert demo["status"] == "pass", f"{demo['status']}: {demo['error']}"


def test_batch_on_the_whole_zoo(tmp_path):
    prepare(tmp_path)
    expected = sorted(f"models/{e['path']}" for e in manifest_models())
    # The zoo's parts, not models/ itself: models/toolchains/ has its own manifest and
    # test (tests/test_toolchain_zoo.py).
    parts = sorted({f"models/{e['path'].split('/')[0]}" for e in manifest_models()})
    result = batch(tmp_path, *parts, "extra", "--out", "out", "--jobs", "2")
    records = check_reports(tmp_path / "out", expected, result)
    demo = records[DEMO]
    assert demo["status"] == "pass", f"{demo['status']}: {demo['error']}"
