"""What `inspect` and `tosa-info` both print: graph signatures, op counts and a table."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # `--help` registers every command: it must not load the IR (numpy)
    from tfl2tosa.ir.core import Module, Op


def graph_entries(module: Module) -> list[dict[str, Any]]:
    """Per graph: name, inputs and outputs (name, type), op and tensor counts."""
    return [{
        "name": graph.name,
        "inputs": [{"name": v.name, "type": str(v.type)} for v in graph.inputs],
        "outputs": [{"name": v.name, "type": str(v.type)} for v in graph.outputs],
        "ops": len(graph.ops),
        "tensors": sum(1 for _ in graph.values()),
    } for graph in module.graphs.values()]


def op_counts(module: Module, label: Callable[[Op], str], label_key: str) -> list[dict[str, Any]]:
    """How many ops of each (name, label), most frequent first."""
    counts = Counter((op.name, label(op)) for _, op in module.ops())
    return [{"op": name, label_key: text, "count": count}
            for (name, text), count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def print_op_table(title: str, counts: list[dict[str, Any]], label_key: str,
                   label_title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("op")
    table.add_column(label_title)
    table.add_column("count", justify="right")
    for row in counts:
        table.add_row(row["op"], row[label_key], str(row["count"]))
    Console(soft_wrap=False).print(table)
