"""Throughput against Arm's pipeline: one table per run, every row measured in this run.

Each row runs our command and its counterpart alternately, --repeat times, in
this one process (so both see the same machine load), and keeps the best wall
time and the best CPU time (user + system of the child processes) of each side:

- `convert MODEL`: `tfl2tosa convert` against `tosa-converter-for-tflite`
  (TFLite -> TOSA MLIR bytecode) + `tosa-opt --tosa-serialize` (-> .tosa).
- `run MODEL`: `tfl2tosa run` on our .tosa against Arm's `tosa_reference_model`
  executable on Arm's .tosa, same seeded inputs.
- `batch convert`: `tfl2tosa batch --no-validate -j 2` over the whole zoo
  (`--batch-models`: `models/`, toolchain zoo included, every model Arm's pipeline
  converts) against Arm's two commands per model, two models at a time.
- `batch validate`: `tfl2tosa batch -j 2` (convert + validate against TFLite)
  against its floor, TFLite alone: two processes each importing TensorFlow once
  and running the interpreter `--runs` times per model on its half of the models.
- `start-up floor`: `python -c "import numpy"`, the floor under every command of ours
  (`convert` runs with one OpenBLAS thread, so its floor imports numpy that way).

Benchmark-only dependency: `pip install tosa-converter-for-tflite` (in any
environment; give its executable with --arm-converter if it is not on PATH).

    python benchmarks/throughput.py [--repeat 3] [--models DIR_OR_FILE ...] [--no-batch]

The single-command rows run on `--models` (default: the arch zoo and the large
models of `benchmarks/.cache/`, which `benchmarks/mobilenet_v2.py` and
`benchmarks/keras_applications.py` make).

Goals (issue 18): batch convert <= 0.25x Arm; single convert <= 1.0x Arm on every
model of 5 MB or more, and at most start-up floor + 30 ms on smaller ones (each such
row measures the floor again, in turn with its own commands, and its goal column
shows that floor); run <= 1.0x Arm on every model. The last column says whether the row meets its goal,
judged on CPU time: the machine is shared, and another process's load stretches
wall times but not the CPU time a command needs.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
LARGE_BYTES = 5 << 20
CPU = 1  # index of the CPU time in a (wall, CPU) result: goals are judged on it
FLOOR_SLACK_S = 0.030

# TFLite alone, as the floor of a validating batch: one process per half of the models.
TFLITE_ONLY = """
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np, tensorflow as tf
runs = int(sys.argv[1])
for path in sys.argv[2:]:
    try:  # a model TFLite refuses (an input's domain, a kernel it lacks) costs what it costs
        interp = tf.lite.Interpreter(model_path=path)
        interp.allocate_tensors()
        rng = np.random.default_rng(0)
        for _ in range(runs):
            for d in interp.get_input_details():
                info = np.iinfo(d["dtype"]) if np.issubdtype(d["dtype"], np.integer) else None
                x = (rng.integers(info.min, info.max, d["shape"], endpoint=True) if info
                     else rng.standard_normal(d["shape"])).astype(d["dtype"])
                interp.set_tensor(d["index"], x)
            interp.invoke()
    except Exception:
        pass
