"""`tfl2tosa convert MODEL.tflite -o OUT.tosa`."""

from __future__ import annotations

from pathlib import Path

import typer

from tfl2tosa.cli.convert_work import convert_model
from tfl2tosa.cli.typer_app import HYBRID_HELP, app

EXAMPLES = """

Examples:

  tfl2tosa convert model.tflite                      (writes model.tosa)

  tfl2tosa convert model.tflite --emit mlir -o -     (TOSA MLIR on stdout)

  tfl2tosa convert model.tflite --report report.json --no-fallback

  tfl2tosa convert model.tflite --profile PRO-INT --extension EXT-INT16
"""


def _default_profiles() -> list[str]:
    from tfl2tosa.pipeline import DEFAULT_PROFILES

    return list(DEFAULT_PROFILES)


@app.command("convert", help="Convert a TFLite model to TOSA. Nothing is written unless the "
                             "whole model converts." + EXAMPLES)
def convert_command(
    model: str = typer.Argument(..., help="Input .tflite file, or - for standard input."),
    output: str = typer.Option(None, "-o", "--output",
                               help="Output file, or - for standard output. "
                                    "Default: MODEL with the emitted form's suffix."),
    output_alias: str = typer.Option(None, "--out", hidden=True),
    emit_form: str = typer.Option("tosa", "--emit",
                                  help="tosa (flatbuffer), mlir (TOSA MLIR text) or tfl "
                                       "(the imported TFLite graph as MLIR, not converted)."),
    profile: list[str] = typer.Option(..., "--profile", default_factory=_default_profiles,
                                      show_default=False,
                                      help="TOSA profile the output must conform to "
                                           "(PRO-INT, PRO-FP; repeat for several; default: "
                                           "both)."),
    extension: list[str] = typer.Option(None, "--extension",
                                        help="TOSA extension the output may use, e.g. "
                                             "EXT-INT16 (repeat for several; default: every "
                                             "extension but EXT-DYNAMIC)."),
    disable: list[str] = typer.Option([], "--disable",
                                      help="Switch a legalization pattern off (by label)."),
    no_fallback: bool = typer.Option(False, "--no-fallback",
                                     help="Refuse quantized ops without an integer lowering "
                                          "instead of lowering them through float."),
    report: Path = typer.Option(None, "--report",
                                help="Write the conversion report (JSON) to this file."),
    quiet: bool = typer.Option(False, "--quiet", "-q",
                               help="No progress line and no summary line on the terminal."),
    hybrid: str = typer.Option("emulate", "--hybrid", help=HYBRID_HELP),
    kernels: str = typer.Option("reference", "--kernels",
                                help="Which TFLite kernels integer ops reproduce where they "
                                     "round differently: reference (BUILTIN_REF), optimized "
                                     "(TensorFlow's builtin kernels) or litert-optimized "
                                     "(LiteRT's); `validate` picks the runtime's builtin "
                                     "kernels when the reference resolver lacks an op "
                                     "version."),
) -> None:
    convert_model(model, output, output_alias, emit_form, profile, extension, disable,
                  no_fallback, report, quiet, hybrid, kernels)
