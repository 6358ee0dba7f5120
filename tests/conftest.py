"""Shared test fixtures: the model zoo, small TF-converted models, a TFLite builder.

- `zoo_models()` lists the `.tflite` files under `models/` (from
  `models/manifest.json` when it exists, else a glob).
- `small_models` converts a handful of tiny Keras/tf.function models with the
  real TFLite converter (in a subprocess, cached in pytest's cache directory so
  TensorFlow is not imported by every run).
- `TfliteBuilder` writes TFLite flatbuffers directly with the object API of
  TensorFlow's own generated schema module, to reach corners the converter
  never emits (int4, sparse, custom and unknown ops, large buffers, bad indices).
- `mlir` runs MLIR text through TensorFlow's embedded MLIR (quant dialect
  registered): the independent parser, verifier and printer of our MLIR text.
"""

from __future__ import annotations

import os

# One OpenBLAS thread per test process, set before numpy loads: `-n 2` runs two
# workers on two cores, and idle OpenBLAS threads spin. Arm's reference model,
# run in the same process right after ours, slowed down 8x and sometimes
# crashed (tests/test_stateful.py's loop model) while they spun.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import fcntl  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import flatbuffers  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
MODELS_DIR = REPO / "models"


def _tflite_paths_in(data: Any) -> list[str]:
    """Every string ending in `.tflite` anywhere in a manifest's JSON."""
    if isinstance(data, str):
        return [data] if data.endswith(".tflite") else []
    if isinstance(data, dict):
        return [p for value in data.values() for p in _tflite_paths_in(value)]
    if isinstance(data, list):
        return [p for value in data for p in _tflite_paths_in(value)]
    return []


def zoo_models() -> list[Path]:
    """The zoo's `.tflite` files, sorted; empty if `models/` has none yet."""
    manifest = MODELS_DIR / "manifest.json"
    found: list[Path] = []
    if manifest.is_file():
        try:
            entries = _tflite_paths_in(json.loads(manifest.read_text()))
        except (OSError, ValueError):
            entries = []
        for entry in entries:
            for candidate in (MODELS_DIR / entry, REPO / entry):
                if candidate.is_file():
                    found.append(candidate.resolve())
                    break
    if not found:
        found = [p.resolve() for p in MODELS_DIR.glob("**/*.tflite")]
    return sorted(set(found))


def model_id(path: Path) -> str:
    try:
        return str(path.relative_to(MODELS_DIR))
    except ValueError:
        return path.name


# --------------------------------------------------------------------------
# Small models from the real converter

_GENERATOR = r'''
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf

out = sys.argv[1]

def save(name, converter):
    data = converter.convert()
    tmp = os.path.join(out, f"{name}.tflite.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, os.path.join(out, name + ".tflite"))

tf.keras.utils.set_random_seed(0)
conv = tf.keras.Sequential([
    tf.keras.Input((16, 16, 3), batch_size=1),
    tf.keras.layers.Conv2D(8, 3, strides=2, padding="same", activation="relu6"),
    tf.keras.layers.DepthwiseConv2D(3, padding="valid"),
    tf.keras.layers.Flatten(),
    tf.keras.layers.Dense(10),
    tf.keras.layers.Softmax(),
])

def representative():
    rng = np.random.default_rng(0)
    for _ in range(8):
        yield [rng.standard_normal((1, 16, 16, 3)).astype(np.float32)]

save("conv_f32", tf.lite.TFLiteConverter.from_keras_model(conv))

c = tf.lite.TFLiteConverter.from_keras_model(conv)
c.optimizations = [tf.lite.Optimize.DEFAULT]
c.representative_dataset = representative
c.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
c.inference_input_type = tf.int8
c.inference_output_type = tf.int8
save("conv_int8", c)

c = tf.lite.TFLiteConverter.from_keras_model(conv)
c.optimizations = [tf.lite.Optimize.DEFAULT]
c.representative_dataset = representative
c.target_spec.supported_ops = [
    tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
save("conv_16x8", c)

c = tf.lite.TFLiteConverter.from_keras_model(conv)
c.optimizations = [tf.lite.Optimize.DEFAULT]
c.target_spec.supported_types = [tf.float16]
save("conv_f16", c)

@tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
def loop(x):
    def cond(i, x):
        return i < 5
    def body(i, x):
        return i + 1, x * 2.0 + 1.0
    return tf.while_loop(cond, body, [tf.constant(0), x])[1]

save("while_loop", tf.lite.TFLiteConverter.from_concrete_functions(
    [loop.get_concrete_function()], loop))

lstm = tf.keras.Sequential([tf.keras.Input((5, 4), batch_size=1), tf.keras.layers.LSTM(6)])
save("lstm_f32", tf.lite.TFLiteConverter.from_keras_model(lstm))
'''

