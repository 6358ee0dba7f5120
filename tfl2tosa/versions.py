"""The format versions tfl2tosa reads and writes, in a module that imports
nothing, so `tfl2tosa --version` stays as light as `--help`."""

# TOSA specification version written into every file. Both official tools
# (tosa-tools 2026.8.0's reference model and tosa-opt) accept any 1.0.x file
# as backward compatible; they reject 1.1.0 unless marked draft. Our ops are
# the 1.0 operator set, so the file says 1.0.0, final (not draft).
TOSA_VERSION = (1, 0, 0, False)

# The TFLite flatbuffer schema version the importer reads (the file's `version`).
TFLITE_SCHEMA_VERSION = 3
