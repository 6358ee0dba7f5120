"""The conversion pipeline: `.tflite` -> TOSA Module -> `.tosa` or MLIR text.

    load -> check_module -> inline_calls -> lower_resource_variables -> legalize -> CSE/DCE ->
    lower_quant_ops -> strip_func_quant_types -> canonicalize/CSE/DCE -> verify -> write

`PASSES` is that list after `load`; the passes themselves are in
`tfl2tosa/passes/` (and the legalization in `legalize/`).

The quant casts are lowered before any canonicalization: every qcast/dcast
here stands for a tensor TFLite really quantizes (an explicit QUANTIZE /
DEQUANTIZE, or a fallback op's quantized result), so folding
`dcast(qcast(x)) -> x` would drop TFLite's rounding and saturation of that
tensor. Once lowered, only scast pairs are left for canonicalize to fold.

Every stage is a plain function over the one IR; `convert` runs them in
turn, each timed, and fills a ConversionReport. Nothing is written unless
every op converted and the verifier passed; files are written atomically
(temp file + rename).
"""

from __future__ import annotations

import errno
import gc
import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np

from tfl2tosa.errors import ConversionError, UsageError
from tfl2tosa.kernels import KERNELS
from tfl2tosa.kernels import kernels as kernels_for
from tfl2tosa.ir.core import Module
from tfl2tosa.ir.types import Record
from tfl2tosa.paths import exists, file_name, is_dir, parent, shown_path

DEFAULT_PROFILES = ("PRO-INT", "PRO-FP")
# Ops that hold data rather than compute: TFLite's operator count (as TFLite and
# Netron show it) and the TOSA op counts in summaries leave them out.
CONSTANT_OPS = frozenset({"tfl.pseudo_const", "tfl.no_value", "tosa.const", "tosa.const_shape"})
# Ops the importer makes for tensors rather than TFLite operators: constants, the
# absent optional operand, the state tensors of recurrent ops.
TENSOR_OPS = CONSTANT_OPS | {"tfl.variable"}
# A piece of output: bytes, or an array written as its bytes (`emit_pieces`).
Buffer = bytes | bytearray | np.ndarray
# How hybrid (dynamic-range) ops compute: "emulate" TFLite's hybrid kernels
# (legalize.hybrid), or "float" on dequantized weights (legalize.conv).
HYBRID_MODES = ("emulate", "float")


class ConversionReport(Record):
    """Per model: ops in and out, which path each op took, errors, timings, and
    the TOSA extensions the output needs beyond its profiles."""

    model: str
    kernels: str                      # the TFLite kernels integer ops reproduce
    ops_in: dict[str, int]
    ops_out: dict[str, int]
    outcomes: list[dict[str, str]]
    # One entry per STABLEHLO_COMPOSITE: name, loc, version, attributes,
    # decomposition graph and how it was lowered (tfl2tosa.passes.inline_calls).
    composites: list[dict[str, Any]]
    extensions: list[str]
    errors: list[str]
    timings: dict[str, float]
    hybrid: str  # the mode asked for; each op's pattern says what it got

    _fields = ("model", "kernels", "ops_in", "ops_out", "outcomes", "composites", "extensions",
               "errors", "timings", "hybrid")

    def __init__(self, model: str, kernels: str = "reference",
                 ops_in: dict[str, int] | None = None, ops_out: dict[str, int] | None = None,
                 outcomes: list[dict[str, str]] | None = None,
                 composites: list[dict[str, Any]] | None = None,
                 extensions: list[str] | None = None, errors: list[str] | None = None,
                 timings: dict[str, float] | None = None, hybrid: str = "emulate") -> None:
        self.model = model
        self.kernels = kernels
        self.ops_in = {} if ops_in is None else ops_in
        self.ops_out = {} if ops_out is None else ops_out
        self.outcomes = [] if outcomes is None else outcomes
        self.composites = [] if composites is None else composites
        self.extensions = [] if extensions is None else extensions
        self.errors = [] if errors is None else errors
        self.timings = {} if timings is None else timings
        self.hybrid = hybrid

    def count(self, path: str) -> int:
        return sum(1 for o in self.outcomes if o["path"] == path)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def operators_in(self) -> int:
        """TFLite's operator count: the model's ops without its constants."""
        return sum(n for name, n in self.ops_in.items() if name not in TENSOR_OPS)

    @property
    def operators_out(self) -> int:
        return sum(n for name, n in self.ops_out.items() if name not in CONSTANT_OPS)

    def to_dict(self) -> dict[str, Any]:
        data = super().to_dict()
        data["summary"] = {p: self.count(p) for p in ("integer", "float", "fallback",
                                                       "unsupported")}
        return data

    def to_json(self) -> str:
        import json  # only a --report needs it

        return json.dumps(self.to_dict(), indent=2)


