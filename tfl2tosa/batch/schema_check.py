"""Checking a JSON document against the shipped report schema (report.schema.json).

A small validator for the part of JSON Schema (draft 2020-12) the schema uses:
type, const, enum, required, properties, additionalProperties, items,
minItems, minLength, minimum, pattern, oneOf and local `$ref`s into `$defs`.
`jsonschema` is not a runtime dependency; the tests hold this validator to it
on the same documents. A keyword outside that subset is an error, so the
schema cannot grow a rule this file would silently skip.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).with_name("report.schema.json")

_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool)
    or isinstance(v, float) and v.is_integer(),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}
_ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "title", "description"})
_CHECKED = frozenset({"type", "const", "enum", "required", "properties",
                      "additionalProperties", "items", "minItems", "minLength", "minimum",
                      "pattern", "oneOf", "$ref"})


@lru_cache(maxsize=1)
def report_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def first_violation(document: Any, schema: dict[str, Any] | None = None) -> str | None:
    """Where and how `document` breaks the schema (one line), or None if it conforms."""
    root = schema if schema is not None else report_schema()
    return _violation(document, root, root, "$")


def _violation(value: Any, schema: dict[str, Any], root: dict[str, Any], where: str
               ) -> str | None:
    unknown = set(schema) - _CHECKED - _ANNOTATIONS
    if unknown:
        raise ValueError(f"schema keyword(s) {sorted(unknown)} at {where} are not checked")
    if "$ref" in schema:
        found = _violation(value, _resolve(schema["$ref"], root), root, where)
        if found:
            return found
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_TYPES[name](value) for name in names):
            return f"{where} is {_kind(value)}, expected {' or '.join(names)}"
    if "const" in schema and not _equal(value, schema["const"]):
        return f"{where} is {json.dumps(value)[:60]}, expected {json.dumps(schema['const'])}"
    if "enum" in schema and not any(_equal(value, option) for option in schema["enum"]):
        return f"{where} is {json.dumps(value)[:60]}, expected one of {schema['enum']}"
    if "oneOf" in schema:
        matches = [s for s in schema["oneOf"] if _violation(value, s, root, where) is None]
        if len(matches) != 1:
            reasons = "; ".join(filter(None, (_violation(value, s, root, where)
                                              for s in schema["oneOf"])))
            return (f"{where} matches {len(matches)} of the alternatives"
                    + (f" ({reasons})" if not matches else ""))
    if isinstance(value, dict):
        return _object_violation(value, schema, root, where)
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return f"{where} has {len(value)} items, at least {schema['minItems']} needed"
        if "items" in schema:
            for i, item in enumerate(value):
                found = _violation(item, schema["items"], root, f"{where}[{i}]")
                if found:
                    return found
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{where} is shorter than {schema['minLength']} characters"
        if "pattern" in schema and not re.search(schema["pattern"], value):
            return f"{where} {value[:60]!r} does not match {schema['pattern']!r}"
    if _TYPES["number"](value) and "minimum" in schema and value < schema["minimum"]:
        return f"{where} is {value}, below the minimum {schema['minimum']}"
    return None


def _object_violation(value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any],
                      where: str) -> str | None:
    for name in schema.get("required", ()):
        if name not in value:
            return f"{where} lacks {name!r}"
    properties = schema.get("properties", {})
    for name, item in value.items():
        if name in properties:
            found = _violation(item, properties[name], root, f"{where}.{name}")
        elif schema.get("additionalProperties", True) is False:
            found = f"{where} has an unexpected field {name!r}"
        elif isinstance(schema.get("additionalProperties"), dict):
            found = _violation(item, schema["additionalProperties"], root, f"{where}.{name}")
        else:
            found = None
        if found:
            return found
    return None


def _resolve(reference: str, root: dict[str, Any]) -> dict[str, Any]:
    if not reference.startswith("#/"):
        raise ValueError(f"only local references are supported, not {reference!r}")
    node: Any = root
    for part in reference[2:].split("/"):
        node = node[part]
    return node


def _equal(a: Any, b: Any) -> bool:
    # JSON equality: true is not 1.
    return type(a) is type(b) and a == b or (
        _TYPES["number"](a) and _TYPES["number"](b) and a == b)


def _kind(value: Any) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPES[name](value):
            return f"{'an' if name[0] in 'aio' else 'a'} {name}"
    return type(value).__name__
