"""`convert` skips (and does not import) the call-inlining and resource-variable
passes for a model with none of the ops they act on. The passes themselves
are the judge: on every zoo model without those ops each leaves the module as
it found it, and the op sets `convert` looks for are the ones they act on."""

from __future__ import annotations

import pytest

from conftest import zoo_models
from tfl2tosa.pipeline import CALLING_OPS, RESOURCE_VARIABLE_OPS, op_counts
from tfl2tosa.passes.inline_calls import CALLEE_ATTRS, inline_calls
from tfl2tosa.passes.resource_variables import RESOURCE_OPS, lower_resource_variables
from tfl2tosa.tflite_import import load
from tfl2tosa.tflite_import.structure import check_module



def _without_their_ops(paths: list) -> list:
    """The models none of whose ops either pass acts on (chosen when collecting,
    so every case collected is one the test judges)."""
    def untouched(path) -> bool:
        counts = op_counts(load(path))
        return CALLING_OPS.isdisjoint(counts) and RESOURCE_VARIABLE_OPS.isdisjoint(counts)
    return [path for path in paths if untouched(path)]


# Every fourth zoo model keeps the sweep short.
MODELS_WITHOUT_THEIR_OPS = _without_their_ops(zoo_models()[::4])


def test_the_skipped_passes_act_on_these_ops() -> None:
    assert CALLING_OPS == set(CALLEE_ATTRS)
    # CALL_ONCE runs an initialization graph; a WHILE may carry a resource handle.
    assert RESOURCE_VARIABLE_OPS == RESOURCE_OPS | {"tfl.call_once", "tfl.while"}


def _snapshot(module) -> list:
    return [(name, [(id(op), op.name, [id(v) for v in op.operands],
                     [(id(v), v.type) for v in op.results], sorted(op.attrs))
                    for op in graph.ops],
             [id(v) for v in graph.inputs], [id(v) for v in graph.outputs])
            for name, graph in module.graphs.items()]


def test_the_sweep_has_models() -> None:
    assert len(MODELS_WITHOUT_THEIR_OPS) >= 20


@pytest.mark.parametrize("path", MODELS_WITHOUT_THEIR_OPS, ids=lambda p: p.stem)
def test_a_model_without_their_ops_is_left_as_it_was(path) -> None:
    module = load(path)
    check_module(module)
    before = _snapshot(module)
    assert inline_calls(module).composites == []
    lower_resource_variables(module)
    assert _snapshot(module) == before
