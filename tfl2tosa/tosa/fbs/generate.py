"""Regenerate `tosa_generated.py` and `tosa_builders.py` from `schemas/tosa.fbs`
with `flatc --python`.

Usage: `python -m tfl2tosa.tosa.fbs.generate [--check]`. flatc is looked up
next to the Python interpreter (tosa-tools installs one) and then on PATH.
`--check` exits 1 if a committed file differs from what flatc produces.

`tosa_builders.py` is flatc's output less the reader classes: the enums and
the `<Table>Start` / `<Table>Add<Field>` / `<Table>End` functions, all that
the writer uses. Every conversion imports the writer, and the reader classes
are most of what importing the whole generated module costs. The builder
functions' one use of the flatbuffers package, converting an offset with
`flatbuffers.number_types.UOffsetTFlags.py_type` (which is `int`), is written
as `int`, so a conversion does not import that package either.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
SCHEMA = PACKAGE_DIR.parents[2] / "schemas" / "tosa.fbs"
OUTPUT = PACKAGE_DIR / "tosa_generated.py"
BUILDERS_OUTPUT = PACKAGE_DIR / "tosa_builders.py"

HEADER = """\
# Generated from schemas/tosa.fbs by `python -m tfl2tosa.tosa.fbs.generate`
# (flatc --python --gen-onefile). Do not edit; regenerate instead.
# ruff: noqa
"""

BUILDERS_HEADER = """\
# Generated from schemas/tosa.fbs by `python -m tfl2tosa.tosa.fbs.generate`:
# flatc's enums and builder functions without its reader classes (those are in
# tosa_generated.py). Do not edit; regenerate instead.
# ruff: noqa
"""

# flatc's numpy probe: only reader classes would use `np`.
_NUMPY_PROBE = ("from flatbuffers.compat import import_numpy\n", "np = import_numpy()\n")
_FLATBUFFERS_IMPORT = "import flatbuffers\n"
# The offset conversion of flatc's builder functions, and what it is (checked by
# `builders`, so a flatbuffers release that changes it fails the generation).
_OFFSET_CONVERSION = "flatbuffers.number_types.UOffsetTFlags.py_type("


def find_flatc() -> str:
    local = Path(sys.executable).parent / "flatc"
    if local.exists():
        return str(local)
    found = shutil.which("flatc")
    if found is None:
        raise SystemExit("flatc not found (install tosa-tools or the flatbuffers compiler)")
    return found


def flatc_output() -> str:
    """flatc's single-file Python for the current schema."""
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([find_flatc(), "--python", "--gen-onefile", "-o", out, str(SCHEMA)],
                       check=True, capture_output=True)
        return (Path(out) / "tosa_generated.py").read_text()


def generate() -> str:
    """The text of tosa_generated.py for the current schema."""
    return HEADER + flatc_output()


def builders(generated: str) -> str:
    """flatc's output without its reader classes (a class with a `_tab` slot),
    the numpy probe and the flatbuffers import (its offset conversion is `int`)."""
    import flatbuffers

    if flatbuffers.number_types.UOffsetTFlags.py_type is not int:
        raise SystemExit("flatbuffers' UOffsetTFlags.py_type is no longer int: "
                         "tosa_builders.py cannot write it as int")
    lines = generated.splitlines(keepends=True)
    dropped: set[int] = set()
    for node in ast.parse(generated).body:
        if isinstance(node, ast.ClassDef) and _is_reader(node):
            dropped.update(range(node.lineno - 1, node.end_lineno or node.lineno))
    kept = [line for i, line in enumerate(lines)
            if i not in dropped and line not in _NUMPY_PROBE and line != _FLATBUFFERS_IMPORT]
    text = "".join(kept).replace(_OFFSET_CONVERSION, "int(")
    if "flatbuffers" in text:
        raise SystemExit("flatc's builder functions use flatbuffers in a new way: "
                         "see tfl2tosa/tosa/fbs/generate.py")
    while "\n\n\n\n" in text:
        text = text.replace("\n\n\n\n", "\n\n\n")
    return BUILDERS_HEADER + text


def _is_reader(node: ast.ClassDef) -> bool:
    return any(isinstance(statement, ast.Assign)
               and any(isinstance(target, ast.Name) and target.id == "__slots__"
                       for target in statement.targets)
               for statement in node.body)


def main(argv: list[str]) -> int:
    generated = flatc_output()
    texts = {OUTPUT: HEADER + generated, BUILDERS_OUTPUT: builders(generated)}
    if "--check" in argv:
        return 0 if all(path.exists() and path.read_text() == text
                        for path, text in texts.items()) else 1
    for path, text in texts.items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
