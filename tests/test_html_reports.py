"""The HTML pages, rendered by a real browser (Debian's headless chromium): the
charts and the model graph must be drawn, not just present in the file.

Two views of each rendered page: the DOM chromium builds (--dump-dom), for the
structure, and a screenshot, for what was painted. In CI (CI=true) a missing
chromium fails the test; elsewhere it skips.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

MODELS = Path(__file__).resolve().parent.parent / "models"
# A model validate fails on for a lasting reason (TFLite's builtin kernels ignore
# its blockwise int4 scales), so its report has a first diverging tensor to mark.
DIVERGING = MODELS / "toolchains" / "litert_torch" / "t5_encoder_float32.tflite"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]


def chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        message = "chromium is not installed (apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def render(page: Path, work: Path, height: int) -> tuple[str, np.ndarray]:
    """(the DOM chromium built, the screenshot as an RGB array)."""
    browser = chromium()
    common = [browser, *FLAGS, f"--user-data-dir={work / 'profile'}"]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True,
                         text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    shot = work / "shot.png"
    painted = subprocess.run([*common, f"--window-size=1280,{height}", f"--screenshot={shot}",
                              page.as_uri()], capture_output=True, text=True, timeout=120)
    assert painted.returncode == 0 and shot.exists(), painted.stderr[-2000:]
    from PIL import Image  # matplotlib's own dependency

    return dom.stdout, np.asarray(Image.open(shot).convert("RGB"))


def pixels_of(image: np.ndarray, color: str) -> int:
    rgb = np.array([int(color[i:i + 2], 16) for i in (1, 3, 5)])
    return int(np.all(np.abs(image.astype(int) - rgb) <= 2, axis=-1).sum())


def tfl2tosa(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfl2tosa", *map(str, args)],
                          capture_output=True, text=True, timeout=600)


def test_validate_html_draws_graph_histograms_and_marks_the_first_divergence(tmp_path: Path):
    import tflite

    chromium()
    page = tmp_path / "page.html"
    result = tfl2tosa("validate", DIVERGING, "--html", page, "--json")
    assert result.returncode in (0, 1), result.stderr  # 1: an output beyond tolerance
    report = json.loads(result.stdout)
    assert report["first_divergence"]
    text = page.read_text()
    # Self-contained: nothing to fetch, nothing to run.
    assert "<script" not in text
    assert not any(f'{attribute}="http' in text for attribute in ("src", "href"))
    assert "url(http" not in text and "@import" not in text

    dom, image = render(page, tmp_path, 2600)
    # The graph: one box per TFLite operator (counted by the tflite schema package).
    model = tflite.Model.GetRootAsModel(DIVERGING.read_bytes(), 0)
    assert dom.count('<g class="node') == model.Subgraphs(0).OperatorsLength()
    first = dom.split('class="node first-divergence"', 1)[1].split(">", 1)[0]
    assert f'data-tensor="{report["first_divergence"]}"' in first
    assert dom.count('class="node first-divergence"') == 1
    # One error histogram per output, each a matplotlib SVG with bars.
    assert dom.count('class="chart histogram"') == len(report["outputs"]) == 1
    histogram = dom.split('class="chart histogram"', 1)[1].split("</svg>", 1)[0]
    assert histogram.count('id="patch_') > 3
    # Painted: boxes in the error colors (red 0xe6, blue 0x20, green falling with
    # the error; far more than the legend's two swatches), several shades of them,
    # the histogram's red bars, the black frame of the first diverging box.
    error_colored = (np.abs(image[..., 0].astype(int) - 0xE6) <= 2) & (
        np.abs(image[..., 2].astype(int) - 0x20) <= 2)
    assert error_colored.sum() > 20000
    assert len(np.unique(image[error_colored][:, 1])) >= 3
    assert pixels_of(image, "#d1242f") > 1000      # histogram bars
    assert pixels_of(image, "#000000") > 300       # the marked box's frame
    # The conversion table: one row per operator with its path (the blockwise dense
    # layers take the fallback).
    rows = dom.count('<tr class="float">') + dom.count('<tr class="fallback">')
    assert rows == model.Subgraphs(0).OperatorsLength()


def test_batch_report_html_draws_status_errors_and_regressions(tmp_path: Path):
    chromium()
    models = tmp_path / "models"
    models.mkdir()
    for name in ("add", "floor_mod", "bitcast", "softmax"):
        shutil.copy(MODELS / "unit" / "int8" / f"{name}.tflite", models)
    first = tfl2tosa("batch", models, "-o", tmp_path / "first", "--no-progress", "-j", "2",
                     "--root", tmp_path)
    assert first.returncode == 1, first.stderr
    # A baseline in which floor_mod still passed: it has regressed since.
    baseline = json.loads((tmp_path / "first" / "report.json").read_text())
    for record in baseline["models"]:
        if record["id"].endswith("floor_mod.tflite"):
            record["status"], record["error"] = "pass", None
            record["validation"].update(verdict="pass", max_abs_error=0.0, max_lsb=0)
    (tmp_path / "baseline.json").write_text(json.dumps(baseline))
    second = tfl2tosa("batch", models, "-o", tmp_path / "second", "--no-progress", "-j", "2",
                      "--root", tmp_path, "--baseline", tmp_path / "baseline.json")
    assert second.returncode == 1, second.stderr
    page = tmp_path / "second" / "report.html"
    assert "html report: " in second.stdout and page.exists()

    dom, image = render(page, tmp_path, 2200)
    status_chart = dom.split('class="chart status-chart"', 1)[1].split("</svg>", 1)[0]
    assert status_chart.count('id="patch_') >= 8          # frame + one bar per status
    assert dom.count('class="chart error-chart"') == 1
    assert "models/floor_mod.tflite" in dom.split("Against the baseline", 1)[1].split(
        "Failures", 1)[0]
    assert pixels_of(image, "#2da44e") > 500               # the pass bar
    assert pixels_of(image, "#bf8700") > 100               # the unsupported bar
    assert pixels_of(image, "#0969da") > 500               # the error histogram
