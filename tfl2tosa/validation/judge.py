"""Who judges a model, by what bounds, and how one output compares.

Tolerances
----------
Integer outputs must be exact when every op took the integer path. An op that
took the dequantize/float/quantize fallback may differ from TFLite's integer
kernel by rounding, so such models allow `lsb_tolerance` (default 1) LSBs.
The integer lowerings reproduce TFLite's reference kernels, or its optimized
ones where tfl2tosa.kernels lists how they differ; a model that runs on the
optimized kernels still gets 1 LSB, because not every optimized kernel has been
measured (e.g. the optimized float -> int8/int16 QUANTIZE multiplies by the
float reciprocal and rounds half to even, the reference kernel divides in float
and rounds half away from zero: both reproduced).

TFLite's reference SUM kernel is broken for quantized data (reduce.cc calls
the uint8 reference overload on int8 tensors, and int16 results change from
one invocation to the next), so models with a quantized SUM run on the
optimized kernels.

Float outputs are compared with an absolute + relative bound chosen by the op
families present in the model (FLOAT_TOLERANCES): data movement is exact,
plain arithmetic rounds differently only through evaluation order,
transcendental functions follow the TOSA spec's ulp bounds, which are looser
than TFLite's libm.

Hybrid (dynamic-range) ops keep int8 weights but float activations. Emulated
ones (`convert --hybrid emulate`, legalize.hybrid) compute what TFLite's
hybrid kernels compute, bit for bit, so they get the ordinary float
tolerances; the judge is then the builtin kernels
(BUILTIN_WITHOUT_DEFAULT_DELEGATES), not the reference resolver, because
(1) BUILTIN_REF lacks FULLY_CONNECTED version 12, which the converter emits
for every dynamic-range dense layer, so such models fell back to the builtin
kernels anyway, and (2) where both exist they order the float rescale
differently (CONV_2D per channel: reference `(acc * s_w) * s_in`, builtin
`acc * (s_in * s_w)`; DEPTHWISE_CONV_2D: reference `acc * (s_in * s_w)`,
builtin `(acc * s_w) * s_in` in groups of four channels); the emulation
follows the builtin kernels, which are also what TFLite runs without a
delegate. Hybrid ops computed on dequantized weights (`--hybrid float`, or a
hybrid op with no emulation) are judged against TFLite running a twin of the
model whose weights for exactly those ops are dequantized (`float_twin`), and
the report says so.

int4 weights with blockwise scales (AI Edge Quantizer's dynamic blockwise
recipes) are read by two TFLite runtimes: the builtin FULLY_CONNECTED's 4-bit
path (EvalBlockwise4Bit; the reference kernel ignores the scales) and LiteRT's
XNNPACK delegate. The builtin kernel is the judge: it reads the float16 scales
as stored and computes the same on TensorFlow and LiteRT, and the emulation
(legalize.hybrid.fully_connected_blockwise_hybrid) follows it bit for bit.
LiteRT's XNNPACK rounds the scales to bfloat16 first, which moves its outputs
beyond the float bounds, and TensorFlow 2.20's XNNPACK misreads them.
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import numpy as np

from tfl2tosa.errors import Tfl2TosaError, UsageError
from tfl2tosa.float_twin import float_twin
from tfl2tosa.validation.report import OutputComparison


# (atol, rtol) by the TFL op family that dominates error; a model uses the
# loosest bound among the op families it contains.
FLOAT_TOLERANCES: dict[str, tuple[float, float]] = {
    "exact": (0.0, 0.0),
    "arithmetic": (1e-6, 1e-5),      # add/mul/conv/matmul: summation order
    "transcendental": (1e-5, 1e-4),  # exp/log/tanh/sigmoid/erf/pow/softmax/...
    "approximate": (1e-4, 1e-3),     # ops lowered through reciprocal/rsqrt chains
}


# Ulps of a float type narrower than float32 that any inexact family allows.
NARROW_FLOAT_ULPS = 4


_EXACT_OPS = {
    "reshape", "transpose", "concatenation", "pack", "unpack", "split", "split_v", "slice",
    "strided_slice", "tile", "pad", "padv2", "mirror_pad", "expand_dims", "squeeze",
    "reverse_v2", "gather", "gather_nd", "space_to_depth", "depth_to_space",
    "space_to_batch_nd", "batch_to_space_nd", "broadcast_to", "max_pool_2d", "maximum",
    "minimum", "relu", "relu6", "relu_n1_to_1", "relu_0_to_1", "reduce_max", "reduce_min",
    "arg_max", "arg_min", "select", "select_v2", "equal", "not_equal", "less", "less_equal",
    "greater", "greater_equal", "logical_and", "logical_or", "logical_not", "neg", "abs",
    "floor", "ceil", "round", "cast", "pseudo_const", "no_value", "quantize", "dequantize",
    "zeros_like", "ones_like", "fill", "shape", "rank", "one_hot", "reverse_sequence",
    "resize_nearest_neighbor", "embedding_lookup", "scatter_nd", "matrix_diag",
    "matrix_set_diag", "dynamic_update_slice", "broadcast_args", "unsorted_segment_max",
    "unsorted_segment_min", "leaky_relu", "prelu", "reduce_any", "reduce_all", "topk_v2",
    "while", "if", "call_once", "variable", "sign",
}


_TRANSCENDENTAL_OPS = {
    "exp", "log", "logistic", "tanh", "gelu", "elu", "softmax", "log_softmax", "pow", "sin",
    "cos", "rsqrt", "l2_normalization", "local_response_normalization", "l2_pool_2d",
    "atan2", "unidirectional_sequence_lstm", "unidirectional_sequence_rnn",
    "bidirectional_sequence_lstm", "bidirectional_sequence_rnn", "lstm", "rnn",
}


# Measured by the pattern authors against TFLite: mean and average pool stay within
# an ulp or two (MUL by 1/N versus a division), hard_swish within one (x/6 as
# x*(1/6)); div and sqrt are correctly rounded, floor_div/floor_mod bit exact
# below 2^23. No op needs the approximate family today; it stays for lowerings
# through reciprocal chains.
_APPROXIMATE_OPS: set[str] = set()


_FLOAT_NAMES = ("f32", "f16", "bf16")


def is_hybrid(outcome: dict[str, str]) -> bool:
    """An op with quantized (weight) operands and float results.

    DEQUANTIZE is not one: it is exact, `float(double(scale) * (q - zp))` in
    TFLite and in its lowering; nor is a custom op (TFLite_Detection_PostProcess
    dequantizes its inputs that same way, in its kernel and its lowering), nor a
    quantized comparison (bool results)."""
    if outcome["op_name"] in ("tfl.dequantize", "tfl.custom"):
        return False
    ins, _, outs = outcome["types"].partition(" -> ")
    return "quant.uniform" in ins and all(t in _FLOAT_NAMES for t in outs.split(","))


def hybrid_mode(outcome: dict[str, str]) -> str | None:
    """How a hybrid op computed: "emulate" (TFLite's hybrid kernel) or "float"
    (dequantized weights); None for other ops."""
    if not is_hybrid(outcome):
        return None
    from legalize.hybrid import HYBRID_LABELS

    return "emulate" if outcome.get("pattern") in HYBRID_LABELS else "float"


def float_tolerance(tfl_op_names: set[str]) -> tuple[str, tuple[float, float]]:
    short = {n.split(".", 1)[-1] for n in tfl_op_names}
    if short & _APPROXIMATE_OPS:
        family = "approximate"
    elif short & _TRANSCENDENTAL_OPS:
        family = "transcendental"
    elif short - _EXACT_OPS:
        family = "arithmetic"
    else:
        family = "exact"
    return family, FLOAT_TOLERANCES[family]


# Their integer patterns take any operand quantization equal to the output's; with
# another one they fall back and compute on real values, while TFLite's kernels
# pick among the stored integers as if the scales were equal.
RAW_CHOICE_OPS = frozenset({"tfl.maximum", "tfl.minimum", "tfl.select", "tfl.select_v2"})


RAW_CHOICE_NOTE = ("its inputs are quantized unlike its output; TFLite picks among the "
                   "stored integers ignoring the scales, we pick among the real values, "
                   "so a mismatch here is TFLite's raw-integer answer")


BLOCKWISE_PATTERN = "fully_connected_blockwise_hybrid"


BLOCKWISE_NOTE = ("FULLY_CONNECTED's 4-bit path reads their float16 scales (LiteRT's "
                  "XNNPACK rounds them to bfloat16; TFLite's reference kernel ignores them)")


# TFLite runtimes validate can use, in order of preference: LiteRT (TFLite's
# successor, a small wheel) and TensorFlow's bundled TFLite. Both offer the
# reference resolver; their kernels differ on a few edge cases (README, Install).
BACKENDS = ("ai-edge-litert", "tensorflow")


def _runtime(backend: str | None) -> tuple[Any, Any, str]:
    """(Interpreter class, OpResolverType enum, backend name) of the chosen or
    first installed backend."""
    if backend is not None and backend not in BACKENDS:
        raise UsageError(f"unknown backend {backend!r} (choose {' or '.join(BACKENDS)})")
    for name in (backend,) if backend else BACKENDS:
        try:
            if name == "ai-edge-litert":
                from ai_edge_litert import interpreter as litert

                return litert.Interpreter, litert.OpResolverType, name
            import tensorflow as tf

            return tf.lite.Interpreter, tf.lite.experimental.OpResolverType, name
        except ImportError:
            continue
    if backend == "tensorflow":
        raise Tfl2TosaError("--backend tensorflow needs tensorflow-cpu: "
                            "pip install 'tfl2tosa[tensorflow]'")
    raise Tfl2TosaError(f"validation needs {backend or 'ai-edge-litert or tensorflow-cpu'}: "
                        "pip install 'tfl2tosa[validate]'")


def _interpreter(model: bytes, *, reference: bool = True,
                 backend: str | None = None) -> tuple[Any, str, str]:
    """A TFLite interpreter on builtin reference kernels, or the plain builtin
    ones; with the resolver and the backend's name."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    Interpreter, resolvers, backend_name = _runtime(backend)
    warnings.filterwarnings("ignore", message=".*tf.lite.Interpreter is deprecated.*")
    last_error: Exception | None = None
    choices = ("BUILTIN_REF", "BUILTIN_WITHOUT_DEFAULT_DELEGATES")
    for resolver in choices if reference else choices[1:]:
        try:
            interp = Interpreter(model_content=model,
                                 experimental_op_resolver_type=getattr(resolvers, resolver),
                                 experimental_preserve_all_tensors=True)
            interp.allocate_tensors()
            return interp, resolver, backend_name
        except (RuntimeError, ValueError) as exc:
            last_error = exc
    raise Tfl2TosaError(f"the TFLite interpreter cannot load the model: "
                        f"{_first_line(last_error) if last_error else ''}")


def _needs_builtin_kernels(outcomes: list[dict[str, Any]]) -> bool:
    """Whether TFLite judges these ops on its builtin kernels although the reference
    resolver could load them: a quantized SUM (its reference kernel is broken) or
    an emulated hybrid op (the emulation follows the builtin kernels)."""
    return any((o["op_name"] == "tfl.sum" and "quant.uniform" in o["types"])
               or hybrid_mode(o) == "emulate" for o in outcomes)


def judging_kernels(model_path: str | os.PathLike, conversion: Any,
                    backend: str | None = None) -> str:
    """The `convert(kernels=...)` whose lowerings the TFLite kernels that `validate`
    runs for this model and its `conversion` compute (raises Tfl2TosaError when
    TFLite cannot load the model)."""
    from tfl2tosa.tflite_import.source import open_source

    model_bytes = bytes(open_source(os.fspath(model_path))[0])
    dequantized = [o for o in conversion.outcomes if hybrid_mode(o) == "float"]
    if dequantized:
        model_bytes = float_twin(model_bytes, dequantized)
    _, resolver, name = _interpreter(model_bytes, backend=backend,
                                     reference=not _needs_builtin_kernels(conversion.outcomes))
    return _kernels_for(resolver, name)


def _first_line(error: Exception) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0]


