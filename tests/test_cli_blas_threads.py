"""How many OpenBLAS threads a `tfl2tosa` process's numpy gets: one for `convert` and
`run` (their threads cost more CPU than they save), unless the user chose a count
with any variable OpenBLAS reads for it. Read from OpenBLAS itself at exit of a
real CLI process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tfl2tosa.ir import Graph, Module, Op, TensorType, scalar_type
from tfl2tosa.tosa.writer import write_tosa

ROOT = Path(__file__).resolve().parent.parent
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
# The BLAS numpy was built on, as numpy reports it ("scipy-openblas" for the wheels).
NUMPY_BLAS = str(np.__config__.CONFIG["Build Dependencies"]["blas"].get("name", "")).lower()

# Asks the OpenBLAS library numpy loaded how many threads it runs (names as
# scipy-openblas and plain OpenBLAS export the getter); prints "none" when numpy is
# built on another BLAS.
REPORT = """
import ctypes, sys
def report():
    count = "none"
    paths = {line.split()[-1] for line in open("/proc/self/maps") if "openblas" in line}
    for path in paths:
        library = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                     "openblas_get_num_threads"):
            getter = getattr(library, name, None)
            if getter is not None:
                count = getter()
    print(f"\\nthreads={count}", file=sys.__stderr__)
"""
# Runs the CLI as the installed script does, and reports at its exit.
PROBE = REPORT + """
import atexit
atexit.register(report)
sys.argv = ["tfl2tosa"] + sys.argv[1:]
from tfl2tosa.cli import main
main()
"""

pytestmark = [
    pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/self/maps"),
    # With one core OpenBLAS runs one thread whatever it is told.
    pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores"),
]


def blas_threads(*args: str, cwd: Path = ROOT, probe: str = PROBE, **variables: str) -> int:
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARIABLES}
    env.update(variables)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", probe, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    count = done.stderr.strip().splitlines()[-1].removeprefix("threads=")
    if count == "none":
        # Only a numpy built on another BLAS may lack the getter; on an OpenBLAS
        # build (the wheels') a probe that finds none is broken, not excused.
        assert "openblas" not in NUMPY_BLAS, f"no OpenBLAS thread getter found in {NUMPY_BLAS}"
        pytest.skip(f"numpy is built on {NUMPY_BLAS}, not OpenBLAS: "
                    "the thread count these tests read is OpenBLAS's")
    return int(count)


@pytest.fixture
def run_args(tmp_path: Path) -> list[str]:
    graph = Graph("main")
    i32 = TensorType((2,), scalar_type("i32"))
    a = graph.add_input("a", i32)
    total = graph.append(Op("tosa.add", [a, a], [i32], result_names=["total"]))
    graph.set_outputs([total.result])
    module = Module()
    module.add_graph(graph)
    (tmp_path / "m.tosa").write_bytes(write_tosa(module))
    np.save(tmp_path / "a.npy", np.arange(2, dtype=np.int32))
    return ["run", "m.tosa", "--input", "a.npy", "-o", "out"]


def test_numpy_runs_several_threads_when_nobody_says():
    # What the tests below see changed: left alone, OpenBLAS takes a thread per core.
    assert blas_threads(probe=REPORT + "import numpy\nreport()\n") > 1


def test_run_uses_one_thread(tmp_path, run_args):
    assert blas_threads(*run_args, cwd=tmp_path) == 1
    assert (tmp_path / "out" / "total.npy").exists()


def test_convert_uses_one_thread(tmp_path):
    model = ROOT / "models/arch/mobilenet_tiny_int8.tflite"
    assert blas_threads("convert", str(model), "-o", "m.tosa", cwd=tmp_path) == 1


@pytest.mark.parametrize("variable", THREAD_VARIABLES)
def test_the_users_thread_count_wins(tmp_path, run_args, variable):
    assert blas_threads(*run_args, cwd=tmp_path, **{variable: "2"}) == 2
