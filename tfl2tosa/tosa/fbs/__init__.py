"""Python accessors for the `.tosa` flatbuffer schema (`schemas/tosa.fbs`).

`tosa_generated.py` is produced by `flatc --python` from our schema and is
committed; do not edit it. `tosa_builders.py` is the same less the reader
classes (the writer's import). After changing the schema, regenerate it with

    python -m tfl2tosa.tosa.fbs.generate

(tests/test_tosa_serialize.py fails while a committed file is stale).
"""