def _tensorflow_version() -> str:
    from importlib import metadata

    for distribution in ("tensorflow-cpu", "tensorflow"):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    raise RuntimeError("tensorflow (a dev dependency) is not installed")


SMALL_MODEL_NAMES = ("conv_f32", "conv_int8", "conv_16x8", "conv_f16", "while_loop", "lstm_f32")


@pytest.fixture(scope="session")
def small_models(request: pytest.FixtureRequest,
                 tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """name -> path of tiny models made by the TFLite converter (cached)."""
    directory = f"tfl2tosa-small-models-{_tensorflow_version()}"
    if getattr(request.config, "cache", None) is not None:
        cache = Path(request.config.cache.mkdir(directory))
    else:
        cache = tmp_path_factory.mktemp(directory)
    paths = {name: cache / f"{name}.tflite" for name in SMALL_MODEL_NAMES}
    # One generator at a time: pytest-xdist workers wait for the first one's models.
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not all(p.is_file() for p in paths.values()):
            result = subprocess.run([sys.executable, "-c", _GENERATOR, str(cache)],
                                    capture_output=True, text=True, timeout=900,
                                    check=False)
            if result.returncode != 0:
                raise RuntimeError(f"model generation failed:\n{result.stderr[-4000:]}")
    return paths


# --------------------------------------------------------------------------
# Writing TFLite flatbuffers directly

def tflite_schema():
    """TensorFlow's generated schema module (with the object API), loaded by path
    so that TensorFlow itself is not imported."""
    if "tflite_schema_for_tests" in sys.modules:
        return sys.modules["tflite_schema_for_tests"]
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("tensorflow (a dev dependency) is not installed")
    path = os.path.join(spec.submodule_search_locations[0], "lite", "python",
                        "schema_py_generated.py")
    module_spec = importlib.util.spec_from_file_location("tflite_schema_for_tests", path)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules["tflite_schema_for_tests"] = module
    module_spec.loader.exec_module(module)
    return module


def pack_model(model: Any) -> bytes:
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def unpack_model(data: bytes) -> Any:
    schema = tflite_schema()
    return schema.ModelT.InitFromObj(schema.Model.GetRootAs(data, 0))


class TfliteBuilder:
    """A TFLite model written field by field (object API), for corner cases."""

    def __init__(self) -> None:
        self.s = tflite_schema()
        self.model = self.s.ModelT()
        self.model.version = 3
        self.model.description = "built by tests"
        self.model.buffers = [self.s.BufferT()]  # buffer 0: the empty sentinel
        self.model.operatorCodes = []
        self.model.subgraphs = []
        self.model.signatureDefs = []
        self.model.metadata = []
        self.subgraph()

    def subgraph(self, name: str = "") -> int:
        graph = self.s.SubGraphT()
        graph.tensors, graph.operators, graph.inputs, graph.outputs = [], [], [], []
        graph.name = name
        self.model.subgraphs.append(graph)
        return len(self.model.subgraphs) - 1

    def buffer(self, data: bytes | None = None) -> int:
        buffer = self.s.BufferT()
        if data is not None:
            buffer.data = np.frombuffer(data, dtype=np.uint8).copy()
        self.model.buffers.append(buffer)
        return len(self.model.buffers) - 1

    def tensor(self, shape: list[int], type_name: str = "FLOAT32", name: str = "",
               data: np.ndarray | bytes | None = None, *, graph: int = 0,
               scale: list[float] | None = None, zero_point: list[int] | None = None,
               axis: int = 0, min_max: tuple[float, float] | None = None,
               is_variable: bool = False, sparsity: Any = None,
               shape_signature: list[int] | None = None) -> int:
        tensor = self.s.TensorT()
        tensor.shape = list(shape)
        tensor.type = getattr(self.s.TensorType, type_name)
        tensor.name = name
        tensor.hasRank = True
        tensor.isVariable = is_variable
        tensor.sparsity = sparsity
        tensor.shapeSignature = shape_signature
        if data is not None:
            raw = data.tobytes() if isinstance(data, np.ndarray) else bytes(data)
            tensor.buffer = self.buffer(raw)
        else:
            tensor.buffer = self.buffer()
        if scale is not None or min_max is not None:
            q = self.s.QuantizationParametersT()
            if scale is not None:
                q.scale = list(scale)
                q.zeroPoint = list(zero_point if zero_point is not None else [0] * len(scale))
            if min_max is not None:
                q.min, q.max = [min_max[0]], [min_max[1]]
            q.quantizedDimension = axis
            tensor.quantization = q
        tensors = self.model.subgraphs[graph].tensors
        tensors.append(tensor)
        return len(tensors) - 1

    def opcode(self, code: int | str, custom_code: str | None = None,
               deprecated_code: int | None = None) -> int:
        entry = self.s.OperatorCodeT()
        number = getattr(self.s.BuiltinOperator, code) if isinstance(code, str) else code
        entry.builtinCode = number
        entry.deprecatedBuiltinCode = min(number, 127) if deprecated_code is None \
            else deprecated_code
        entry.customCode = custom_code
        entry.version = 1
        self.model.operatorCodes.append(entry)
        return len(self.model.operatorCodes) - 1

    def op(self, code: int | str, inputs: list[int], outputs: list[int], *, graph: int = 0,
           options: Any = None, options2: Any = None, custom_code: str | None = None,
           custom_options: bytes | None = None, opcode_index: int | None = None,
           intermediates: list[int] | None = None) -> int:
        op = self.s.OperatorT()
        op.opcodeIndex = self.opcode(code, custom_code) if opcode_index is None else opcode_index
        op.inputs, op.outputs = list(inputs), list(outputs)
        if options is not None:
            op.builtinOptionsType = getattr(self.s.BuiltinOptions,
                                            type(options).__name__[:-1])
            op.builtinOptions = options
        if options2 is not None:
            op.builtinOptions2Type = getattr(self.s.BuiltinOptions2,
                                             type(options2).__name__[:-1])
            op.builtinOptions2 = options2
        if custom_options is not None:
            op.customOptions = list(custom_options)
        if intermediates is not None:
            op.intermediates = list(intermediates)
        operators = self.model.subgraphs[graph].operators
        operators.append(op)
        return len(operators) - 1

    def io(self, inputs: list[int], outputs: list[int], graph: int = 0) -> None:
        self.model.subgraphs[graph].inputs = list(inputs)
        self.model.subgraphs[graph].outputs = list(outputs)

    def options(self, table: str, /, **fields: Any) -> Any:
        """An options object, e.g. options("Conv2DOptions", strideH=2)."""
        obj = getattr(self.s, table + "T")()
        for key, value in fields.items():
            if not hasattr(obj, key):
                raise AttributeError(f"{table} has no field {key}")
            setattr(obj, key, value)
        return obj

    def signature(self, key: str, inputs: dict[str, int], outputs: dict[str, int],
                  graph: int = 0) -> None:
        signature = self.s.SignatureDefT()
        signature.signatureKey = key
        signature.subgraphIndex = graph
        signature.inputs, signature.outputs = [], []
        for target, mapping in ((signature.inputs, inputs), (signature.outputs, outputs)):
            for alias, index in mapping.items():
                entry = self.s.TensorMapT()
                entry.name, entry.tensorIndex = alias, index
                target.append(entry)
        self.model.signatureDefs.append(signature)

    def metadata(self, name: str, data: bytes) -> None:
        entry = self.s.MetadataT()
        entry.name, entry.buffer = name, self.buffer(data)
        self.model.metadata.append(entry)

    def to_bytes(self) -> bytes:
        return pack_model(self.model)

    def to_bytes_with_external_buffers(self) -> bytes:
        """Write buffer data after the flatbuffer, as TFLite does for models over 2 GB.

        Buffers get `offset`/`size` (from the start of the file) and no inline
        data. The flatbuffer is packed twice: first with placeholder offsets of
        the same width to learn its length, then with the real ones.
        """
        payloads = []
        for buffer in self.model.buffers:
            data = buffer.data
            payloads.append(None if data is None or len(data) == 0 else bytes(bytearray(data)))
            if payloads[-1] is not None:
                buffer.data = None
                buffer.offset, buffer.size = 1 << 40, len(payloads[-1])
        length = len(self.to_bytes())
        position = (length + 15) // 16 * 16
        for buffer, payload in zip(self.model.buffers, payloads):
            if payload is not None:
                buffer.offset = position
                position = (position + len(payload) + 15) // 16 * 16
        flatbuffer = self.to_bytes()
        assert len(flatbuffer) == length
        out = bytearray(flatbuffer)
        for buffer, payload in zip(self.model.buffers, payloads):
            if payload is not None:
                out.extend(b"\0" * (buffer.offset - len(out)))
                out.extend(payload)
        return bytes(out)


@pytest.fixture
def builder() -> TfliteBuilder:
    return TfliteBuilder()


@pytest.fixture(scope="session")
def mlir():
    """`run(text, pipeline="", locations=False)`: parse MLIR text with TensorFlow's
    MLIR, run the pass pipeline, re-print it; raise ValueError on errors."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    def run(text: str, pipeline: str = "", locations: bool = False) -> str:
        try:
            return tf.mlir.experimental.run_pass_pipeline(text, pipeline,
                                                          show_debug_info=locations)
        except tf.errors.OpError as error:
            raise ValueError(error.message) from None

    return run
