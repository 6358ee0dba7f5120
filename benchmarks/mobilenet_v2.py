"""A real MobileNetV2 (224x224x3, alpha 1.0, 1000 classes) as float32 and int8 TFLite models.

    .venv/bin/python benchmarks/mobilenet_v2.py [--force]

Benchmark models, not test fixtures: Keras' `MobileNetV2(weights=None)` with seeded
random weights (no download), converted by TensorFlow's TFLite converter with the
zoo's flavour settings (`models/generate.py`: `configure`, calibration samples,
the TFLite smoke run and the check that int8 really got quantized). The files go to
`benchmarks/.cache/` (git-ignored), named with a digest of this file, and are made
again only when missing or with `--force`. Making both takes about 10 s.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
CACHE = BENCHMARKS / ".cache"
FLAVOURS = ("float32", "int8")
NAME = "mobilenet_v2"
INPUT_SHAPE = (224, 224, 3)


def model_path(flavour: str) -> Path:
    """The cache file, named with a digest of this generator: editing it makes new files."""
    digest = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:8]
    return CACHE / f"{NAME}_{flavour}.{digest}.tflite"


def mobilenet_v2_paths(force: bool = False) -> dict[str, Path]:
    """The cached `.tflite` file of each flavour, generating the missing ones first."""
    missing = [f for f in FLAVOURS if force or not model_path(f).exists()]
    if missing:
        generate(missing)
    return {flavour: model_path(flavour) for flavour in FLAVOURS}


def generate(flavours: list[str]) -> None:
    """Build the Keras model once, convert it in each flavour, write the cache files."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")
    # One seed for Keras' initializers (Python, numpy and TF generators): the same
    # weights, hence the same .tflite bytes, on every run with this TensorFlow.
    tf.keras.utils.set_random_seed(0)
    keras_model = tf.keras.applications.MobileNetV2(
        input_shape=INPUT_SHAPE, alpha=1.0, include_top=True, weights=None, classes=1000)
    rescale_kernels(keras_model, tf.keras.layers.DepthwiseConv2D)
    write_flavours(keras_model, NAME, INPUT_SHAPE, flavours, model_path)


def write_flavours(keras_model: object, name: str, input_shape: tuple[int, ...],
                   flavours: list[str], path_of: Callable[[str], Path]) -> None:
    """Convert `keras_model` in each flavour with the zoo's settings and calibration,
    writing each to `path_of(flavour)`."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    sys.path.insert(0, str(BENCHMARKS.parent / "models"))
    import tensorflow as tf
    from generate import ConverterFactory, ModelJob, convert_flavour
    from zoo_units import InputSpec

    # The weights enter the trace as constants (Keras' stateless call), as the zoo's
    # do: left as variables, the converter keeps some as READ_VARIABLE ops.
    trainable = [v.numpy() for v in keras_model.trainable_variables]
    non_trainable = [v.numpy() for v in keras_model.non_trainable_variables]

    def inference(_params: object, image: tf.Tensor) -> tf.Tensor:
        outputs, _ = keras_model.stateless_call(
            [tf.constant(w) for w in trainable], [tf.constant(w) for w in non_trainable],
            image, training=False)
        return outputs

    # The zoo's job shape: one float image, calibrated like the zoo's architectures.
    job = ModelJob(name, "arch", inference, (InputSpec((1, *input_shape)),),
                   via_saved_model=False)
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as workdir:
        factory = ConverterFactory(job, Path(workdir))
        for flavour in flavours:
            path_of(flavour).write_bytes(convert_flavour(factory, flavour))


def rescale_kernels(keras_model: object, depthwise_class: type) -> None:
    """Give every kernel He's variance, 2 / fan-in, keeping its random pattern.

    Keras' default (Glorot uniform) with untrained batch norms (identity) shrinks the
    activations about 4x per block: about 1e-11 at the head, a softmax of exactly
    1/1000 everywhere and, in int8, rescale multipliers too small to represent (whole
    tensors of zeros). A trained network's batch norms keep activations near unit
    scale; He's variance (He et al. 2015, for ReLU-like layers) does that here, so
    every layer of the benchmark carries information and a comparison can fail.
    """
    for layer in keras_model.layers:
        variable = getattr(layer, "kernel", None)
        if variable is None:
            continue
        kernel = variable.numpy()
        # Conv2D (h, w, in, out) and Dense (in, out) sum over all but the last axis;
        # a depthwise kernel (h, w, channels, multiplier) over h and w only.
        depthwise = isinstance(layer, depthwise_class)
        fan_in = kernel.shape[0] * kernel.shape[1] if depthwise else kernel[..., 0].size
        variable.assign(kernel / kernel.std() * (2.0 / fan_in) ** 0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="regenerate even if cached")
    args = parser.parse_args()
    for flavour, path in mobilenet_v2_paths(args.force).items():
        print(f"{flavour}: {path} ({path.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