"""


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(step) -> tuple[float, float] | None:
    start, start_cpu = time.perf_counter(), _children_cpu()
    if not step():
        return None
    return time.perf_counter() - start, _children_cpu() - start_cpu


def _commands(commands: list[list[str]], exit_codes: tuple[int, ...] = (0,)):
    def step() -> bool:
        return all(subprocess.run(c, capture_output=True, env=ENV).returncode in exit_codes
                   for c in commands)
    return step


def _parallel(groups: list[list[list[str]]], jobs: int = 2):
    def step() -> bool:
        with ThreadPoolExecutor(jobs) as pool:
            return all(pool.map(lambda g: _commands(g)(), groups))
    return step


def interleaved(ours, theirs, repeat: int, *others):
    """Best (wall, CPU) of each side (ours, theirs, then any others), all run in turn."""
    steps = (ours, theirs, *others)
    best = [None] * len(steps)
    for _ in range(repeat):
        for side, step in enumerate(steps):
            if step is None:
                continue
            result = _timed(step)
            if result is None:
                best[side] = "fail"
            elif best[side] != "fail":
                best[side] = result if best[side] is None else (
                    min(best[side][0], result[0]), min(best[side][1], result[1]))
    return best


class Table:
    def __init__(self) -> None:
        self.rows: list[tuple] = []

    def add(self, measure: str, ours, theirs, goal: str, met: bool | None) -> None:
        self.rows.append((measure, ours, theirs, goal, met))

    def print(self) -> None:
        def fmt(x):
            return "fail" if x == "fail" else "-" if x is None else f"{x[0]:.3f} / {x[1]:.3f}"
        print("| measure | ours wall / CPU s | Arm (or floor) wall / CPU s | ratio wall | "
              "ratio CPU | goal | met |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for measure, ours, theirs, goal, met in self.rows:
            ok = isinstance(ours, tuple) and isinstance(theirs, tuple)
            ratio = f"{ours[0] / theirs[0]:.2f}" if ok else "-"
            cpu = f"{ours[1] / theirs[1]:.2f}" if ok and theirs[1] else "-"
            verdict = "-" if met is None else "yes" if met else "no"
            print(f"| {measure} | {fmt(ours)} | {fmt(theirs)} | {ratio} | {cpu} | {goal} | "
                  f"{verdict} |")


def _inputs(tosa: Path, directory: Path) -> tuple[list[str], list[str]]:
    """Seeded random inputs of a .tosa graph saved as .npy: (names, files)."""
    sys.path.insert(0, str(ROOT))
    from tfl2tosa.ir.types import numpy_dtype, storage_type
    from tfl2tosa.tosa.reader import read_tosa

    rng = np.random.default_rng(0)
    names, files = [], []
    for value in read_tosa(str(tosa)).main.inputs:
        dtype = numpy_dtype(storage_type(value.type.element))
        shape = [max(d, 1) for d in value.type.shape]
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            array = rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
        else:
            array = rng.standard_normal(shape).astype(dtype)
        path = directory / f"in{len(files)}.npy"
        np.save(path, array)
        names.append(value.name)
        files.append(str(path))
    return names, files


def _signature(tosa: Path) -> tuple[list[str], list[str]]:
    """Input and output names of a .tosa graph (Arm's names its tensors its own way)."""
    from tfl2tosa.tosa.reader import read_tosa

    main = read_tosa(str(tosa)).main
    return [v.name for v in main.inputs], [v.name for v in main.outputs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", type=Path,
                        default=[ROOT / "models" / "arch", ROOT / "benchmarks" / ".cache"],
                        help="models of the single-command rows")
    parser.add_argument("--batch-models", nargs="*", type=Path, default=[ROOT / "models"],
                        help="models of the batch rows (directories are searched recursively)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch-repeat", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3, help="validation runs per model")
    parser.add_argument("--no-batch", action="store_true")
    parser.add_argument("--no-single", action="store_true",
                        help="only the batch rows (and the start-up floor)")
    parser.add_argument("--arm-converter",
                        default=shutil.which("tosa-converter-for-tflite", path=str(BIN))
                        or shutil.which("tosa-converter-for-tflite"))
    args = parser.parse_args()
    tosa_opt = shutil.which("tosa-opt", path=str(BIN)) or shutil.which("tosa-opt")
    arm_ref = shutil.which("tosa_reference_model", path=str(BIN))
    if not args.arm_converter or not tosa_opt or not arm_ref:
        sys.exit("needs tosa-converter-for-tflite (--arm-converter), tosa-opt and "
                 "tosa_reference_model: pip install tosa-converter-for-tflite 'tfl2tosa[dev]'")
    models = sorted(p for m in args.models for p in ([m] if m.is_file() else m.glob("*.tflite")))
    batch_models = sorted(p.resolve() for m in args.batch_models
                          for p in ([m] if m.is_file() else m.rglob("*.tflite")))
    for package in ("tfl2tosa", "legalize", "reference_model"):
        compileall.compile_dir(ROOT / package, quiet=1)
    ours_cli = str(BIN / "tfl2tosa")
    start_load = os.getloadavg()
    table = Table()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        floor = interleaved(_commands([[sys.executable, "-c", "import numpy"]]), None,
                            args.repeat)[0]
        table.add("start-up floor: python -c 'import numpy'", floor, None, "-", None)
        # `tfl2tosa convert` runs with one OpenBLAS thread (tfl2tosa/cli), whose
        # start-up then costs less CPU: its floor is numpy imported the same way.
        single_thread = ["env", "OPENBLAS_NUM_THREADS=1", sys.executable, "-c", "import numpy"]
        convert_floor = interleaved(_commands([single_thread]), None, args.repeat)[0]
        table.add("start-up floor of convert: the same, OPENBLAS_NUM_THREADS=1", convert_floor,
                  None, "-", None)

        def arm_convert(model: Path, out: Path) -> list[list[str]]:
            bytecode = out.with_suffix(".mlirbc")
            return [[args.arm_converter, str(model), "--bytecode", "-o", str(bytecode)],
                    [tosa_opt, str(bytecode), f"--tosa-serialize=tosa-flatbuffer-filename={out}",
                     "-o", "/dev/null"]]

        for model in [] if args.no_single else models:
            ours_out, arm_out = tmp / f"{model.stem}.ours.tosa", tmp / f"{model.stem}.arm.tosa"
            large = model.stat().st_size >= LARGE_BYTES
            size = f"{model.stat().st_size / 2**20:.1f} MB"
            # A small model's goal is the floor: measured in turn with this row's
            # commands, as the machine's speed drifts over a run.
            ours, arm, *row_floor = interleaved(
                _commands([[ours_cli, "convert", str(model), "-o", str(ours_out)]]),
                _commands(arm_convert(model, arm_out)), args.repeat,
                *([] if large else [_commands([single_thread])]))
            if large:
                goal, met = "<= 1.0x", isinstance(ours, tuple) and isinstance(arm, tuple) and \
                    ours[CPU] <= arm[CPU]
            else:
                floor_cpu = row_floor[0][CPU]
                goal = f"<= floor + 30 ms ({floor_cpu:.3f} + 0.030)"
                met = isinstance(ours, tuple) and ours[CPU] <= floor_cpu + FLOOR_SLACK_S
            table.add(f"convert {model.name} ({size})", ours, arm, goal, met)
            if not (ours_out.exists() and arm_out.exists()):
                continue
            run_dir = tmp / f"{model.stem}.run"
            run_dir.mkdir()
            _, files = _inputs(ours_out, run_dir)
            arm_inputs, arm_names = _signature(arm_out)
            ours_run = [ours_cli, "run", str(ours_out), "-o", str(run_dir / "ours")]
            for file in files:
                ours_run += ["--input", file]
            arm_run = [arm_ref, "--tosa_file", str(arm_out), "--ifm_name", ",".join(arm_inputs),
                       "--ifm_file", ",".join(files), "--ofm_name", ",".join(arm_names),
                       "--ofm_file", ",".join(str(run_dir / f"arm{i}.npy")
                                              for i in range(len(arm_names))),
                       "--output_dir", str(run_dir)]
            ours, arm = interleaved(_commands([ours_run]), _commands([arm_run]), args.repeat)
            met = isinstance(ours, tuple) and isinstance(arm, tuple) and ours[CPU] <= arm[CPU]
            table.add(f"run {model.name}", ours, arm, "<= 1.0x", met)

        if not args.no_batch:
            # Both batches over the models Arm's pipeline converts (it fails on some:
            # its failures would make its time meaningless).
            with ThreadPoolExecutor(2) as pool:
                converts = list(pool.map(
                    lambda im: _commands(arm_convert(im[1], tmp / f"{im[0]}.probe.arm.tosa"))(),
                    enumerate(batch_models)))
            models = [m for m, ok in zip(batch_models, converts) if ok]
            zoo = tmp / "zoo"
            for i, model in enumerate(models):
                # One directory per model keeps equal file names of different zoos apart.
                (zoo / str(i)).mkdir(parents=True)
                (zoo / str(i) / model.name).symlink_to(model)
            ours = [ours_cli, "batch", str(zoo), "-j", "2", "--no-progress", "--timeout", "600"]
            arm_groups = [arm_convert(m, tmp / f"{i}.batch.arm.tosa") for i, m in enumerate(models)]
            ours_b, arm_b = interleaved(
                _commands([ours + ["--no-validate", "-o", str(tmp / "b1")]]),
                _parallel(arm_groups), args.batch_repeat)
            met = isinstance(ours_b, tuple) and isinstance(arm_b, tuple) and \
                ours_b[CPU] <= 0.25 * arm_b[CPU]
            table.add(f"batch convert, {len(models)} of {len(batch_models)} models "
                      "(those Arm converts), -j 2", ours_b, arm_b, "<= 0.25x", met)
            halves = [[str(m) for m in models[0::2]], [str(m) for m in models[1::2]]]
            floor_groups = [[[sys.executable, "-c", TFLITE_ONLY, str(args.runs), *h]]
                            for h in halves if h]
            ours_v, floor_v = interleaved(
                # exit code 1: some model failed validation (the statuses below say which)
                _commands([ours + ["--runs", str(args.runs), "-o", str(tmp / "b2")]], (0, 1)),
                _parallel(floor_groups), args.batch_repeat)
            table.add(f"batch validate, {len(models)} models, -j 2 (vs TFLite alone)",
                      ours_v, floor_v, "-", None)
            report = json.loads((tmp / "b2" / "report.json").read_text())
            statuses = report["summary"]["by_status"]
            print(f"batch validate statuses: {statuses}")
            for record in report["models"]:
                if record["status"] != "pass":
                    print(f"  {record['status']}: {record['path']}: {record['error']}")
    table.print()
    print(f"ratio = ours / Arm (or the floor); best of {args.repeat} interleaved runs "
          f"({args.batch_repeat} for batch rows); load average at the start "
          f"{start_load[0]:.1f}, at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
