"""Facts read from .tflite flatbuffers with the `tflite` package: ops, signatures, diffs.

Used by generate.py for the manifest and for `--check`'s explanation of a difference.
"""

from __future__ import annotations

from collections.abc import Sequence

import tflite

from tfl2tosa.tflite_import.source import operator_code

OPERATOR_NAMES = {code: name for name, code in vars(tflite.BuiltinOperator).items()
                  if not name.startswith("_")}
TENSOR_TYPE_NAMES = {code: name.lower() for name, code in vars(tflite.TensorType).items()
                     if not name.startswith("_")}


def operator_name(model: tflite.Model, opcode_index: int) -> str:
    code = model.OperatorCodes(opcode_index)
    builtin = operator_code(code)
    if builtin == tflite.BuiltinOperator.CUSTOM:
        return f"CUSTOM:{code.CustomCode().decode()}"
    return OPERATOR_NAMES[builtin]


def subgraph_op_names(model: tflite.Model) -> list[list[str]]:
    """Operator names per subgraph, in execution order."""
    result = []
    for s in range(model.SubgraphsLength()):
        graph = model.Subgraphs(s)
        result.append([operator_name(model, graph.Operators(i).OpcodeIndex())
                       for i in range(graph.OperatorsLength())])
    return result


def tensor_signature(graph: tflite.SubGraph, index: int) -> dict[str, object]:
    tensor = graph.Tensors(index)
    shape = [int(d) for d in tensor.ShapeAsNumpy()] if tensor.ShapeLength() else []
    entry: dict[str, object] = {
        "name": tensor.Name().decode(),
        "shape": shape,
        "dtype": TENSOR_TYPE_NAMES[tensor.Type()],
    }
    if tensor.ShapeSignatureLength():
        signature = [int(d) for d in tensor.ShapeSignatureAsNumpy()]
        if signature != shape:  # -1 marks a dimension only known at run time
            entry["shape_signature"] = signature
    quant = tensor.Quantization()
    if quant is not None and quant.ScaleLength() == 1:
        entry["scale"] = float(quant.Scale(0))
        entry["zero_point"] = int(quant.ZeroPoint(0))
    return entry


def signature_input_names(model: tflite.Model) -> dict[int, str]:
    """Main-subgraph tensor index -> signature input name (`input_<argument index>`)."""
    if not model.SignatureDefsLength():
        return {}
    signature = model.SignatureDefs(0)
    return {signature.Inputs(i).TensorIndex(): signature.Inputs(i).Name().decode()
            for i in range(signature.InputsLength())}


def describe_model(data: bytes, ranges: Sequence[tuple[float, float]] = ()
                   ) -> dict[str, object]:
    """Manifest facts about a model; `ranges` (per function argument) adds each input's
    calibration range."""
    model = tflite.Model.GetRootAsModel(data, 0)
    main = model.Subgraphs(0)
    ops = sorted({name for graph_ops in subgraph_op_names(model) for name in graph_ops})
    argument_names = signature_input_names(model)
    input_entries = []
    for i in range(main.InputsLength()):
        entry = tensor_signature(main, main.Inputs(i))
        name = argument_names.get(main.Inputs(i))
        if name is not None and ranges:
            entry["signature_name"] = name
            entry["range"] = list(ranges[int(name.removeprefix("input_"))])
        input_entries.append(entry)
    return {
        "builtin_ops": ops,
        "subgraphs": model.SubgraphsLength(),
        "inputs": input_entries,
        "outputs": [tensor_signature(main, main.Outputs(i))
                    for i in range(main.OutputsLength())],
    }


def tensor_types(data: bytes) -> set[str]:
    model = tflite.Model.GetRootAsModel(data, 0)
    return {TENSOR_TYPE_NAMES[model.Subgraphs(s).Tensors(t).Type()]
            for s in range(model.SubgraphsLength())
            for t in range(model.Subgraphs(s).TensorsLength())}


# --- --check: explain differences -----------------------------------------------------


def metadata_buffers(model: tflite.Model) -> dict[str, bytes]:
    result = {}
    for i in range(model.MetadataLength()):
        item = model.Metadata(i)
        result[item.Name().decode()] = buffer_bytes(model, item.Buffer())
    return result


def buffer_bytes(model: tflite.Model, index: int) -> bytes:
    buffer = model.Buffers(index)
    return buffer.DataAsNumpy().tobytes() if buffer.DataLength() else b""


def tensor_descriptions(model: tflite.Model) -> list[tuple]:
    rows = []
    for s in range(model.SubgraphsLength()):
        graph = model.Subgraphs(s)
        for t in range(graph.TensorsLength()):
            sig = tensor_signature(graph, t)
            rows.append((s, sig["name"], tuple(sig["shape"]), sig["dtype"],
                         sig.get("scale"), sig.get("zero_point")))
    return rows


def tensor_data(model: tflite.Model) -> list[bytes]:
    """The constant data of every tensor, in subgraph and tensor order."""
    return [buffer_bytes(model, model.Subgraphs(s).Tensors(t).Buffer())
            for s in range(model.SubgraphsLength())
            for t in range(model.Subgraphs(s).TensorsLength())]


def unreferenced_buffers(model: tflite.Model) -> list[bytes]:
    used = {model.Subgraphs(s).Tensors(t).Buffer()
            for s in range(model.SubgraphsLength())
            for t in range(model.Subgraphs(s).TensorsLength())}
    used |= {model.Metadata(i).Buffer() for i in range(model.MetadataLength())}
    return [data for i in range(model.BuffersLength())
            if i not in used and (data := buffer_bytes(model, i))]


def describe_difference(old: bytes, new: bytes) -> list[str]:
    """Human-readable reasons two model files differ, most significant first."""
    a, b = tflite.Model.GetRootAsModel(old, 0), tflite.Model.GetRootAsModel(new, 0)
    reasons = []
    if subgraph_op_names(a) != subgraph_op_names(b):
        reasons.append(f"op list differs: {describe_model(old)['builtin_ops']} -> "
                       f"{describe_model(new)['builtin_ops']}")
    weights_a, weights_b = tensor_data(a), tensor_data(b)
    if weights_a != weights_b:
        changed = sum(x != y for x, y in zip(weights_a, weights_b))
        reasons.append(f"weights differ ({changed} constant tensors changed)")
    if tensor_descriptions(a) != tensor_descriptions(b):
        reasons.append("tensor names, shapes, types or quantization parameters differ")
    meta_a, meta_b = metadata_buffers(a), metadata_buffers(b)
    for key in sorted(set(meta_a) | set(meta_b)):
        if meta_a.get(key) != meta_b.get(key):
            before, after = (meta.get(key, b"").rstrip(b"\0") for meta in (meta_a, meta_b))
            reasons.append(f"metadata {key!r} differs: {before!r} -> {after!r}")
    if not reasons:
        dead_a, dead_b = unreferenced_buffers(a), unreferenced_buffers(b)
        if dead_a != dead_b:
            reasons.append(f"only buffers no tensor uses differ ({len(dead_a)} -> "
                           f"{len(dead_b)} non-empty): dead data the converter left behind")
        else:
            reasons.append("same ops, weights, tensors and metadata: flatbuffer layout differs")
    elif all(r.startswith("metadata") for r in reasons):
        reasons.insert(0, "only metadata differs")
    return reasons
