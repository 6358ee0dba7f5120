"""Mutation fuzzing of the importer: only ModelError may come out, quickly, in bounded memory.

Mutants of real models (the zoo, converter-made small models, hand-built
corner cases): bit flips, overwritten 16/32-bit words (flatbuffer offsets,
lengths and vtable entries), copied words, zeroed ranges and truncations.
Mutations land mostly outside the weight data, where they would only change
numbers. Each run happens in a subprocess with an address-space limit; each
case has an alarm-based time limit. The short run is part of the normal
suite; the long run is marked slow.
"""

from __future__ import annotations

import json
import os
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


def run_driver() -> None:
    """Read a job (JSON on stdin), fuzz, print a JSON summary on stdout."""
    import resource
    import signal
    import time

    job = json.loads(sys.stdin.read())
    sys.path.insert(0, str(TESTS_DIR.parent))
    from tfl2tosa.errors import ModelError
    from tfl2tosa.tflite_import import load

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
    structures = [structure_positions(m) for m in models]
    rng = np.random.default_rng(job["seed"])
    failures, errors, accepted, slowest = [], 0, 0, 0.0
    for case in range(job["cases"]):
        which = int(rng.integers(len(models)))
        mutant, how = mutate(models[which], structures[which], rng)
        label = f"case {case}: {Path(job['models'][which]).name}: {how}"
        start = time.perf_counter()
        signal.setitimer(signal.ITIMER_REAL, job["case_timeout"])
        try:
            load(mutant)
            accepted += 1
        except ModelError as exc:
            errors += 1
            if "\n" in str(exc) or not str(exc):
                failures.append(f"{label}: ModelError message not one line: {exc!r}")
        except CaseTimeout:
            failures.append(f"{label}: no result within {job['case_timeout']} s")
        except BaseException as exc:  # noqa: BLE001 - anything else is the bug we hunt
            failures.append(f"{label}: {type(exc).__name__}: {exc}"[:400])
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        slowest = max(slowest, time.perf_counter() - start)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"failures": failures, "errors": errors, "accepted": accepted,
                      "slowest": slowest, "peak_rss_kib": peak_kib}))


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
    save("corner_blockwise", _blockwise_model())
    return paths


def _blockwise_model() -> bytes:
    """An int4 FULLY_CONNECTED filter with blockwise scales and zero points."""
    from test_weights_int4 import blockwise_weights

    b = TfliteBuilder()
    q = np.arange(-8, 8, dtype=np.int8).reshape(2, 8)
    w = blockwise_weights(b, q, np.full((2, 2), 0.5, np.float16), 4,
                          zero_points=np.zeros((2, 2), np.int32))
    x = b.tensor([1, 8], "FLOAT32", "x")
    y = b.tensor([1, 2], "FLOAT32", "y")
    b.op("FULLY_CONNECTED", [x, w, -1], [y], options=b.options("FullyConnectedOptions"))
    b.io([x], [y])
    return b.to_bytes()


def fuzz_corpus(small_models: dict[str, Path], directory: Path, zoo_limit: int) -> list[Path]:
    zoo = sorted(zoo_models(), key=lambda p: p.stat().st_size)
    # The short run takes the smallest zoo models so that copying mutants stays cheap.
    zoo = [p for p in zoo if p.stat().st_size <= 4 << 20][:zoo_limit]
    small = [small_models[name] for name in ("conv_int8", "conv_16x8", "while_loop", "lstm_f32")]
    return zoo + small + corner_case_models(directory)


def run_fuzz(models: list[Path], cases: int, seed: int, timeout: float) -> dict:
    job = {"models": [str(p) for p in models], "cases": cases, "seed": seed,
           "case_timeout": 2.0, "memory_headroom": 1 << 30}
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from test_import_fuzz import run_driver; run_driver()")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-c", code, str(TESTS_DIR)], input=json.dumps(job),
                            capture_output=True, text=True, timeout=timeout, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def check(summary: dict, cases: int) -> None:
    failures = summary["failures"]
    assert not failures, f"{len(failures)} of {cases} mutants failed:\n" + "\n".join(failures[:20])
    assert summary["errors"] + summary["accepted"] == cases
    # The mutations must actually hit structure, or this test proves nothing.
    assert summary["errors"] >= cases // 5, summary


def test_fuzz_short(small_models, tmp_path):
    cases = 300
    models = fuzz_corpus(small_models, tmp_path, zoo_limit=4)
    check(run_fuzz(models, cases, seed=20240611, timeout=120), cases)


@pytest.mark.slow
def test_fuzz_long(small_models, tmp_path):
    cases = 20000
    models = fuzz_corpus(small_models, tmp_path, zoo_limit=50)
    check(run_fuzz(models, cases, seed=1, timeout=3600), cases)
