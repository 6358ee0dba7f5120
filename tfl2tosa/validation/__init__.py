"""`validate`: run the TFLite interpreter and our reference model on the same inputs.

TFLite runs with its builtin reference kernels (`OpResolverType.BUILTIN_REF`):
those are the kernels TOSA's integer semantics reproduce (the optimized and
XNNPACK kernels round differently; tfl2tosa.kernels says where).
When the reference resolver lacks an op version the model falls back, as a
whole, to the builtin kernels without default delegates; the report names the
resolver used, and a model `validate` converts itself is then lowered for those
kernels of the runtime that runs it (`convert(kernels="optimized")` for
TensorFlow's, "litert-optimized" for LiteRT's; see tfl2tosa.kernels).

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

An emulated hybrid op is bit exact given the same input, but its run-time
quantization is discontinuous: an ulp of difference in a float op before it
(summation order, which TOSA leaves free) can move one int8 rounding, and its
output then differs by a quantization step, beyond the float bounds. So when a
run of an emulated hybrid model misses the bounds, our reference model runs
again *anchored*: each float input of an emulated hybrid op (a TOSA value that
keeps its TFLite tensor name) is replaced, as it is computed, by TFLite's
tensor, where ours is within the float bound of the ops computing it since the
model's inputs and the previous anchors (`emulated_hybrid_inputs`). The run
passes when none was further off and the anchored outputs are within the
ordinary bounds; the report keeps the un-anchored errors and says how many
inputs were anchored and how far apart they were. A hybrid op computing
wrongly, or a float op off by more than its bound, still fails.

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
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, fields
from typing import Any

import numpy as np

from tfl2tosa.errors import InputDomainError, Tfl2TosaError, UsageError
from tfl2tosa.float_twin import float_twin

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


@dataclass
class OutputComparison:
    name: str
    dtype: str
    shape: list[int]
    exact: bool
    within_tolerance: bool
    max_abs_error: float
    max_rel_error: float
    max_ulp: int | None = None        # float outputs
    max_lsb: int | None = None        # integer outputs
    mismatched_elements: int = 0
    tolerance: str = ""
    # Largest error over the runs judged anchored (see AnchoredRun); None when
    # no run needed anchoring. The fields above are the un-anchored errors.
    anchored_max_abs_error: float | None = None


@dataclass
class ValidationReport:
    model: str
    backend: str = ""
    resolver: str = ""
    kernels: str = ""     # the tfl2tosa.kernels the judged conversion reproduces
    runs: int = 0
    outputs: list[OutputComparison] = field(default_factory=list)
    first_divergence: str | None = None
    fallback_ops: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    # Runs that passed only anchored (validate re-ran our reference model with
    # TFLite's values at emulated hybrid ops' inputs), how many such inputs were
    # anchored and the largest difference between ours and TFLite's there, in
    # ulps of that tensor's largest magnitude.
    anchored_runs: int = 0
    anchored_inputs: int = 0
    anchored_max_ulp: int | None = None
    # Filled with keep_details (for the HTML page); never part of to_dict.
    details: ValidationDetails | None = field(default=None, repr=False, compare=False)

    @property
    def passed(self) -> bool:
        return not self.errors and all(o.within_tolerance for o in self.outputs)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "details"}
        data["outputs"] = [asdict(o) for o in self.outputs]
        data["passed"] = self.passed
        return data


@dataclass
class ValidationDetails:
    """What a picture of a validation needs beyond the report."""

    conversion: Any = None                  # the ConversionReport
    # TFLite tensor name -> largest |ours - TFLite| over the runs (integers in
    # stored units), for every tensor both graphs have.
    tensor_errors: dict[str, float] = field(default_factory=dict)
    # Output name -> |ours - TFLite| of every element of every run.
    output_errors: dict[str, np.ndarray] = field(default_factory=dict)


# Their integer patterns take any operand quantization equal to the output's; with
# another one they fall back and compute on real values, while TFLite's kernels
# pick among the stored integers as if the scales were equal.
RAW_CHOICE_OPS = frozenset({"tfl.maximum", "tfl.minimum", "tfl.select", "tfl.select_v2"})
RAW_CHOICE_NOTE = ("its inputs are quantized unlike its output; TFLite picks among the "
                   "stored integers ignoring the scales, we pick among the real values, "
                   "so a mismatch here is TFLite's raw-integer answer")


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


# A real-valued range for one input: its index in TFLite's input order or its
# name (None: every input) -> (low, high).
InputRanges = dict[int | str | None, tuple[float, float]]


def parse_input_range(text: str) -> tuple[int | str | None, tuple[float, float]]:
    """`LO:HI`, `INDEX=LO:HI` or `NAME=LO:HI` (the CLI's --input-range)."""
    key: int | str | None = None
    spec = text
    if "=" in text:
        name, spec = text.rsplit("=", 1)
        key = int(name) if name.isdigit() else name
    try:
        low, high = (float(v) for v in spec.split(":"))
    except ValueError:
        raise UsageError(f"input range {text!r} is not [NAME=]LOW:HIGH") from None
    if not low < high:
        raise UsageError(f"input range {text!r}: LOW must be below HIGH")
    return key, (low, high)


def ranged_input(rng: np.random.Generator, detail: dict[str, Any],
                 bounds: tuple[float, float]) -> np.ndarray:
    """Real values uniform in [low, high), quantized with the input's own scale
    and zero point when it is an integer tensor (rounded and saturated)."""
    shape, dtype = list(detail["shape"]), np.dtype(detail["dtype"])
    real = rng.uniform(*bounds, size=shape)
    if not np.issubdtype(dtype, np.integer):
        return real.astype(dtype)
    scale, zero_point = detail.get("quantization", (0.0, 0))
    stored = np.round(real / scale) + zero_point if scale else np.round(real)
    info = np.iinfo(dtype)
    return np.clip(stored, info.min, info.max).astype(dtype)


def _range_for(ranges: InputRanges, index: int, name: str) -> tuple[float, float] | None:
    for key in (index, name, None):
        if key in ranges:
            return ranges[key]
    return None


def _draw_input(rng: np.random.Generator, detail: dict[str, Any],
                real_range: tuple[float, float] | None) -> np.ndarray:
    if real_range is None:
        return random_input(rng, list(detail["shape"]), detail["dtype"])
    return ranged_input(rng, detail, real_range)


def random_input(rng: np.random.Generator, shape: list[int], dtype: np.dtype) -> np.ndarray:
    """Uniform over the type's range for integers; uniform in [-2, 2) for floats
    (covers both signs and the interesting region of most activations)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        if dtype.itemsize >= 4:  # indices and sizes: keep them small
            return rng.integers(0, 4, size=shape).astype(dtype)
        return rng.integers(info.min, int(info.max) + 1, size=shape).astype(dtype)
    return rng.uniform(-2.0, 2.0, size=shape).astype(dtype)


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


def validate(model_path: str | os.PathLike, *, runs: int = 3, seed: int = 0,
             inputs: list[list[np.ndarray]] | None = None, module: Any = None,
             conversion: Any = None, fallback: bool = True,
             lsb_tolerance: int | None = None,
             input_ranges: InputRanges | None = None,
             backend: str | None = None,
             on_progress: Callable[[str], None] | None = None,
             keep_details: bool = False,
             hybrid: str = "emulate") -> ValidationReport:
    """Compare the converted model with TFLite on `runs` seeded inputs (or `inputs`).

    Converts the model unless `module` (and its `conversion` report, which says
    which ops took which path) is given. `input_ranges` draws the inputs it names
    (by index or name; key None: all) from a real-valued range instead of the
    type's whole range, for models whose ops have a domain (a divisor, RSQRT).
    `backend` picks the TFLite runtime (BACKENDS; default: the first installed).
    `on_progress` is told what is happening ("legalize", "run 2/10").
    `keep_details` fills `report.details` (per-tensor and per-element errors).
    Raises InputDomainError when TFLite itself cannot run the model on an input, or
    quantizes a NaN it computed on one (checked on runs that do not match).
    """
    import reference_model
    from tfl2tosa.pipeline import convert
    from tfl2tosa.tflite_import.source import open_source

    if inputs is None and runs < 1:
        raise UsageError(f"runs must be at least 1 (got {runs}): nothing would be compared")
    if inputs is not None and not inputs:
        raise UsageError("no input sets given: nothing would be compared")
    path = os.fspath(model_path)
    report = ValidationReport(model=path)
    model_bytes = bytes(open_source(path)[0])
    converted_here = module is None
    if converted_here:
        # Lower for the kernels that will judge: the reference ones unless the
        # reference resolver lacks one of the model's op versions.
        try:
            _, resolver, backend_name = _interpreter(model_bytes, backend=backend)
        except Tfl2TosaError:
            # A model our own checks refuse (a tensor over the budget) says why first.
            convert(path, fallback=fallback, hybrid=hybrid)
            raise
        module, conversion = convert(path, fallback=fallback,
                                     kernels=_kernels_for(resolver, backend_name),
                                     hybrid=hybrid, on_stage=on_progress)
    outcomes = conversion.outcomes if conversion is not None else []
    if keep_details:
        report.details = ValidationDetails(conversion=conversion)
    report.fallback_ops = [f"{o['op_name']} at {o['loc']}" for o in outcomes
                           if o["path"] == "fallback"]
    report.notes = [f"{o['op_name']} at {o['loc']}: {RAW_CHOICE_NOTE}" for o in outcomes
                    if o["path"] == "fallback" and o["op_name"] in RAW_CHOICE_OPS]
    tfl_ops = {o["op_name"] for o in outcomes}
    family, bounds = float_tolerance(tfl_ops)
    modes = [(o, hybrid_mode(o)) for o in outcomes]
    emulated = sum(mode == "emulate" for _, mode in modes)
    dequantized = [o for o, mode in modes if mode == "float"]
    if emulated:
        report.notes.append(f"{emulated} hybrid op(s) emulate TFLite's hybrid kernels: judged "
                            "on its builtin kernels (the emulation follows them)")
    blockwise = sum(o.get("pattern") == BLOCKWISE_PATTERN for o in outcomes)
    if blockwise:
        report.notes.append(f"{blockwise} of them with blockwise int4 weights, as the builtin "
                            f"{BLOCKWISE_NOTE}")
    if dequantized:
        model_bytes = float_twin(model_bytes, dequantized)
        report.notes.append(f"{len(dequantized)} hybrid op(s) computed on dequantized weights: "
                            "judged against TFLite running the model with those weights "
                            "dequantized, not against its hybrid kernels")
    reference = not _needs_builtin_kernels(outcomes)
    interp, report.resolver, report.backend = _interpreter(model_bytes, reference=reference,
                                                           backend=backend)
    judging = _kernels_for(report.resolver, report.backend)
    if converted_here and conversion.kernels != judging:
        module, conversion = convert(path, fallback=fallback, kernels=judging, hybrid=hybrid)
    if conversion is not None:
        report.kernels = conversion.kernels
        if conversion.kernels != judging and any(o["path"] == "integer" for o in outcomes):
            report.notes.append(f"converted for TFLite's {conversion.kernels} kernels, judged "
                                f"by {report.backend} on {report.resolver} ({judging}): "
                                "their integer convolutions and matrix products may round "
                                "otherwise")
    if lsb_tolerance is None:
        lsb_tolerance = 1 if report.fallback_ops or report.resolver != "BUILTIN_REF" else 0
    in_details = interp.get_input_details()
    out_details = interp.get_output_details()
    rng = np.random.default_rng(seed)
    ranges = input_ranges or {}
    known = {*range(len(in_details)), *(d["name"] for d in in_details), None}
    if set(ranges) - known:
        raise UsageError(f"no model input {sorted(map(str, set(ranges) - known))} "
                         f"(inputs: {', '.join(d['name'] for d in in_details)})")
    if inputs is None:
        inputs = [[_draw_input(rng, d, _range_for(ranges, i, d["name"]))
                   for i, d in enumerate(in_details)]
                  for _ in range(runs)]
    # TFLite cannot reset resource variables (reset_all_variables only resets the
    # variable tensors of recurrent ops): a stateful model gets a fresh interpreter
    # per run, as the TOSA graph starts from the initial values every run.
    stateful = conversion is not None and "tfl.var_handle" in conversion.ops_in
    compiled = reference_model.compile(module)  # once for every run

    def judge(outputs: dict[str, np.ndarray], expected: list[np.ndarray]
              ) -> list[OutputComparison]:
        return [compare(detail["name"], theirs, as_tflite_output(outputs[value.name],
                                                                  theirs.dtype),
                        lsb_tolerance=lsb_tolerance, float_bounds=bounds, family=family)
                for detail, value, theirs in zip(out_details, module.main.outputs, expected)]

    worst: dict[str, OutputComparison] = {}
    # Anchoring (emulated hybrid models whose outputs miss the bounds): made on
    # first need, then what the runs it rescued anchored, and the first run it
    # did not rescue.
    hybrid_inputs: dict[str, tuple[str, tuple[float, float]]] | None = None
    anchored_errors: dict[str, float] = {}
    anchored_names: set[str] = set()
    anchored_ulp = 0
    failed_anchoring: tuple[AnchoredRun, float] | None = None
    for run_inputs in inputs:
        if on_progress is not None:
            on_progress(f"run {report.runs + 1}/{len(inputs)}")
        if stateful and report.runs:
            interp, _, _ = _interpreter(model_bytes, reference=reference,
                                        backend=report.backend)
        # Recurrent ops keep state in variable tensors across invocations; the TOSA
        # graph starts from the initial state every run, so TFLite must too.
        interp.reset_all_variables()
        for detail, array in zip(in_details, run_inputs):
            interp.set_tensor(detail["index"], array)
        try:
            interp.invoke()
        except RuntimeError as exc:
            # TFLite's message: "<file:line> <check>Node number N (OP) failed to invoke."
            reason = " ".join(str(exc).split())
            # TFLite appends "Node number N ..." to the kernel's message with no space.
            reason = re.sub(r"(?<=\S)(?=Node number \d)", "; ", reason)
            raise InputDomainError(
                f"TFLite cannot run the model on input set {report.runs + 1}: {reason} "
                "(give inputs in the model's domain: --input-range [NAME=]LOW:HIGH or "
                "--inputs)") from None
        expected = [interp.get_tensor(d["index"]) for d in out_details]
        if "tfl.custom" in tfl_ops:
            notes = _clear_unwritten_rows(path, expected)
            report.notes += [n for n in notes if n not in report.notes]
        feeds = [as_graph_input(a, v) for a, v in zip(run_inputs, module.main.inputs)]
        ours = compiled.run(feeds, keep_intermediates=True)
        results = judge(ours, expected)
        if not all(r.exact for r in results) and \
                (source := _quantized_nan(interp, path)) is not None:
            raise InputDomainError(
                f"TFLite's {source} gives NaN on input set {report.runs + 1} (an input "
                "outside its domain, such as a zero divisor) and a QUANTIZE turns it into "
                "an integer, which is no number to compare (give inputs in the model's "
                "domain: --input-range [NAME=]LOW:HIGH or --inputs)")
        if NMS_OPS & tfl_ops and not all(r.exact for r in results):
            notes = _tied_nms_scores(interp, path)
            report.notes += [n for n in notes if n not in report.notes]
        if emulated and not all(r.within_tolerance for r in results):
            if hybrid_inputs is None:
                hybrid_inputs = emulated_hybrid_inputs(path, outcomes)
            anchoring = anchored_run(compiled, feeds, interp, hybrid_inputs)
            anchored = judge(anchoring.outputs, expected)
            if not anchoring.refused and all(a.within_tolerance for a in anchored):
                for result, fixed in zip(results, anchored):
                    result.within_tolerance = True
                    anchored_errors[result.name] = max(fixed.max_abs_error,
                                                       anchored_errors.get(result.name, 0.0))
                report.anchored_runs += 1
                anchored_names |= anchoring.anchored
                anchored_ulp = max(anchored_ulp, anchoring.max_ulp)
            elif failed_anchoring is None:
                failed_anchoring = (anchoring, max(a.max_abs_error for a in anchored))
        for result in results:
            previous = worst.get(result.name)
            if previous is None or result.max_abs_error > previous.max_abs_error or (
                    not result.within_tolerance and previous.within_tolerance):
                worst[result.name] = result
        if report.details is not None:
            _keep_details(report.details, interp, module, ours, out_details, expected)
        if report.first_divergence is None and not all(w.exact for w in worst.values()):
            report.first_divergence = _first_divergence(interp, module, ours)
        report.runs += 1
    report.outputs = list(worst.values())
    for output in report.outputs:
        output.anchored_max_abs_error = anchored_errors.get(output.name)
    if report.anchored_runs:
        report.anchored_inputs = len(anchored_names)
        report.anchored_max_ulp = anchored_ulp
        report.notes.append(ANCHORED_NOTE.format(runs=report.anchored_runs,
                                                 inputs=report.anchored_inputs,
                                                 ulp=anchored_ulp))
    if failed_anchoring is not None:
        report.notes.append(_failed_anchoring_note(*failed_anchoring))
    return report


BLOCKWISE_PATTERN = "fully_connected_blockwise_hybrid"
BLOCKWISE_NOTE = ("FULLY_CONNECTED's 4-bit path reads their float16 scales (LiteRT's "
                  "XNNPACK rounds them to bfloat16; TFLite's reference kernel ignores them)")


# Why an emulated hybrid model passes although its outputs missed the float bounds.
ANCHORED_NOTE = (
    "hybrid ops quantize their float inputs to int8 at run time, so an ulp of difference "
    "(summation order) in a float op before one can move an int8 rounding, and the output "
    "by a quantization step: {runs} run(s) missed the float bounds (the errors above) and "
    "are within them with TFLite's own values at the {inputs} hybrid-op input(s) where "
    "ours differed, each within the float bound of the ops computing it (by at most {ulp} "
    "ulp of the tensor's largest value)")


@dataclass
class AnchoredRun:
    """A run of our reference model with TFLite's tensors at emulated hybrid ops'
    float inputs (each where ours was within the float bounds of the ops computing it)."""

    outputs: dict[str, np.ndarray]
    anchored: set[str] = field(default_factory=set)   # those that differed from TFLite's
    # The largest difference anchored, in ulps of its tensor's largest magnitude.
    max_ulp: int = 0
    # Inputs where ours was beyond those bounds: name -> (family, max abs error).
    refused: dict[str, tuple[str, float]] = field(default_factory=dict)


def emulated_hybrid_inputs(path: str, outcomes: list[dict[str, str]]
                           ) -> dict[str, tuple[str, tuple[float, float]]]:
    """The TFLite tensor name of each run-time float input of an emulated hybrid
    op -> the float bound (family, (atol, rtol)) of the ops that compute it from
    the model's inputs, constants and the other such inputs."""
    from tfl2tosa.ir.types import TensorType
    from tfl2tosa.passes.inline_calls import inline_calls
    from tfl2tosa.tflite_import import load

    module = load(path)
    inline_calls(module)
    locations = {o["loc"] for o in outcomes if hybrid_mode(o) == "emulate"}
    inputs = {value for op in module.main.ops if op.loc in locations for value in op.operands
              if value.owner is not None and value.owner.name != "tfl.pseudo_const"
              and isinstance(value.type, TensorType) and str(value.type.element) in _FLOAT_NAMES}
    bounds = {}
    for value in inputs:
        ops: set[str] = set()
        pending, seen = [value.owner], set()
        while pending:
            op = pending.pop()
            if id(op) in seen:
                continue
            seen.add(id(op))
            ops.add(op.name)
            pending += [v.owner for v in op.operands
                        if v.owner is not None and v not in inputs]
        bounds[value.name] = float_tolerance(ops)
    return bounds


def anchored_run(compiled: Any, feeds: list[np.ndarray], interp: Any,
                 hybrid_inputs: dict[str, tuple[str, tuple[float, float]]]) -> AnchoredRun:
    """Our reference model again on `feeds`, each of `hybrid_inputs` replaced, as it is
    computed, by TFLite's tensor of that name when ours is within its bound (so
    every comparison sees only the difference since the previous anchors)."""
    by_name = {d["name"]: d["index"] for d in interp.get_tensor_details()}
    run = AnchoredRun(outputs={})

    def anchor(name: str) -> Callable[[np.ndarray], np.ndarray]:
        family, (atol, rtol) = hybrid_inputs[name]

        def substitute(ours: np.ndarray) -> np.ndarray:
            try:
                theirs = interp.get_tensor(by_name[name])
            except ValueError:  # a tensor the interpreter did not keep
                return ours
            if theirs.shape != ours.shape or theirs.dtype != ours.dtype:
                return ours
            diff = float_difference(theirs, ours)
            if not np.all((diff == 0) | (diff <= atol + rtol * np.abs(theirs))):
                run.refused[name] = (family, float(diff.max()))
                return ours
            if not diff.any():
                return ours
            run.anchored.add(name)
            run.max_ulp = max(run.max_ulp, _ulps_of_largest(diff, theirs))
            return theirs
        return substitute

    run.outputs = compiled.run(feeds, substitute={name: anchor(name) for name in hybrid_inputs
                                                  if name in by_name})
    return run


def _ulps_of_largest(diff: np.ndarray, theirs: np.ndarray) -> int:
    """The largest difference in ulps of the tensor's largest finite magnitude: the
    scale of a summation-order difference (an element near zero is many of its
    own ulps away for the same difference)."""
    finite = np.abs(theirs[np.isfinite(theirs)])
    ulp = float(np.spacing(finite.max(initial=0).astype(theirs.dtype)))
    largest = float(np.nan_to_num(diff, nan=0.0).max(initial=0.0))
    return int(np.ceil(largest / ulp)) if ulp else 0


def _failed_anchoring_note(run: AnchoredRun, error: float) -> str:
    """Why an emulated hybrid model fails although anchoring was tried."""
    if run.refused:
        name, (family, worst) = next(iter(run.refused.items()))
        return (f"hybrid-op input {name!r} differs from TFLite's by {worst:.3g}, beyond the "
                f"{family} bound of the ops computing it: a real difference, not an ulp "
                "moving a hybrid op's run-time quantization")
    return (f"with TFLite's own values at the {len(run.anchored)} hybrid-op input(s) where "
            f"ours differed, the outputs still miss the float bounds (by up to {error:.3g}): "
            "not an ulp upstream moving a hybrid op's run-time quantization")
    return note


def _clear_unwritten_rows(path: str, expected: list[np.ndarray]) -> list[str]:
    """Custom ops whose TFLite kernel leaves output elements unwritten
    (TFLite_Detection_PostProcess): those elements zeroed, as the lowering
    writes them; a note per op."""
    from legalize.detection import clear_unwritten_rows
    from tfl2tosa.tflite_import import load

    return clear_unwritten_rows(load(path).main, expected)


def _quantized_nan(interp: Any, path: str) -> str | None:
    """The TFLite op ("main:op2:FLOOR_MOD") whose NaN a QUANTIZE of the model turned
    into an integer on the last run, if any. TFLite's QUANTIZE casts NaN as x86 does
    (INT32_MIN, plus the zero point, clamped): a platform's answer, not a number."""
    from tfl2tosa.tflite_import import load

    graph = load(path).main
    producers = {result.name: op for op in graph.ops for result in op.results}
    by_name = {d["name"]: d["index"] for d in interp.get_tensor_details()}
    for op in graph.ops:
        if op.name != "tfl.quantize" or op.operands[0].name not in by_name:
            continue
        values = interp.get_tensor(by_name[op.operands[0].name])
        if np.issubdtype(values.dtype, np.floating) and np.isnan(values).any():
            producer = producers.get(op.operands[0].name)
            return producer.loc if producer else op.operands[0].name
    return None


NMS_OPS = frozenset({"tfl.non_max_suppression_v4", "tfl.non_max_suppression_v5"})
TIED_NMS_NOTE = ("its scores had ties on a run that differs: TFLite takes tied boxes in "
                 "its priority queue's order, the conversion lowest index first "
                 "(TensorFlow's order)")


def _tied_nms_scores(interp: Any, path: str) -> list[str]:
    """A note for each non-max suppression whose scores (TFLite's tensor on the last
    run) hold equal values: the one place where the lowering orders otherwise."""
    from tfl2tosa.tflite_import import load

    by_name = {d["name"]: d["index"] for d in interp.get_tensor_details()}
    notes = []
    for op in load(path).main.ops:
        if op.name not in NMS_OPS or op.operands[1].name not in by_name:
            continue
        scores = interp.get_tensor(by_name[op.operands[1].name]).ravel()
        if np.unique(scores).size < scores.size:
            notes.append(f"{op.loc}: {TIED_NMS_NOTE}")
    return notes


def _paired_tensors(interp: Any, module: Any, ours: dict[str, np.ndarray]
                    ) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(name, TFLite's value, ours) for each tensor of `module`'s main graph, in graph
    order, that both sides hold with the same shape (TOSA values keep the TFLite
    tensor names they were lowered from)."""
    by_name = {d["name"]: d["index"] for d in interp.get_tensor_details()}
    for value in module.main.values():
        index = by_name.get(value.name)
        if index is None or value.name not in ours:
            continue
        try:
            theirs = interp.get_tensor(index)
        except ValueError:
            continue
        if theirs.shape == ours[value.name].shape:
            yield value.name, theirs, ours[value.name]


def _first_divergence(interp: Any, module: Any, ours: dict[str, np.ndarray]) -> str | None:
    """The first tensor, in graph order, whose value differs from TFLite's tensor of
    the same name."""
    for name, theirs, mine in _paired_tensors(interp, module, ours):
        if np.issubdtype(theirs.dtype, np.floating):
            if not np.allclose(theirs, mine.astype(theirs.dtype), rtol=1e-4, atol=1e-5,
                               equal_nan=True):
                return name
        elif not np.array_equal(theirs, mine):
            return name
    return None


def _keep_details(details: ValidationDetails, interp: Any, module: Any,
                  ours: dict[str, np.ndarray], out_details: list[dict[str, Any]],
                  expected: list[np.ndarray]) -> None:
    def difference(theirs: np.ndarray, mine: np.ndarray) -> np.ndarray:
        # Equal infinities (an attention mask's -inf) agree.
        return float_difference(theirs, as_tflite_output(mine, theirs.dtype))

    for name, theirs, mine in _paired_tensors(interp, module, ours):
        if theirs.size == 0:
            continue
        error = float(np.nan_to_num(difference(theirs, mine).max(), nan=np.inf))
        details.tensor_errors[name] = max(error, details.tensor_errors.get(name, 0.0))
    for detail, value, theirs in zip(out_details, module.main.outputs, expected):
        if value.name in ours and theirs.shape == ours[value.name].shape:
            diff = difference(theirs, ours[value.name]).ravel()
            kept = details.output_errors.get(detail["name"])
            details.output_errors[detail["name"]] = (diff if kept is None
                                                     else np.concatenate([kept, diff]))
