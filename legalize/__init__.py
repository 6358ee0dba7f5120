"""TFL -> TOSA legalization: one module per TFL op family, each pattern a function
registered under the TFL op names it lowers (see `registry.py`).

Family modules are imported on demand, by op (see `registry.patterns_for`);
`load_all()` imports every one of them (the coverage table and the pattern
index need the whole registry).
"""

import importlib

from legalize.driver import LegalizeResult, OpOutcome, legalize
from legalize.integer import MODULES as INTEGER_MODULES
from legalize.registry import LABELS, PATTERNS, pattern

# Family modules, each registering its patterns on import (explicit list).
# The driver hands an op only to the patterns whose kind serves it, tried by
# kind (`legalize.registry.KINDS`), then in this order of their modules (the
# index records it); "integer" stands for the modules of `legalize.integer`.
# Among patterns of one kind it matters only where two serve the same op:
# "integer" leads because its `data` module's uint8 wrappers must see a
# uint8 op before the int8 patterns of the family modules do.
MODULES = (
    "integer",
    "activations",
    "softmax",
    "calls",
    "casts",
    "comparison",
    "complex",
    "constants",
    "control_flow",
    "detection",
    "hybrid",
    "conv",
    "elementwise",
    "gather",
    "shape",
    "slicing",
    "joining",
    "padding",
    "space_batch",
    "reverse",
    "updates",
    "mediapipe",
    "misc",
    "nms",
    "normalization",
    "pooling",
    "reduce",
    "resize",
    "lstm",
    "rnn",
    "unsupported",
)


def family_modules() -> list[str]:
    """Every family module's dotted name, in pattern order."""
    names: list[str] = []
    for name in MODULES:
        if name == "integer":
            names.extend(f"legalize.integer.{n}" for n in INTEGER_MODULES)
        else:
            names.append(f"legalize.{name}")
    return names


def load_all() -> None:
    """Import every family module, registering every pattern."""
    for name in family_modules():
        importlib.import_module(name)


__all__ = [
    "LABELS",
    "PATTERNS",
    "LegalizeResult",
    "OpOutcome",
    "family_modules",
    "legalize",
    "load_all",
    "pattern",
]
