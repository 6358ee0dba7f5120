"""`tfl2tosa tosa-info FILE.tosa`: a `.tosa` flatbuffer as TOSA MLIR plus op counts."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import typer

from tfl2tosa.cli import app
from tfl2tosa.ir.core import Module, Op, Value
from tfl2tosa.ir.printer import DEFAULT_ELIDE_ELEMENTS
from tfl2tosa.ir.types import TensorType, storage_type


@app.command("tosa-info")
def tosa_info_command(
    path: str = typer.Argument(..., help="The .tosa file, or - for standard input."),
    elide: int = typer.Option(DEFAULT_ELIDE_ELEMENTS, "--elide", metavar="N",
                              help="Print constants with more than N elements as "
                                   "dense_resource<__elided__>; -1 prints every value "
                                   "(text tosa-opt can then run)."),
    as_json: bool = typer.Option(False, "--json",
                                 help="Print graphs, op counts and sizes as JSON instead of "
                                      "the MLIR text and table."),
) -> None:
    """Print a TOSA flatbuffer as TOSA MLIR and a table of its ops by element types."""
    from tfl2tosa.tosa.mlir import print_tosa_mlir
    from tfl2tosa.tosa.reader import read_tosa

    source: str | bytes = sys.stdin.buffer.read() if path == "-" else path
    module = read_tosa(source)
    summary = summarize(module, path)
    if as_json:
        import json

        typer.echo(json.dumps(summary, indent=2))
        return
    typer.echo(print_tosa_mlir(module, elide=None if elide < 0 else elide), nl=False)
    _print_table(summary)


def _element(value: Value) -> str:
    if isinstance(value.type, TensorType):
        return str(storage_type(value.type.element))
    return str(value.type)


def type_label(op: Op) -> str:
    """The op's element types: `i8`, or `i8 -> i32` when the result type differs
    from the first operand's (CONV2D, CAST, RESCALE, comparisons, ...)."""
    first_in = _element(op.operands[0]) if op.operands else ""
    first_out = _element(op.results[0]) if op.results else ""
    if not first_in or not first_out or first_in == first_out:
        return first_in or first_out or "-"
    return f"{first_in} -> {first_out}"


def _constant_bytes(module: Module) -> int:
    total = 0
    for _, op in module.ops():
        for key in ("values", "initial_value"):
            value = op.attrs.get(key)
            if isinstance(value, np.ndarray):
                total += value.nbytes
    return total


def summarize(module: Module, path: str) -> dict[str, Any]:
    counts = Counter((op.name, type_label(op)) for _, op in module.ops())
    graphs = [{
        "name": graph.name,
        "inputs": [{"name": v.name, "type": str(v.type)} for v in graph.inputs],
        "outputs": [{"name": v.name, "type": str(v.type)} for v in graph.outputs],
        "ops": len(graph.ops),
        "tensors": sum(1 for _ in graph.values()),
    } for graph in module.graphs.values()]
    return {
        "file": path,
        "tosa_version": module.attrs.get("tosa_version", ""),
        "graphs": graphs,
        "op_counts": [{"op": name, "types": label, "count": count}
                      for (name, label), count in sorted(counts.items(),
                                                         key=lambda kv: (-kv[1], kv[0]))],
        "ops": sum(g["ops"] for g in graphs),
        "tensors": sum(g["tensors"] for g in graphs),
        "constant_bytes": _constant_bytes(module),
    }


def _print_table(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    title = (f"{Path(summary['file']).name} (TOSA {summary['tosa_version']}): "
             f"{summary['ops']} ops, {summary['tensors']} tensors, "
             f"{len(summary['graphs'])} graph(s), {summary['constant_bytes']} constant bytes")
    table = Table(title=title)
    table.add_column("op")
    table.add_column("types")
    table.add_column("count", justify="right")
    for row in summary["op_counts"]:
        table.add_row(row["op"], row["types"], str(row["count"]))
    Console(soft_wrap=False).print(table)
