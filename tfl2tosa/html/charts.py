"""Charts as inline SVG, drawn by matplotlib (the [html] extra)."""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np


def _figure(width: float = 4.8, height: float = 3.0):  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), layout="constrained")
    return figure, figure.subplots()


def _svg(figure) -> str:  # type: ignore[no-untyped-def]
    import matplotlib

    buffer = io.StringIO()
    # Text stays text (smaller, searchable); a fixed salt makes the same data
    # give the same file.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "tfl2tosa"}):
        figure.savefig(buffer, format="svg",
                       metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buffer.getvalue()
    return text[text.index("<svg"):]  # inline: drop the XML prolog and doctype


def _ticks():  # type: ignore[no-untyped-def]
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(nbins=5)


def error_histogram(title: str, errors: np.ndarray, unit: str) -> str:
    """How many elements differ from TFLite by how much."""
    figure, axes = _figure()
    errors = np.asarray(errors, dtype=np.float64)
    errors = errors[np.isfinite(errors)]
    if errors.size and errors.max() > 0:
        bins = min(50, max(10, int(np.sqrt(errors.size))))
        axes.hist(errors, bins=bins, color="#d1242f", log=True)
    else:
        axes.bar([0.0], [errors.size], width=0.5, color="#1a7f37")
        axes.set_xticks([0.0])
    axes.xaxis.set_major_locator(_ticks())
    axes.tick_params(axis="x", labelrotation=30)
    axes.set_title(title, fontsize=10)
    axes.set_xlabel(f"|ours - TFLite| ({unit})")
    axes.set_ylabel("elements")
    return _svg(figure)


def bar_chart(title: str, labels: Sequence[str], counts: Sequence[int],
              colors: Sequence[str]) -> str:
    figure, axes = _figure()
    axes.bar(list(labels), list(counts), color=list(colors))
    for x, count in enumerate(counts):
        axes.annotate(str(count), (x, count), ha="center", va="bottom", fontsize=9)
    axes.set_title(title, fontsize=10)
    axes.set_ylabel("models")
    axes.tick_params(axis="x", labelrotation=30)
    return _svg(figure)


def value_histogram(title: str, values: Sequence[float], xlabel: str) -> str:
    figure, axes = _figure()
    data = np.asarray([v for v in values if v is not None and np.isfinite(v)], np.float64)
    if data.size:
        axes.hist(data, bins=min(30, max(5, data.size)), color="#0969da")
    axes.set_title(title, fontsize=10)
    axes.set_xlabel(xlabel)
    axes.set_ylabel("models")
    return _svg(figure)
