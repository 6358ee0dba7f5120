"""A numpy interpreter of TOSA 1.0 graphs, exact where the specification is exact.

    import reference_model
    outputs = reference_model.run("model.tosa", [x])          # {output name: array}
    outputs = reference_model.run(module, {"input_0": x}, keep_intermediates=True)

    compiled = reference_model.compile("model.tosa")          # read and compile once
    for x in feeds:
        outputs = compiled.run([x])                           # then run many times

Errors: ReferenceModelError (cannot run: not TOSA, bad inputs), SpecErrorIf (an
ERROR_IF holds: the graph is invalid) and SpecRequire (a REQUIRE fails at run
time: the specification leaves the result unpredictable), all from
tfl2tosa.errors. Importing this package is cheap; kernels load on first run.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from reference_model.evaluator import CompiledModel
    from tfl2tosa.ir.core import Graph, Module

__all__ = ["compile", "run"]


def compile(model: Graph | Module | str | os.PathLike | bytes) -> CompiledModel:
    """Read (if needed) and compile a TOSA graph once, for repeated `.run(inputs)`.

    Compiling finds every op's kernel, checks type modes, folds constants and
    decodes attributes; errors it finds are raised when a run reaches the op.
    """
    from reference_model.evaluator import CompiledModel

    # Reading and compiling make thousands of small objects that all stay alive:
    # the collector's passes over them (and over the rest of the process's heap)
    # find nothing to free, and cost a noticeable share of the time.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return CompiledModel(_as_module(model))
    finally:
        if collecting:
            gc.enable()


def run(model: Graph | Module | CompiledModel | str | os.PathLike | bytes,
        inputs: Sequence[Any] | Mapping[str, Any], *,
        keep_intermediates: bool = False) -> dict[str, np.ndarray]:
    """Run a TOSA graph on numpy inputs.

    `model` is a Graph, a Module (its first graph is the entry point; control
    flow runs the others), a `.tosa` file path, `.tosa` flatbuffer bytes, or
    what `compile` returned.
    `inputs` is a list in the graph's input order or a dict by input name;
    arrays are converted to the declared element type when every value
    survives the conversion. Returns {output name: array} in the graph's
    output order; with `keep_intermediates`, every tensor of the entry graph
    follows (inputs and op results, in execution order).
    """
    from reference_model.evaluator import CompiledModel

    compiled = model if isinstance(model, CompiledModel) else compile(model)
    return compiled.run(inputs, keep_intermediates=keep_intermediates)


def _as_module(model: Any) -> Module:
    from tfl2tosa.ir.core import Graph, Module

    if isinstance(model, Module):
        return model
    if isinstance(model, Graph):
        module = Module()
        module.add_graph(model)
        return module
    if isinstance(model, (str, os.PathLike, bytes, bytearray, memoryview)):
        from tfl2tosa.tosa.reader import read_tosa

        return read_tosa(bytes(model) if isinstance(model, (bytearray, memoryview)) else model)
    raise TypeError(f"reference_model.run needs a Graph, Module, .tosa path or bytes, "
                    f"not {type(model).__name__}")
