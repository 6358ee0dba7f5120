"""Flax (linen) modules with seeded random parameters, through jax2tf and TFLiteConverter
(a SavedModel of the converted function), in float32 and full int8."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable

import numpy as np

IMAGE = 16
CALIBRATION_SAMPLES = 16
FLAVOURS = ("float32", "int8")


def cnn():
    """Conv -> LayerNorm -> GELU -> Conv (stride 2) -> mean over space -> Dense."""
    import flax.linen as nn

    class SmallCNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Conv(16, (3, 3))(x)
            x = nn.LayerNorm()(x)
            x = nn.gelu(x)
            x = nn.Conv(32, (3, 3), strides=(2, 2))(x)
            x = nn.relu(x)
            x = x.mean(axis=(1, 2))
            return nn.Dense(10)(x)

    return SmallCNN(), (1, IMAGE, IMAGE, 3), {"class": "SmallCNN", "layers":
                                              "conv16-layernorm-gelu-conv32/2-relu-mean-dense10"}


def mlp_mixer():
    """A token-mixing and a channel-mixing MLP over patches (LayerNorm, GELU, transposes)."""
    import flax.linen as nn

    class MixerBlock(nn.Module):
        @nn.compact
        def __call__(self, x):
            y = nn.LayerNorm()(x).swapaxes(1, 2)
            y = nn.Dense(16)(nn.gelu(nn.Dense(16)(y))).swapaxes(1, 2)
            x = x + y
            y = nn.LayerNorm()(x)
            return x + nn.Dense(32)(nn.gelu(nn.Dense(64)(y)))

    class Mixer(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Conv(32, (4, 4), strides=(4, 4))(x)
            x = x.reshape((x.shape[0], -1, x.shape[-1]))
            x = MixerBlock()(x)
            return nn.Dense(10)(nn.LayerNorm()(x).mean(axis=1))

    return Mixer(), (1, IMAGE, IMAGE, 3), {"class": "Mixer", "patch": 4, "hidden": 32,
                                           "blocks": 1}


MODELS: dict[str, Callable] = {"cnn": cnn, "mlp_mixer": mlp_mixer}


def convert(name: str, flavour: str):
    import jax
    import tensorflow as tf
    from jax.experimental import jax2tf
    from toolchain_case import Built
    module, shape, config = MODELS[name]()
    params = module.init(jax.random.PRNGKey(0), np.zeros(shape, np.float32))
    function = jax2tf.convert(lambda x: module.apply(params, x), native_serialization=False)
    holder = tf.Module()
    holder.f = tf.function(function, input_signature=[tf.TensorSpec(shape, tf.float32)],
                           autograph=False)
    rng = np.random.default_rng(6)
    samples = [[rng.uniform(0.0, 1.0, size=shape).astype(np.float32)]
               for _ in range(CALIBRATION_SAMPLES)]
    with tempfile.TemporaryDirectory() as tmp:
        saved = os.path.join(tmp, "saved")
        tf.saved_model.save(holder, saved, signatures=holder.f.get_concrete_function())
        converter = tf.lite.TFLiteConverter.from_saved_model(saved)
        recipe = "jax2tf (native_serialization=False) -> SavedModel -> TFLiteConverter"
        if flavour == "int8":
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
            converter.representative_dataset = lambda: iter(samples)
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            converter.inference_input_type = tf.int8
            converter.inference_output_type = tf.int8
            recipe += f", int8: representative dataset ({CALIBRATION_SAMPLES} seeded samples)"
        data = bytes(converter.convert())
    return Built(data, [(0.0, 1.0)], config, recipe)


def cases() -> list:
    from toolchain_case import Case
    return [Case(f"flax/{name}_{flavour}.tflite",
                 lambda name=name, flavour=flavour: convert(name, flavour))
            for name in MODELS for flavour in FLAVOURS]
