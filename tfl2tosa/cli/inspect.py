"""`tfl2tosa inspect MODEL.tflite`: the imported `tfl` graph and what it contains."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from tfl2tosa.cli.typer_app import app, default_elide
from tfl2tosa.cli.summary import graph_entries, op_counts, print_op_table

if TYPE_CHECKING:  # imported when the command runs (`--help` must not load numpy)
    from tfl2tosa.ir.core import Module, Op

CONSTANT = "tfl.pseudo_const"  # a constant tensor, as the importer represents it


@app.command("inspect", help="Print a TFLite model as `tfl` MLIR and a table of its "
                             "operators by element type; constants are counted apart, as "
                             "TFLite and Netron count operators.\n\nExamples:\n\n"
                             "  tfl2tosa inspect model.tflite\n\n"
                             "  tfl2tosa inspect model.tflite --json\n\n"
                             "  tfl2tosa inspect model.tflite --elide -1 > model.tfl.mlir")
def inspect_command(
    model: str = typer.Argument(..., help="The .tflite file, or - for standard input."),
    elide: int = typer.Option(..., "--elide", metavar="N", default_factory=default_elide,
                              help="Print constants with more than N elements as "
                                   "dense_resource<__elided__>; -1 prints every value."),
    as_json: bool = typer.Option(False, "--json",
                                 help="Print op counts, graph signatures and tensor counts "
                                      "as JSON instead of the MLIR text and table."),
) -> None:
    from tfl2tosa.ir.printer import print_module
    from tfl2tosa.tflite_import import load

    source: str | bytes = sys.stdin.buffer.read() if model == "-" else model
    module = load(source)
    summary = summarize(module, model)
    if as_json:
        import json

        typer.echo(json.dumps(summary, indent=2))
        return
    typer.echo(print_module(module, elide=None if elide < 0 else elide), nl=False)
    _print_table(summary)


def element_label(op: Op) -> str:
    """The element type an op computes in: its first result's, else its first operand's.

    Quantized types are shortened to their storage (`quant<i8>`, `quant<i8>/axis`):
    scales differ per tensor and would make every row unique.
    """
    from tfl2tosa.ir.types import TensorType, UniformQuantized, UniformQuantizedPerAxis

    values = op.results or op.operands
    if not values or not isinstance(values[0].type, TensorType):
        return str(values[0].type) if values else "-"
    element = values[0].type.element
    if isinstance(element, UniformQuantizedPerAxis):
        return f"quant<{element.storage}>/axis"
    if isinstance(element, UniformQuantized):
        return f"quant<{element.storage}>"
    return str(element)


def summarize(module: Module, model: str) -> dict[str, Any]:
    """Counts as TFLite and Netron give them: `operators` are the graph's operators;
    constant tensors (`tfl.pseudo_const` here) are counted apart."""
    from tfl2tosa.pipeline import TENSOR_OPS

    graphs = graph_entries(module)
    for entry, graph in zip(graphs, module.graphs.values()):
        del entry["ops"]
        entry["operators"] = sum(1 for op in graph.ops if op.name not in TENSOR_OPS)
        entry["constants"] = sum(1 for op in graph.ops if op.name == CONSTANT)
    counts = op_counts(module, element_label, "element_type")
    return {
        "model": model,
        "description": module.attrs.get("description", ""),
        "graphs": graphs,
        "op_counts": [row for row in counts if row["op"] not in TENSOR_OPS],
        "constant_counts": [row for row in counts if row["op"] == CONSTANT],
        "operators": sum(g["operators"] for g in graphs),
        "constants": sum(g["constants"] for g in graphs),
        "tensors": sum(g["tensors"] for g in graphs),
        "signature_defs": module.attrs.get("signature_defs", []),
    }


def _print_table(summary: dict[str, Any]) -> None:
    title = (f"{Path(summary['model']).name}: {summary['operators']} operators, "
             f"{summary['constants']} constants, {summary['tensors']} tensors, "
             f"{len(summary['graphs'])} graph(s)")
    print_op_table(title, summary["op_counts"], "element_type", "element type")
    if summary["constant_counts"]:
        print_op_table("constants", summary["constant_counts"], "element_type",
                       "element type")
