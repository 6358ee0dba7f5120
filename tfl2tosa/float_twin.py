"""The float twin of a TFLite model: the same model with the int8 weights of
chosen hybrid ops dequantized, so TFLite computes those ops in float.

`validate` judges hybrid ops that the conversion computed on dequantized
weights (`--hybrid float`) against this twin: TFLite then computes what the
TOSA graph computes, and the ordinary float tolerances apply. The values are
`(q - zp) * scale` in double rounded once to float32, as legalize.conv
dequantizes them.
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

from tfl2tosa.errors import Tfl2TosaError

# TFLite's generated flatbuffer schema with the object API, from whichever
# runtime is installed.
_SCHEMA_MODULES = ("tensorflow.lite.python.schema_py_generated",
                   "ai_edge_litert.schema_py_generated")


def _schema() -> Any:
    for name in _SCHEMA_MODULES:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise Tfl2TosaError("judging dequantized hybrid ops needs tensorflow-cpu or ai-edge-litert")


def _op_position(loc: str, graph_names: list[str]) -> tuple[int, int] | None:
    """(subgraph, operator) of an outcome's TFLite location `graph:opN:NAME`."""
    graph, _, rest = loc.partition(":op")
    index = rest.split(":", 1)[0]
    if not index.isdigit():
        return None
    if graph == "main":
        return 0, int(index)
    return (graph_names.index(graph), int(index)) if graph in graph_names else None


def _dequantized(schema: Any, model: Any, tensor: Any) -> None:
    """Turn `tensor` (a quantized int8 constant) into its float32 values, in place."""
    q = tensor.quantization
    data = np.frombuffer(bytes(model.buffers[tensor.buffer].data), dtype=np.int8)
    values = data.astype(np.float64).reshape(tensor.shape)
    scales = np.asarray(q.scale, dtype=np.float64)
    zero_points = np.asarray(q.zeroPoint, dtype=np.float64)
    if scales.size > 1:
        shape = [1] * values.ndim
        shape[q.quantizedDimension] = scales.size
        scales, zero_points = scales.reshape(shape), zero_points.reshape(shape)
    real = ((values - zero_points) * scales).astype(np.float32)
    buffer = schema.BufferT()
    buffer.data = np.frombuffer(real.tobytes(), dtype=np.uint8).copy()
    model.buffers.append(buffer)
    tensor.buffer = len(model.buffers) - 1
    tensor.type = schema.TensorType.FLOAT32
    tensor.quantization = None


def float_twin(model_bytes: bytes, outcomes: list[dict[str, str]]) -> bytes:
    """`model_bytes` with the quantized int8 constant operands of the ops named by
    `outcomes` (conversion outcomes, located by their `loc`) dequantized."""
    import flatbuffers

    schema = _schema()
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAs(model_bytes, 0))
    names = [(g.name.decode() if isinstance(g.name, bytes) else g.name or "")
             for g in model.subgraphs]
    int8 = schema.TensorType.INT8
    done: set[tuple[int, int]] = set()
    for outcome in outcomes:
        position = _op_position(outcome["loc"], names)
        if position is None:
            raise Tfl2TosaError(f"cannot locate {outcome['op_name']} at {outcome['loc']} "
                                "in the model")
        graph = model.subgraphs[position[0]]
        for index in graph.operators[position[1]].inputs:
            tensor = graph.tensors[index] if index >= 0 else None
            q = None if tensor is None else tensor.quantization
            if tensor is None or tensor.type != int8 or q is None or q.scale is None \
                    or len(q.scale) == 0 or (position[0], index) in done:
                continue
            buffer = model.buffers[tensor.buffer]
            if buffer.data is None or len(buffer.data) == 0:
                continue  # a run-time int8 tensor, not a weight
            _dequantized(schema, model, tensor)
            done.add((position[0], index))
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())
