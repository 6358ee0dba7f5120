"""`tfl2tosa validate MODEL.tflite`: TFLite interpreter vs our reference model."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from tfl2tosa.cli import HYBRID_HELP, app

if TYPE_CHECKING:  # imported when the command runs: every command's start-up pays for these
    from tfl2tosa.validation import ValidationReport


@app.command("validate")
def validate_command(
    model: str = typer.Argument(..., help="Input .tflite file."),
    runs: int = typer.Option(3, "--runs", "-n", help="Number of seeded random inputs."),
    seed: int = typer.Option(0, "--seed"),
    inputs: list[str] = typer.Option([], "--inputs",
                                     help="Use these .npy files (one per model input, "
                                          "in order) instead of random inputs."),
    input_range: list[str] = typer.Option(
        [], "--input-range",
        help="Draw an input from a real-valued range, quantized with its own scale: "
             "[NAME|INDEX=]LOW:HIGH (no name: every input). For ops with a domain "
             "(divisors, RSQRT), where TFLite refuses some random inputs."),
    no_fallback: bool = typer.Option(False, "--no-fallback"),
    hybrid: str = typer.Option("emulate", "--hybrid", help=HYBRID_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    as_markdown: bool = typer.Option(False, "--markdown", help="Print a Markdown table."),
) -> None:
    """Convert MODEL, run TFLite's reference kernels and our TOSA reference model on the same inputs, and report each output.

    Exit code 0 only if every output is within tolerance (exact on integer paths).
    """
    import numpy as np

    from tfl2tosa.validation import parse_input_range, validate

    given = [[np.load(p) for p in inputs]] if inputs else None
    ranges = dict(parse_input_range(text) for text in input_range)
    report = validate(model, runs=runs, seed=seed, inputs=given, fallback=not no_fallback,
                      input_ranges=ranges, hybrid=hybrid)
    if as_json:
        import json

        typer.echo(json.dumps(report.to_dict(), indent=2))
    elif as_markdown:
        typer.echo(to_markdown(report))
    else:
        _print_table(report)
    raise typer.Exit(0 if report.passed else 1)


def to_markdown(report: ValidationReport) -> str:
    lines = [f"### {report.model}: {'PASS' if report.passed else 'FAIL'}",
             f"resolver `{report.resolver}`, {report.runs} run(s)", "",
             "| output | dtype | shape | exact | max abs err | max rel err | ulp/lsb | tolerance |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for o in report.outputs:
        dist = o.max_ulp if o.max_ulp is not None else o.max_lsb
        lines.append(f"| {o.name} | {o.dtype} | {o.shape} | {'yes' if o.exact else 'no'} | "
                     f"{o.max_abs_error:.3g} | {o.max_rel_error:.3g} | {dist} | {o.tolerance} |")
    if report.first_divergence:
        lines.append(f"\nfirst diverging tensor: `{report.first_divergence}`")
    if report.fallback_ops:
        lines.append(f"\nops lowered through the float fallback: {len(report.fallback_ops)}")
    lines.extend(f"\nnote: {note}" for note in report.notes)
    return "\n".join(lines)


def _print_table(report: ValidationReport) -> None:
    from rich.console import Console
    from rich.table import Table

    # A CI log (no terminal) gets a wide table rather than columns folded to 80.
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    table = Table(title=f"{report.model} ({report.resolver}, {report.runs} runs)")
    for column in ("output", "dtype", "shape", "exact", "max abs err", "max rel err",
                   "ulp/lsb", "tolerance", "verdict"):
        table.add_column(column)
    for o in report.outputs:
        dist = o.max_ulp if o.max_ulp is not None else o.max_lsb
        table.add_row(o.name, o.dtype, str(o.shape), "yes" if o.exact else "no",
                      f"{o.max_abs_error:.3g}", f"{o.max_rel_error:.3g}", str(dist), o.tolerance,
                      "[green]ok[/]" if o.within_tolerance else "[red]FAIL[/]")
    console.print(table)
    if report.first_divergence:
        console.print(f"first diverging tensor: {report.first_divergence}")
    if report.fallback_ops:
        console.print(f"{len(report.fallback_ops)} op(s) took the float fallback")
    for note in report.notes:
        console.print(f"note: {note}", markup=False)
    console.print("[green]PASS[/]" if report.passed else "[red]FAIL[/]")