def op_counts(module: Module) -> dict[str, int]:
    ops = chain.from_iterable(graph.ops for graph in module.graphs.values())
    return dict(sorted(Counter(map(attrgetter("name"), ops)).items()))


def _timed(report: ConversionReport, stage: str, fn: Any, *args: Any,
           on_stage: Callable[[str], None] | None = None, **kwargs: Any) -> Any:
    if on_stage is not None:
        on_stage(stage)
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    report.timings[stage] = report.timings.get(stage, 0.0) + time.perf_counter() - start
    return result


@contextmanager
def no_cyclic_collection() -> Iterator[None]:
    """Run no cyclic garbage collection during a conversion or its writing;
    nested uses leave the collector off until the outermost ends.

    A conversion allocates many small objects (ops, values, types, attribute
    tuples) that mostly live until it ends, so a collection in its middle
    scans them all and finds little. What piles up meanwhile is one
    conversion's cyclic garbage: the ops its passes erase and the constants
    they held, mostly views of the model's buffer, which lives anyway (peak
    memory of the largest benchmark models is unchanged). The first
    collection after the collector is back on frees it, so many conversions
    in one process do not accumulate it (tests/test_cli_convert.py,
    test_many_conversions_in_one_process_leave_no_garbage_behind).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class Conversion:
    """One conversion under way: what it was asked for, and the report its
    passes fill. (A plain class: a dataclass decorator costs time at import.)"""

    __slots__ = ("report", "fallback", "disabled", "profiles", "extensions", "kernels",
                 "simplified")

    def __init__(self, report: ConversionReport, fallback: bool, disabled: frozenset[str],
                 profiles: tuple[str, ...], extensions: tuple[str, ...] | None,
                 kernels: str) -> None:
        self.report = report
        self.fallback = fallback
        self.disabled = disabled
        self.profiles = profiles
        self.extensions = extensions
        self.kernels = kernels
        # The module is as CSE and DCE last left it: running them again would
        # change nothing (a pass that changes it clears this).
        self.simplified = False


def _check_structure(module: Module, conversion: Conversion) -> None:
    from tfl2tosa.tflite_import.structure import check_module

    check_module(module)


# The ops each of these passes acts on: a model with none of them leaves the
# pass nothing to do, and the conversion does not import it
# (tests/test_pipeline_stages.py holds these to the passes).
CALLING_OPS = frozenset({"tfl.call", "tfl.stablehlo_composite"})
RESOURCE_VARIABLE_OPS = frozenset({"tfl.var_handle", "tfl.read_variable", "tfl.assign_variable",
                                   "tfl.call_once", "tfl.while"})


def _inline_calls(module: Module, conversion: Conversion) -> None:
    if CALLING_OPS.isdisjoint(conversion.report.ops_in):
        return
    from tfl2tosa.passes.inline_calls import inline_calls

    conversion.report.composites = inline_calls(module).composites


def _lower_resource_variables(module: Module, conversion: Conversion) -> None:
    if RESOURCE_VARIABLE_OPS.isdisjoint(conversion.report.ops_in):
        return
    from tfl2tosa.passes.resource_variables import lower_resource_variables

    lower_resource_variables(module)


def _legalize(module: Module, conversion: Conversion) -> None:
    """TFL ops -> TOSA ops and quant casts; ConversionError listing every op that
    has no pattern."""
    import legalize

    # Patterns fold constants in IEEE arithmetic, as TFLite's C kernels compute them: a
    # quantization scale near the float32 limit overflows to inf there too, and numpy's
    # warning about it would be noise on the user's terminal.
    with kernels_for(conversion.kernels), np.errstate(over="ignore", under="ignore"):
        result = legalize.legalize(module, fallback=conversion.fallback,
                                   disabled=conversion.disabled)
    report = conversion.report
    report.outcomes = [o.to_dict() for o in result.outcomes]
    if result.unsupported:
        lines = [f"{o.op_name} ({o.types}) at {o.loc}: {o.reason}" for o in result.unsupported]
        report.errors = lines
        kinds = sorted({o.op_name for o in result.unsupported})
        raise ConversionError(
            f"{len(lines)} op(s) could not be converted ({', '.join(kinds)}): " + "; ".join(lines),
            failures=result.unsupported)


def _merge_duplicates(module: Module, conversion: Conversion) -> None:
    from tfl2tosa.passes.simplify import cse, dce

    cse(module)
    dce(module)
    conversion.simplified = True


def _lower_quant_ops(module: Module, conversion: Conversion) -> None:
    from tfl2tosa.passes.lower_quant import lower_quant_ops

    with kernels_for(conversion.kernels):
        if lower_quant_ops(module):
            conversion.simplified = False


def _strip_quant_types(module: Module, conversion: Conversion) -> None:
    from tfl2tosa.passes.strip_quant_types import strip_func_quant_types

    if strip_func_quant_types(module):
        conversion.simplified = False


def _simplify(module: Module, conversion: Conversion) -> None:
    """Canonicalize, CSE and DCE. One pass of CSE leaves no two ops to merge
    (each op is matched against the ops kept before it, its operands already
    merged), so where nothing changed the module since the last CSE and DCE
    (a model without quantized types: no cast lowered or stripped, no
    pattern applied) they would find nothing to do and are skipped."""
    from tfl2tosa.passes.simplify import apply_canonicalizations, cse, dce

    if apply_canonicalizations(module) or not conversion.simplified:
        dce(module)
        cse(module)
        dce(module)


def _verify(module: Module, conversion: Conversion) -> None:
    """The TOSA specification's rules for the chosen profiles; records the
    extensions the graph needs."""
    from tfl2tosa.tosa.verify import verify

    needed: set[str] = set()
    kwargs: dict[str, Any] = {"profile": conversion.profiles, "needed": needed}
    if conversion.extensions is not None:
        kwargs["extensions"] = conversion.extensions
    verify(module, **kwargs)
    conversion.report.extensions = sorted(needed)


Pass = Callable[[Module, Conversion], None]

# What convert runs after import, in order: (stage name in the report's timings
# and the progress display, pass). Quant casts are lowered before any
# canonicalization (see the module docstring).
PASSES: tuple[tuple[str, Pass], ...] = (
    ("check", _check_structure),
    ("inline_calls", _inline_calls),
    ("resource_variables", _lower_resource_variables),
    ("legalize", _legalize),
    ("simplify", _merge_duplicates),
    ("lower_quant", _lower_quant_ops),
    ("strip_quant", _strip_quant_types),
    ("simplify", _simplify),
)
# Run last, unless convert is asked not to verify.
VERIFY: tuple[str, Pass] = ("verify", _verify)


@no_cyclic_collection()
def convert(source: str | os.PathLike | bytes, *, fallback: bool = True,
            disabled: set[str] | frozenset[str] = frozenset(),
            profiles: tuple[str, ...] = DEFAULT_PROFILES,
            extensions: tuple[str, ...] | None = None,
            verify: bool = True, kernels: str = "reference",
            hybrid: str = "emulate",
            on_stage: Callable[[str], None] | None = None) -> tuple[Module, ConversionReport]:
    """Convert a TFLite model (path or bytes) to a verified TOSA Module.

    `kernels` picks which of TFLite's kernels integer ops reproduce where they
    differ: "reference" (BUILTIN_REF), "optimized" or "litert-optimized" (the builtin
    kernels of TensorFlow or LiteRT; see tfl2tosa.kernels). `hybrid` is how ops with int8 weights
    and float activations compute: "emulate" (TFLite's hybrid kernels,
    run-time quantized activations) or "float" (dequantized weights).
    `on_stage` is called with each stage's name as it starts (a progress display).

    Raises ConversionError listing every op that could not be converted (with
    its types and TFLite location), or VerificationError for a graph that
    breaks the TOSA specification.
    """
    from legalize.registry import known_labels
    from tfl2tosa.tflite_import import load

    if kernels not in KERNELS:
        raise UsageError(f"--kernels {kernels!r}: one of {', '.join(KERNELS)}")
    unknown = sorted(set(disabled) - known_labels()) if disabled else []
    if unknown:
        raise UsageError(f"no pattern labelled {', '.join(unknown)} (see `--disable`: "
                         "labels are the pattern names in the conversion report)")
    if hybrid not in HYBRID_MODES:
        raise UsageError(f"--hybrid must be one of {', '.join(HYBRID_MODES)}, not {hybrid!r}")
    if hybrid == "float":
        from legalize.hybrid import HYBRID_LABELS

        disabled = frozenset(disabled) | HYBRID_LABELS
    name = os.fspath(source) if not isinstance(source, bytes) else "<bytes>"
    report = ConversionReport(model=name, kernels=kernels, hybrid=hybrid)
    conversion = Conversion(report, fallback, frozenset(disabled), profiles, extensions,
                            kernels)
    module = _timed(report, "import", load, source, on_stage=on_stage)
    report.ops_in = op_counts(module)
    for stage, run in PASSES + ((VERIFY,) if verify else ()):
        _timed(report, stage, run, module, conversion, on_stage=on_stage)
    report.ops_out = op_counts(module)
    return module, report


@no_cyclic_collection()
def emit(module: Module, form: str) -> bytes:
    """Serialize a module: "tosa" (flatbuffer), "mlir" (TOSA MLIR text) or "tfl"."""
    if form == "tosa":
        from tfl2tosa.tosa.writer import write_tosa

        return write_tosa(module)
    if form == "mlir":
        from tfl2tosa.tosa.mlir import print_tosa_mlir

        return print_tosa_mlir(module).encode()
    if form == "tfl":
        from tfl2tosa.ir.printer import print_module

        return print_module(module).encode()
    raise ValueError(f"unknown output form {form!r} (tosa, mlir or tfl)")


@no_cyclic_collection()
def emit_pieces(module: Module, form: str) -> list[Buffer]:
    """`emit`'s bytes as pieces that follow one another (`write_atomically` writes
    them): a .tosa file's constants stay the module's arrays, copied once, into
    the file, rather than first into one bytes object as large as the file."""
    if form == "tosa":
        from tfl2tosa.tosa.writer import tosa_pieces

        return tosa_pieces(module)
    return [emit(module, form)]


def write_atomically(path: str | os.PathLike, data: bytes | list[Buffer]) -> None:
    """Write `data` (bytes, or pieces written one after another) to `path` via a
    temp file in the same directory and a rename, so a reader never sees a
    half-written file. The file gets the mode a plain `open(path, "w")` would
    (0666 less the umask).

    Raises UsageError naming `path` (never the temp file) when it cannot be
    written: a missing directory, a directory in its place, no permission.
    """
    target = check_writable(path)
    try:
        fd, tmp = _create_temporary(target)
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            if isinstance(data, list):
                f.writelines(data)
            else:
                f.write(data)
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise UsageError(f"cannot write {target}: {exc.strerror}") from None
        raise


def _create_temporary(target: str) -> tuple[int, str]:
    """A new file `.NAME.<random>` beside `target`, opened for writing, and its path.

    What `tempfile.mkstemp` does, without importing `tempfile` (and with it
    `shutil`, `random` and the compression modules) into every conversion; the
    file is created with mode 0666, which the umask reduces as for `open`.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = os.path.join(parent(target), f".{file_name(target)}.{os.urandom(6).hex()}")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name", parent(target))


def check_writable(path: str | os.PathLike[str]) -> str:
    """`path` as pathlib shows it (tfl2tosa.paths), if a file can be written there:
    its directory exists and the path is not a directory. Else UsageError, said
    in one line."""
    target = shown_path(path)
    try:
        if is_dir(target):
            raise UsageError(f"cannot write {target}: it is a directory")
        directory = parent(target)
        if not is_dir(directory):
            what = "is not a directory" if exists(directory) else "does not exist"
            raise UsageError(f"cannot write {target}: directory {directory} {what}")
    except OSError as exc:  # a name too long, no permission to look: not absence
        raise UsageError(f"cannot write {target}: {exc.strerror}") from None
    return target
