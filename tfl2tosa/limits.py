"""Resource bounds checked before anything is allocated.

`max_tensor_bytes()` is the budget for one tensor (`check_tensor`): the
structural check holds every tensor a model declares to it (the constants
conversion materialises are the size of those tensors, or of an option it
checks too, such as LRN's window), the reference model every result it would
compute, `run` and `validate` every input they would make. The
budget comes from `set_max_tensor_bytes` (the CLI's `--max-tensor-bytes`),
else the environment variable TFL2TOSA_MAX_TENSOR_BYTES (so worker processes
inherit the CLI's choice), else an eighth of the machine's physical memory:
room for the tensor and the few temporaries a kernel makes beside it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable

from tfl2tosa.errors import ResourceLimitError, UsageError

ENVIRONMENT_VARIABLE = "TFL2TOSA_MAX_TENSOR_BYTES"

# A recurrent op unrolls one group of TOSA ops per time step; past this many
# steps the graph would be larger than any accelerator compiler takes.
MAX_UNROLLED_STEPS = 1024

_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}

_budget: int | None = None


def parse_bytes(text: str) -> int:
    """`1000000`, `512M`, `4G` (binary multiples; a trailing `B`/`iB` is allowed)."""
    spec = text.strip().upper().removesuffix("IB").removesuffix("B")
    number, suffix = (spec[:-1], spec[-1]) if spec and spec[-1] in _SUFFIXES else (spec, "")
    try:
        value = float(number) * _SUFFIXES[suffix]
    except (ValueError, KeyError):
        raise UsageError(f"{text!r} is not a byte count (e.g. 1000000, 512M, 4G)") from None
    if not math.isfinite(value) or value < 1:
        raise UsageError(f"{text!r} is not a positive byte count")
    return int(value)


def default_max_tensor_bytes() -> int:
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        physical = 8 << 30
    return max(physical // 8, 1 << 20)


def max_tensor_bytes() -> int:
    if _budget is not None:
        return _budget
    from_environment = os.environ.get(ENVIRONMENT_VARIABLE)
    if from_environment:
        return parse_bytes(from_environment)
    return default_max_tensor_bytes()


def set_max_tensor_bytes(budget: int | None) -> None:
    """Set the budget for this process (None: back to the environment or the default)."""
    global _budget
    if budget is not None and budget < 1:
        raise UsageError(f"the tensor budget must be positive, got {budget}")
    _budget = budget


def element_count(shape: Iterable[int]) -> int:
    count = 1
    for dim in shape:
        count *= max(int(dim), 0)
    return count


def check_bytes(nbytes: int, what: str) -> None:
    """Refuse `nbytes` for one tensor when it exceeds the budget."""
    budget = max_tensor_bytes()
    if nbytes > budget:
        raise ResourceLimitError(
            f"{what} needs {_size_text(nbytes)}, more than the tensor budget of "
            f"{_size_text(budget)} (--max-tensor-bytes)")


def check_tensor(shape: Iterable[int], itemsize: float, what: str) -> None:
    """Refuse a tensor of `shape` with `itemsize` bytes per element over the budget."""
    shape = tuple(shape)
    check_bytes(math.ceil(element_count(shape) * itemsize), f"{what} {list(shape)}")


def check_steps(steps: int, what: str) -> None:
    """Refuse to unroll more than MAX_UNROLLED_STEPS time steps."""
    if steps > MAX_UNROLLED_STEPS:
        raise ResourceLimitError(
            f"{what} has {steps} time steps; unrolling more than {MAX_UNROLLED_STEPS} is "
            "refused")


def _size_text(nbytes: int) -> str:
    for suffix in ("T", "G", "M", "K"):
        if nbytes >= _SUFFIXES[suffix]:
            return f"{nbytes / _SUFFIXES[suffix]:.1f} {suffix}iB ({nbytes} bytes)"
    return f"{nbytes} bytes"
