"""Patterns for complex tensors: RFFT2D, REAL, IMAG, COMPLEX_ABS.

TOSA has no complex element type. A complex64 tensor `[..., H, W]` is carried
as a float32 tensor `[..., H, W, 2]` holding (real, imaginary) along a new
last axis, the representation TensorFlow's own TFL->TOSA lowering uses.
RFFT2D's pattern produces that pair tensor in place of its complex result;
REAL, IMAG and COMPLEX_ABS read it back. Because the replacement value has a
different type than the value it replaces, RFFT2D first checks that every
consumer is one of those three ops (whose patterns understand the pair) and
that the complex value is not a graph output (a graph's signature cannot
change type); otherwise it refuses, naming the consumer.

REAL, IMAG and COMPLEX_ABS of a complex constant fold at conversion time.

Numerics: TFLite's RFFT2D (kernels/rfft2d.cc) computes in double and rounds
the result to float; TOSA RFFT2D (EXT-FFT) is specified with the same sums and
the reference models evaluate them in double as well. TFLite's COMPLEX_ABS is
`std::abs(std::complex<float>)` (a hypot); here it is sqrt(re^2 + im^2) with a
power-of-two rescaling that keeps the squares in range, within a few ulp.
"""

from __future__ import annotations

import numpy as np

from legalize.common import constant_value, element, require_static, tensor_type
from legalize.elementwise import first_failure
from legalize.registry import pattern
from tfl2tosa.ir.core import Op, Value
from tfl2tosa.ir.rewrite import Failure, Rewriter
from tfl2tosa.ir.types import TensorType, complex64, f32
from tfl2tosa.tosa import build
from tfl2tosa.tosa.build import Elementwise

# The ops whose patterns read the (real, imaginary) pair tensor.
COMPLEX_CONSUMERS = frozenset({"tfl.real", "tfl.imag", "tfl.complex_abs"})


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _reshape(rw: Rewriter, x: Value, shape: tuple[int, ...]) -> Value:
    if tensor_type(x).shape == tuple(shape):
        return x
    return build.reshape(rw, x, shape)


def _fit(rw: Rewriter, x: Value, axis: int, size: int) -> Value:
    """`x` cropped or zero-padded along `axis` to `size`, as TFLite's RFFT2D
    reads its input (PrepareInputBuffer: the first `size` values, then zeros)."""
    shape = tensor_type(x).shape
    have = shape[axis]
    if have > size:
        sizes = list(shape)
        sizes[axis] = size
        return build.slice(rw, x, [0] * len(shape), sizes)
    if have < size:
        padding = [0] * (2 * len(shape))
        padding[2 * axis + 1] = size - have
        return build.pad(rw, x, padding, 0.0)
    return x


def _complex_consumers_only(op: Op, rw: Rewriter) -> Failure | None:
    result = op.results[0]
    if any(v is result for v in rw.graph.outputs):
        return Failure(f"{op.name}: its complex result is a graph output, and TOSA tensors "
                       "cannot be complex")
    for user, _ in result.uses:
        if user.name not in COMPLEX_CONSUMERS:
            return Failure(f"{op.name}: its complex result feeds {user.name}, which has no "
                           "lowering for complex operands (only REAL, IMAG and COMPLEX_ABS)")
    return None


