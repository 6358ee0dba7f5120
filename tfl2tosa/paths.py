"""File paths as pathlib shows and uses them, without importing pathlib.

`convert` and `run` name files in their messages, reports and the `source`
attribute as `pathlib.Path` showed them (`./a.tflite` is `a.tflite`, `a//b`
is `a/b`, a trailing slash goes), and open the path in that form. pathlib
itself (with ntpath, fnmatch and urllib behind it) is not needed to do so:
`tests/test_paths.py` holds these functions to pathlib over odd paths.
"""

from __future__ import annotations

import errno
import os
import stat

# The errors on which pathlib's exists() and is_dir() answer False; others raise.
_ABSENT = (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP)


def shown_path(path: str | os.PathLike[str]) -> str:
    """`str(pathlib.PurePosixPath(path))`: empty and `.` components dropped,
    repeated slashes collapsed, exactly two leading slashes kept, `.` for nothing."""
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError("argument should be a str object or an os.PathLike object "
                        f"returning str, not {type(text)!r}")
    root = "//" if text[:2] == "//" and text[2:3] != "/" else "/" if text[:1] == "/" else ""
    return root + "/".join(part for part in text.split("/") if part and part != ".") or "."


def file_name(shown: str) -> str:
    """pathlib's `name` of a path `shown_path` gave: its last component, or ''."""
    name = shown.rpartition("/")[2]
    return "" if name == "." else name


def parent(shown: str) -> str:
    """pathlib's `parent` of a path `shown_path` gave (itself at the root or at `.`)."""
    return os.path.dirname(shown) or "."


def _stat(shown: str) -> os.stat_result | None:
    """os.stat of `shown`, or None where pathlib takes the path for absent; an
    error other than absence (no permission, a name too long) is raised."""
    try:
        return os.stat(shown)
    except OSError as exc:
        if exc.errno not in _ABSENT:
            raise
        return None
    except ValueError:  # a NUL in the path
        return None


def is_dir(shown: str) -> bool:
    """`pathlib.Path(shown).is_dir()`: a missing path is not a directory, but an
    error other than absence (no permission, a name too long) is raised."""
    found = _stat(shown)
    return found is not None and stat.S_ISDIR(found.st_mode)


def exists(shown: str) -> bool:
    """`pathlib.Path(shown).exists()`, with the same errors raised as `is_dir`."""
    return _stat(shown) is not None
