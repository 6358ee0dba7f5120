"""What `tfl2tosa run` does once its command line is parsed, without typer: both
typer's command (`run.py`) and the fast path (`fast.py`) call `run_model`."""

from __future__ import annotations

import os
import re
import time
from typing import TYPE_CHECKING

from tfl2tosa.cli import CommandFailed, echo, read_npy
from tfl2tosa.paths import exists, is_dir, parent, shown_path

if TYPE_CHECKING:  # imported when the command runs (`--help` must not load numpy)
    import numpy as np

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_filename(name: str, index: int, taken: set[str]) -> str:
    """A file name for output `name`: every character outside [A-Za-z0-9._-] becomes `_`,
    a leading dot becomes `_`, an empty name becomes `output_<index>`, and a name already
    taken (case-insensitively) gets `_2`, `_3`, ... appended."""
    base = _UNSAFE.sub("_", name)
    if base.startswith("."):
        base = "_" + base[1:]
    base = base or f"output_{index}"
    candidate, n = base, 1
    while candidate.lower() in taken:
        n += 1
        candidate = f"{base}_{n}"
    taken.add(candidate.lower())
    return candidate + ".npy"


def _load(path: str) -> np.ndarray:
    return read_npy(path, "--input")


def bind_inputs(specs: list[str], input_names: list[str]) -> dict[str, np.ndarray]:
    """`NAME=file.npy` binds by name; plain `file.npy` entries fill the remaining inputs
    in graph order."""
    named: dict[str, np.ndarray] = {}
    positional: list[str] = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if sep and name in input_names:
            if name in named:
                raise CommandFailed(f"input {name!r} is given twice")
            named[name] = _load(path)
        elif sep and not exists(shown_path(spec)):
            raise CommandFailed(f"{name!r} is not an input of the graph; inputs are "
                                f"{input_names}")
        else:
            positional.append(spec)
    remaining = [n for n in input_names if n not in named]
    if len(positional) > len(remaining):
        raise CommandFailed(f"{len(positional)} positional input(s) for {len(remaining)} "
                            f"unbound graph input(s) {remaining}")
    named.update({name: _load(path) for name, path in zip(remaining, positional)})
    return named


def run_model(file: str, inputs: list[str], out: str | os.PathLike[str] | None,
              out_alias: str | os.PathLike[str] | None, as_json: bool) -> None:
    import numpy as np

    import reference_model
    from tfl2tosa.tosa.reader import read_tosa

    # Typer hands these as Paths, the fast path as the text given: compared and
    # shown as pathlib shows them either way.
    if out is not None and out_alias is not None and shown_path(out) != shown_path(out_alias):
        raise CommandFailed("give the output directory once: -o/--output (--out is its old "
                            "spelling)", 2)
    directory = shown_path(out if out is not None else out_alias if out_alias is not None
                           else ".")
    module = read_tosa(file)
    bound = bind_inputs(inputs, [v.name for v in module.main.inputs])
    start = time.perf_counter()
    outputs = reference_model.run(module, bound)
    elapsed = time.perf_counter() - start
    try:
        _make_directories(directory)
    except OSError as exc:
        raise CommandFailed(f"cannot create {directory}: {exc}") from None
    taken: set[str] = set()
    summary = []
    for index, (name, array) in enumerate(outputs.items()):
        path = shown_path(os.path.join(directory, safe_filename(name, index, taken)))
        np.save(path, array)
        summary.append({"name": name, "file": path, "shape": list(array.shape),
                        "dtype": str(array.dtype)})
    if as_json:
        import json

        echo(json.dumps({"model": file, "outputs": summary,
                               "time_s": round(elapsed, 6)}, indent=2))
    else:
        for entry in summary:
            echo(f"{entry['name']}: {entry['dtype']}{entry['shape']} -> {entry['file']}")
        echo(f"ran in {elapsed * 1000:.1f} ms")


def _make_directories(directory: str, parents: bool = True) -> None:
    """`pathlib.Path(directory).mkdir(parents=True, exist_ok=True)`: each missing
    parent made in turn, so an error names the directory pathlib's would."""
    try:
        os.mkdir(directory)
    except FileNotFoundError:
        if not parents or parent(directory) == directory:
            raise
        _make_directories(parent(directory))
        _make_directories(directory, parents=False)
    except OSError:
        if not is_dir(directory):
            raise
