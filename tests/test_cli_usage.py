"""The command line as users of command-line tools expect it: one-line usage errors
with exit code 2, conflicting flags refused, readable verifier failures, the umask,
`-v` anywhere, `--version`, help with examples, terminal-only progress and summary.

Run as subprocesses through `python -m tfl2tosa`, where errors become exit codes.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "models"
DEMO = MODELS / "demo" / "mobilenet_tiny_int8.tflite"
INT16 = MODELS / "arch" / "mobilenet_tiny_int16x8.tflite"
FLOAT_ADD = MODELS / "unit" / "float32" / "add.tflite"
COMMANDS = ["convert", "validate", "inspect", "tosa-info", "run", "batch", "report merge"]


def tfl2tosa(*args: object, umask: int | None = None, cwd: Path | None = None,
             ) -> subprocess.CompletedProcess:
    def set_umask() -> None:
        if umask is not None:
            os.umask(umask)

    return subprocess.run([sys.executable, "-m", "tfl2tosa", *map(str, args)],
                          capture_output=True, text=True, timeout=600, cwd=cwd,
                          preexec_fn=set_umask)


def on_terminal(*args: object) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal: (exit code, stdout, what the terminal showed)."""
    controller, terminal = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "tfl2tosa", *map(str, args)],
                               stdout=subprocess.PIPE, stderr=terminal,
                               env={**os.environ, "COLUMNS": "200", "TERM": "xterm"})
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # EIO: the process closed its end
            break
        if not chunk:
            break
        shown += chunk
    stdout = process.stdout.read().decode()
    code = process.wait(timeout=600)
    os.close(controller)
    plain = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", shown.decode(errors="replace"))
    return code, stdout, plain


