"""The float twin of a TFLite model: the same model with the int8 or int4
weights of chosen hybrid ops dequantized, so TFLite computes those ops in float.

`validate` judges hybrid ops that the conversion computed on dequantized
weights (`--hybrid float`) against this twin: TFLite then computes what the
TOSA graph computes, and the ordinary float tolerances apply. The values are
`(q - zp) * scale` in double rounded once to float32, per tensor, per channel
or per block (blockwise scales), as legalize.quantized.dequantized_values
computes them.
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


def _blockwise_scales(schema: Any, model: Any, graph: Any, tensor: Any,
                      shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray] | None:
    """Per-value scales and zero points of a tensor with BlockwiseQuantization
    details (float16 or float32 scales, one per block of a row's values), or
    None for other details."""
    q = tensor.quantization
    details = q.details if q is not None else None
    if details is None or not hasattr(details, "blockSize") or details.blockSize < 1:
        return None

    def constant(index: int) -> np.ndarray | None:
        if not 0 <= index < len(graph.tensors):
            return None
        t = graph.tensors[index]
        data = model.buffers[t.buffer].data
        types = schema.TensorType
        dtype = {types.FLOAT16: np.float16, types.FLOAT32: np.float32,
                 types.INT32: np.int32}.get(t.type)
        return None if data is None or dtype is None else \
            np.frombuffer(bytes(data), dtype=dtype).astype(np.float64)

    scales = constant(details.scales)
    blocks = shape[-1] // details.blockSize
    if scales is None or scales.size * details.blockSize != int(np.prod(shape)):
        raise Tfl2TosaError(f"tensor {tensor.name!r}: blockwise scales do not fit its shape")
    zero_points = constant(details.zeroPoints)
    # An absent zero-point tensor reads as index 0 (or -1, as AI Edge Quantizer writes).
    if zero_points is None or zero_points.size != scales.size:
        zero_points = np.zeros_like(scales)
    per_block = (*shape[:-1], blocks)
    return tuple(np.repeat(v.reshape(per_block), details.blockSize, axis=-1)
                 for v in (scales, zero_points))


def _dequantized(schema: Any, model: Any, graph: Any, tensor: Any) -> None:
    """Turn `tensor` (a quantized int8 or int4 constant) into its float32
    values, in place."""
    from tfl2tosa.tflite_import.tensors import unpack_int4

    q = tensor.quantization
    shape = tuple(int(d) for d in tensor.shape)
    data = np.frombuffer(bytes(model.buffers[tensor.buffer].data), dtype=np.int8)
    if tensor.type == schema.TensorType.INT4:
        data = unpack_int4(data.view(np.uint8), shape)
    values = data.astype(np.float64).reshape(shape)
    blockwise = _blockwise_scales(schema, model, graph, tensor, shape)
    if blockwise is not None:
        scales, zero_points = blockwise
    else:
        scales = np.asarray(q.scale, dtype=np.float64)
        zero_points = np.asarray(q.zeroPoint, dtype=np.float64)
        if scales.size > 1:
            axes = [1] * values.ndim
            axes[q.quantizedDimension] = scales.size
            scales, zero_points = scales.reshape(axes), zero_points.reshape(axes)
    real = ((values - zero_points) * scales).astype(np.float32)
    buffer = schema.BufferT()
    buffer.data = np.frombuffer(real.tobytes(), dtype=np.uint8).copy()
    model.buffers.append(buffer)
    tensor.buffer = len(model.buffers) - 1
    tensor.type = schema.TensorType.FLOAT32
    tensor.quantization = None


def float_twin(model_bytes: bytes, outcomes: list[dict[str, str]]) -> bytes:
    """`model_bytes` with the quantized int8 and int4 constant operands of the
    ops named by `outcomes` (conversion outcomes, located by their `loc`)
    dequantized."""
    import flatbuffers

    schema = _schema()
    model = schema.ModelT.InitFromObj(schema.Model.GetRootAs(model_bytes, 0))
    names = [(g.name.decode() if isinstance(g.name, bytes) else g.name or "")
             for g in model.subgraphs]
    stored = (schema.TensorType.INT8, schema.TensorType.INT4)
    blockwise = schema.QuantizationDetails.BlockwiseQuantization
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
            quantized = q is not None and (q.scale is not None and len(q.scale) > 0
                                           or q.detailsType == blockwise)
            if tensor is None or tensor.type not in stored or not quantized \
                    or (position[0], index) in done:
                continue
            buffer = model.buffers[tensor.buffer]
            if buffer.data is None or len(buffer.data) == 0:
                continue  # a run-time int8 tensor, not a weight
            _dequantized(schema, model, graph, tensor)
            done.add((position[0], index))
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())
