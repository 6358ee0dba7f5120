"""Whole-graph execution time: our reference model against Arm's (tosa_reference_model).

    .venv/bin/python benchmarks/reference_model_vs_arm.py [--repeat 7] [--models GLOB]
                                                          [--no-mobilenet-v2]

Rows: a single large CONV2D and MATMUL (int8 and fp32), every model of the zoo
(`models/arch/*.tflite`) that converts, then a real MobileNetV2 (224x224x3,
alpha 1.0, 1000 classes, float32 and int8; `benchmarks/mobilenet_v2.py` makes and
caches it, about 10 s the first time). Every row, in one run of the script, on
the same `.tosa` bytes and the same seeded random inputs; the best of `--repeat`
runs counts. numpy gets one OpenBLAS thread unless OPENBLAS_NUM_THREADS says
otherwise (see below). Columns:

- Arm: `tosa_reference_model.run(bytes, inputs)`, its only API: parse the
  flatbuffer, build and check the graph, run it, return the outputs.
- ours, bytes to outputs: `reference_model.run(bytes, inputs)`, the same work
  (our reader, compiling the plan, running it). This is the like-for-like
  comparison.
- ours, compiled, run only: `compiled.run(inputs)` on a plan compiled
  beforehand (`reference_model.compile`), what every further run of a loaded
  model costs (validate's seeded runs, a batch of inputs). Arm's Python API
  cannot keep a loaded graph, so its column still includes loading: this
  ratio flatters us and is not like-for-like.
- TFLite: `invoke()` of an allocated interpreter (its default XNNPACK delegate)
  on the original `.tflite`, for scale.
- agree: ours and Arm's outputs are identical (integers) or within 1e-3
  relative, plus 1e-3 of the tensor's largest magnitude (floats), so a fast
  wrong answer does not pass unnoticed. For MobileNetV2 every op's result is
  compared, in one extra untimed run with all of them as graph outputs.

Measured on the project's 2-core machine (best of 10, one OpenBLAS thread;
every row agreed, MobileNetV2 on every op's result, int8 bit for bit):

| graph | ops | Arm ms | ours ms | ours / Arm | run only ms | run only / Arm | TFLite ms |
| --- | --- | --- | --- | --- | --- | --- | --- |
| CONV2D 1x64x64x32 -> 64, 3x3 (i8) | 5 | 72.21 | 2.35 | 0.03 | 2.56 | 0.04 | - |
| MATMUL 256x256x256 (i8) | 3 | 22.24 | 0.47 | 0.02 | 0.37 | 0.02 | - |
| CONV2D 1x64x64x32 -> 64, 3x3 (f32) | 5 | 246.41 | 5.34 | 0.02 | 5.18 | 0.02 | - |
| MATMUL 256x256x256 (f32) | 3 | 15.97 | 0.79 | 0.05 | 0.69 | 0.04 | - |
| attention_block_dynamic_range | 97 | 1.02 | 2.09 | 2.05 | 0.46 | 0.45 | 0.01 |
| attention_block_float16 | 97 | 1.24 | 2.68 | 2.17 | 0.46 | 0.37 | 0.01 |
| attention_block_float32 | 97 | 1.07 | 2.30 | 2.15 | 0.46 | 0.43 | 0.01 |
| attention_block_int16x8 | 230 | 1.99 | 5.21 | 2.62 | 0.65 | 0.33 | 0.05 |
| attention_block_int8 | 255 | 2.24 | 5.62 | 2.51 | 0.72 | 0.32 | 0.01 |
| lstm_classifier_dynamic_range | 414 | 6.60 | 8.14 | 1.23 | 1.74 | 0.26 | 0.04 |
| lstm_classifier_float16 | 414 | 6.94 | 9.08 | 1.31 | 2.06 | 0.30 | 0.03 |
| lstm_classifier_float32 | 414 | 6.62 | 8.98 | 1.36 | 1.55 | 0.23 | 0.02 |
| lstm_classifier_int8 | 809 | 22.40 | 16.52 | 0.74 | 2.15 | 0.10 | 0.18 |
| mobilenet_tiny_dynamic_range | 107 | 7.48 | 3.74 | 0.50 | 1.04 | 0.14 | 0.05 |
| mobilenet_tiny_float16 | 107 | 8.25 | 3.97 | 0.48 | 1.68 | 0.20 | 0.05 |
| mobilenet_tiny_float32 | 107 | 7.68 | 5.70 | 0.74 | 1.23 | 0.16 | 0.05 |
| mobilenet_tiny_int16x8 | 240 | 8.23 | 6.42 | 0.78 | 1.18 | 0.14 | 1.14 |
| mobilenet_tiny_int8 | 269 | 7.07 | 6.31 | 0.89 | 1.25 | 0.18 | 0.03 |
| MobileNetV2 224x224 float32 | 183 | 1160.87 | 109.43 | 0.09 | 92.22 | 0.08 | 7.32 |
| MobileNetV2 224x224 int8 | 457 | 528.86 | 60.46 | 0.11 | 45.86 | 0.09 | 3.10 |

("ops" counts constants too.) Two further runs of the mobilenet_tiny rows
(`--models 'arch/mobilenet_tiny*' --repeat 20`) gave 0.84 and 0.91 (int8),
0.76 and 0.90 (int16x8), 0.36-0.42 (float flavours): the machine's noise moves
single rows by 10-20%.

The float rows above predate in-order float convolutions (CONV2D, CONV3D and
DEPTHWISE_CONV2D sum one term at a time in the specification's order, to give
the bits of Arm's model and TFLite's reference kernels, where a float64 matrix
product rounded once was used before). Three interleaved runs of both versions
(`--models 'arch/mobilenet_tiny*' --repeat 10`, machine load 7-11) gave, before
and after: CONV2D f32 0.02 -> 0.12-0.19, MobileNetV2 float32 0.10-0.12 ->
0.21-0.30, mobilenet_tiny float flavours 0.24-0.67 -> 0.34-0.81 (noise
dominates there); the integer rows did not change.

The graphs the goal names (the zoo's MobileNetV2-style mobilenet_tiny, int8 and
float32, the large single ops) and the real MobileNetV2 run faster than on Arm's
model, bytes to outputs like for like. On mobilenet_tiny_int8 (about 6 ms):
reading about 1.8 ms, compiling about 1.5 ms, running about 1.2 ms. Still
slower than Arm: attention_block (2.1-2.6x) and the float lstm_classifier
(1.2-1.4x), graphs of many ops on tensors of a few hundred elements, where Arm
spends about 9 us per op and our reader and compiler still a few microseconds
of Python per op and tensor. TFLite's XNNPACK is 13x (float32) and 15x (int8)
faster than our compiled run of the real MobileNetV2.

With numpy's default two OpenBLAS threads, rows with a matrix product were
10-30x slower at random on the shared machine (a BLAS thread waiting for a
busy core: MATMUL 256^3 i8 took 0.55 or 15.9 ms, best of 10); one thread
matches Arm's model, which computes on one (its CPU time equals its wall time
on the large CONV2D), and gives stable numbers.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

# One OpenBLAS thread, set before numpy loads (an OPENBLAS_NUM_THREADS in the
# environment wins): Arm's model computes on one thread, so this is like for like,
# and on the shared 2-core machine a second BLAS thread waiting for a busy core
# made single rows 10-30x slower at random (MATMUL 256^3 i8: 0.55 or 15.9 ms).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

# Run from a checkout: the repository root first on the path.
REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import reference_model
from tfl2tosa.errors import Tfl2TosaError
from tfl2tosa.ir import Graph, Module, Op, TensorType, scalar_type
from tfl2tosa.ir.types import numpy_dtype, storage_type
from tfl2tosa.tosa.writer import write_tosa


def _const(graph: Graph, values: np.ndarray, element: str):
    op = graph.append(Op("tosa.const", [], [TensorType(values.shape, scalar_type(element))],
                         {"values": values}))
    return op.result


def conv2d_module(element: str, rng: np.random.Generator) -> Module:
    """1x64x64x32 input, 64 3x3 filters, stride 1, same padding."""
    acc, out = ("i32", "i32") if element == "i8" else ("f32", "f32")
    graph = Graph("main")
    x = graph.add_input("input", TensorType((1, 64, 64, 32), scalar_type(element)))
    weight = _random(rng, (64, 3, 3, 32), element)
    bias = np.zeros(64, numpy_dtype(scalar_type(out)))
    zero = np.zeros(1, numpy_dtype(scalar_type(element)))
    operands = [x, _const(graph, weight, element), _const(graph, bias, out),
                _const(graph, zero, element), _const(graph, zero, element)]
    op = graph.append(Op("tosa.conv2d", operands, [TensorType((1, 64, 64, 64), scalar_type(out))],
                         {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1],
                          "acc_type": "INT32" if acc == "i32" else "FP32",
                          "local_bound": False}))
    graph.set_outputs([op.result])
    return _module(graph)


def matmul_module(element: str, rng: np.random.Generator) -> Module:
    """[1,256,256] x [1,256,256]."""
    out = "i32" if element == "i8" else "f32"
    graph = Graph("main")
    a = graph.add_input("a", TensorType((1, 256, 256), scalar_type(element)))
    b = graph.add_input("b", TensorType((1, 256, 256), scalar_type(element)))
    zero = np.zeros(1, numpy_dtype(scalar_type(element)))
    op = graph.append(Op("tosa.matmul", [a, b, _const(graph, zero, element),
                                         _const(graph, zero, element)],
                         [TensorType((1, 256, 256), scalar_type(out))]))
    graph.set_outputs([op.result])
    return _module(graph)


def _module(graph: Graph) -> Module:
    module = Module()
    module.add_graph(graph)
    return module


def _random(rng: np.random.Generator, shape: tuple[int, ...], element: str) -> np.ndarray:
    dtype = numpy_dtype(scalar_type(element))
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(max(info.min, -128), min(info.max, 127), size=shape,
                            endpoint=True).astype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    return rng.standard_normal(shape).astype(dtype)


def graph_inputs(module: Module, rng: np.random.Generator) -> list[np.ndarray]:
    inputs = []
    for value in module.main.inputs:
        shape = tuple(1 if d < 0 else d for d in value.type.shape)
        inputs.append(_random(rng, shape, storage_type(value.type.element).name))
    return inputs


def _quiet_arm(data: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    import tosa_reference_model

    saved = os.dup(1), os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        outputs, status = tosa_reference_model.run(data, inputs)
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (null, *saved):
            os.close(fd)
    if status != tosa_reference_model.GraphStatus.TOSA_VALID:
        raise RuntimeError(f"Arm's model: {status.name}")
    return outputs


def _best_time(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    """The fastest of `repeat` runs (the least disturbed by other work on the machine)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def _agree(ours: list[np.ndarray], arm: list[np.ndarray]) -> bool:
    """Integers identical; floats within 1e-3 relative to the value plus 1e-3 of the
    tensor's largest magnitude (a fixed 1e-3 would pass any softmax over 1000 classes)."""
    for mine, theirs in zip(ours, arm, strict=True):
        mine = np.asarray(mine)
        theirs = np.asarray(theirs).reshape(mine.shape)
        if mine.dtype.kind in "iub":
            if not np.array_equal(mine, theirs.astype(mine.dtype)):
                return False
            continue
        theirs = theirs.astype(np.float64)
        finite = np.abs(theirs[np.isfinite(theirs)])
        scale = float(finite.max()) if finite.size else 0.0
        if not np.allclose(mine.astype(np.float64), theirs, rtol=1e-3, atol=1e-3 * scale,
                           equal_nan=True):
            return False
    return True


