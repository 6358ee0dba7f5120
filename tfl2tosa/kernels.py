"""Which of TFLite's kernels a conversion reproduces where they compute differently.

"reference": the builtin reference kernels (OpResolverType.BUILTIN_REF), the
default and what `validate` judges by. "optimized": the builtin optimized kernels
(BUILTIN_WITHOUT_DEFAULT_DELEGATES), what devices run, and what a model needs when
the reference resolver lacks one of its op versions. Measured against TF 2.20 on
x86 where they differ: the scaling of int8 CONV_2D, DEPTHWISE_CONV_2D,
FULLY_CONNECTED and BATCH_MATMUL and of int16x8 FULLY_CONNECTED
(legalize.quantized.OPTIMIZED_ROUNDING) and float -> int8/int16 QUANTIZE
(tfl2tosa.passes.lower_quant). Other optimized kernels are taken
to compute what the reference ones do (not measured).

The choice holds for the conversion inside `kernels(name)`; patterns and lowerings
read it with `current()`.

"optimized" is TensorFlow 2.20's builtin kernels; "litert-optimized" LiteRT 2.3's,
the same but where LITERT_REFERENCE_OPS says (measured on the ops above,
tests/test_legalize_integer_litert.py). Both runtimes' reference kernels compute
the same. `current()` names the resolver ("optimized" for either runtime's builtin
kernels); `runs_optimized()` says which kernel the chosen runtime runs for an op.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

KERNELS = ("reference", "optimized", "litert-optimized")
# The builtin kernels of each TFLite runtime `validate` can use.
BUILTIN_KERNELS = {"tensorflow": "optimized", "ai-edge-litert": "litert-optimized"}
# (op, activation bits) that LiteRT's builtin resolver runs on the reference kernel
# where TensorFlow's runs an optimized one. LiteRT dropped its optimized
# BATCH_MATMUL in favour of XNNPACK (LiteRT commit 239a8f3, July 2025), so without
# delegates the reference kernel's double rounding scales int8 BATCH_MATMUL
# (tests/test_legalize_integer_litert.py).
LITERT_REFERENCE_OPS = frozenset({("tfl.batch_matmul", 8)})
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
    """The resolver followed: "reference", or "optimized" for either runtime's builtin
    kernels."""
    return "reference" if _current.get() == "reference" else "optimized"


def runs_optimized(op_name: str, bits: int) -> bool:
    """Whether the chosen kernels run TFLite's optimized kernel for `op_name` with
    `bits`-bit activations (the reference kernel otherwise)."""
    name = _current.get()
    if name == "reference":
        return False
    return not (name == "litert-optimized" and (op_name, bits) in LITERT_REFERENCE_OPS)
