"""Arrow types from the schema table: every field of every version of a
message becomes a typed column (null where a version lacks the field)."""

from __future__ import annotations

from kbatch.internal._schemas import MESSAGES

_PRIMITIVE = {"int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
              "uint16": "uint16", "uint32": "uint32", "float64": "float64", "bool": "bool_",
              "string": "string", "uuid": "string", "bytes": "binary", "records": "binary"}


def arrow_type(f: dict):
    import pyarrow as pa
    typ = f["type"]
    is_list = typ.startswith("[]")
    base = typ[2:] if is_list else typ
    if base == "struct":
        t = pa.struct([pa.field(sub["column"], arrow_type(sub)) for sub in f["fields"]])
    else:
        t = getattr(pa, _PRIMITIVE[base])()
    return pa.list_(t) if is_list else t


def message_fields(name: str, prefix: str = "") -> list:
    """``pa.field``s of every top-level field of ``name`` (all versions)."""
    import pyarrow as pa
    return [pa.field(prefix + f["column"], arrow_type(f)) for f in MESSAGES[name]["fields"]]
