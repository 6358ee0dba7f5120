"""Which of TFLite's kernels a conversion reproduces where they compute differently.

"reference": the builtin reference kernels (OpResolverType.BUILTIN_REF), the
default and what `validate` judges by. "optimized": the builtin optimized kernels
(BUILTIN_WITHOUT_DEFAULT_DELEGATES), what devices run, and what a model needs when
the reference resolver lacks one of its op versions. Measured against TF 2.20 on
x86 where they differ: the scaling of int8 CONV_2D, DEPTHWISE_CONV_2D,
FULLY_CONNECTED and BATCH_MATMUL and of int16x8 FULLY_CONNECTED
(legalize.quantized.OPTIMIZED_ROUNDING) and float -> int8/int16 QUANTIZE
(tfl2tosa.quant.lower). Other optimized kernels are taken
to compute what the reference ones do (not measured).

The choice holds for the conversion inside `kernels(name)`; patterns and lowerings
read it with `current()`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

KERNELS = ("reference", "optimized")
_current: ContextVar[str] = ContextVar("kernels", default="reference")


@contextmanager
def kernels(name: str) -> Iterator[None]:
    """Convert for TFLite's `name` kernels (one of KERNELS) inside the block."""
    if name not in KERNELS:
        raise ValueError(f"kernels {name!r} is not one of {', '.join(KERNELS)}")
    token = _current.set(name)
    try:
        yield
    finally:
        _current.reset(token)


def current() -> str:
    return _current.get()
