"""TFLite's builtin reference kernels as the judge of small integer tests.

- `reference_outputs(model, feeds)`: one run of a `.tflite` file (or its
  bytes) on TFLite's BUILTIN_REF kernels.
- `check_patterns(path, labels)`: `e2e.check_model` (ours against TFLite and
  against Arm's reference model), every op named in `labels` lowered on the
  integer path by its pattern, every output exact.
- `write_model(builder, path)`: a `TfliteBuilder` model written to `path`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from conftest import TfliteBuilder
from e2e import check_model

from tfl2tosa.pipeline import ConversionReport
from tfl2tosa.validation import ValidationReport


def reference_outputs(model: str | os.PathLike | bytes, feeds: Sequence[np.ndarray]
                      ) -> list[np.ndarray]:
    """TFLite's outputs on its builtin reference kernels for one run."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated.*")
    source = {"model_content": model} if isinstance(model, bytes) else {"model_path": str(model)}
    interpreter = tf.lite.Interpreter(
        **source, experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
    interpreter.allocate_tensors()
    for detail, array in zip(interpreter.get_input_details(), feeds):
        interpreter.set_tensor(detail["index"], array)
    interpreter.invoke()
    return [interpreter.get_tensor(d["index"]) for d in interpreter.get_output_details()]


def check_patterns(path: str | os.PathLike, labels: Mapping[str, str], *,
                   allowed_paths: tuple[str, ...] = ("integer",), **kwargs
                   ) -> tuple[ConversionReport, ValidationReport]:
    """Exact against TFLite and Arm, each op named in `labels` (TFL op name ->
    pattern label) on the integer path through its pattern."""
    conversion, report = check_model(path, allowed_paths=allowed_paths, **kwargs)
    ours = [o for o in conversion.outcomes if o["op_name"] in labels]
    assert ours, f"none of {sorted(labels)} in {conversion.outcomes}"
    assert all((o["path"], o["pattern"]) == ("integer", labels[o["op_name"]])
               for o in ours), ours
    assert all(o.exact for o in report.outputs)
    return conversion, report


def write_model(builder: TfliteBuilder, path: Path) -> Path:
    """`builder`'s model written to `path` (its folder created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(builder.to_bytes())
    return path
