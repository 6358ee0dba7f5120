"""The typer application: every command's options and help, the global options,
and the help and usage errors users see. `tfl2tosa.cli.main` runs it for every
command line the fast path does not take.
"""

from __future__ import annotations

import importlib
import os
import sys

import typer

from tfl2tosa.cli import VERBOSE_FLAGS, invoked_command

# convert / validate / batch --hybrid.
HYBRID_HELP = ("How ops with int8 weights and float activations (dynamic-range models) "
               "compute: emulate (TFLite's hybrid kernels: activations quantized at run "
               "time, integer products) or float (dequantized weights).")

app = typer.Typer(
    name="tfl2tosa",
    help="Convert TensorFlow Lite models to TOSA 1.0 and check the result.\n\n"
         "Examples:\n\n"
         "  tfl2tosa convert model.tflite -o model.tosa\n\n"
         "  tfl2tosa validate model.tflite --runs 10\n\n"
         "  tfl2tosa batch models/ -o results/",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def version_text() -> str:
    """`--version`: this package, the TOSA specification it writes, the TFLite schema it reads."""
    from tfl2tosa import __version__
    from tfl2tosa.versions import TFLITE_SCHEMA_VERSION, TOSA_VERSION

    major, minor, patch, draft = TOSA_VERSION
    tosa = f"{major}.{minor}.{patch}" + (" (draft)" if draft else "")
    return (f"tfl2tosa {__version__}\nTOSA specification {tosa}\n"
            f"TFLite schema version {TFLITE_SCHEMA_VERSION}")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(version_text())
        raise typer.Exit(0)


@app.callback()
def _global_options(
    verbose: bool = typer.Option(False, *VERBOSE_FLAGS,
                                 help="On errors, show the full details and the traceback "
                                      "(also accepted after the command)."),
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print the versions of tfl2tosa, the TOSA specification "
                                      "it writes and the TFLite schema it reads, and exit."),
    max_tensor_bytes: str = typer.Option(
        None, "--max-tensor-bytes", metavar="BYTES",
        help="Refuse any tensor larger than this (e.g. 512M, 4G) before allocating it: "
             "constants conversion materialises, tensors `run` and `validate` compute. "
             "Default: an eighth of physical memory."),
) -> None:
    # `verbose` is read by `tfl2tosa.cli.main`, which hoists it to the front.
    if max_tensor_bytes is not None:
        from tfl2tosa import limits

        budget = limits.parse_bytes(max_tensor_bytes)
        limits.set_max_tensor_bytes(budget)
        os.environ[limits.ENVIRONMENT_VARIABLE] = str(budget)  # batch workers inherit it


def default_elide() -> int:
    """`--elide`'s default, the IR printer's, read when a command runs (the
    printer loads numpy, which `--help` must not)."""
    from tfl2tosa.ir.printer import DEFAULT_ELIDE_ELEMENTS

    return DEFAULT_ELIDE_ELEMENTS


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one error line and return the Exit to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


# Each command's module, which registers the command on `app` when imported
# (explicit list).
COMMAND_MODULES = {
    "batch": "batch", "report": "batch", "convert": "convert", "inspect": "inspect",
    "run": "run", "tosa-info": "tosa_info", "validate": "validate",
}


def _modules_to_register(argv: list[str]) -> list[str]:
    """Only the invoked command's module when this process is `tfl2tosa` running
    a known command (typer builds every registered command before dispatching,
    a cost every run would pay); every module otherwise: `--help`, a mistyped
    command, or the CLI imported by another program."""
    program = argv[0] if argv else ""
    is_cli = (os.path.splitext(os.path.basename(program))[0] == "tfl2tosa"
              or program.endswith(os.path.join("tfl2tosa", "__main__.py")))
    command = invoked_command(argv[1:])
    if is_cli and command in COMMAND_MODULES:
        return [COMMAND_MODULES[command]]
    return sorted(set(COMMAND_MODULES.values()))


for _module in _modules_to_register(sys.argv):
    importlib.import_module(f"tfl2tosa.cli.{_module}")


def run(args: list[str]) -> None:
    """Parse `args` and run the command, as the `tfl2tosa` program does."""
    app(args=args, prog_name="tfl2tosa")
