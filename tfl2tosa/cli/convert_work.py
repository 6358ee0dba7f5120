"""What `tfl2tosa convert` does once its command line is parsed, without typer:
both typer's command (`convert.py`) and the fast path (`fast.py`) call
`convert_model`."""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

from tfl2tosa.cli.terminal import human_size, progress_line, summary_line
from tfl2tosa.errors import ConversionError, ModelError, UsageError
from tfl2tosa.paths import file_name, shown_path

if TYPE_CHECKING:  # imported when the command runs (`--help` must not load numpy)
    from tfl2tosa.pipeline import ConversionReport


def convert_model(model: str, output: str | None, output_alias: str | None, emit_form: str,
                  profile: list[str], extension: list[str] | None, disable: list[str],
                  no_fallback: bool, report: str | os.PathLike[str] | None, quiet: bool,
                  hybrid: str, kernels: str) -> None:
    from tfl2tosa.pipeline import check_writable, convert, emit, emit_pieces, write_atomically

    if emit_form not in ("tosa", "mlir", "tfl"):
        raise UsageError(f"--emit {emit_form}: choose tosa, mlir or tfl")
    if emit_form == "tfl" and report is not None:
        raise UsageError("--report describes a conversion, and --emit tfl does not convert "
                         "(it prints the imported graph); drop one of them")
    output = _one_of(output, output_alias)
    profiles = spec_names(profile, "PRO-", "--profile")
    extensions = spec_names(extension, "EXT-", "--extension") or None
    started = time.perf_counter()
    source: str | bytes = sys.stdin.buffer.read() if model == "-" else model
    if output is None:
        if model == "-":
            output = "-"
        else:
            suffix = {"tosa": ".tosa", "mlir": ".mlir", "tfl": ".tfl.mlir"}[emit_form]
            output = _with_suffix(model, suffix)
    for path in (output, report):  # before the work, not after it
        if path is not None and path != "-":
            check_writable(path)
    conversion: ConversionReport | None = None
    with progress_line(f"converting {file_name(shown_path(model))}", enabled=not quiet) as show:
        if emit_form == "tfl":
            from tfl2tosa.tflite_import import load

            data = [emit(load(source), "tfl")]
        else:
            try:
                module, conversion = convert(
                    source, fallback=not no_fallback, disabled=frozenset(disable),
                    profiles=profiles, extensions=extensions, kernels=kernels,
                    hybrid=hybrid, on_stage=show)
            except ConversionError as exc:
                if report is not None:
                    write_atomically(report, _failure_report(model, exc).encode())
                raise
            if report is not None:
                write_atomically(report, conversion.to_json().encode())
            show("writing")
            data = emit_pieces(module, emit_form)
    if output == "-":
        sys.stdout.buffer.writelines(data)
        sys.stdout.buffer.flush()
    else:
        write_atomically(output, data)
    if conversion is not None:
        size = sum(memoryview(piece).nbytes for piece in data)
        summary_line(_summary(conversion, output, size, time.perf_counter() - started),
                     enabled=not quiet)


def _with_suffix(model: str, suffix: str) -> str:
    """The default output path: `model` with its suffix replaced, as pathlib's
    `with_suffix` gives it."""
    shown = shown_path(model)
    name = file_name(shown)
    if not name:  # `.`, `/` (and `` for `.`): no file to name the output after
        raise ModelError(f"{shown}: is a directory, not a .tflite file")
    dot = name.rfind(".")
    stem = name[:dot] if 0 < dot < len(name) - 1 else name
    return shown[:len(shown) - len(name)] + stem + suffix


def _one_of(value: str | None, alias: str | None) -> str | None:
    if value is not None and alias is not None and value != alias:
        raise UsageError("give the output once: -o/--output (--out is its old spelling)")
    return value if value is not None else alias


def spec_names(names: list[str] | None, prefix: str, option: str) -> tuple[str, ...]:
    """Profile or extension names as the specification spells them: `int16`,
    `ext_int16` and `EXT-INT16` all name EXT-INT16."""
    from tfl2tosa.tosa.ops import EXTENSIONS, PROFILES

    known = PROFILES if prefix == "PRO-" else EXTENSIONS
    spelled = []
    for name in names or ():
        upper = name.upper().replace("_", "-")
        spec = upper if upper.startswith(prefix) else prefix + upper
        if spec not in known:
            raise UsageError(f"{option} {name}: choose from {', '.join(known)}")
        spelled.append(spec)
    return tuple(spelled)


def _summary(conversion: ConversionReport, output: str, size: int, seconds: float) -> str:
    where = "stdout" if output == "-" else output
    return (f"{conversion.operators_in} TFLite ops -> {conversion.operators_out} TOSA ops "
            f"({conversion.count('integer')} integer, {conversion.count('fallback')} fallback, "
            f"{conversion.count('float')} float); {where}: {human_size(size)}; "
            f"{seconds:.2f} s")


def _failure_report(model: str, exc: ConversionError) -> str:
    import json

    # Legalization's failures are OpOutcomes; a quant cast's, lines of text.
    unsupported = [f if isinstance(f, str) else f.to_dict() for f in exc.failures]
    return json.dumps({"model": model, "errors": [str(exc)], "unsupported": unsupported},
                      indent=2)
