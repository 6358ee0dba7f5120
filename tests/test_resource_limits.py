"""Resource bounds: a tensor over `--max-tensor-bytes` and a recurrent op with too many
time steps are refused by name before anything is allocated, and nothing hangs.

Each case runs the command line in a subprocess, so that the child's peak resident
memory (the kernel's VmHWM, an independent judge) shows nothing of the size of the
refused tensor was ever allocated.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import TfliteBuilder
from test_legalize_rnn import Lstm, unidirectional_lstm

from tfl2tosa import limits
from tfl2tosa.errors import ResourceLimitError, UsageError

REPO = Path(__file__).resolve().parent.parent
# Far below the refused tensors (4 GiB and more), above what a refusal needs (validate
# imports TensorFlow: about 600 MiB).
PEAK_LIMIT_BYTES = 1 << 30


def run_cli(*args: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess, int]:
    """The CLI in a fresh process, and that process's peak RSS in bytes."""
    # VmHWM: the peak of this process's own memory map (ru_maxrss would carry the
    # forking test worker's peak across exec).
    code = ("import sys, runpy; sys.argv = ['tfl2tosa', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('tfl2tosa', run_name='__main__')\n"
            "finally:\n"
            "    hwm = [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')]\n"
            "    print('peak', hwm[0], file=sys.stderr)")
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    env.pop(limits.ENVIRONMENT_VARIABLE, None)
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                            text=True, timeout=timeout, env=env)
    peak_line = [line for line in result.stderr.splitlines() if line.startswith("peak ")]
    peak = int(peak_line[-1].split()[1]) * 1024 if peak_line else 0
    return result, peak


def error_line(result: subprocess.CompletedProcess) -> str:
    return next(line for line in result.stderr.splitlines() if line.startswith("error:"))


def write(builder: TfliteBuilder, path: Path) -> Path:
    path.write_bytes(builder.to_bytes())
    return path


def topk_model(path: Path) -> Path:
    b = TfliteBuilder()
    x = b.tensor([1, 1 << 30], "FLOAT32", "x")
    k = b.tensor([], "INT32", "k", np.int32([1]))
    values, indices = b.tensor([1, 1], "FLOAT32", "values"), b.tensor([1, 1], "INT32", "indices")
    b.op("TOPK_V2", [x, k], [values, indices])
    b.io([x], [values, indices])
    return write(b, path)


def segment_model(path: Path) -> Path:
    b = TfliteBuilder()
    data = b.tensor([4], "FLOAT32", "data")
    ids = b.tensor([4], "INT32", "ids", np.int32([0, 1, 2, 3]))
    count = b.tensor([], "INT32", "count", np.int32([1 << 30]))
    out = b.tensor([1 << 30], "FLOAT32", "out")
    b.op("UNSORTED_SEGMENT_SUM", [data, ids, count], [out])
    b.io([data], [out])
    return write(b, path)


def dynamic_update_slice_model(path: Path) -> Path:
    b = TfliteBuilder()
    operand = b.tensor([3, 1 << 30], "FLOAT32", "operand")
    update = b.tensor([1, 4], "FLOAT32", "update")
    start = b.tensor([2], "INT32", "start", np.int32([0, 0]))
    out = b.tensor([3, 1 << 30], "FLOAT32", "out")
    b.op("DYNAMIC_UPDATE_SLICE", [operand, update, start], [out])
    b.io([operand, update], [out])
    return write(b, path)


def square_add_model(path: Path, side: int) -> Path:
    b = TfliteBuilder()
    x = b.tensor([side, side], "FLOAT32", "x")
    y = b.tensor([side, side], "FLOAT32", "y")
    b.op("ADD", [x, x], [y], options=b.options("AddOptions"))
    b.io([x], [y])
    return write(b, path)


# The cases: each declares a tensor of 4 GiB or more; a 1 GiB budget must
# refuse it whatever the machine's memory (the default depends on it).
@pytest.mark.parametrize("build, command, named", [
    (topk_model, "convert", "graph input 'x'"),
    (segment_model, "convert", "tensor 'out'"),
    (dynamic_update_slice_model, "convert", "graph input 'operand'"),
    (lambda p: square_add_model(p, 65536), "validate", "graph input 'x'"),
], ids=["topk_1x2^30", "unsorted_segment_sum_2^30", "dynamic_update_slice_12GiB",
        "validate_65536x65536"])
