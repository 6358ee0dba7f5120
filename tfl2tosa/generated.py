"""The command line of a script that generates a committed file (`python -m
MODULE [--update | --check]`): print the text, write it, or say whether the
committed file is current (the tests run `--check`)."""

from __future__ import annotations

import sys
from pathlib import Path


def generated_file_command(path: Path, text: str, module: str, argv: list[str]) -> int:
    """`--update` writes `text` to `path`; `--check` exits 1, naming the command to
    run, when `path` holds anything else; otherwise `text` goes to stdout."""
    if "--update" in argv:
        path.write_text(text)
        return 0
    if "--check" in argv:
        current = path.read_text() if path.exists() else ""
        if current != text:
            print(f"{path} is stale: run `python -m {module} --update`", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(text)
    return 0
