"""The `quant` dialect: casts between float, quantized and storage types.

- ops: `quant.dcast`, `quant.qcast`, `quant.scast` (verification, builders, printing)
- canonicalize: the cast-pair folds, registered with `tfl2tosa.passes.simplify.canonicalize`

The passes over it are in `tfl2tosa/passes/`: `lower_quant` (qcast/dcast -> TOSA
arithmetic + scast) and `strip_quant_types` (storage types at graph boundaries
and on TOSA ops).
"""

from tfl2tosa.quant.ops import (
    DCAST,
    QCAST,
    QUANT_OPS,
    SCAST,
    dcast,
    qcast,
    scast,
    storage_integer,
    stripped_type,
    verify_quant_op,
    verify_quant_ops,
)

__all__ = [
    "DCAST", "QCAST", "QUANT_OPS", "SCAST", "dcast", "qcast", "scast", "storage_integer",
    "stripped_type", "verify_quant_op", "verify_quant_ops",
]