@pattern("tfl.rfft2d", types=("f32",))
def rfft2d(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """RFFT2D over the last two axes (batch axes flattened into N), its real and
    imaginary outputs stacked along a new last axis. The input is cropped or
    zero-padded to fft_length first, as TFLite does (kernels/rfft2d.cc)."""
    x = op.operands[0]
    failure = first_failure(require_static(op), _complex_consumers_only(op, rw))
    if failure is not None:
        return failure
    if element(x) != f32 or element(op.results[0]) != complex64:
        return Failure(f"{op.name}: only float32 -> complex64 is supported "
                       f"({element(x)} -> {element(op.results[0])})")
    lengths = constant_value(op.operands[1])
    if lengths is None or lengths.size != 2:
        return Failure(f"{op.name}: fft_length must be a constant pair")
    height, width = (int(v) for v in lengths.reshape(-1))
    if not (_is_power_of_two(height) and _is_power_of_two(width)):
        return Failure(f"{op.name}: fft_length {[height, width]} must be powers of two "
                       "(TFLite and TOSA alike)")
    if width < 2:
        # Ooura's rdft2d, which TFLite's kernel calls, needs two columns: with
        # fft_length width 1 TFLite returns values that are not the DFT.
        return Failure(f"{op.name}: fft_length width 1 is not supported (TFLite's kernel does "
                       "not compute the transform for it)")
    shape = tensor_type(x).shape
    if len(shape) < 2:
        return Failure(f"{op.name}: the input needs at least two dimensions")
    batch = shape[:-2]
    out_shape = (*batch, height, width // 2 + 1)
    if tensor_type(op.results[0]).shape != out_shape:
        return Failure(f"{op.name}: result {tensor_type(op.results[0])} does not match "
                       f"fft_length {[height, width]}")
    x = _fit(rw, _fit(rw, x, len(shape) - 2, height), len(shape) - 1, width)
    n = int(np.prod(batch, dtype=np.int64))
    x = _reshape(rw, x, (n, height, width))
    half = TensorType((n, height, width // 2 + 1), f32)
    real, imag = build.op_results(rw, "tosa.rfft2d", [x], [half, half], local_bound=False)
    parts = [_reshape(rw, part, (*out_shape, 1)) for part in (real, imag)]
    pair = TensorType((*out_shape, 2), f32)
    return [build.op(rw, "tosa.concat", parts, pair, axis=len(out_shape))]


def _pair_operand(op: Op) -> Value | Failure:
    """The (real, imaginary) pair tensor RFFT2D's pattern left for `op`."""
    x = op.operands[0]
    want = (*tensor_type(op.results[0]).shape, 2)
    if element(x) == f32 and tensor_type(x).shape == want:
        return x
    return Failure(f"{op.name}: its complex operand {tensor_type(x)} was not produced by "
                   "RFFT2D (the only complex producer with a lowering) nor is a constant")


def _component(rw: Rewriter, pair: Value, index: int) -> Value:
    shape = tensor_type(pair).shape
    start = [0] * len(shape)
    start[-1] = index
    part = build.slice(rw, pair, start, (*shape[:-1], 1))
    return build.reshape(rw, part, shape[:-1])


def _fold_complex(rw: Rewriter, op: Op, fold) -> list[Value] | None:
    """The op applied by numpy to a complex constant operand, else None."""
    array = constant_value(op.operands[0])
    if array is None or not np.iscomplexobj(array):
        return None
    t = tensor_type(op.results[0])
    if t.element != f32:
        return None
    return [build.const(rw, np.asarray(fold(array), np.float32).reshape(t.shape), f32)]


def _complex_part(op: Op, rw: Rewriter, index: int, fold) -> list[Value] | Failure:
    failure = require_static(op)
    if failure is not None:
        return failure
    folded = _fold_complex(rw, op, fold)
    if folded is not None:
        return folded
    pair = _pair_operand(op)
    if isinstance(pair, Failure):
        return pair
    return [_component(rw, pair, index)]


@pattern("tfl.real", types=("f32",))
def real(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """The real half of the pair tensor: SLICE [..., 0:1] and RESHAPE."""
    return _complex_part(op, rw, 0, np.real)


@pattern("tfl.imag", types=("f32",))
def imag(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """The imaginary half of the pair tensor: SLICE [..., 1:2] and RESHAPE."""
    return _complex_part(op, rw, 1, np.imag)


# Power-of-two rescaling for hypot: magnitudes above 2^64 are scaled by 2^-80,
# below 2^-64 by 2^80, so the squares neither overflow nor lose precision to
# subnormals; the factor is exact and undone after the square root.
_LARGE, _SMALL, _SCALE = 2.0 ** 64, 2.0 ** -64, 2.0 ** 80


def hypot(e: Elementwise, a: Value, b: Value) -> Value:
    """sqrt(a^2 + b^2) without spurious overflow or underflow.

    The square root is s * rsqrt(s), within about two ulp (TOSA RSQRT's bound);
    s = 0 and s = inf are selected directly (0 * inf would be NaN).
    """
    m = e.maximum(e.abs(a), e.abs(b))
    large, small = e.greater(m, e.like(_LARGE, m)), e.less(m, e.like(_SMALL, m))

    def by_range(if_large: float, if_small: float) -> Value:
        return e.select(large, e.like(if_large, m),
                        e.select(small, e.like(if_small, m), e.like(1.0, m)))

    factor = by_range(1.0 / _SCALE, _SCALE)
    a, b = e.mul(a, factor), e.mul(b, factor)
    s = e.add(e.mul(a, a), e.mul(b, b))
    root = e.mul(s, e.rsqrt(s))
    special = e.logical_or(e.equal(s, e.like(0.0, s)), e.equal(s, e.like(np.inf, s)))
    root = e.select(special, s, root)
    return e.mul(root, by_range(_SCALE, 1.0 / _SCALE))


@pattern("tfl.complex_abs", types=("f32",))
def complex_abs(op: Op, rw: Rewriter) -> list[Value] | Failure:
    """|z| = hypot(real, imag) of the pair tensor (TFLite: std::abs of complex<float>)."""
    failure = require_static(op)
    if failure is not None:
        return failure
    folded = _fold_complex(rw, op, np.abs)
    if folded is not None:
        return folded
    pair = _pair_operand(op)
    if isinstance(pair, Failure):
        return pair
    e = Elementwise(rw, len(tensor_type(op.results[0]).shape))
    return [hypot(e, _component(rw, pair, 0), _component(rw, pair, 1))]