def assert_one_line_usage_error(result: subprocess.CompletedProcess, *expected: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for text in expected:
        assert text in lines[0]
    # write_atomically's temp files are named `.NAME.xxxx`; none may show.
    assert not re.search(r"/\.[^/\s]+\.[A-Za-z0-9_]{6,}", lines[0]), lines[0]


# ---------------------------------------------------------------------------
# 1-3: usage errors


@pytest.mark.parametrize("runs", ["0", "-1"])
def test_validate_runs_below_one_is_a_usage_error(runs: str) -> None:
    assert_one_line_usage_error(tfl2tosa("validate", FLOAT_ADD, "--runs", runs),
                                "at least 1")


def test_api_runs_zero_is_a_usage_error() -> None:
    from tfl2tosa import validate
    from tfl2tosa.errors import UsageError

    with pytest.raises(UsageError, match="at least 1"):
        validate(FLOAT_ADD, runs=0)
    with pytest.raises(UsageError, match="no input sets"):
        validate(FLOAT_ADD, inputs=[])


def _cases(tmp: Path) -> dict[str, tuple[list[object], tuple[str, ...]]]:
    text, a_file, missing = tmp / "text.npy", tmp / "a_file", tmp / "missing"
    return {
        "convert -o into a missing directory": (
            ["convert", FLOAT_ADD, "-o", missing / "x.tosa"], (str(missing), "does not exist")),
        "convert -o onto a directory": (
            ["convert", FLOAT_ADD, "-o", tmp], (str(tmp), "is a directory")),
        "convert --report into a missing directory": (
            ["convert", FLOAT_ADD, "-o", tmp / "x.tosa", "--report", missing / "r.json"],
            (str(missing / "r.json"),)),
        "validate a missing file": (["validate", missing / "m.tflite"], ("no such file",)),
        "validate a directory": (["validate", tmp], ("is a directory",)),
        "validate --input not an .npy": (["validate", FLOAT_ADD, "--input", text],
                                         ("not an .npy file",)),
        "validate --input missing": (["validate", FLOAT_ADD, "--input", missing / "x.npy"],
                                     ("no such file",)),
        "batch -o onto a file": (["batch", FLOAT_ADD, "-o", a_file, "--no-progress"],
                                 ("is a file",)),
        "validate --runs 0 with a file": (["validate", FLOAT_ADD, "-n", "0"], ("runs",)),
        "convert --emit tfl --report": (
            ["convert", FLOAT_ADD, "--emit", "tfl", "--report", tmp / "r.json"],
            ("--report", "--emit tfl")),
        "validate --json --markdown": (["validate", FLOAT_ADD, "--json", "--markdown"],
                                       ("--json", "--markdown")),
        "convert --extension unknown": (["convert", FLOAT_ADD, "--extension", "EXT-NOPE"],
                                        ("EXT-NOPE", "EXT-INT16")),
        # No file name to name the default output after.
        "convert the current directory": (["convert", "."], (".", "is a directory")),
        "convert the root directory": (["convert", "/"], ("/", "is a directory")),
        # Names longer than a file system takes (255 bytes): not mere absence.
        "convert -o a name too long": (["convert", FLOAT_ADD, "-o", tmp / ("a" * 300 + ".tosa")],
                                       ("cannot write", "File name too long")),
        "convert --report a name too long": (
            ["convert", FLOAT_ADD, "-o", tmp / "x.tosa", "--report", tmp / ("r" * 300)],
            ("cannot write", "File name too long")),
    }


CASE_NAMES = list(_cases(Path("/nonexistent")))


@pytest.mark.parametrize("case", CASE_NAMES)
def test_usage_errors_are_one_line_with_exit_2(tmp_path: Path, case: str) -> None:
    (tmp_path / "text.npy").write_text("not an array\n")
    (tmp_path / "a_file").write_text("x")
    args, expected = _cases(tmp_path)[case]
    assert_one_line_usage_error(tfl2tosa(*args), *expected)
    assert not (tmp_path / "r.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


# ---------------------------------------------------------------------------
# 4: verifier failures


def test_profile_failure_lists_the_first_violations_and_how_to_see_all(tmp_path: Path) -> None:
    out = tmp_path / "x.tosa"
    result = tfl2tosa("convert", DEMO, "-o", out, "--profile", "PRO-FP")
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    count = int(re.match(r"error: (\d+) TOSA violation", lines[0])[1])
    listed = [line for line in lines if re.match(r"\s+tosa\.\w+ @ main:op\d+:[A-Z_0-9]+: ", line)]
    assert 1 <= len(listed) <= 5 < count
    assert any("needs PRO-INT" in line for line in listed)
    assert "--verbose" in lines[-1] and "--extension" in lines[-1]
    assert not out.exists()
    # -v after the command lists every violation.
    everything = tfl2tosa("convert", DEMO, "-o", out, "--profile", "PRO-FP", "-v")
    assert everything.returncode != 0
    assert sum(1 for line in everything.stderr.splitlines()
               if re.match(r"\s+tosa\.\w+ @ ", line)) >= count


def test_extension_option_chooses_what_the_output_may_use(tmp_path: Path) -> None:
    out = tmp_path / "x.tosa"
    refused = tfl2tosa("convert", INT16, "-o", out, "--extension", "EXT-DOUBLEROUND")
    assert refused.returncode == 1 and "EXT-INT16" in refused.stderr and not out.exists()
    allowed = tfl2tosa("convert", INT16, "-o", out, "--profile", "PRO-INT",
                       "--extension", "int16", "--extension", "EXT-DOUBLEROUND")
    assert allowed.returncode == 0, allowed.stderr
    assert out.read_bytes()[4:8] == b"TOSA"


# ---------------------------------------------------------------------------
# 5: the umask


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_output_files_follow_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    out, report = tmp_path / "x.tosa", tmp_path / "r.json"
    result = tfl2tosa("convert", FLOAT_ADD, "-o", out, "--report", report, umask=umask)
    assert result.returncode == 0, result.stderr
    # What a plain open() for writing gives under the same umask, the judge.
    plain = tmp_path / "plain"
    subprocess.run([sys.executable, "-c", f"open({str(plain)!r}, 'w')"], check=True,
                   preexec_fn=lambda: os.umask(umask))
    assert (plain.stat().st_mode & 0o777) == mode
    assert (out.stat().st_mode & 0o777) == mode
    assert (report.stat().st_mode & 0o777) == mode


# ---------------------------------------------------------------------------
# 6: -v, --version, help, option names


def test_verbose_is_accepted_after_the_command(tmp_path: Path) -> None:
    before = tfl2tosa("-v", "convert", FLOAT_ADD, "-o", tmp_path / "m" / "x.tosa")
    after = tfl2tosa("convert", FLOAT_ADD, "-o", tmp_path / "m" / "x.tosa", "--verbose")
    for result in (before, after):
        assert result.returncode != 0
        assert "Traceback" in result.stderr and "UsageError" in result.stderr


def test_version_names_package_tosa_and_tflite_schema() -> None:
    import tflite

    result = tfl2tosa("--version")
    assert result.returncode == 0, result.stderr
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    model = tflite.Model.GetRootAsModel(DEMO.read_bytes(), 0)
    assert result.stdout.splitlines() == [
        f"tfl2tosa {project['version']}",
        "TOSA specification 1.0.0",
        f"TFLite schema version {model.Version()}",
    ]


@pytest.mark.parametrize("command", COMMANDS)
def test_every_help_has_examples_and_every_option_a_help_text(command: str) -> None:
    result = tfl2tosa(*command.split(), "--help")
    assert result.returncode == 0, result.stderr
    assert "Examples:" in result.stdout and "tfl2tosa " + command.split()[0] in result.stdout

    import typer.main

    import tfl2tosa.cli as cli

    group = typer.main.get_command(cli.app)
    click_command = group
    for word in command.split():
        click_command = click_command.commands[word]
    for parameter in click_command.params:
        if getattr(parameter, "hidden", False) or parameter.param_type_name != "option":
            continue
        assert parameter.help, f"{command} {parameter.opts} has no help"


def test_option_names_agree_and_old_spellings_still_work(tmp_path: Path) -> None:
    assert "--output" in tfl2tosa("convert", "--help").stdout
    for command in ("batch", "run"):
        text = tfl2tosa(command, "--help").stdout
        assert "--output" in text and "--out " not in text
    text = tfl2tosa("validate", "--help").stdout
    assert "--input " in text and "--inputs" not in text
    np.save(tmp_path / "a.npy", np.ones((1, 4, 4, 3), np.float32))
    np.save(tmp_path / "b.npy", np.ones((1, 4, 4, 3), np.float32))
    for option in ("--input", "--inputs", "-i"):
        result = tfl2tosa("validate", FLOAT_ADD, option, tmp_path / "a.npy", option,
                          tmp_path / "b.npy", "--json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["runs"] == 1
    old = tfl2tosa("convert", FLOAT_ADD, "--out", tmp_path / "old.tosa")
    assert old.returncode == 0 and (tmp_path / "old.tosa").exists()


# ---------------------------------------------------------------------------
# 12-13: progress and the summary line, on a terminal only


def test_convert_summary_on_a_terminal_only(tmp_path: Path) -> None:
    import tflite

    out = tmp_path / "demo.tosa"
    code, _, shown = on_terminal("convert", DEMO, "-o", out)
    assert code == 0, shown
    model = tflite.Model.GetRootAsModel(DEMO.read_bytes(), 0)
    operators = model.Subgraphs(0).OperatorsLength()
    last = [line for line in shown.splitlines() if line.strip()][-1]
    kilobytes = out.stat().st_size / 1024
    assert re.fullmatch(rf"{operators} TFLite ops -> \d+ TOSA ops \({operators} integer, "
                        rf"0 fallback, 0 float\); {re.escape(str(out))}: {kilobytes:.1f} KB; "
                        r"\d+\.\d\d s", last.strip()), last
    piped = tfl2tosa("convert", DEMO, "-o", out)
    assert piped.returncode == 0 and piped.stderr == ""
    code, _, quiet = on_terminal("convert", DEMO, "-o", out, "-q")
    assert code == 0 and quiet.strip() == ""


def test_validate_shows_progress_on_a_terminal_and_nothing_when_piped() -> None:
    code, stdout, shown = on_terminal("validate", FLOAT_ADD, "--runs", "4", "--json")
    assert code == 0
    assert "validating add.tflite" in shown
    assert json.loads(stdout)["runs"] == 4  # stdout stays clean JSON
    piped = tfl2tosa("validate", FLOAT_ADD, "--runs", "4", "--json")
    assert piped.returncode == 0 and piped.stderr == ""
