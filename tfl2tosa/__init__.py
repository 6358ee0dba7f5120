"""tfl2tosa: convert TensorFlow Lite models to TOSA 1.0 and prove each conversion right.

The public API is re-exported here lazily so that `import tfl2tosa` stays cheap
(TensorFlow is imported only by validation and the model zoo).
"""

from __future__ import annotations

__version__ = "0.1.0.dev0"

_LAZY = {
    "convert": ("tfl2tosa.pipeline", "convert"),
    "emit": ("tfl2tosa.pipeline", "emit"),
    "validate": ("tfl2tosa.validation", "validate"),
    "load_tflite": ("tfl2tosa.tflite_import", "load"),
    "read_tosa": ("tfl2tosa.tosa.reader", "read_tosa"),
    "write_tosa": ("tfl2tosa.tosa.writer", "write_tosa"),
    "verify_tosa": ("tfl2tosa.tosa.verify", "verify"),
    "run_tosa": ("reference_model", "run"),
    "compile_tosa": ("reference_model", "compile"),
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'tfl2tosa' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))
