"""Integer (bit exact with TFLite) patterns for quantized ops, one module per family.

Each module registers its patterns (kind="integer") when imported; the
registry imports them on demand (`legalize.load_all()` imports all). The
arithmetic they share is in `legalize.quantized`.
"""

# Family modules (explicit list; `legalize.load_all` imports each, in this
# order, which is the order patterns of one op are tried in): `data` first
# because its uint8 wrapper must see an op before the int8 patterns do.
MODULES = (
    "data",
)
