"""`tfl2tosa tosa-info FILE.tosa`: a `.tosa` flatbuffer as TOSA MLIR plus op counts."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from tfl2tosa.cli.typer_app import app, default_elide
from tfl2tosa.cli.summary import graph_entries, op_counts, print_op_table

if TYPE_CHECKING:  # imported when the command runs (`--help` must not load numpy)
    from tfl2tosa.ir.core import Module, Op, Value


@app.command("tosa-info", help="Print a TOSA flatbuffer as TOSA MLIR and a table of its "
                               "ops by element types.\n\nExamples:\n\n"
                               "  tfl2tosa tosa-info model.tosa\n\n"
                               "  tfl2tosa tosa-info model.tosa --json")
def tosa_info_command(
    path: str = typer.Argument(..., help="The .tosa file, or - for standard input."),
    elide: int = typer.Option(..., "--elide", metavar="N", default_factory=default_elide,
                              help="Print constants with more than N elements as "
                                   "dense_resource<__elided__>; -1 prints every value "
                                   "(text tosa-opt can then run)."),
    as_json: bool = typer.Option(False, "--json",
                                 help="Print graphs, op counts and sizes as JSON instead of "
                                      "the MLIR text and table."),
) -> None:
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
    from tfl2tosa.ir.types import TensorType, storage_type

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
    import numpy as np

    total = 0
    for _, op in module.ops():
        for key in ("values", "initial_value"):
            value = op.attrs.get(key)
            if isinstance(value, np.ndarray):
                total += value.nbytes
    return total


def summarize(module: Module, path: str) -> dict[str, Any]:
    graphs = graph_entries(module)
    return {
        "file": path,
        "tosa_version": module.attrs.get("tosa_version", ""),
        "graphs": graphs,
        "op_counts": op_counts(module, type_label, "types"),
        "ops": sum(g["ops"] for g in graphs),
        "tensors": sum(g["tensors"] for g in graphs),
        "constant_bytes": _constant_bytes(module),
    }


def _print_table(summary: dict[str, Any]) -> None:
    title = (f"{Path(summary['file']).name} (TOSA {summary['tosa_version']}): "
             f"{summary['ops']} ops, {summary['tensors']} tensors, "
             f"{len(summary['graphs'])} graph(s), {summary['constant_bytes']} constant bytes")
    print_op_table(title, summary["op_counts"], "types", "types")
