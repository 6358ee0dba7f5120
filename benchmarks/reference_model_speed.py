"""Time single large ops in our reference model against a plain numpy baseline.

    .venv/bin/python benchmarks/reference_model_speed.py [--repeat 5]

Each row runs one TOSA op through `reference_model.run` (compiling the one-op
graph, evaluator and dtype checks included; every operand is a graph input, so
the registered kernels run, not the prepared forms for constant weights that a
converted model gets) and, as the baseline, the same arithmetic as one float32
numpy computation with no zero points, padding checks or exactness
guarantees: the cost of a plain float implementation on this machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# Run from a checkout: the repository root first on the path (an editable install made
# before reference_model/__init__.py existed resolves it as a namespace package).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import reference_model
import reference_model.kernels.tensor_ops
from tfl2tosa.ir import Graph, Op, TensorType, scalar_type
from tfl2tosa.tosa.ops import OPS


@dataclass
class Case:
    name: str
    op: str
    operands: list[tuple[np.ndarray, str]]
    output: tuple[tuple[int, ...], str]
    attrs: dict
    baseline: Callable[[], np.ndarray]


def _graph(case: Case) -> Graph:
    graph = Graph("main")
    values = [graph.add_input(f"in{i}", TensorType(a.shape, scalar_type(e)))
              for i, (a, e) in enumerate(case.operands)]
    shape, element = case.output
    op = graph.append(Op(OPS[case.op].mlir, values, [TensorType(shape, scalar_type(element))],
                         case.attrs, loc="benchmark"))
    graph.set_outputs(op.results)
    return graph


def _conv_baseline(x: np.ndarray, w: np.ndarray, pad: int) -> Callable[[], np.ndarray]:
    """float32 im2col-free conv: one matmul per tap over a padded input."""
    xf = np.pad(x.astype(np.float32), ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    wf = w.astype(np.float32)
    out_h, out_w = xf.shape[1] - w.shape[1] + 1, xf.shape[2] - w.shape[2] + 1

    def run() -> np.ndarray:
        acc = np.zeros((x.shape[0], out_h, out_w, w.shape[0]), np.float32)
        for ky in range(w.shape[1]):
            for kx in range(w.shape[2]):
                acc += xf[:, ky:ky + out_h, kx:kx + out_w] @ wf[:, ky, kx].T
        return acc

    return run


def cases(rng: np.random.Generator) -> list[Case]:
    def i8(*shape: int) -> np.ndarray:
        return rng.integers(-128, 128, size=shape).astype(np.int8)

    conv_attrs = {"pad": [1, 1, 1, 1], "stride": [1, 1], "dilation": [1, 1],
                  "acc_type": "INT32", "local_bound": False}
    x, w = i8(1, 112, 112, 32), i8(32, 3, 3, 32)
    xf, wf = x.astype(np.float32), w.astype(np.float32)
    dw = i8(3, 3, 32, 1)
    a, b = i8(1, 512, 512), i8(1, 512, 512)
    zero8 = np.zeros(1, np.int8)
    logits = rng.standard_normal((64, 1000)).astype(np.float32)
    return [
        Case("CONV2D i8 1x112x112x32 * 3x3x32x32", "CONV2D",
             [(x, "i8"), (w, "i8"), (np.zeros(32, np.int32), "i32"),
              (np.array([-1], np.int8), "i8"), (zero8, "i8")],
             ((1, 112, 112, 32), "i32"), conv_attrs, _conv_baseline(x, w, 1)),
        Case("CONV2D f32 1x112x112x32 * 3x3x32x32", "CONV2D",
             [(xf, "f32"), (wf, "f32"), (np.zeros(32, np.float32), "f32"),
              (np.zeros(1, np.float32), "f32"), (np.zeros(1, np.float32), "f32")],
             ((1, 112, 112, 32), "f32"), {**conv_attrs, "acc_type": "FP32"},
             _conv_baseline(x, w, 1)),
        Case("DEPTHWISE_CONV2D i8 1x112x112x32 * 3x3", "DEPTHWISE_CONV2D",
             [(x, "i8"), (dw, "i8"), (np.zeros(32, np.int32), "i32"),
              (np.array([-1], np.int8), "i8"), (zero8, "i8")],
             ((1, 112, 112, 32), "i32"), conv_attrs,
             lambda: sum(np.pad(xf, ((0, 0), (1, 1), (1, 1), (0, 0)))[:, ky:ky + 112,
                                                                     kx:kx + 112]
                         * dw[ky, kx, :, 0].astype(np.float32)
                         for ky in range(3) for kx in range(3))),
        Case("MATMUL i8 512x512 * 512x512", "MATMUL",
             [(a, "i8"), (b, "i8"), (np.array([3], np.int8), "i8"), (zero8, "i8")],
             ((1, 512, 512), "i32"), {},
             lambda: a.astype(np.float32) @ b.astype(np.float32)),
        # A softmax's max over the classes (signed zeros and NaN modes as the spec's
        # sequential fold gives them) against numpy's own max.
        Case("REDUCE_MAX f32 64x1000, axis 1", "REDUCE_MAX", [(logits, "f32")],
             ((64, 1), "f32"), {"axis": 1, "nan_mode": "PROPAGATE"},
             lambda: np.max(logits, axis=1, keepdims=True)),
    ]


def _best_of(fn: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per case; the best counts")
    args = parser.parse_args()
    print(f"{'case':44} {'ours ms':>9} {'numpy ms':>9} {'ratio':>6}")
    for case in cases(np.random.default_rng(0)):
        graph = _graph(case)
        feeds = [array for array, _ in case.operands]
        ours = _best_of(lambda graph=graph, feeds=feeds: reference_model.run(graph, feeds),
                        args.repeat)
        baseline = _best_of(case.baseline, args.repeat)
        print(f"{case.name:44} {ours * 1e3:9.2f} {baseline * 1e3:9.2f} {ours / baseline:6.1f}")


if __name__ == "__main__":
    main()
