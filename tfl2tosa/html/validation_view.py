"""`validate --html`: the model graph colored by error, error histograms per
output, and the conversion path of every op."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tfl2tosa.html.charts import error_histogram
from tfl2tosa.html.graph import EXACT, UNKNOWN, error_color, graph_svg
from tfl2tosa.html.page import escape, page, table
from tfl2tosa.pipeline import CONSTANT_OPS


def render(report: Any) -> str:
    details = report.details
    verdict = "PASS" if report.passed else "FAIL"
    body = [f"<h1>{escape(Path(report.model).name)}: "
            f'<span class="{verdict.lower()}">{verdict}</span></h1>',
            f"<p>TFLite on {escape(report.backend)} ({escape(report.resolver)} kernels) "
            f"against the TOSA reference model of the conversion for its "
            f"{escape(report.kernels)} kernels, {report.runs} run(s).</p>"]
    if report.first_divergence:
        body.append(f"<p>First diverging tensor: <code>{escape(report.first_divergence)}</code>"
                    " (marked ★ in the graph).</p>")
    body += _outputs_section(report)
    if report.notes:
        body += ["<h2>Notes</h2>", "<ul>", *(f"<li>{escape(n)}</li>" for n in report.notes),
                 "</ul>"]
    body += _graph_section(report, details.tensor_errors)
    body += _conversion_section(details.conversion)
    return page(f"tfl2tosa validate {Path(report.model).name}", body)


def _outputs_section(report: Any) -> list[str]:
    rows, classes = [], []
    for o in report.outputs:
        distance = o.max_ulp if o.max_ulp is not None else o.max_lsb
        rows.append([escape(o.name), escape(o.dtype), escape(o.shape),
                     "yes" if o.exact else "no", f"{o.max_abs_error:.3g}", escape(distance),
                     escape(o.tolerance), _verdict(o)])
        classes.append("" if o.within_tolerance else "unsupported")
    parts = ["<h2>Outputs</h2>",
             table(["output", "dtype", "shape", "exact", "max abs err", "ulp/lsb", "tolerance",
                    "verdict"], rows, classes),
             "<h2>Error histograms</h2>", '<div class="histograms">']
    for o in report.outputs:
        errors = report.details.output_errors.get(o.name)
        if errors is None:
            continue
        unit = "LSB" if o.max_lsb is not None else "absolute"
        parts.append(f'<div class="chart histogram">'
                     f"{error_histogram(o.name, errors, unit)}</div>")
    parts.append("</div>")
    return parts


def _verdict(output: Any) -> str:
    if not output.within_tolerance:
        return "FAIL"
    return "ok" if output.anchored_max_abs_error is None else "ok (anchored, see the notes)"


def _graph_section(report: Any, tensor_errors: dict[str, float]) -> list[str]:
    from tfl2tosa.tflite_import import load

    graph = load(report.model).main
    largest = max(tensor_errors.values(), default=0.0)
    legend = [f'<span style="background:{EXACT}">exact</span>']
    if largest > 0:
        legend += [f'<span style="background:{error_color(largest / 16, largest)}">'
                   "small error</span>",
                   f'<span style="background:{error_color(largest, largest)}">'
                   f"largest error ({largest:.3g})</span>"]
    legend.append(f'<span style="background:{UNKNOWN}">not compared</span>')
    legend = ['<p class="legend">', *legend, " Hover a box for its op, tensor and error.</p>"]
    return ["<h2>Model graph, colored by error against TFLite</h2>", "".join(legend),
            f'<div class="graph">{graph_svg(graph, tensor_errors, report.first_divergence)}'
            "</div>"]


def _conversion_section(conversion: Any) -> list[str]:
    if conversion is None:
        return []
    outcomes = [o for o in conversion.outcomes if o["op_name"] not in CONSTANT_OPS]
    counts = {p: sum(1 for o in outcomes if o["path"] == p)
              for p in ("integer", "fallback", "float", "unsupported")}
    rows = [[escape(o["op_name"]), escape(o["loc"]), escape(o["path"]),
             escape(o.get("pattern", "")), escape(o.get("types", ""))] for o in outcomes]
    return ["<h2>Conversion, op by op</h2>",
            "<p>" + ", ".join(f"{n} {p}" for p, n in counts.items()) + ".</p>",
            table(["op", "location", "path", "pattern", "types"], rows,
                  [o["path"] for o in outcomes])]
