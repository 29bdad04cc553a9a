"""One record of an internal topic -> its type, version and fields.

Never raises on the data: a record whose type or version no schema knows
comes back with ``known=False`` and its raw bytes; a damaged one with the
error text (``strict=True`` raises ``CorruptRecordError`` instead), as does
a ``__cluster_metadata``/``__remote_log_metadata`` value framed other than
in frame version 1, which Kafka refuses (no type or version is read then).
"""

from __future__ import annotations

import base64
import struct

from kbatch.errors import CorruptRecordError
from kbatch.internal import protocol as wire
from kbatch.internal.registry import FAMILIES, FRAMED, key_schema_version

_INT16 = struct.Struct(">h")


def _version(buf: bytes, what: str) -> int:
    if len(buf) < 2:
        raise CorruptRecordError(f"{what}: {len(buf)} bytes, no version")
    return _INT16.unpack_from(buf, 0)[0]


def decode_coordinator(family: str, key: bytes | None, value: bytes | None,
                       *, strict: bool = False) -> dict:
    """A ``__consumer_offsets``/``__transaction_state``/``__share_group_state``
    record: ``{type_id, type, key_version, value_version, key, value,
    tombstone, known, error}``."""
    types = FAMILIES[family][1]
    out = {"type_id": None, "type": None, "key_version": None, "value_version": None,
           "key": None, "value": None, "tombstone": value is None, "known": False,
           "error": None}
    try:
        if key is None:
            raise CorruptRecordError("null key")
        kver = _version(key, "key")
        out["type_id"] = out["key_version"] = kver
        name = types.get(kver)
        if value is not None:
            out["value_version"] = _version(value, "value")
        if name is None:
            return out
        out["type"] = name
        kschema = key_schema_version(name + "Key", kver)
        if not wire.knows(name + "Key", kschema):
            return out
        out["key"] = wire.decode(name + "Key", kschema, key, 2)
        if value is not None and not wire.knows(name + "Value", out["value_version"]):
            return out
        if value is not None:
            out["value"] = wire.decode(name + "Value", out["value_version"], value, 2)
        out["known"] = True
    except CorruptRecordError as exc:
        if strict:
            raise
        out["error"] = exc.reason if hasattr(exc, "reason") else str(exc)
        out["known"] = False
    return out


def decode_framed(family: str, value: bytes | None, *, strict: bool = False) -> dict:
    """A ``__cluster_metadata``/``__remote_log_metadata`` record value:
    ``{type_id, type, version, frame_version, value, known, error}``."""
    types = FAMILIES[family][1]
    out = {"type_id": None, "type": None, "version": None, "frame_version": None,
           "value": None, "known": False, "error": None}
    try:
        if value is None:
            raise CorruptRecordError("null value")
        r = wire.Reader(value, "frame")
        out["frame_version"] = frame = r.uvarint("frame version")
        # AbstractApiMessageSerde.read reads frame version 1 only, and refuses
        # any other before the rest of the header
        if frame != 1:
            preview = " (KRaft's preview in Kafka 2.8)" if frame == 0 else ""
            raise CorruptRecordError(f"frame version {frame}{preview} is not supported (Kafka "
                                     "reads frame version 1 only)")
        api_key, version = r.uvarint("api key"), r.uvarint("version")
        # unsignedIntToShort: a key or version past 32767 is a parse error
        for what, n in (("api key", api_key), ("version", version)):
            if n > 0x7FFF:
                raise CorruptRecordError(f"{what} {n} is out of range (at most 32767)")
        out["type_id"], out["version"] = api_key, version
        name = types.get(out["type_id"])
        if name is None:
            return out
        out["type"] = name
        if not wire.knows(name, out["version"]):
            return out
        out["value"] = wire.decode(name, out["version"], value, r.pos)
        out["known"] = True
    except CorruptRecordError as exc:
        if strict:
            raise
        out["error"] = getattr(exc, "reason", str(exc))
    return out


def decode_record(family: str, key, value, *, strict: bool = False) -> dict:
    if family in FRAMED:
        return decode_framed(family, value, strict=strict)
    return decode_coordinator(family, key, value, strict=strict)


def jsonable(obj):
    """Decoded fields as JSON-ready values (bytes as base64 text)."""
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(obj)).decode()
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    return obj
