"""Mutation fuzzing of every entry point that reads a file: only the project's
error type may come out, quickly, in bounded memory, with nothing printed.

Mutants of real models (the zoo, converter-made small models, hand-built
corner cases) and of the `.tosa` files they convert to: bit flips,
overwritten 16/32-bit words (flatbuffer offsets, lengths and vtable entries),
copied words, zeroed ranges, truncations, splices from another model, and
field-aware edits (shapes, opcode indices, tensor indices, buffer offsets,
options, quantization parameters) found by walking the intact flatbuffer.
Mutations land mostly outside the weight data, where they would only change
numbers. The targets: `load` (the importer alone), `convert` (import,
`inspect`'s summary and text, conversion and the `.tosa` writer) and `run`
(the `.tosa` reader and the reference model on zero inputs). Each run happens
in one subprocess with an address-space limit; each case has an alarm-based
watchdog. The short run is part of the normal suite; the long run is marked
slow.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import TfliteBuilder, zoo_models

TESTS_DIR = Path(__file__).resolve().parent

# 32-bit values that break offsets and lengths in interesting ways.
INTERESTING_32 = (0, 1, 2, 3, 4, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF,
                  0x80000000, 0xFFFFFFFC, 0xFFFFFFFF)
INTERESTING_16 = (0, 1, 4, 0x7F, 0xFF, 0x7FFF, 0x8000, 0xFFFF)
INTERESTING_8 = (0, 1, 2, 0x7F, 0x80, 0xFE, 0xFF)
INTERESTING_64 = (0, 1, 2, 0x7FFFFFFF, 0xFFFFFFFF, 1 << 32, 1 << 62, (1 << 64) - 1)
# Scales and other float fields: every way a float can be unusable.
INTERESTING_FLOATS = (float("nan"), float("inf"), -float("inf"), 0.0, -1.0, 1e-45, 3e38)


# --------------------------------------------------------------------------
# Field-aware edits: where the fields that matter sit in an intact flatbuffer

_u32 = struct.Struct("<I")
_i32 = struct.Struct("<i")


def _table_fields(data: bytes, table: int) -> list[int]:
    """Positions of every field present in the table at `table`."""
    vtable = table - _i32.unpack_from(data, table)[0]
    size = struct.unpack_from("<H", data, vtable)[0]
    offsets = struct.unpack_from(f"<{(size - 4) // 2}H", data, vtable + 4)
    return [table + o for o in offsets if o]


def _field(data: bytes, table: int, slot: int) -> int | None:
    """Position of field `slot` (4, 6, 8, ...) of the table at `table`, None if absent."""
    vtable = table - _i32.unpack_from(data, table)[0]
    size = struct.unpack_from("<H", data, vtable)[0]
    if slot >= size:
        return None
    o = struct.unpack_from("<H", data, vtable + slot)[0]
    return table + o if o else None


def _deref(data: bytes, position: int) -> int:
    return position + _u32.unpack_from(data, position)[0]


def _vector(data: bytes, table: int, slot: int) -> tuple[int, int]:
    """(position of the first element, element count) of a vector field; (0, 0) if absent."""
    position = _field(data, table, slot)
    if position is None:
        return 0, 0
    start = _deref(data, position)
    return start + 4, _u32.unpack_from(data, start)[0]


def _tables(data: bytes, table: int, slot: int) -> list[int]:
    start, count = _vector(data, table, slot)
    return [_deref(data, start + 4 * i) for i in range(count)]


def tflite_fields(data: bytes) -> dict[str, list[tuple[int, int]]]:
    """Field kind -> (position, width) of each instance in a `.tflite` model."""
    found: dict[str, list[tuple[int, int]]] = {k: [] for k in (
        "shape", "opcode index", "tensor index", "buffer offset", "options", "quantization",
        "tensor type", "builtin code", "subgraph io")}

    def add(kind: str, position: int | None, width: int) -> None:
        if position is not None:
            found[kind].append((position, width))

    def add_vector(kind: str, table: int, slot: int, width: int) -> None:
        start, count = _vector(data, table, slot)
        found[kind].extend((start + width * i, width) for i in range(count))

    model = _deref(data, 0)
    for code in _tables(data, model, 6):
        add("builtin code", _field(data, code, 4), 1)
        add("builtin code", _field(data, code, 10), 4)
    for buffer in _tables(data, model, 12):
        add("buffer offset", _field(data, buffer, 6), 8)
        add("buffer offset", _field(data, buffer, 8), 8)
        start, count = _vector(data, buffer, 4)
        if count:
            found["buffer offset"].append((start - 4, 4))
        add("buffer offset", _field(data, buffer, 4), 4)
    for subgraph in _tables(data, model, 8):
        add_vector("subgraph io", subgraph, 6, 4)
        add_vector("subgraph io", subgraph, 8, 4)
        for tensor in _tables(data, subgraph, 4):
            add_vector("shape", tensor, 4, 4)
            add_vector("shape", tensor, 18, 4)
            add("tensor type", _field(data, tensor, 6), 1)
            add("buffer offset", _field(data, tensor, 8), 4)
            quantization = _field(data, tensor, 12)
            if quantization is not None:
                params = _deref(data, quantization)
                add_vector("quantization", params, 8, 4)
                add_vector("quantization", params, 10, 8)
                add("quantization", _field(data, params, 16), 4)
        for operator in _tables(data, subgraph, 10):
            add("opcode index", _field(data, operator, 4), 4)
            add_vector("tensor index", operator, 6, 4)
            add_vector("tensor index", operator, 8, 4)
            add_vector("tensor index", operator, 20, 4)
            add("options", _field(data, operator, 10), 1)
            add("options", _field(data, operator, 26), 1)
            for slot in (12, 28):
                options = _field(data, operator, slot)
                if options is not None:
                    table = _deref(data, options)
                    found["options"].extend((p, 4) for p in _table_fields(data, table))
    return {kind: spots for kind, spots in found.items() if spots}


def tosa_fields(data: bytes) -> dict[str, list[tuple[int, int]]]:
    """Field kind -> (position, width) of each instance in a `.tosa` file."""
    found: dict[str, list[tuple[int, int]]] = {k: [] for k in (
        "shape", "op code", "tensor type", "options", "tensor index", "buffer offset")}
    graph = _deref(data, 0)
    for region in _tables(data, graph, 6):
        for block in _tables(data, region, 6):
            for operator in _tables(data, block, 6):
                found["op code"].append((_field(data, operator, 4) or 0, 4))
                if (attribute_type := _field(data, operator, 6)) is not None:
                    found["options"].append((attribute_type, 1))
                if (attribute := _field(data, operator, 8)) is not None:
                    found["options"].extend((p, 4) for p in
                                            _table_fields(data, _deref(data, attribute)))
                for slot in (10, 12):
                    start, count = _vector(data, operator, slot)
                    found["tensor index"].extend((_deref(data, start + 4 * i) + 4, 1)
                                                 for i in range(count))
            for tensor in _tables(data, block, 8):
                start, count = _vector(data, tensor, 6)
                found["shape"].extend((start + 4 * i, 4) for i in range(count))
                if (kind := _field(data, tensor, 8)) is not None:
                    found["tensor type"].append((kind, 4))
                start, count = _vector(data, tensor, 10)
                if count:
                    found["buffer offset"].append((start - 4, 4))
    return {kind: spots for kind, spots in found.items() if spots}


def _interesting(width: int, rng: np.random.Generator, size: int) -> bytes:
    if width == 1:
        return bytes([INTERESTING_8[rng.integers(len(INTERESTING_8))]])
    if width == 8:
        return INTERESTING_64[rng.integers(len(INTERESTING_64))].to_bytes(8, "little")
    if rng.random() < 0.2:
        return struct.pack("<f", INTERESTING_FLOATS[rng.integers(len(INTERESTING_FLOATS))])
    choices = INTERESTING_32 + (size, 1 << 16, 1 << 20, 1 << 30, int(rng.integers(1 << 32)))
    value = int(choices[rng.integers(len(choices))])
    if rng.random() < 0.5:
        value = int(rng.integers(-3, 70)) & 0xFFFFFFFF  # near small counts, indices and codes
    return value.to_bytes(4, "little")


def field_edit(data: bytes, fields: dict[str, list[tuple[int, int]]],
               rng: np.random.Generator) -> tuple[bytes, str]:
    """Overwrite one field (a dimension, an index, an option, a scale, ...)."""
    kinds = sorted(fields)
    kind = kinds[rng.integers(len(kinds))]
    position, width = fields[kind][rng.integers(len(fields[kind]))]
    value = _interesting(width, rng, len(data))
    out = bytearray(data)
    out[position:position + width] = value
    return bytes(out), f"{kind} at {position} := {value.hex()}"


def splice(data: bytes, other: bytes, rng: np.random.Generator) -> tuple[bytes, str]:
    """Overwrite or insert a run of bytes taken from another model (or this one)."""
    length = int(rng.integers(1, 257))
    source = int(rng.integers(max(len(other) - length, 1)))
    chunk = other[source:source + length]
    target = int(rng.integers(max(len(data), 1)))
    if rng.random() < 0.5:
        return data[:target] + chunk + data[target + len(chunk):], \
            f"splice {len(chunk)} bytes from {source} over {target}"
    return data[:target] + chunk + data[target:], f"splice-insert {len(chunk)} bytes at {target}"


# --------------------------------------------------------------------------
# The driver (runs in a subprocess: `python -c ... run_driver()` reads a JSON job)


def weight_spans(data: bytes) -> list[tuple[int, int]]:
    """Byte ranges of buffer data in an intact model (the weights)."""
    import tflite

    model = tflite.Model.GetRootAs(data, 0)
    spans = []
    for i in range(model.BuffersLength()):
        tab = model.Buffers(i)._tab
        offset = tab.Offset(4)
        if offset:
            start, length = tab.Vector(offset), tab.VectorLen(offset)
            if length:
                spans.append((start, start + length))
    return spans


def structure_positions(data: bytes) -> np.ndarray:
    """Positions outside the weights: where corruption changes structure."""
    mask = np.ones(len(data), dtype=bool)
    for start, end in weight_spans(data):
        mask[start:end] = False
    positions = np.flatnonzero(mask)
    return positions if positions.size else np.arange(len(data))


def mutate(data: bytes, structure: np.ndarray, rng: np.random.Generator) -> tuple[bytes, str]:
    """One random mutant of `data` and a description of what was done."""
    out = bytearray(data)
    size = len(out)

    def position(width: int = 1) -> int:
        if rng.random() < 0.9:
            p = int(structure[rng.integers(structure.size)])
        else:
            p = int(rng.integers(size))
        return min(p, max(size - width, 0))

    kind = rng.choice(["flip", "word32", "word16", "copy", "zero", "truncate"],
                      p=[0.3, 0.3, 0.15, 0.1, 0.05, 0.1])
    if kind == "flip":
        flips = [(position(), int(rng.integers(8))) for _ in range(int(rng.integers(1, 9)))]
        for p, bit in flips:
            out[p] ^= 1 << bit
        return bytes(out), f"flip bits {flips}"
    if kind == "word32":
        p = position(4) & ~3
        choices = INTERESTING_32 + (size, size - 4, size + 4, int(rng.integers(1 << 32)))
        value = int(choices[rng.integers(len(choices))])
        out[p:p + 4] = value.to_bytes(4, "little")
        return bytes(out), f"write32 {value:#x} at {p}"
    if kind == "word16":
        p = position(2) & ~1
        value = int(INTERESTING_16[rng.integers(len(INTERESTING_16))])
        out[p:p + 2] = value.to_bytes(2, "little")
        return bytes(out), f"write16 {value:#x} at {p}"
    if kind == "copy":
        source, target = position(4) & ~3, position(4) & ~3
        out[target:target + 4] = data[source:source + 4]
        return bytes(out), f"copy word {source} -> {target}"
    if kind == "zero":
        p, n = position(), int(rng.integers(1, 65))
        out[p:p + n] = bytes(len(out[p:p + n]))
        return bytes(out), f"zero {n} bytes at {p}"
    length = int(rng.integers(0, size))
    return bytes(out[:length]), f"truncate to {length}"


def _zero_inputs(module) -> list[np.ndarray]:
    """Zeros for every input of the entry graph (dynamic dimensions as 1), each within
    the tensor budget as `run` and `validate` check it."""
    from tfl2tosa.limits import check_tensor

    inputs = []
    for value in module.main.inputs:
        shape = tuple(max(d, 1) for d in getattr(value.type, "shape", None) or ())
        check_tensor(shape, 8, f"input {value.name!r}")
        inputs.append(np.zeros(shape, dtype=np.int8))
    return inputs


def _target(name: str):
    """The function a mutant goes through: `load`, `convert` or `run`."""
    from tfl2tosa.tflite_import import load

    if name == "load":
        return load
    if name == "convert":
        from tfl2tosa.cli.inspect import summarize
        from tfl2tosa.ir.printer import print_module
        from tfl2tosa.pipeline import convert, emit

        def convert_and_inspect(data: bytes) -> None:
            module = load(data)
            summarize(module, "mutant")
            print_module(module)
            emit(convert(data)[0], "tosa")

        return convert_and_inspect
    import reference_model
    from tfl2tosa.tosa.reader import read_tosa

    def run(data: bytes) -> None:
        compiled = reference_model.compile(read_tosa(data))
        compiled.run(_zero_inputs(compiled.module))

    return run


def _escape_place(exc: BaseException) -> str:
    """file:line of the innermost frame in the project, to group escapes by place."""
    import traceback

    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if "/tests/" not in f.filename and "site-packages" not in f.filename]
    frame = frames[-1] if frames else traceback.extract_tb(exc.__traceback__)[-1]
    parts = Path(frame.filename).parts
    return f"{'/'.join(parts[-2:])}:{frame.lineno}"


def run_driver() -> None:
    """Read a job (JSON on stdin), fuzz, print a JSON summary on stdout."""
    import resource
    import signal
    import time
    import warnings

    job = json.loads(sys.stdin.read())
    sys.path.insert(0, str(TESTS_DIR.parent))
    from tfl2tosa import limits
    from tfl2tosa.errors import Tfl2TosaError

    limits.set_max_tensor_bytes(job.get("max_tensor_bytes"))
    target = _target(job.get("target", "load"))
    # Bound the address space: a huge allocation becomes a MemoryError (a failure).
    vm_kib = int(next(line.split()[1] for line in open("/proc/self/status")
                      if line.startswith("VmSize:")))
    limit = vm_kib * 1024 + job["memory_headroom"]
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    class CaseTimeout(BaseException):
        pass

    def on_alarm(signum, frame):
        raise CaseTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    models = [Path(p).read_bytes() for p in job["models"]]
    tflite_input = job.get("target", "load") != "run"
    structures = [structure_positions(m) if tflite_input else np.arange(len(m)) for m in models]
    walk = tflite_fields if tflite_input else tosa_fields
    fields = [walk(m) for m in models]
    rng = np.random.default_rng(job["seed"])
    failures, places, errors, accepted, slowest = [], {}, 0, 0, 0.0
    for case in range(job["cases"]):
        which = int(rng.integers(len(models)))
        data = models[which]
        choice = rng.random()
        if choice < 0.35 and fields[which]:
            mutant, how = field_edit(data, fields[which], rng)
        elif choice < 0.45:
            mutant, how = splice(data, models[int(rng.integers(len(models)))], rng)
        else:
            mutant, how = mutate(data, structures[which], rng)
        label = f"case {case}: {Path(job['models'][which]).name}: {how}"
        start = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, job["case_timeout"])
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    target(mutant)
                    accepted += 1
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            if caught:
                failures.append(f"{label}: warning on success: {caught[0].message}"[:400])
                places.setdefault(f"warning {caught[0].filename}:{caught[0].lineno}", label)
        except Tfl2TosaError as exc:
            errors += 1
            # The CLI prints the first line: it must name the problem by itself.
            first_line = str(exc).split("\n", 1)[0]
            if not first_line or first_line.endswith(":"):
                failures.append(f"{label}: {type(exc).__name__} message's first line says "
                                f"nothing: {exc!r}")
        except CaseTimeout:
            failures.append(f"{label}: no result within {job['case_timeout']} s")
            places.setdefault("timeout", label)
        except BaseException as exc:  # noqa: BLE001 - anything else is the bug we hunt
            failures.append(f"{label}: {type(exc).__name__}: {exc}"[:400])
            place = f"{type(exc).__name__} at {_escape_place(exc)}"
            if job.get("tracebacks") and place not in places:
                import traceback

                label += "\n" + "".join(traceback.format_exception(exc)[-6:])
                Path(job["tracebacks"], f"case{case}.bin").write_bytes(mutant)
            places.setdefault(place, label)
        slowest = max(slowest, time.perf_counter() - start)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"failures": failures, "places": places, "errors": errors,
                      "accepted": accepted, "slowest": slowest, "peak_rss_kib": peak_kib}))


# --------------------------------------------------------------------------
# The corpus and the tests


def corner_case_models(directory: Path) -> list[Path]:
    """Hand-built models with the features the converter rarely writes."""
    import test_tflite_import as cases

    paths = []

    def save(name: str, data: bytes) -> None:
        path = directory / f"{name}.tflite"
        path.write_bytes(data)
        paths.append(path)

    b = TfliteBuilder()
    x = b.tensor([2, 3], "INT8", "x", scale=[0.5], zero_point=[1])
    w = b.tensor([3, 3], "INT8", "w", np.arange(9, dtype=np.int8).reshape(3, 3),
                 scale=[0.1, 0.2, 0.3], axis=0)
    i4 = b.tensor([5], "INT4", "w4", bytes([0xE1, 0x83, 0x07]), scale=[0.5])
    y = b.tensor([2, 3], "INT8", "y", scale=[0.5], zero_point=[1])
    s = b.tensor([1], "INT32", "s")
    state = b.tensor([2, 3], "FLOAT32", "state", is_variable=True)
    r = b.tensor([2, 3], "FLOAT32", "r")
    b.op("FULLY_CONNECTED", [x, w, -1], [y], options=b.options(
        "FullyConnectedOptions", fusedActivationFunction=1))
    b.op("SHAPE", [i4], [s])
    b.op("CUSTOM", [state], [r], custom_code="Corner", custom_options=b"\x00\x01\x02")
    b.io([x], [y, s, r])
    b.signature("serving", {"x": x}, {"y": y})
    b.metadata("meta", b"value")
    save("corner_quantized", b.to_bytes())
    save("corner_external_buffers", b.to_bytes_with_external_buffers())
    save("corner_rnn", cases.build_rnn(TfliteBuilder()))
    return paths


def fuzz_corpus(small_models: dict[str, Path], directory: Path, zoo_limit: int) -> list[Path]:
    zoo = sorted(zoo_models(), key=lambda p: p.stat().st_size)
    # The short run takes the smallest zoo models so that copying mutants stays cheap.
    zoo = [p for p in zoo if p.stat().st_size <= 4 << 20][:zoo_limit]
    small = [small_models[name] for name in ("conv_int8", "conv_16x8", "while_loop", "lstm_f32")]
    return zoo + small + corner_case_models(directory)


def tosa_corpus(models: list[Path], directory: Path) -> list[Path]:
    """The `.tosa` files of the models that convert (intact: mutation comes after)."""
    from tfl2tosa.errors import Tfl2TosaError
    from tfl2tosa.pipeline import convert, emit

    paths = []
    for i, model in enumerate(models):
        try:
            data = emit(convert(model)[0], "tosa")
        except Tfl2TosaError:
            continue
        path = directory / f"{i}_{model.stem}.tosa"
        path.write_bytes(data)
        paths.append(path)
    return paths


def run_fuzz(models: list[Path], cases: int, seed: int, timeout: float,
             target: str = "load") -> dict:
    # A tensor budget well inside the memory cap: anything larger is refused by name.
    job = {"models": [str(p) for p in models], "cases": cases, "seed": seed,
           "target": target, "case_timeout": 10.0, "memory_headroom": 1 << 30,
           "max_tensor_bytes": 16 << 20}
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from test_import_fuzz import run_driver; run_driver()")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-c", code, str(TESTS_DIR)], input=json.dumps(job),
                            capture_output=True, text=True, timeout=timeout, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def check(summary: dict, cases: int) -> None:
    failures = summary["failures"]
    assert not failures, (f"{len(failures)} of {cases} mutants failed ({len(summary['places'])} "
                          "places):\n" + "\n".join(failures[:20]))
    assert summary["errors"] + summary["accepted"] == cases
    # The mutations must actually hit structure, or this test proves nothing.
    assert summary["errors"] >= cases // 5, summary


def test_fuzz_short(small_models, tmp_path):
    cases = 300
    models = fuzz_corpus(small_models, tmp_path, zoo_limit=4)
    check(run_fuzz(models, cases, seed=20240611, timeout=120), cases)


def test_fuzz_convert_and_inspect_short(small_models, tmp_path):
    """Mutants of every zoo model through inspect's summary and text, conversion
    and the .tosa writer."""
    cases = 1500
    models = fuzz_corpus(small_models, tmp_path, zoo_limit=10_000)
    check(run_fuzz(models, cases, seed=20261126, timeout=300, target="convert"), cases)


def test_fuzz_run_short(tmp_path):
    """Mutants of converted zoo models through the .tosa reader and the reference model."""
    cases = 1500
    zoo = sorted(zoo_models(), key=lambda p: p.stat().st_size)[:40]
    models = tosa_corpus(zoo, tmp_path)
    check(run_fuzz(models, cases, seed=20261126, timeout=300, target="run"), cases)


# At least 100,000 cases in all, over every zoo model.
@pytest.mark.slow
def test_fuzz_long(small_models, tmp_path):
    cases = 20000
    models = fuzz_corpus(small_models, tmp_path, zoo_limit=50)
    check(run_fuzz(models, cases, seed=1, timeout=3600), cases)


@pytest.mark.slow
def test_fuzz_convert_and_inspect_long(small_models, tmp_path):
    cases = 50_000
    models = fuzz_corpus(small_models, tmp_path, zoo_limit=10_000)
    check(run_fuzz(models, cases, seed=2, timeout=3 * 3600, target="convert"), cases)


@pytest.mark.slow
def test_fuzz_run_long(tmp_path):
    cases = 40_000
    models = tosa_corpus(zoo_models(), tmp_path)
    check(run_fuzz(models, cases, seed=3, timeout=3 * 3600, target="run"), cases)
