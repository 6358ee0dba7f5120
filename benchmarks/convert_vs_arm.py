"""Conversion speed: `tfl2tosa convert` against Arm's pipeline, on the zoo architectures.

Arm's pipeline is `tosa-converter-for-tflite` (TFLite -> TOSA MLIR bytecode)
followed by `tosa-opt --tosa-serialize` (MLIR -> .tosa flatbuffer), both from
PyPI (benchmark-only dependencies: `pip install tosa-converter-for-tflite`;
tosa-opt comes with the dev extra's tosa-tools). Both sides are timed as the
shell commands a user runs (ours: the installed `tfl2tosa` script, with its
bytecode compiled as an installation has it), best of --repeat runs, in the same
process of this script so the machine's load is shared; the table prints the
ratio per model, of wall time and of CPU time (user + system of the child
processes: steadier than wall time when other work shares the machine).

    python benchmarks/convert_vs_arm.py [--repeat 5] [MODEL.tflite ...]

Goal: our ratio (ours / Arm) <= 1 on every model. Not met. Measured on the
2-core machine (best of 7; Arm's converter fails on the LSTM models and
attention_block_int16x8; two runs of the script differ by up to 30% per row):

| model | ours s | Arm s | ratio | ours, library only s |
| --- | --- | --- | --- | --- |
| attention_block (dynamic range, f16, f32, int8) | 0.15-0.21 | 0.12-0.16 | 1.12-1.45 | 0.015-0.045 |
| mobilenet_tiny (dynamic range, f16, f32, int16x8, int8) | 0.17-0.25 | 0.12-0.17 | 1.04-1.70 | 0.020-0.040 |
| lstm_classifier (4 flavours, no Arm result) | 0.19-0.29 | fail | - | 0.035-0.076 |

The conversion itself (library column) is 3-10x faster than Arm's pipeline;
the difference is start-up. Python with numpy and typer, before any of our
code, takes 0.10-0.12 s on this machine (`python -c "import numpy, typer"`),
about Arm's whole two-process pipeline; our own modules (the IR, importer,
verifier, writer, the patterns a model needs and the dozen `tflite` modules
it reads) add about 0.03 s and the first conversion in a process 0.03-0.07 s.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


# What an installed package runs with: compiled bytecode (pip compiles it at
# install time). A PYTHONDONTWRITEBYTECODE in the environment would make every
# run of ours compile every module from source.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def compile_bytecode() -> None:
    for package in ("tfl2tosa", "legalize", "reference_model"):
        compileall.compile_dir(ROOT / package, quiet=1)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def best_time(commands: list[list[str]], repeat: int) -> tuple[float, float] | None:
    """(best wall time, best CPU time) of running `commands` in sequence."""
    best_wall = best_cpu = float("inf")
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), _children_cpu()
        for command in commands:
            if subprocess.run(command, capture_output=True, env=ENV, check=False).returncode != 0:
                return None
        best_wall = min(best_wall, time.perf_counter() - start)
        best_cpu = min(best_cpu, _children_cpu() - start_cpu)
    return best_wall, best_cpu


def in_process_time(model: Path, repeat: int) -> float:
    from tfl2tosa.pipeline import convert, emit

    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        module, _ = convert(model)
        emit(module, "tosa")
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    models = args.models or sorted((ROOT / "models" / "arch").glob("*.tflite"))
    arm_converter = shutil.which("tosa-converter-for-tflite", path=str(BIN)) or shutil.which(
        "tosa-converter-for-tflite")
    tosa_opt = shutil.which("tosa-opt", path=str(BIN)) or shutil.which("tosa-opt")
    if arm_converter is None or tosa_opt is None:
        sys.exit("needs tosa-converter-for-tflite and tosa-opt: "
                 "pip install tosa-converter-for-tflite 'tfl2tosa[dev]'")
    ours_cli = [str(BIN / "tfl2tosa"), "convert"]
    compile_bytecode()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            out = Path(tmp) / f"{model.stem}.tosa"
            ours = best_time([[*ours_cli, str(model), "-o", str(out)]], args.repeat)
            ours_lib = in_process_time(model, args.repeat) if ours is not None else None
            bytecode = Path(tmp) / f"{model.stem}.mlirbc"
            arm = best_time([
                [arm_converter, str(model), "--bytecode", "-o", str(bytecode)],
                [tosa_opt, str(bytecode),
                 f"--tosa-serialize=tosa-flatbuffer-filename={Path(tmp) / 'arm.tosa'}",
                 "-o", "/dev/null"],
            ], args.repeat)
            rows.append((model.name, ours, ours_lib, arm))
    print(f"{'model':40} {'ours CLI s':>10} {'CPU s':>6} {'ours lib s':>10} {'Arm s':>6} "
          f"{'CPU s':>6} {'ratio':>6} {'CPU ratio':>9}")
    for name, ours, ours_lib, arm in rows:
        def fmt(t: float | None) -> str:
            return "fail" if t is None else f"{t:.3f}"
        wall_ratio = f"{ours[0] / arm[0]:.2f}" if ours and arm else "-"
        cpu_ratio = f"{ours[1] / arm[1]:.2f}" if ours and arm else "-"
        print(f"{name:40} {fmt(ours and ours[0]):>10} {fmt(ours and ours[1]):>6} "
              f"{fmt(ours_lib):>10} {fmt(arm and arm[0]):>6} {fmt(arm and arm[1]):>6} "
              f"{wall_ratio:>6} {cpu_ratio:>9}")
    print("ratio = ours CLI / Arm pipeline (both include process start-up); < 1 is faster")


if __name__ == "__main__":
    main()
