"""The `tfl2tosa` command line. Each command lives in its own module here.

Library errors (Tfl2TosaError) become one line on stderr and the error's exit
code; any other exception is a bug of ours, also reported in one line (exit
70); a traceback is printed only with `--verbose`.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from typing import Any

# numpy's OpenBLAS starts a thread per core when numpy loads, about 40 ms of CPU
# on two cores: worth it for the reference model's matrix products, pure start-up
# cost for commands that multiply no matrices. Those ask for one thread (unless
# the user chose a count).
_COMMANDS_WITHOUT_BLAS = frozenset({"convert", "inspect", "tosa-info"})


def _invoked_command(args: list[str]) -> str | None:
    """The command word of a command line (its first argument not an option)."""
    return next((arg for arg in args if not arg.startswith("-")), None)


def _tune_fresh_process(argv: list[str]) -> None:
    """Settings for a `tfl2tosa` process, made before the heavy imports below.

    Skipped when numpy is already loaded: then the CLI was imported into a
    running program, whose settings are its own.
    """
    if "numpy" in sys.modules:
        return
    # Start-up creates a few hundred thousand objects (modules, classes,
    # functions) that live until exit; at the default threshold (700
    # allocations) the cyclic GC would rescan them dozens of times.
    gc.set_threshold(50_000, 20, 10)
    if (_invoked_command(argv) in _COMMANDS_WITHOUT_BLAS
            and not {"OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS"} & os.environ.keys()):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


_tune_fresh_process(sys.argv[1:])

import typer  # noqa: E402  (after the process tuning above)

from tfl2tosa.errors import Tfl2TosaError, VerificationError  # noqa: E402

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

_verbose = False
INTERNAL_ERROR = 70  # sysexits.h EX_SOFTWARE
VERBOSE_FLAGS = ("-v", "--verbose")


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
    global _verbose
    _verbose = _verbose or verbose
    if max_tensor_bytes is not None:
        from tfl2tosa import limits

        budget = limits.parse_bytes(max_tensor_bytes)
        limits.set_max_tensor_bytes(budget)
        os.environ[limits.ENVIRONMENT_VARIABLE] = str(budget)  # batch workers inherit it


def hoist_verbose(args: list[str]) -> list[str]:
    """`-v`/`--verbose` anywhere on the command line (before a `--`) means the
    global option: each is moved in front of the command word, where typer takes it."""
    end = args.index("--") if "--" in args else len(args)
    flags = [a for a in args[:end] if a in VERBOSE_FLAGS]
    if not flags:
        return args
    rest = [a for a in args[:end] if a not in VERBOSE_FLAGS] + args[end:]
    return ["--verbose", *rest]


def default_elide() -> int:
    """`--elide`'s default, the IR printer's, read when a command runs (the
    printer loads numpy, which `--help` must not)."""
    from tfl2tosa.ir.printer import DEFAULT_ELIDE_ELEMENTS

    return DEFAULT_ELIDE_ELEMENTS


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one error line and return the Exit to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def read_npy(path: str, option: str) -> Any:
    """An array from an .npy file named on the command line; a usage error (exit 2)
    naming the option when it is missing or not an .npy file."""
    import numpy as np

    from tfl2tosa.errors import UsageError

    try:
        with open(path, "rb") as file:
            if file.read(6) != b"\x93NUMPY":
                raise UsageError(f"{option} {path}: not an .npy file (numpy.save writes them)")
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"{option} {path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{option} {path}: is a directory, not an .npy file") from None
    except (OSError, ValueError, EOFError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"{option} {path}: not an .npy file ({reason})") from None


# Each command's module, which registers the command on `app` when imported
# (explicit list).
COMMAND_MODULES = {
    "batch": "batch", "report": "batch", "convert": "convert", "inspect": "inspect",
    "run": "run", "tosa-info": "tosa_info", "validate": "validate",
}


def _modules_to_register(argv: list[str]) -> list[str]:
    """Only the invoked command's module when this process is `tfl2tosa` running
    a known command (typer builds every registered command before dispatching,
    ~2% of a conversion's CPU); every module otherwise: `--help`, a mistyped
    command, or the CLI imported by another program."""
    program = argv[0] if argv else ""
    is_cli = (os.path.splitext(os.path.basename(program))[0] == "tfl2tosa"
              or program.endswith(os.path.join("tfl2tosa", "__main__.py")))
    command = _invoked_command(argv[1:])
    if is_cli and command in COMMAND_MODULES:
        return [COMMAND_MODULES[command]]
    return sorted(set(COMMAND_MODULES.values()))


for _module in _modules_to_register(sys.argv):
    importlib.import_module(f"tfl2tosa.cli.{_module}")


def main() -> None:
    # What exists now (modules, classes, functions) lives until exit: moved out
    # of the collected generations, it is not rescanned by every full cyclic-GC
    # pass the command's own allocations trigger (~3% of a conversion's CPU).
    gc.freeze()
    global _verbose
    args = hoist_verbose(sys.argv[1:])
    _verbose = args[:1] == ["--verbose"]
    try:
        app(args=args, prog_name="tfl2tosa")
    except VerificationError as exc:
        if _verbose:
            _print_violations(exc)
            raise
        typer.echo(f"error: {exc}", err=True)
        typer.echo("(rerun with --verbose to list every violation; --profile and --extension "
                   "choose what is allowed)", err=True)
        sys.exit(exc.exit_code)
    except Tfl2TosaError as exc:
        if _verbose:
            raise
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        typer.echo(f"error: {message}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # a bug of ours: still one line, the traceback on request
        if _verbose:
            raise
        first_line = str(exc).splitlines()[0] if str(exc) else ""
        typer.echo(f"error: internal error ({type(exc).__name__}: {first_line}); "
                   "rerun with --verbose for the traceback and please report it", err=True)
        sys.exit(INTERNAL_ERROR)


def _print_violations(exc: VerificationError) -> None:
    typer.echo(f"{len(exc.violations)} TOSA violation(s):", err=True)
    for violation in exc.violations:
        typer.echo(f"  {violation}", err=True)
