"""`tfl2tosa validate MODEL.tflite`: TFLite interpreter vs our reference model."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from tfl2tosa.cli.typer_app import HYBRID_HELP, app
from tfl2tosa.errors import UsageError

if TYPE_CHECKING:  # imported when the command runs: every command's start-up pays for these
    from tfl2tosa.validation import OutputComparison, ValidationReport


EXAMPLES = """

Examples:

  tfl2tosa validate model.tflite --runs 10

  tfl2tosa validate model.tflite --input x.npy --json

  tfl2tosa validate model.tflite --input-range 0.1:4 --html report.html
"""


@app.command("validate", help="Convert MODEL, run TFLite's reference kernels and our TOSA "
                              "reference model on the same inputs, and report each output."
                              "\n\nExit code 0 only if every output is within tolerance "
                              "(exact on integer paths); 1 otherwise; 2 a usage error." + EXAMPLES)
def validate_command(
    model: str = typer.Argument(..., help="Input .tflite file."),
    runs: int = typer.Option(3, "--runs", "-n",
                             help="Number of seeded random input sets (at least 1)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the random inputs."),
    inputs: list[str] = typer.Option([], "--input", "-i",
                                     help="Use these .npy files (one per model input, "
                                          "in order; repeat the option) instead of random "
                                          "inputs."),
    inputs_alias: list[str] = typer.Option([], "--inputs", hidden=True),
    input_range: list[str] = typer.Option(
        [], "--input-range",
        help="Draw an input from a real-valued range, quantized with its own scale: "
             "[NAME|INDEX=]LOW:HIGH (no name: every input). For ops with a domain "
             "(divisors, RSQRT), where TFLite refuses some random inputs."),
    no_fallback: bool = typer.Option(False, "--no-fallback",
                                     help="Refuse quantized ops without an integer lowering "
                                          "instead of lowering them through float."),
    backend: str = typer.Option(None, "--backend",
                                help="TFLite runtime: ai-edge-litert or tensorflow "
                                     "(default: the first installed, in that order)."),
    hybrid: str = typer.Option("emulate", "--hybrid", help=HYBRID_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    as_markdown: bool = typer.Option(False, "--markdown", help="Print a Markdown table."),
    html: Path = typer.Option(None, "--html",
                              help="Also write a self-contained HTML page: the graph colored "
                                   "by error, error histograms, the conversion per op "
                                   "(needs the [html] extra)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress line on the terminal."),
) -> None:
    from tfl2tosa.cli import read_npy
    from tfl2tosa.cli.terminal import progress_line
    from tfl2tosa.pipeline import check_writable
    from tfl2tosa.validation import parse_input_range, validate

    if as_json and as_markdown:
        raise UsageError("--json and --markdown both choose how the report is printed; "
                         "give one of them")
    if html is not None:
        check_writable(html)
        from tfl2tosa.html import require_matplotlib

        require_matplotlib()
    paths = [*inputs, *inputs_alias]
    given = [[read_npy(p, "--input") for p in paths]] if paths else None
    ranges = dict(parse_input_range(text) for text in input_range)
    with progress_line(f"validating {Path(model).name}", enabled=not quiet) as show:
        report = validate(model, runs=runs, seed=seed, inputs=given, fallback=not no_fallback,
                          input_ranges=ranges, hybrid=hybrid, backend=backend,
                          on_progress=show,
                          keep_details=html is not None)
        if html is not None:
            from tfl2tosa.html import validation_page
            from tfl2tosa.pipeline import write_atomically

            show("writing the HTML page")
            write_atomically(html, validation_page(report).encode())
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
             f"TFLite on `{report.backend}`, resolver `{report.resolver}`, converted for its "
             f"`{report.kernels}` kernels, {report.runs} run(s)", "",
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


def _verdict(output: OutputComparison, ok: str, fail: str) -> str:
    """An output's verdict; "anchored" when it passed only anchored (see the notes)."""
    if not output.within_tolerance:
        return fail
    return ok if output.anchored_max_abs_error is None else f"{ok} (anchored)"


def _print_table(report: ValidationReport) -> None:
    from rich.console import Console
    from rich.table import Table

    # A CI log (no terminal) gets a wide table rather than columns folded to 80.
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    table = Table(title=f"{report.model} ({report.backend} {report.resolver}, "
                        f"{report.kernels} kernels, {report.runs} runs)")
    for column in ("output", "dtype", "shape", "exact", "max abs err", "max rel err",
                   "ulp/lsb", "tolerance", "verdict"):
        table.add_column(column)
    for o in report.outputs:
        dist = o.max_ulp if o.max_ulp is not None else o.max_lsb
        table.add_row(o.name, o.dtype, str(o.shape), "yes" if o.exact else "no",
                      f"{o.max_abs_error:.3g}", f"{o.max_rel_error:.3g}", str(dist), o.tolerance,
                      _verdict(o, "[green]ok[/]", "[red]FAIL[/]"))
    console.print(table)
    if report.first_divergence:
        console.print(f"first diverging tensor: {report.first_divergence}")
    if report.fallback_ops:
        console.print(f"{len(report.fallback_ops)} op(s) took the float fallback")
    for note in report.notes:
        console.print(f"note: {note}", markup=False)
    console.print("[green]PASS[/]" if report.passed else "[red]FAIL[/]")
