"""The fast path (tfl2tosa/cli/fast.py) hands `convert` and `run` the very
arguments typer's commands would, and leaves every other command line to typer.

The judge is typer itself: each command line is parsed by the typer application
(with the command's work replaced by a recorder) and by the fast path.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import typer.main

import tfl2tosa.cli.convert
import tfl2tosa.cli.run
from tfl2tosa.cli import fast, hoist_verbose
from tfl2tosa.cli.convert_work import convert_model
from tfl2tosa.cli.run_work import run_model
from tfl2tosa.cli.typer_app import app

WORK = {"convert": (tfl2tosa.cli.convert, "convert_model", convert_model),
        "run": (tfl2tosa.cli.run, "run_model", run_model)}


def typer_arguments(args: list[str], monkeypatch: pytest.MonkeyPatch) -> dict:
    """What typer's command passes to the command's work for `args`."""
    module, name, work = WORK[[a for a in args if a != "--verbose"][0]]
    calls = []
    monkeypatch.setattr(module, name, lambda *a, **k: calls.append(
        inspect.signature(work).bind(*a, **k).arguments))
    typer.main.get_command(app).main(args=args, prog_name="tfl2tosa", standalone_mode=False)
    assert len(calls) == 1
    return dict(calls[0])


TAKEN = [
    "convert m.tflite",
    "convert - -o -",
    "convert m.tflite -o out.tosa --emit mlir -q",
    "convert m.tflite --output o.tosa --quiet --no-fallback --report r.json",
    "convert m.tflite --out o.tosa --profile PRO-INT --profile pro-fp",
    "convert m.tflite --extension int16 --extension EXT-FP8E4M3 --disable a --disable b",
    "convert --hybrid float --kernels optimized m.tflite",
    "convert m.tflite -q -q",
    "-v convert m.tflite",
    "convert m.tflite --verbose",
    "run m.tosa",
    "run m.tosa -i x.npy --input y=y.npy -o outputs --json",
    "run m.tosa --out d --output d",
    "convert ./m.tflite -o ./o//m.tosa --report .//r.json/",
    "run m.tosa -o out//a/ --out ./out/a",
    "run -i a.npy m.tosa -i b.npy",
]


@pytest.mark.parametrize("line", TAKEN)
def test_fast_path_passes_what_typer_passes(line: str, monkeypatch: pytest.MonkeyPatch) -> None:
    args = hoist_verbose(line.split())
    parsed = fast.parse(args)
    assert parsed is not None
    expected = typer_arguments(args, monkeypatch)
    # Where typer makes a pathlib.Path of a path, the fast path hands the text
    # (the work shows and opens both alike: tests/test_paths.py).
    paths = {name for name, value in expected.items() if isinstance(value, Path)}
    assert all(isinstance(parsed[1][name], str) for name in paths)
    assert {name: Path(value) if name in paths else value
            for name, value in parsed[1].items()} == expected


LEFT_TO_TYPER = [
    "convert", "convert --help", "convert m.tflite -h", "convert a.tflite b.tflite",
    "convert m.tflite --emit", "convert m.tflite -o", "convert m.tflite --bogus",
    "convert m.tflite --emit=mlir", "convert m.tflite -qo out.tosa", "convert -- m.tflite",
    "convert m.tflite -o a.tosa -o b.tosa", "convert m.tflite -o --emit",
    "--max-tensor-bytes 1G convert m.tflite", "--version", "--help", "", "validate m.tflite",
    "inspect m.tflite", "run", "run m.tosa -i", "run m.tosa --json --help",
]


@pytest.mark.parametrize("line", LEFT_TO_TYPER)
def test_other_command_lines_are_left_to_typer(line: str) -> None:
    assert fast.parse(hoist_verbose(line.split())) is None


def test_empty_values_are_left_to_typer() -> None:
    assert fast.parse(["convert", "m.tflite", "-o", ""]) is None
    assert fast.parse(["convert", ""]) is None


@pytest.mark.parametrize("name", sorted(fast.COMMANDS))
def test_every_option_of_the_typer_command_is_known(name: str) -> None:
    """An option added to typer's command and not to the fast path's table would be
    left to typer (correct but slow); one renamed in typer and not here would be
    taken with the old spelling. Both tables must list the same spellings."""
    command = typer.main.get_command(app).commands[name]
    declared = {spelling: parameter.name for parameter in command.params
                if parameter.param_type_name == "option" for spelling in parameter.opts}
    declared.pop("--help", None), declared.pop("-h", None)
    known = {spelling: option.parameter
             for spelling, option in fast.COMMANDS[name].options.items()}
    assert known == declared
    arguments = [p.name for p in command.params if p.param_type_name == "argument"]
    assert arguments == [fast.COMMANDS[name].argument]


def test_report_and_output_directory_are_the_text_given() -> None:
    _, keywords = fast.parse(["convert", "m.tflite", "--report", "./r.json"])
    assert keywords["report"] == "./r.json"
    _, keywords = fast.parse(["run", "m.tosa", "-o", "d//"])
    assert keywords["out"] == "d//"
