"""A field's default (JSON, as the Avro specification writes it) encoded as
an Avro binary datum of the field's type, so the compiled decoder fills a
missing field by decoding it like any value.

    null: null | boolean: true/false | int, long: integer (not 2.0) | float,
    double: number, or "NaN", "Infinity", "-Infinity" | bytes, fixed: a string whose code points 0-255 are the bytes |
    string: string (a uuid: 8-4-4-4-12 hexadecimal digits) | enum: a symbol | array: list | map, record: object |
    union: a value of the first branch it fits (Avro 1.12 allows any branch)
"""

from __future__ import annotations

import re
import struct

from kbatch.errors import SchemaError
from kbatch.payloads.avro_schema import AvroType


NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}
UUID_TEXT = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def zigzag(n: int) -> bytes:
    u = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def encode_default(t: AvroType, value, where: str) -> bytes:
    try:
        return bytes(_encode(t, value, 0))
    except (TypeError, ValueError, OverflowError, KeyError, UnicodeError, struct.error) as exc:
        raise SchemaError(f"{where}: default {value!r} does not fit {t!r}: {exc}") from None


def _int(value, bits: int) -> int:
    """A JSON integer (not 2.0: Java's Schema.isValidDefault asks for an
    integral number) in the range of ``bits``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("not an integer")
    v = int(value)
    if not -(1 << (bits - 1)) <= v < 1 << (bits - 1):
        raise ValueError(f"out of the int{bits} range")
    return v


def _latin1(value) -> bytes:
    if not isinstance(value, str):
        raise TypeError("bytes defaults are strings")
    return value.encode("latin-1")


def _encode(t: AvroType, v, depth: int) -> bytes:
    if depth > 200:
        raise ValueError("nested too deeply")
    k = t.kind
    if k == "null":
        if v is not None:
            raise ValueError("null's default is null")
        return b""
    if k == "boolean":
        if not isinstance(v, bool):
            raise TypeError("not a boolean")
        return b"\x01" if v else b"\x00"
    if k == "int":
        return zigzag(_int(v, 32))
    if k == "long":
        return zigzag(_int(v, 64))
    if k in ("float", "double"):
        # a JSON number, or one of the texts Java's Avro writes for the
        # numbers JSON lacks (JacksonUtils: "NaN", "Infinity", "-Infinity")
        if isinstance(v, str) and v in NON_FINITE:
            f = NON_FINITE[v]
        elif isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError("not a number")
        else:
            f = float(v)
        return struct.pack("<f" if k == "float" else "<d", f)
    if k == "bytes":
        raw = _latin1(v)
        return zigzag(len(raw)) + raw
    if k == "string":
        if not isinstance(v, str):
            raise TypeError("not a string")
        if t.logical == "uuid" and not UUID_TEXT.fullmatch(v):
            raise ValueError("not a uuid (8-4-4-4-12 hexadecimal digits)")
        raw = v.encode("utf-8")
        return zigzag(len(raw)) + raw
    if k == "fixed":
        raw = _latin1(v)
        if len(raw) != t.size:
            raise ValueError(f"{len(raw)} bytes for a fixed of {t.size}")
        return raw
    if k == "enum":
        return zigzag(t.symbols.index(v))
    if k == "array":
        if not isinstance(v, list):
            raise TypeError("not a list")
        body = b"".join(_encode(t.items, x, depth + 1) for x in v)
        return (zigzag(len(v)) + body + b"\x00") if v else b"\x00"
    if k == "map":
        if not isinstance(v, dict):
            raise TypeError("not an object")
        body = b"".join(_encode(AvroType("string"), key, depth + 1) + _encode(t.values, x, depth + 1)
                        for key, x in v.items())
        return (zigzag(len(v)) + body + b"\x00") if v else b"\x00"
    if k == "record":
        if not isinstance(v, dict):
            raise TypeError("not an object")
        out = b""
        for f in t.fields:
            if f.name in v:
                out += _encode(f.type, v[f.name], depth + 1)
            elif f.has_default:
                out += _encode(f.type, f.default, depth + 1)
            else:
                raise KeyError(f"field {f.name!r} missing")
        return out
    if k == "union":
        errors = []
        for i, b in enumerate(t.branches):
            try:
                return zigzag(i) + _encode(b, v, depth + 1)
            except (TypeError, ValueError, KeyError, UnicodeError, struct.error, OverflowError) as exc:
                errors.append(str(exc))
        raise ValueError("fits no branch of the union: " + "; ".join(errors))
    raise ValueError(f"no default for {k}")
