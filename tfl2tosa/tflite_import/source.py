"""Opening a `.tflite` model and reading its flatbuffer without trusting it.

The `tflite` package's generated accessors do no bounds checks: a bad offset
raises whatever Python or numpy happens to raise (struct.error, IndexError,
ValueError, TypeError, ...) or, for a huge vector length, would loop for a
long time. Everything here turns those into one-line ModelErrors and checks
vector lengths against the file size before anything iterates over them.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
from typing import Any, Union

import numpy as np

from tfl2tosa.errors import IRError, ModelError
from tfl2tosa.paths import shown_path
from tfl2tosa.tflite_import.flat import SchemaTable, Table
from tfl2tosa.versions import TFLITE_SCHEMA_VERSION

Source = Union[str, os.PathLike, bytes, bytearray, memoryview]
Buffer = Union[bytes, bytearray, memoryview, mmap.mmap]

FILE_IDENTIFIER = b"TFL3"
SCHEMA_VERSION = TFLITE_SCHEMA_VERSION

# What a corrupt flatbuffer makes the generated accessors raise. MemoryError is
# deliberately absent: every size is validated before anything is allocated, so
# a MemoryError would be a bug of ours, not a property of the input.
CORRUPTION = (IndexError, KeyError, struct.error, UnicodeDecodeError, ValueError, TypeError,
               OverflowError, AttributeError, IRError)


# struct's message for a read past the end (compiled on the first error only).
_UNPACK_PAST_END = r"at offset (-?\d+) \(actual buffer size is (\d+)\)"


def one_line(text: str) -> str:
    return " ".join(str(text).split())


def _explain(exc: Exception) -> str:
    past_end = re.search(_UNPACK_PAST_END, str(exc)) if isinstance(exc, struct.error) else None
    if past_end:
        return f"offset {past_end[1]} is outside the {past_end[2]}-byte model"
    return one_line(f"{type(exc).__name__}: {exc}")


class _Reading:
    """The context `reading` returns (a class: the importer enters several per
    tensor, and a generator-based context manager costs more per entry)."""

    __slots__ = ("what",)

    def __init__(self, what: str) -> None:
        self.what = what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: object) -> bool:
        if exc is not None and isinstance(exc, CORRUPTION) and not isinstance(exc, ModelError):
            raise ModelError(f"corrupt model: cannot read {self.what} ({_explain(exc)})") from exc
        return False


def reading(what: str) -> _Reading:
    """Turn any accessor failure while reading `what` into a ModelError."""
    return _Reading(what)


def open_source(source: Source) -> tuple[Buffer, str | None]:
    """The model bytes (memory-mapped for a path) and the path, if any."""
    if isinstance(source, (bytes, bytearray)):
        return source, None
    if isinstance(source, memoryview):
        if source.format == "B" and source.ndim == 1 and source.contiguous:
            return source, None
        if not source.c_contiguous:
            raise ModelError("cannot read a model from a non-contiguous memoryview")
        return source.cast("B"), None
    if not isinstance(source, (str, os.PathLike)):
        raise ModelError(f"cannot read a model from a {type(source).__name__}; "
                         "give a path, bytes or a memoryview")
    path = shown_path(source)
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            if size == 0:
                raise ModelError(f"{path}: file is empty, not a TFLite model")
            # The mapping outlives the file object; constants are views into it.
            return mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ), path
    except IsADirectoryError:
        raise ModelError(f"{path}: is a directory, not a .tflite file") from None
    except FileNotFoundError:
        raise ModelError(f"{path}: no such file") from None
    except (PermissionError, OSError, ValueError) as exc:
        raise ModelError(f"{path}: cannot read ({one_line(exc)})") from None


def check_identifier(buf: Buffer, origin: str) -> None:
    """Reject what is plainly not a TFLite flatbuffer before parsing it.

    The file identifier ("TFL3" at bytes 4..8) is optional in the schema and
    absent from some old files; there, bytes 4..8 belong to a vtable and are
    almost never printable text. So: "TFL3" passes, four printable characters
    that are not "TFL3" are another format's identifier (or text), anything
    else is parsed and must then pass the schema version check.
    """
    if len(buf) < 8:
        raise ModelError(f"{origin}: {len(buf)} bytes is too short for a TFLite flatbuffer")
    identifier = bytes(buf[4:8])
    if identifier == FILE_IDENTIFIER:
        return
    if all(32 <= c < 127 for c in identifier):
        raise ModelError(f"{origin}: not a TFLite model (file identifier "
                         f"{identifier.decode('ascii')!r}, expected 'TFL3')")


def checked_length(table: Any, field: str, item_size: int, file_size: int, what: str) -> int:
    """The length of vector `field` of `table`, checked to fit in the file.

    For a vector of tables (item_size 4: one offset each) the last offset is
    read as well, so a vector running past the end of the file fails here and
    not after a long loop.
    """
    with reading(what):
        length = getattr(table, field + "Length")()
        if length * item_size > file_size:
            raise ModelError(f"corrupt model: {what} claims {length} entries, more than a "
                             f"{file_size}-byte file can hold")
        if length and item_size == 4 and hasattr(table, field):
            getattr(table, field)(length - 1)
    return length


def checked_tables(table: Table, slot: int, file_size: int, what: str) -> tuple[int, int]:
    """(start, length) of the vector of tables in `slot` of `table`, checked as
    `checked_length` checks a generated table's vector of tables."""
    with reading(what):
        start, length = table.vector(slot)
        if length * 4 > file_size:
            raise ModelError(f"corrupt model: {what} claims {length} entries, more than a "
                             f"{file_size}-byte file can hold")
        if length:
            table.table_offset(start, length - 1)
    return start, length


def int_vector(table: Any, field: str, what: str) -> np.ndarray:
    """A numeric vector field as a read-only numpy view (empty if absent)."""
    with reading(what):
        array = getattr(table, field + "AsNumpy")()
    if isinstance(array, int):  # the accessors return 0 for an absent vector
        return np.zeros(0, dtype=np.int32)
    return array


def text(raw: bytes | None, what: str) -> str:
    if raw is None:
        return ""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ModelError(f"corrupt model: {what} is not valid UTF-8") from None


def operator_code(entry: Any) -> int:
    """The builtin operator code of an OperatorCode table: the larger of its raw
    builtin_code and deprecated_builtin_code fields, as TFLite reads it
    (schema_utils.cc GetBuiltinCode). Codes >= 127 live only in builtin_code;
    old files set only the deprecated byte; AI Edge Quantizer sets only
    builtin_code, also below 127. The `tflite` package's BuiltinCode() returns
    the deprecated byte whenever the stored code is below 127, which reads
    such a QUANTIZE (114) as ADD (0); `schema_data` describes the stored field.
    `entry` is a SchemaTable or, for scripts that read models with the
    package, its generated OperatorCode."""
    if not isinstance(entry, SchemaTable):
        entry = SchemaTable("OperatorCode", entry._tab.Bytes, entry._tab.Pos)
    return max(entry.read("BuiltinCode"), entry.read("DeprecatedBuiltinCode"))
