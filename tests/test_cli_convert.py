"""`tfl2tosa convert` and `tfl2tosa validate` from the shell: outputs, errors, exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from arm import run_arm

MODELS = Path(__file__).resolve().parent.parent / "models"
DEMO = MODELS / "demo" / "mobilenet_tiny_int8.tflite"
FLOAT_ADD = MODELS / "unit" / "float32" / "add.tflite"
UNIQUE = MODELS / "unit" / "float32" / "unique.tflite"


def tfl2tosa(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tfl2tosa", *map(str, args)], input=stdin,
                          capture_output=True, timeout=300)


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_convert_writes_a_tosa_file_arm_runs(tmp_path: Path) -> None:
    out = tmp_path / "demo.tosa"
    result = tfl2tosa("convert", DEMO, "-o", out)
    assert result.returncode == 0, result.stderr.decode()
    data = out.read_bytes()
    assert data[4:8] == b"TOSA"
    feed = np.zeros((1, 32, 32, 3), np.int8)
    assert run_arm(data, [feed], [np.dtype(np.int8)]).status == "valid"
    assert leftovers(tmp_path) == []


def test_report_lists_each_op_with_its_path(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    result = tfl2tosa("convert", DEMO, "-o", tmp_path / "demo.tosa", "--report", report)
    assert result.returncode == 0, result.stderr.decode()
    data = json.loads(report.read_text())
    assert data["errors"] == []
    assert data["ops_in"]["tfl.conv_2d"] == 15
    assert {o["path"] for o in data["outcomes"]} == {"integer"}
    assert all(o["loc"].startswith("main:op") for o in data["outcomes"])
    assert data["summary"]["integer"] == len(data["outcomes"])


def test_emit_mlir_and_tfl_to_stdout() -> None:
    mlir = tfl2tosa("convert", FLOAT_ADD, "--emit", "mlir", "-o", "-")
    assert mlir.returncode == 0, mlir.stderr.decode()
    assert '"tosa.add"' in mlir.stdout.decode() and "tfl." not in mlir.stdout.decode()
    tfl = tfl2tosa("convert", FLOAT_ADD, "--emit", "tfl", "-o", "-")
    assert tfl.returncode == 0 and '"tfl.add"' in tfl.stdout.decode()


def test_model_from_stdin_to_stdout() -> None:
    result = tfl2tosa("convert", "-", stdin=FLOAT_ADD.read_bytes())
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout[4:8] == b"TOSA"


def test_emitted_mlir_parses_in_tosa_opt(tmp_path: Path) -> None:
    text = tmp_path / "add.mlir"
    assert tfl2tosa("convert", FLOAT_ADD, "--emit", "mlir", "-o", text).returncode == 0
    opt = Path(sys.executable).parent / "tosa-opt"
    result = subprocess.run([str(opt), str(text), "-o", str(tmp_path / "round.mlir")],
                            capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr.decode()


def test_unconvertible_model_names_the_op_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "unique.tosa"
    out.write_bytes(b"previous contents")
    result = tfl2tosa("convert", UNIQUE, "-o", out)
    assert result.returncode != 0
    err = result.stderr.decode().strip()
    assert len(err.splitlines()) == 1, err
    assert "tfl.unique" in err and "main:op" in err
    assert "Traceback" not in err
    assert out.read_bytes() == b"previous contents"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("content", [b"", b"not a model", b"\x00" * 64])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, content: bytes) -> None:
    model = tmp_path / "bad.tflite"
    model.write_bytes(content)
    result = tfl2tosa("convert", model, "-o", tmp_path / "bad.tosa")
    assert result.returncode == 2
    assert len(result.stderr.decode().strip().splitlines()) == 1
    assert not (tmp_path / "bad.tosa").exists()


def test_missing_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = tfl2tosa("convert", tmp_path / "nope.tflite")
    assert result.returncode == 2
    assert "nope.tflite" in result.stderr.decode()


def test_disable_switches_a_pattern_off(tmp_path: Path) -> None:
    # With the float ADD pattern switched off, the model has no lowering left.
    result = tfl2tosa("convert", FLOAT_ADD, "-o", tmp_path / "x.tosa", "--disable", "add")
    assert result.returncode != 0
    assert "tfl.add" in result.stderr.decode()
    # Switching off the integer conv pattern sends the demo's convs through the fallback.
    report = tmp_path / "r.json"
    result = tfl2tosa("convert", DEMO, "-o", tmp_path / "d.tosa", "--report", report,
                      "--disable", "conv_2d_int")
    assert result.returncode == 0, result.stderr.decode()
    paths = {o["path"] for o in json.loads(report.read_text())["outcomes"]
             if o["op_name"] == "tfl.conv_2d"}
    assert paths == {"fallback"}


def test_validate_demo_is_exact() -> None:
    result = tfl2tosa("validate", DEMO, "--json", "--runs", "2")
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    report = json.loads(result.stdout)
    assert report["passed"] and report["resolver"] == "BUILTIN_REF"
    assert all(o["exact"] and o["max_lsb"] == 0 for o in report["outputs"])


def test_validate_markdown() -> None:
    result = tfl2tosa("validate", FLOAT_ADD, "--markdown", "--runs", "1")
    assert result.returncode == 0
    assert "| output |" in result.stdout.decode() and "PASS" in result.stdout.decode()


def test_python_api_matches_cli(tmp_path: Path) -> None:
    from tfl2tosa.pipeline import convert, emit

    module, report = convert(FLOAT_ADD)
    assert report.ok and report.ops_out == {"tosa.add": 1}
    out = tmp_path / "add.tosa"
    assert tfl2tosa("convert", FLOAT_ADD, "-o", out).returncode == 0
    assert emit(module, "tosa") == out.read_bytes()


def test_cli_writes_the_bytes_emit_returns_to_a_file_and_to_stdout(tmp_path: Path) -> None:
    # The CLI writes a .tosa file's pieces (metadata, each weight's own bytes) one
    # after another; a model with weights has many of them.
    from tfl2tosa.pipeline import convert, emit

    expected = emit(convert(DEMO)[0], "tosa")
    out = tmp_path / "demo.tosa"
    assert tfl2tosa("convert", DEMO, "-o", out).returncode == 0
    assert out.read_bytes() == expected
    piped = tfl2tosa("convert", DEMO, "-o", "-")
    assert piped.returncode == 0 and piped.stdout == expected


def test_top_level_python_api() -> None:
    import tfl2tosa

    module, report = tfl2tosa.convert(FLOAT_ADD)
    assert report.ops_out == {"tosa.add": 1}
    assert tfl2tosa.emit(module, "tosa")[4:8] == b"TOSA"
    assert tfl2tosa.validate(FLOAT_ADD, runs=1).passed
    # Compiled once, run twice: 1 + 2 and 3 + 4 by hand.
    compiled = tfl2tosa.compile_tosa(tfl2tosa.emit(module, "tosa"))
    for x, y in ((1.0, 2.0), (3.0, 4.0)):
        feeds = [np.full(v.type.shape, value, np.float32)
                 for v, value in zip(module.main.inputs, (x, y))]
        (out,) = compiled.run(feeds).values()
        assert np.all(out == x + y)


def test_internal_error_is_one_line_with_exit_70(monkeypatch, capsys, tmp_path: Path) -> None:
    # A bug of ours (here: an exception the library does not expect) must still
    # reach the user as one line, never a traceback.
    import tfl2tosa.pipeline as pipeline  # the command imports convert from here when it runs
    from tfl2tosa.cli import main

    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero\nsecond line")

    monkeypatch.setattr(pipeline, "convert", broken)
    monkeypatch.setattr(sys, "argv", ["tfl2tosa", "convert", str(FLOAT_ADD), "-o",
                                      str(tmp_path / "x.tosa")])
    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 70
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: internal error (ZeroDivisionError: division by zero); "
                   "rerun with --verbose for the traceback and please report it"]
    assert not (tmp_path / "x.tosa").exists()


def test_conversion_runs_no_collection_and_restores_the_collector_even_on_failure() -> None:
    import gc

    from tfl2tosa.errors import ModelError
    from tfl2tosa.pipeline import convert, emit, no_cyclic_collection

    seen = []
    collections = []

    def count(phase: str, info: dict) -> None:
        collections.append(info["generation"])

    assert gc.isenabled()
    gc.callbacks.append(count)
    try:
        # Each stage starts with the collector off and none run since the first.
        module, _ = convert(DEMO, on_stage=lambda stage: seen.append(
            (gc.isenabled(), len(collections))))
        assert len(seen) > 5 and set(seen) == {(False, seen[0][1])}
        with no_cyclic_collection():
            with no_cyclic_collection():
                emit(module, "tosa")
            assert not gc.isenabled()  # nested: off until the outermost ends
    finally:
        gc.callbacks.remove(count)
    assert gc.isenabled()
    with pytest.raises(ModelError):
        convert(b"not a model at all")
    assert gc.isenabled()
    gc.disable()  # a caller that turned it off keeps it off
    try:
        convert(DEMO)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_many_conversions_in_one_process_leave_no_garbage_behind() -> None:
    """The cyclic garbage a conversion leaves while the collector is off is freed
    by the next collection: repeated conversions do not grow the heap."""
    import gc

    from tfl2tosa.pipeline import convert, emit

    def live_objects_after(conversions: int) -> int:
        for _ in range(conversions):
            module, _ = convert(DEMO)
            emit(module, "tosa")
            del module
        gc.collect()
        return len(gc.get_objects())

    live_objects_after(2)  # lazily imported modules, caches
    once = live_objects_after(1)
    assert live_objects_after(6) <= once + 50


# A command line's own process ends without the interpreter's teardown; what a
# normal exit does that anyone sees (atexit handlers, flushed output, exit 0)
# still happens, and a program that calls main itself gets control back.
EXIT_PROBE = """
import atexit, sys
atexit.register(lambda: print("atexit ran", flush=True))
print("before", end=" ")  # left in stdout's buffer
sys.argv = ["tfl2tosa", "convert", sys.argv[1], "-o", "-"]
{call}
print("main returned")
"""


@pytest.mark.parametrize("via", ["entry point", "imported"])
def test_a_command_line_process_exits_as_a_normal_exit_does(tmp_path: Path, via: str) -> None:
    (tmp_path / "caller.py").write_text("def run():\n    from tfl2tosa.cli import main\n"
                                        "    main()\n")
    call = "from tfl2tosa.cli import main; main()" if via == "entry point" else \
        "import caller; caller.run()"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(__file__).resolve().parent.parent), str(tmp_path),
         os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", EXIT_PROBE.format(call=call), str(FLOAT_ADD)],
                            capture_output=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr.decode()
    expected = tfl2tosa("convert", FLOAT_ADD, "-o", "-").stdout
    assert expected[4:8] == b"TOSA"
    ending = b"atexit ran\n" if via == "entry point" else b"main returned\natexit ran\n"
    assert result.stdout == b"before " + expected + ending


def test_a_profiled_command_line_still_writes_its_profile(tmp_path: Path) -> None:
    # cProfile writes its output after the program returns: no early exit under it.
    profile = tmp_path / "convert.prof"
    result = subprocess.run([sys.executable, "-m", "cProfile", "-o", str(profile), "-m",
                             "tfl2tosa", "convert", str(FLOAT_ADD), "-o", str(tmp_path / "x.tosa")],
                            capture_output=True, timeout=300)
    assert result.returncode == 0, result.stderr.decode()
    assert (tmp_path / "x.tosa").stat().st_size > 0
    assert profile.stat().st_size > 0
