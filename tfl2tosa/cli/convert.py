"""`tfl2tosa convert MODEL.tflite -o OUT.tosa`."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from tfl2tosa.cli import HYBRID_HELP, app
from tfl2tosa.errors import ConversionError


def _default_profiles() -> list[str]:
    from tfl2tosa.pipeline import DEFAULT_PROFILES

    return list(DEFAULT_PROFILES)


@app.command("convert")
def convert_command(
    model: str = typer.Argument(..., help="Input .tflite file, or - for standard input."),
    output: str = typer.Option(None, "-o", "--output",
                               help="Output file, or - for standard output. "
                                    "Default: MODEL with the emitted form's suffix."),
    emit_form: str = typer.Option("tosa", "--emit",
                                  help="tosa (flatbuffer), mlir (TOSA MLIR text) or tfl "
                                       "(the imported TFLite graph as MLIR)."),
    profile: list[str] = typer.Option(..., "--profile", default_factory=_default_profiles,
                                      show_default=False,
                                      help="TOSA profile(s) the output must conform to "
                                           "(default: PRO-INT and PRO-FP)."),
    disable: list[str] = typer.Option([], "--disable",
                                      help="Switch a legalization pattern off (by label)."),
    no_fallback: bool = typer.Option(False, "--no-fallback",
                                     help="Refuse quantized ops without an integer lowering "
                                          "instead of lowering them through float."),
    report: Path = typer.Option(None, "--report", help="Write the conversion report (JSON)."),
    hybrid: str = typer.Option("emulate", "--hybrid", help=HYBRID_HELP),
    kernels: str = typer.Option("reference", "--kernels",
                                help="Which TFLite kernels integer ops reproduce where they "
                                     "round differently: reference (BUILTIN_REF) or optimized "
                                     "(the builtin kernels devices run; `validate` picks this "
                                     "when the reference resolver lacks an op version)."),
) -> None:
    """Convert a TFLite model to TOSA. Nothing is written unless the whole model converts."""
    from tfl2tosa.pipeline import convert, emit, write_atomically

    if emit_form not in ("tosa", "mlir", "tfl"):
        raise typer.BadParameter("--emit must be tosa, mlir or tfl")
    source: str | bytes = sys.stdin.buffer.read() if model == "-" else model
    if emit_form == "tfl":
        from tfl2tosa.tflite_import import load

        data = emit(load(source), "tfl")
    else:
        try:
            module, conversion = convert(source, fallback=not no_fallback,
                                         disabled=frozenset(disable),
                                         profiles=tuple(profile), kernels=kernels,
                                         hybrid=hybrid)
        except ConversionError as exc:
            if report is not None:
                write_atomically(report, _failure_report(model, exc).encode())
            raise
        if report is not None:
            write_atomically(report, conversion.to_json().encode())
        data = emit(module, emit_form)
    if output is None:
        if model == "-":
            output = "-"
        else:
            suffix = {"tosa": ".tosa", "mlir": ".mlir", "tfl": ".tfl.mlir"}[emit_form]
            output = str(Path(model).with_suffix(suffix))
    if output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        write_atomically(output, data)


def _failure_report(model: str, exc: ConversionError) -> str:
    import json
    from dataclasses import asdict

    return json.dumps({"model": model, "errors": [str(exc)],
                       "unsupported": [asdict(f) for f in exc.failures]}, indent=2)