def _agree_on_every_tensor(module: Module, inputs: list[np.ndarray]) -> str:
    """Compare every op's result, not only the graph outputs, in one untimed run each.

    The result of each non-constant op becomes a graph output of a probe copy of the
    bytes, so a difference inside the network cannot hide behind a saturating output.
    """
    graph = module.main
    saved = graph.outputs
    probes = [value for op in graph.ops if op.name not in ("tosa.const", "tosa.const_shape")
              for value in op.results]
    graph.set_outputs(probes)
    try:
        data = write_tosa(module)
    finally:
        graph.set_outputs(saved)
    ours = list(reference_model.run(data, inputs).values())
    arm = _quiet_arm(data, inputs)
    differing = [value.owner.name for value, mine, theirs in zip(probes, ours, arm, strict=True)
                 if not _agree([mine], [theirs])]
    if differing:
        return f"no: {len(differing)} of {len(probes)} tensors, first from {differing[0]}"
    return f"yes (all {len(probes)} tensors)"


def _tflite_time(path: Path, repeat: int, rng: np.random.Generator) -> str:
    """invoke() of an allocated TFLite interpreter (default kernels) on random inputs."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow as tf

    interpreter = tf.lite.Interpreter(model_path=str(path))
    interpreter.allocate_tensors()
    for detail in interpreter.get_input_details():
        shape = tuple(int(d) for d in detail["shape"])
        dtype = np.dtype(detail["dtype"])
        if dtype.kind == "f":
            value = rng.standard_normal(shape).astype(dtype)
        else:
            info = np.iinfo(dtype)
            value = rng.integers(max(info.min, -128), min(info.max, 127), size=shape,
                                 endpoint=True).astype(dtype)
        interpreter.set_tensor(detail["index"], value)
    seconds, _ = _best_time(interpreter.invoke, repeat)
    return f"{seconds * 1e3:.2f}"


def bench(name: str, module: Module, repeat: int, rng: np.random.Generator,
          tflite: Path | None = None, every_tensor: bool = False) -> str:
    data = write_tosa(module)
    inputs = graph_inputs(module, rng)
    arm_time, arm_out = _best_time(lambda: _quiet_arm(data, inputs), repeat)
    # The same work as Arm's call: bytes in, outputs out (read, compile, run).
    our_time, our_out = _best_time(
        lambda: list(reference_model.run(data, inputs).values()), repeat)
    compiled = reference_model.compile(data)
    run_time, _ = _best_time(lambda: compiled.run(inputs), repeat)
    ratio = our_time / arm_time if arm_time > 0 else float("inf")
    tflite_ms = _tflite_time(tflite, repeat, rng) if tflite is not None else "-"
    if every_tensor:
        agree = _agree_on_every_tensor(module, inputs)
    else:
        agree = "yes" if _agree(our_out, arm_out) else "no"
    return (f"| {name} | {len(module.main.ops)} | {arm_time * 1e3:.2f} | {our_time * 1e3:.2f} | "
            f"{ratio:.2f} | {run_time * 1e3:.2f} | {run_time / arm_time:.2f} | {tflite_ms} | "
            f"{agree} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs per row; the best counts")
    parser.add_argument("--models", default="arch/*.tflite",
                        help="glob under models/ (default: arch/*.tflite)")
    parser.add_argument("--no-mobilenet-v2", dest="mobilenet_v2", action="store_false",
                        help="leave out the 224x224 MobileNetV2 rows (benchmarks/mobilenet_v2.py)")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print("| graph | ops | Arm ms (bytes to outputs) | ours ms (bytes to outputs) | ours / Arm "
          "| ours ms (compiled, run only) | run only / Arm | TFLite ms (invoke) | agree |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for element in ("i8", "f32"):
        print(bench(f"CONV2D 1x64x64x32 -> 64, 3x3 ({element})", conv2d_module(element, rng),
                    args.repeat, rng), flush=True)
        print(bench(f"MATMUL 256x256x256 ({element})", matmul_module(element, rng),
                    args.repeat, rng), flush=True)
    from tfl2tosa.pipeline import convert

    # (row name, .tflite file, compare every tensor): the zoo's small models compare
    # their outputs; the 224x224 MobileNetV2 every intermediate tensor as well.
    models = [(str(path.relative_to(REPO / "models")), path, False)
              for path in sorted((REPO / "models").glob(args.models))]
    if args.mobilenet_v2:
        from mobilenet_v2 import mobilenet_v2_paths

        models += [(f"MobileNetV2 224x224 {flavour}", path, True)
                   for flavour, path in mobilenet_v2_paths().items()]
    for name, path, every_tensor in models:
        try:
            module, _ = convert(path)
            print(bench(name, module, args.repeat, rng, tflite=path,
                        every_tensor=every_tensor), flush=True)
        except (Tfl2TosaError, RuntimeError) as exc:
            print(f"| {name} | - | - | - | - | - | - | - | {type(exc).__name__}: "
                  f"{str(exc).splitlines()[0][:80]} |", flush=True)


if __name__ == "__main__":
    main()
