"""Write Kafka messages from the schema tables (the inverse of ``wire``).

Used by ``kbatch.sample`` to write real ``__consumer_offsets``,
``__transaction_state`` and ``__cluster_metadata`` records. ``values`` maps
snake_case field names to values; a missing field takes its default.
Framing helpers build whole record keys and values of each internal topic.
"""

from __future__ import annotations

import struct

from kbatch.internal._schemas import MESSAGES
from kbatch.internal.protocol import FIXED_TYPES, in_range, uuid_bytes
from kbatch.internal.registry import key_schema_version


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _length(n: int, compact: bool, wide: bool) -> bytes:
    if compact:
        return _uvarint(n + 1)
    return struct.pack(">i" if wide else ">h", n)


def _value(f: dict, v, version: int, flexible: bool, tagged: bool = False) -> bytes:
    typ = f["type"]
    if typ in FIXED_TYPES:
        return FIXED_TYPES[typ].pack(v)
    if typ == "bool":
        return b"\x01" if v else b"\x00"
    if typ == "uuid":
        return uuid_bytes(v)
    if typ in ("string", "bytes", "records"):
        if v is None:
            return _length(-1, flexible, typ != "string")
        raw = v.encode() if typ == "string" else bytes(v)
        return _length(len(raw), flexible, typ != "string") + raw
    if typ == "struct":
        head = b""
        if in_range(f["nullable"], version):
            # MessageDataGenerator: int8 -1/1, in a tagged field uvarint 0/1
            if v is None:
                return b"\x00" if tagged else b"\xff"
            head = b"\x01"
        return head + encode_struct(f["fields"], v, version, flexible)
    if typ.startswith("[]"):
        if v is None:
            return _length(-1, flexible, True)
        sub = dict(f, type=typ[2:], nullable=None)
        return _length(len(v), flexible, True) + b"".join(
            _value(sub, x, version, flexible) for x in v)
    raise ValueError(f"{f['name']}: unknown type {typ!r}")


def _fill(f: dict, values: dict):
    v = values.get(f["column"], f["default"])
    if v is None and f["type"] in FIXED_TYPES:
        v = f["default"] if f["default"] is not None else 0
    return v


def encode_struct(fields, values: dict, version: int, flexible: bool) -> bytes:
    out = []
    tagged = []
    for f in fields:
        if in_range(f["tagged"], version):
            v = values.get(f["column"], f["default"])
            if v != f["default"]:
                tagged.append((f["tag"], _value(f, v, version, flexible, tagged=True)))
        elif in_range(f["versions"], version):
            out.append(_value(f, _fill(f, values), version, flexible))
    if flexible:
        tagged.sort()
        out.append(_uvarint(len(tagged)))
        for tag, raw in tagged:
            out.append(_uvarint(tag) + _uvarint(len(raw)) + raw)
    return b"".join(out)


def encode(name: str, version: int, values: dict) -> bytes:
    """The message ``name`` at ``version`` (no version prefix)."""
    m = MESSAGES[name]
    if not in_range(m["valid"], version):
        raise ValueError(f"{name}: version {version} outside {m['valid']}")
    return encode_struct(m["fields"], values, version, in_range(m["flexible"], version))


def coordinator_record(key_name: str, key_version: int, key: dict,
                       value_name: str | None, value_version: int,
                       value: dict | None) -> tuple[bytes, bytes | None]:
    """A ``__consumer_offsets``/``__transaction_state`` record: int16 version
    + struct for the key and the value (None value: a tombstone).
    ``key_version`` is the record type id written before the key."""
    kschema = key_schema_version(key_name, key_version)
    k = struct.pack(">h", key_version) + encode(key_name, kschema, key)
    if value is None:
        return k, None
    return k, struct.pack(">h", value_version) + encode(value_name, value_version, value)


def metadata_record(name: str, version: int, values: dict) -> bytes:
    """A ``__cluster_metadata`` record value: uvarint frame version (0),
    uvarint apiKey, uvarint version, then the struct."""
    api_key = MESSAGES[name]["api_key"]
    return _uvarint(1) + _uvarint(api_key) + _uvarint(version) + encode(name, version, values)
