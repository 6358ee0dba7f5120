"""The `tfl2tosa` command line. Each command lives in its own module here; the
typer application that declares them all is `typer_app`.

Library errors (Tfl2TosaError) become one line on stderr and the error's exit
code; any other exception is a bug of ours, also reported in one line (exit
70); a traceback is printed only with `--verbose`.

A plain `convert` or `run` command line (`fast.py`) runs without importing
typer, whose import and command building are a large part of a small model's
conversion; `--help`, usage errors and anything else go to typer, so what
users see is typer's.
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Any

# numpy's OpenBLAS starts a thread per core when numpy loads, and they cost CPU
# time while they spin: pure start-up cost for commands that multiply no matrices,
# and for `run`, even on the largest models, far more CPU than the wall time they
# save (README, "Architecture"). These commands ask for one thread unless the
# user chose a count (any variable OpenBLAS reads for it).
_ONE_BLAS_THREAD_COMMANDS = frozenset({"convert", "inspect", "tosa-info", "run"})
_BLAS_THREAD_VARIABLES = frozenset({"OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
                                    "OMP_NUM_THREADS"})


def invoked_command(args: list[str]) -> str | None:
    """The command word of a command line (its first argument not an option)."""
    return next((arg for arg in args if not arg.startswith("-")), None)


# Whether this process was started to run the command line (see _tune_fresh_process).
_OWN_PROCESS = False


def _tune_fresh_process(argv: list[str]) -> None:
    """Settings for a `tfl2tosa` process, made before the heavy imports.

    Skipped when numpy is already loaded: then the CLI was imported into a
    running program, whose settings are its own.
    """
    global _OWN_PROCESS
    if "numpy" in sys.modules:
        return
    _OWN_PROCESS = True
    # Start-up creates many objects (modules, classes, functions) that live
    # until exit; at the default threshold the cyclic GC would rescan them
    # again and again for nothing.
    gc.set_threshold(50_000, 20, 10)
    if (invoked_command(argv) in _ONE_BLAS_THREAD_COMMANDS
            and not _BLAS_THREAD_VARIABLES & os.environ.keys()):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


_tune_fresh_process(sys.argv[1:])

from tfl2tosa.errors import Tfl2TosaError, VerificationError  # noqa: E402

INTERNAL_ERROR = 70  # sysexits.h EX_SOFTWARE
VERBOSE_FLAGS = ("-v", "--verbose")

# Names of the typer application, loaded on first use (`from tfl2tosa.cli import app`).
_TYPER_NAMES = frozenset({"app", "HYBRID_HELP", "fail", "default_elide",
                          "version_text", "COMMAND_MODULES"})


def __getattr__(name: str) -> Any:
    if name in _TYPER_NAMES:
        from tfl2tosa.cli import typer_app

        return getattr(typer_app, name)
    raise AttributeError(f"module 'tfl2tosa.cli' has no attribute {name!r}")


class CommandFailed(Exception):
    """A command's own refusal: printed as `error: <message>`, exit `code`, never a
    traceback (typer's commands use `fail`, which prints and exits the same way)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def echo(text: str, err: bool = False) -> None:
    """One line on stdout (or stderr), flushed, as typer's echo writes it."""
    print(text, file=sys.stderr if err else sys.stdout, flush=True)


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


def hoist_verbose(args: list[str]) -> list[str]:
    """`-v`/`--verbose` anywhere on the command line (before a `--`) means the
    global option: each is moved in front of the command word, where typer takes it."""
    end = args.index("--") if "--" in args else len(args)
    flags = [a for a in args[:end] if a in VERBOSE_FLAGS]
    if not flags:
        return args
    rest = [a for a in args[:end] if a not in VERBOSE_FLAGS] + args[end:]
    return ["--verbose", *rest]


def main() -> None:
    from tfl2tosa.cli.fast import fast_command

    args = hoist_verbose(sys.argv[1:])
    verbose = args[:1] == ["--verbose"]
    try:
        command = fast_command(args)
        # gc.freeze(): what exists when the command starts (modules, classes,
        # functions) lives until exit; moved out of the collected generations, it is
        # not rescanned by every full cyclic-GC pass the command's allocations trigger.
        if command is not None:
            # Only where the program's entry point (the script, `python -m`) called
            # main: a program or a test that imports the CLI keeps running.
            own = _OWN_PROCESS and sys._getframe().f_back.f_globals.get("__name__") == "__main__"
            if own:
                # The process ends with its one command (below), so no cyclic
                # collection at all (and nothing to freeze): the garbage that could
                # pile up is that of one conversion or run (see
                # pipeline.no_cyclic_collection), and a collection on the way out
                # would scan everything the command made.
                gc.disable()
            else:
                gc.freeze()
            _run_without_typer(command)
            if own:
                _exit_without_teardown()
        else:
            from tfl2tosa.cli import typer_app

            gc.freeze()
            typer_app.run(args)
    except CommandFailed as exc:
        echo(f"error: {exc}", err=True)
        sys.exit(exc.code)
    except VerificationError as exc:
        if verbose:
            _print_violations(exc)
            raise
        echo(f"error: {exc}", err=True)
        echo("(rerun with --verbose to list every violation; --profile and --extension "
             "choose what is allowed)", err=True)
        sys.exit(exc.exit_code)
    except Tfl2TosaError as exc:
        if verbose:
            raise
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        echo(f"error: {message}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # a bug of ours: still one line, the traceback on request
        if verbose:
            raise
        first_line = str(exc).splitlines()[0] if str(exc) else ""
        echo(f"error: internal error ({type(exc).__name__}: {first_line}); "
             "rerun with --verbose for the traceback and please report it", err=True)
        sys.exit(INTERNAL_ERROR)


def _run_without_typer(command: Any) -> None:
    """Run a fast-path command as typer runs one: Ctrl-C exits 130 quietly, and a
    reader that closed our stdout (`| head`) ends the process with exit 1."""
    import errno

    try:
        command()
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        # Nothing more can reach the reader; the final flush must not fail again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)


def _exit_without_teardown() -> None:
    """End a command line's own process with exit 0, without the interpreter's
    teardown: clearing every module and collecting every object the command made
    costs a small conversion a sizeable part of its time, and the operating
    system frees the memory anyway. What a normal exit does that anyone could see
    still happens first: atexit handlers run and stdout and stderr are flushed.
    Anything unusual (a thread still running, a flush that fails, a profiler,
    tracer or debugger, which reports after the program returns, `python -i`)
    returns, and the normal exit follows."""
    import atexit

    if sys.getprofile() is not None or sys.gettrace() is not None or sys.flags.inspect:
        return
    threading = sys.modules.get("threading")
    if threading is not None and threading.active_count() > 1:
        return
    atexit._run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(0)


def _print_violations(exc: VerificationError) -> None:
    echo(f"{len(exc.violations)} TOSA violation(s):", err=True)
    for violation in exc.violations:
        echo(f"  {violation}", err=True)