def _kernels_for(resolver: str, backend: str) -> str:
    """The `convert(kernels=...)` that reproduces `backend`'s kernels under `resolver`."""
    from tfl2tosa.kernels import BUILTIN_KERNELS

    return "reference" if resolver == "BUILTIN_REF" else BUILTIN_KERNELS[backend]


def _ulp_distance(a: np.ndarray, b: np.ndarray) -> int:
    """Largest distance in units in the last place; NaN vs NaN counts as 0."""
    if a.size == 0:
        return 0
    bits = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    half = np.int64(1) << (8 * a.dtype.itemsize - 1)

    def ordered(x: np.ndarray) -> np.ndarray:
        # Sign-magnitude float bits -> a monotonic integer line (-0 and +0 meet).
        i = x.view(bits).astype(np.int64)
        return np.where(i < 0, -(i + half), i)

    both_nan = np.isnan(a) & np.isnan(b)
    return int(np.max(np.where(both_nan, 0, np.abs(ordered(a) - ordered(b)))))


def float_difference(theirs: np.ndarray, ours: np.ndarray) -> np.ndarray:
    """|ours - theirs| in float64: 0 where both are equal (equal infinities included)
    or both NaN, infinite where only one is NaN."""
    theirs = theirs.astype(np.float64)
    ours = ours.astype(np.float64)
    same = (ours == theirs) | (np.isnan(ours) & np.isnan(theirs))
    with np.errstate(invalid="ignore"):
        diff = np.abs(ours - theirs)
    return np.where(same, 0.0, np.nan_to_num(diff, nan=np.inf))


