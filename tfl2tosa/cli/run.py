"""`tfl2tosa run FILE.tosa --input x.npy ... --out DIR`: run a .tosa graph on our reference model."""

from __future__ import annotations

from pathlib import Path

import typer

from tfl2tosa.cli.run_work import run_model, safe_filename  # noqa: F401  (tests use it)
from tfl2tosa.cli.typer_app import app


@app.command("run", help="Run FILE on the numpy TOSA reference model and save each output "
                         "as .npy.\n\nExamples:\n\n"
                         "  tfl2tosa run model.tosa -i x.npy -o outputs/\n\n"
                         "  tfl2tosa run model.tosa -i input_0=x.npy -i input_1=y.npy --json")
def run_command(
    file: str = typer.Argument(..., help="A .tosa flatbuffer."),
    inputs: list[str] = typer.Option(
        [], "--input", "-i",
        help="An .npy file per graph input: `file.npy` in graph input order, or "
             "`NAME=file.npy` by input name (may be mixed; named ones are bound first)."),
    out: Path = typer.Option(
        None, "-o", "--output",
        help="Directory for the outputs, one `<output name>.npy` each. Characters outside "
             "[A-Za-z0-9._-] become `_` (e.g. `model/conv:0` -> `model_conv_0.npy`), a leading "
             "dot becomes `_`, and clashing names get `_2`, `_3`, ... Default: the "
             "working directory."),
    out_alias: Path = typer.Option(None, "--out", hidden=True),
    as_json: bool = typer.Option(False, "--json",
                                 help="Print a JSON summary: outputs (name, file, shape, "
                                      "dtype) and the run time."),
) -> None:
    run_model(file, inputs, out, out_alias, as_json)
