"""tfl2tosa.paths and the path handling of `convert` and `run` built on it, held to
pathlib itself (the judge): messages, reports and written files name a path as
`pathlib.Path` showed it before the convert and run paths stopped importing
pathlib."""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from tfl2tosa.cli.convert_work import _with_suffix
from tfl2tosa.cli.run_work import _make_directories
from tfl2tosa.errors import ModelError, UsageError
from tfl2tosa.paths import exists, file_name, is_dir, parent, shown_path
from tfl2tosa.pipeline import check_writable, write_atomically

# Paths made of the characters pathlib treats specially (separators, dots) and a
# few ordinary ones, so that runs of slashes, `.` and `..` parts and suffixes
# come up often.
paths = st.text(alphabet="/.a b\\~-", max_size=12)


@given(paths)
@example("")
@example(".")
@example("//")
@example("///a//b/")
@example("//./a")
@example("./")
@example("a/./b/.")
def test_shown_path_is_what_pathlib_shows(path: str) -> None:
    pure = PurePosixPath(path)
    assert shown_path(path) == str(pure)
    assert shown_path(pure) == str(pure)  # os.PathLike as well as str
    assert file_name(shown_path(path)) == pure.name
    assert parent(shown_path(path)) == str(pure.parent)


def test_shown_path_refuses_what_pathlib_refuses() -> None:
    class BytesPath:
        def __fspath__(self) -> bytes:
            return b"a"

    for bad in (BytesPath(), 3, b"a"):
        with pytest.raises(TypeError) as ours:
            shown_path(bad)
        with pytest.raises(TypeError) as theirs:
            PurePosixPath(bad)
        assert str(ours.value) == str(theirs.value)


@given(paths)
@example("m.tflite")
@example("a.b.c")
@example(".hidden")
@example("a.")
@example("..")
@example("/")
def test_the_default_output_is_pathlibs_with_suffix(model: str) -> None:
    for suffix in (".tosa", ".tfl.mlir"):
        try:
            expected = str(Path(model).with_suffix(suffix))
        except ValueError:
            # pathlib has no name to change (`.`, `/`): the command says the
            # model is a directory, in one line, rather than pathlib's error.
            with pytest.raises(ModelError, match="is a directory, not a .tflite file"):
                _with_suffix(model, suffix)
        else:
            assert _with_suffix(model, suffix) == expected


def make_tree(root: Path) -> Path:
    """A directory, a file, a link to each, a dangling link and a link loop."""
    (root / "dir").mkdir()
    (root / "file").write_bytes(b"x")
    (root / "to_dir").symlink_to("dir")
    (root / "to_file").symlink_to("file")
    (root / "dangling").symlink_to("missing")
    (root / "loop").symlink_to("loop")
    return root


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path)


NAMES = ["dir", "dir/", "file", "file/", "file/x", "to_dir", "to_dir/", "to_file", "to_file/",
         "dangling", "loop", "loop/x", "missing", "missing/x", "dir/../file", ".", "..",
         "a" * 300, "dir/" + "a" * 300, "nul\0name"]


def outcome(call):
    try:
        return call()
    except Exception as exc:  # the same exception, said the same way
        return type(exc), str(exc)


@pytest.mark.parametrize("name", NAMES, ids=range(len(NAMES)))
def test_is_dir_and_exists_answer_as_pathlib(tree: Path, name: str, monkeypatch) -> None:
    monkeypatch.chdir(tree)
    assert outcome(lambda: is_dir(shown_path(name))) == outcome(lambda: Path(name).is_dir())
    assert outcome(lambda: exists(shown_path(name))) == outcome(lambda: Path(name).exists())


@pytest.mark.parametrize("name", NAMES + ["new", "new/a//b/", "file/x/y", "dangling/x",
                                          "to_dir/new/./c"], ids=range(len(NAMES) + 5))
def test_run_makes_its_output_directory_as_pathlib_did(tmp_path: Path, name: str,
                                                       monkeypatch) -> None:
    # The same tree twice: pathlib's mkdir in one, ours in the other; the same
    # result, error message and directories made.
    made = {}
    for side, make in (("pathlib", lambda n: Path(n).mkdir(parents=True, exist_ok=True)),
                       ("ours", lambda n: _make_directories(shown_path(n)))):
        root = tmp_path / side
        root.mkdir()
        monkeypatch.chdir(make_tree(root))
        made[side] = (outcome(lambda: make(name)), sorted(
            str(p.relative_to(root)) for p in root.rglob("*")))
    assert made["ours"] == made["pathlib"]


def old_check_writable(path) -> Path:
    """What pipeline.check_writable was with pathlib, the judge of its messages;
    except that an OSError pathlib raised (a name too long) is now a one-line
    usage error, never an internal error."""
    target = Path(path)
    try:
        if target.is_dir():
            raise UsageError(f"cannot write {target}: it is a directory")
        directory = target.parent
        if not directory.is_dir():
            what = "is not a directory" if directory.exists() else "does not exist"
            raise UsageError(f"cannot write {target}: directory {directory} {what}")
    except OSError as exc:
        raise UsageError(f"cannot write {target}: {exc.strerror}") from None
    return target


@pytest.mark.parametrize("name", NAMES + ["new.tosa", "./new.tosa", "dir//new.tosa/",
                                          "missing/a.tosa", "file/a.tosa", "to_dir/../a"],
                         ids=range(len(NAMES) + 6))
def test_output_checks_and_writes_say_what_they_said(tree: Path, name: str, monkeypatch) -> None:
    monkeypatch.chdir(tree)
    expected = outcome(lambda: str(old_check_writable(name)))
    assert outcome(lambda: check_writable(name)) == expected
    assert outcome(lambda: check_writable(Path(name))) == expected
    if isinstance(expected, str) and "\0" not in name:  # (os.open refuses a NUL)
        write_atomically(name, b"data")
        assert Path(expected).read_bytes() == b"data"
        assert not [p for p in os.listdir(parent(expected)) if p.startswith(".")]