def test_a_tensor_over_the_budget_is_refused_before_allocation(build, command, named,
                                                                tmp_path):
    model = build(tmp_path / "model.tflite")
    args = ["--max-tensor-bytes", "1G", command, str(model)]
    if command == "convert":
        args += ["-o", str(tmp_path / "out.tosa")]
    result, peak = run_cli(*args)
    assert result.returncode == ResourceLimitError.exit_code, result.stderr
    line = error_line(result)
    assert named in line and "--max-tensor-bytes" in line and "1.0 GiB" in line, line
    assert peak < PEAK_LIMIT_BYTES, f"peak RSS {peak >> 20} MiB before refusing"
    assert not (tmp_path / "out.tosa").exists()


def test_the_default_budget_refuses_the_validate_case(tmp_path):
    """[65536, 65536] float32 is 16 GiB: over an eighth of any machine this runs on."""
    model = square_add_model(tmp_path / "model.tflite", 65536)
    assert limits.default_max_tensor_bytes() < (16 << 30)
    result, peak = run_cli("validate", str(model))
    assert result.returncode == ResourceLimitError.exit_code, result.stderr
    assert "more than the tensor budget" in error_line(result)
    assert peak < PEAK_LIMIT_BYTES


def test_lstm_with_very_many_steps_is_refused_by_name(tmp_path):
    model = unidirectional_lstm(TfliteBuilder(), tmp_path / "lstm.tflite",
                                Lstm(steps=100_000, n_input=2, n_cell=2, n_output=2))
    result, _ = run_cli("convert", str(model), "-o", str(tmp_path / "out.tosa"), timeout=60)
    assert result.returncode == ResourceLimitError.exit_code, result.stderr
    line = error_line(result)
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in line and "100000 time steps" in line, line
    assert f"more than {limits.MAX_UNROLLED_STEPS}" in line


def test_lstm_at_the_step_limit_still_converts(tmp_path):
    from tfl2tosa.pipeline import convert

    model = unidirectional_lstm(TfliteBuilder(), tmp_path / "lstm.tflite",
                                Lstm(steps=limits.MAX_UNROLLED_STEPS, n_input=1, n_cell=1,
                                     n_output=1))
    module, _ = convert(model)
    assert module.main.outputs[0].type.shape == (1, limits.MAX_UNROLLED_STEPS, 1)


def test_run_refuses_a_result_over_the_budget_by_op(tmp_path):
    from tfl2tosa.pipeline import convert, emit

    module, _ = convert(square_add_model(tmp_path / "model.tflite", 64))
    tosa = tmp_path / "model.tosa"
    tosa.write_bytes(emit(module, "tosa"))
    x = tmp_path / "x.npy"
    np.save(x, np.ones((64, 64), np.float32))
    result, _ = run_cli("--max-tensor-bytes", "1K", "run", str(tosa), "-i", str(x),
                        "-o", str(tmp_path / "out"))
    assert result.returncode == ResourceLimitError.exit_code, result.stderr
    line = error_line(result)
    assert "ADD" in line and "[64, 64]" in line and "16384 bytes" in line, line
    ok, _ = run_cli("--max-tensor-bytes", "16K", "run", str(tosa), "-i", str(x),
                    "-o", str(tmp_path / "out"))
    assert ok.returncode == 0, ok.stderr


@pytest.mark.parametrize("text, expected", [
    ("1000", 1000), ("512M", 512 << 20), ("4G", 4 << 30), ("1.5K", 1536), ("2GiB", 2 << 30),
    ("64kb", 64 << 10)])
def test_byte_counts(text, expected):
    assert limits.parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "lots", "-1", "0", "nan", "1Q"])
def test_bad_byte_counts_are_usage_errors(text):
    with pytest.raises(UsageError):
        limits.parse_bytes(text)


def test_a_bad_budget_on_the_command_line_is_one_usage_line(tmp_path):
    result, _ = run_cli("--max-tensor-bytes", "lots", "inspect", str(tmp_path / "x.tflite"))
    assert result.returncode == UsageError.exit_code
    assert "is not a byte count" in error_line(result)


def test_the_environment_sets_the_budget_for_worker_processes(monkeypatch):
    monkeypatch.setattr(limits, "_budget", None)
    monkeypatch.setenv(limits.ENVIRONMENT_VARIABLE, "2048")
    assert limits.max_tensor_bytes() == 2048
    with pytest.raises(ResourceLimitError, match="needs 4.0 KiB"):
        limits.check_tensor((1024,), 4, "a tensor")
