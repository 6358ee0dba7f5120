"""A TFLite graph as SVG: one box per operator (constants left out), drawn in
layers by depth from the inputs, each box colored by the error of the tensor it
computes against TFLite's."""

from __future__ import annotations

import math

from tfl2tosa.html.page import escape
from tfl2tosa.ir.core import Graph
from tfl2tosa.pipeline import CONSTANT_OPS

BOX_WIDTH, BOX_HEIGHT, GAP_X, GAP_Y = 150, 34, 20, 36
EXACT, UNKNOWN = "#2da44e", "#d0d7de"


def error_color(error: float | None, largest: float) -> str:
    """Green when exact, yellow to red as the error grows (log scale up to the
    largest error in the graph), grey when TFLite has no tensor to compare."""
    if error is None:
        return UNKNOWN
    if error == 0:
        return EXACT
    if math.isinf(error) or not largest > 0:
        share = 1.0
    else:
        share = math.log1p(error) / math.log1p(largest)
    share = min(max(share, 0.0), 1.0)
    green = int(200 * (1 - share))
    return f"#e6{green:02x}20"


def graph_svg(graph: Graph, tensor_errors: dict[str, float],
              first_divergence: str | None) -> str:
    ops = [op for op in graph.ops if op.name not in CONSTANT_OPS]
    producer = {id(value): i for i, op in enumerate(ops) for value in op.results}
    depth: list[int] = []
    inputs_of: list[list[int]] = []
    for op in ops:
        sources = sorted({producer[id(v)] for v in op.operands if id(v) in producer})
        inputs_of.append(sources)
        depth.append(1 + max((depth[s] for s in sources), default=-1))
    layers: dict[int, list[int]] = {}
    for i, d in enumerate(depth):
        layers.setdefault(d, []).append(i)
    widest = max((len(v) for v in layers.values()), default=1)
    width = widest * (BOX_WIDTH + GAP_X) + GAP_X
    height = len(layers) * (BOX_HEIGHT + GAP_Y) + GAP_Y
    position: dict[int, tuple[float, float]] = {}
    for d, members in layers.items():
        offset = (width - len(members) * (BOX_WIDTH + GAP_X) + GAP_X) / 2
        for k, i in enumerate(members):
            position[i] = (offset + k * (BOX_WIDTH + GAP_X), GAP_Y / 2 + d * (BOX_HEIGHT + GAP_Y))
    largest = max(tensor_errors.values(), default=0.0)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="model-graph" width="{width:.0f}" '
             f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}">']
    for i, sources in enumerate(inputs_of):
        x, y = position[i]
        for s in sources:
            sx, sy = position[s]
            x1, y1, x2, y2 = sx + BOX_WIDTH / 2, sy + BOX_HEIGHT, x + BOX_WIDTH / 2, y
            # An edge that skips layers bows out to the right, past the boxes between.
            bow = BOX_WIDTH * 0.75 if depth[i] - depth[s] > 1 else 0
            parts.append(f'<path class="edge" d="M{x1:.1f},{y1:.1f} C{x1 + bow:.1f},'
                         f'{y1 + GAP_Y:.1f} {x2 + bow:.1f},{y2 - GAP_Y:.1f} {x2:.1f},{y2:.1f}" '
                         'fill="none" stroke="#8c959f" stroke-width="1"/>')
    for i, op in enumerate(ops):
        x, y = position[i]
        tensor = op.results[0].name if op.results else ""
        error = tensor_errors.get(tensor)
        first = tensor == first_divergence and first_divergence is not None
        stroke = ' stroke="#000" stroke-width="4"' if first else ' stroke="#57606a"'
        tip = f"{op.name} at {op.loc}\ntensor {tensor}\n" + (
            "no TFLite tensor to compare" if error is None else f"max |error| {error:.4g}")
        if first:
            tip += "\nfirst diverging tensor"
        label = op.name.removeprefix("tfl.")
        parts.append(
            f'<g class="node{" first-divergence" if first else ""}" data-tensor="{escape(tensor)}">'
            f"<title>{escape(tip)}</title>"
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{BOX_WIDTH}" height="{BOX_HEIGHT}" rx="5" '
            f'fill="{error_color(error, largest)}"{stroke}/>'
            f'<text x="{x + BOX_WIDTH / 2:.1f}" y="{y + BOX_HEIGHT / 2 + 4:.1f}" '
            f'text-anchor="middle" font-size="12">{escape(label[:22])}'
            f'{" ★" if first else ""}</text></g>')
    parts.append("</svg>")
    return "\n".join(parts)
