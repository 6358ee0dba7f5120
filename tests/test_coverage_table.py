"""The README's op-coverage table is the registry's, not hand-kept."""

from pathlib import Path

from legalize import coverage
from legalize.registry import PATTERNS

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_table_matches_registry():
    assert coverage.readme_table(README) == coverage.table().strip(), (
        "README.md's coverage table is stale: run `python -m legalize.coverage --update`")


def test_table_lists_every_tflite_builtin():
    rows = coverage.table()
    for op in coverage.tflite_builtin_ops():
        if op not in coverage.HIDDEN:
            assert f"| `{op.split('.', 1)[1].upper()}` |" in rows


def test_cells_follow_pattern_declarations():
    # An op with only a float pattern falls back for quantized types; an op
    # with no pattern is unsupported everywhere.
    float_only = [op for op, entries in PATTERNS.items()
                  if entries and all(e.kind == "float" for e in entries)]
    for op in float_only:
        assert coverage.cell(op, "i8") == "fallback"
    assert coverage.cell("tfl.no_such_op", "f32") == "—"
    assert coverage.cell("tfl.no_such_op", "i8") == "—"


def test_custom_section_lists_every_custom_op():
    rows = coverage.table()
    customs = [k for k in PATTERNS if coverage.is_custom(k)]
    assert "`TFLite_Detection_PostProcess`" in rows
    for key in customs:
        assert f"| `{key.split(':', 1)[1]}` |" in rows
        assert f"| `{key.upper()}` |" not in rows  # not among the builtins


def test_inlined_ops_say_so_in_every_column():
    for column in ("f32", "i8", "i16"):
        assert coverage.cell("tfl.stablehlo_composite", column) == "inlined"
        assert coverage.cell("tfl.call", column) == "inlined"
