"""The fast path: plain `convert` and `run` command lines parsed without typer.

Importing typer and building its command takes longer than converting a
small model (README, "Known limits"), and `convert` and `run` are the
commands scripts call once per model. A command line made only of the
command's own options, each spelled out in full (`-o out.tosa`, `--profile
PRO-INT`), is parsed here and handed to the same function typer's command
calls, with the values typer would pass (a path as the text given where
typer makes a `pathlib.Path` of it: the work shows and opens both alike, and
the fast path needs no pathlib). Anything else (`--help`, an unknown
or repeated option, `--opt=value`, `--`, a value that looks like an option, a
missing or extra argument, a global option other than `--verbose`) returns
None, and typer parses it: usage errors and help stay typer's.
`tests/test_cli_fast.py` holds this table to typer's declarations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Option:
    """One option of a command: the parameter it sets and how."""

    __slots__ = ("kind", "parameter")

    def __init__(self, parameter: str, kind: str) -> None:
        self.parameter = parameter
        self.kind = kind          # "flag", "value" or "multiple" (repeatable value)


class Command:
    """A command's argument, its options by spelling, and its function's defaults."""

    __slots__ = ("argument", "defaults", "options", "work")

    def __init__(self, argument: str, options: dict[tuple[str, ...], Option],
                 defaults: Callable[[], dict[str, Any]], work: Callable[[], Callable]) -> None:
        self.argument = argument
        self.options = {spelling: option for spellings, option in options.items()
                        for spelling in spellings}
        self.defaults = defaults  # a function: some defaults need imports
        self.work = work


def _convert_defaults() -> dict[str, Any]:
    from tfl2tosa.pipeline import DEFAULT_PROFILES

    return {"output": None, "output_alias": None, "emit_form": "tosa",
            "profile": list(DEFAULT_PROFILES), "extension": None, "disable": [],
            "no_fallback": False, "report": None, "quiet": False, "hybrid": "emulate",
            "kernels": "reference"}


def _convert_work() -> Callable:
    from tfl2tosa.cli.convert_work import convert_model

    return convert_model


def _run_defaults() -> dict[str, Any]:
    return {"inputs": [], "out": None, "out_alias": None, "as_json": False}


def _run_work() -> Callable:
    from tfl2tosa.cli.run_work import run_model

    return run_model


COMMANDS = {
    "convert": Command("model", {
        ("-o", "--output"): Option("output", "value"),
        ("--out",): Option("output_alias", "value"),
        ("--emit",): Option("emit_form", "value"),
        ("--profile",): Option("profile", "multiple"),
        ("--extension",): Option("extension", "multiple"),
        ("--disable",): Option("disable", "multiple"),
        ("--no-fallback",): Option("no_fallback", "flag"),
        ("--report",): Option("report", "value"),
        ("--quiet", "-q"): Option("quiet", "flag"),
        ("--hybrid",): Option("hybrid", "value"),
        ("--kernels",): Option("kernels", "value"),
    }, _convert_defaults, _convert_work),
    "run": Command("file", {
        ("--input", "-i"): Option("inputs", "multiple"),
        ("-o", "--output"): Option("out", "value"),
        ("--out",): Option("out_alias", "value"),
        ("--json",): Option("as_json", "flag"),
    }, _run_defaults, _run_work),
}


def parse(args: list[str]) -> tuple[str, dict[str, Any]] | None:
    """(command, the keyword arguments typer would pass its function), or None for a
    command line typer must see."""
    if args[:1] == ["--verbose"]:
        args = args[1:]
    if not args or args[0] not in COMMANDS:
        return None
    command = COMMANDS[args[0]]
    given: dict[str, Any] = {}
    argument: str | None = None
    words = iter(args[1:])
    for word in words:
        if word.startswith("-") and word != "-":
            option = command.options.get(word)
            if option is None:
                return None
            if option.kind == "flag":
                given[option.parameter] = True
                continue
            value = next(words, None)
            if value is None or value == "" or (value.startswith("-") and value != "-"):
                return None
            if option.kind == "multiple":
                given.setdefault(option.parameter, []).append(value)
            elif option.parameter in given:
                return None
            else:
                given[option.parameter] = value
        elif argument is None and word:
            argument = word
        else:
            return None
    if argument is None:
        return None
    return args[0], {command.argument: argument, **command.defaults(), **given}


def fast_command(args: list[str]) -> Callable[[], None] | None:
    """The command line's work as a call, or None when typer must parse it."""
    parsed = parse(args)
    if parsed is None:
        return None
    name, keywords = parsed
    work = COMMANDS[name].work()
    return lambda: work(**keywords)
