"""Self-contained HTML pages: one validation (`validate --html`) and one batch
(`report.html` beside a batch's other reports).

Everything a page shows is inline (CSS, SVG charts drawn by matplotlib, the
model graph as SVG), so the file can be mailed or attached to a CI run and
opened anywhere. matplotlib is an optional extra, imported only here.
"""

from __future__ import annotations

from tfl2tosa.errors import UsageError


def require_matplotlib() -> None:
    """A usage error, before any work, when the [html] extra is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("HTML reports need matplotlib: pip install 'tfl2tosa[html]'") from None


def validation_page(report: object) -> str:
    from tfl2tosa.html.validation_view import render

    return render(report)


def batch_page(report: dict) -> str:
    from tfl2tosa.html.batch_view import render

    return render(report)