def compare(name: str, expected: np.ndarray, actual: np.ndarray, *, lsb_tolerance: int,
            float_bounds: tuple[float, float], family: str) -> OutputComparison:
    expected = np.asarray(expected)
    actual = np.asarray(actual)
    if expected.shape != actual.shape:
        return OutputComparison(name, str(expected.dtype), list(expected.shape), False, False,
                                float("inf"), float("inf"),
                                tolerance=f"shape {list(actual.shape)} != {list(expected.shape)}")
    if np.issubdtype(expected.dtype, np.floating):
        a = actual.astype(expected.dtype)
        same = (a == expected) | (np.isnan(a) & np.isnan(expected))
        diff = float_difference(expected, a)
        rel = diff / np.maximum(np.abs(expected.astype(np.float64)), 1e-30)
        atol, rtol = float_bounds
        if rtol > 0:
            # The bounds are set for float32 results: a float16 or bfloat16 result
            # rounds each value to fewer bits, so a few of its own ulps always pass.
            rtol = max(rtol, NARROW_FLOAT_ULPS * float(np.finfo(expected.dtype).eps))
        within = bool(np.all(same | (diff <= atol + rtol * np.abs(expected))))
        return OutputComparison(
            name, str(expected.dtype), list(expected.shape), bool(np.all(same)), within,
            float(np.nan_to_num(diff.max(initial=0.0), nan=np.inf)),
            float(np.nan_to_num(rel.max(initial=0.0), nan=np.inf)),
            max_ulp=_ulp_distance(a, expected), mismatched_elements=int((~same).sum()),
            tolerance=f"{family}: atol={atol:g} rtol={rtol:g}")
    diff = np.abs(actual.astype(np.int64) - expected.astype(np.int64))
    max_lsb = int(diff.max(initial=0))
    return OutputComparison(
        name, str(expected.dtype), list(expected.shape), max_lsb == 0, max_lsb <= lsb_tolerance,
        float(max_lsb), float((diff / np.maximum(np.abs(expected.astype(np.int64)), 1)).max(
            initial=0.0)), max_lsb=max_lsb, mismatched_elements=int((diff != 0).sum()),
        tolerance=f"{lsb_tolerance} LSB" if lsb_tolerance else "exact")


def as_graph_input(array: np.ndarray, value: Any) -> np.ndarray:
    """TFLite's input as the converted graph takes it: TOSA integers are signless,
    so a uint8 (uint16) tensor is fed as the int8 (int16) with the same bits."""
    from tfl2tosa.ir.types import numpy_dtype

    array = np.asarray(array)
    dtype = numpy_dtype(value.type.element)
    if array.dtype.kind == "u" and dtype.kind == "i" and array.dtype.itemsize == dtype.itemsize:
        return array.view(dtype)
    return array


def as_tflite_output(array: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Our output read with TFLite's output type (the inverse of as_graph_input)."""
    array = np.asarray(array)
    if dtype.kind == "u" and array.dtype.kind == "i" and array.dtype.itemsize == dtype.itemsize:
        return array.view(dtype)
    return array
