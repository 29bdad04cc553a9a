"""Kafka's message encoding, decoded from the schema tables in ``_schemas``.

A message (a record key or value of an internal topic, a metadata record, a
producer snapshot) is a struct of fields written in order, big-endian:

    int8/int16/int32/int64, uint16/uint32, float64, bool (1 byte), uuid (16)
    string   classic: int16 length (-1 null) + UTF-8    | compact: uvarint length+1 (0 null)
    bytes    classic: int32 length (-1 null) + bytes    | compact: uvarint length+1 (0 null)
    [array]  classic: int32 count (-1 null) + elements  | compact: uvarint count+1 (0 null)
    struct   its fields in order; a nullable struct is preceded by int8 (-1 null, 1 present),
             in a tagged field by an unsigned varint (0 null, 1 present)

A field exists in the versions its spec lists; in "flexible" versions strings,
bytes and arrays are compact, and every struct ends with a tagged-field
section:

    uvarint count | count x (uvarint tag | uvarint size | size bytes)

whose tags are the fields marked ``tagged`` for that version (absent ones take
their default); unknown tags are kept as raw bytes under ``_unknown_tags``.

Every read goes through ``Reader``, which checks ``n <= end - pos`` first;
counts are checked against the bytes that remain before anything is
allocated; varints stop after 5 bytes. Damage raises ``CorruptRecordError``
with the byte position inside the message.
"""

from __future__ import annotations

import base64
import struct

from kbatch.errors import CorruptRecordError
from kbatch.internal._schemas import MESSAGES, VARIANTS

FIXED_TYPES = {
    "int8": struct.Struct(">b"), "int16": struct.Struct(">h"), "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"), "uint16": struct.Struct(">H"), "uint32": struct.Struct(">I"),
    "float64": struct.Struct(">d"),
}
_MIN_SIZE = {"int8": 1, "int16": 2, "int32": 4, "int64": 8, "uint16": 2, "uint32": 4,
             "float64": 8, "bool": 1, "uuid": 16}


def uuid_str(raw: bytes) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def uuid_bytes(text: str) -> bytes:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"not a Kafka Uuid: {text!r}")
    return raw


def in_range(rng, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


class Reader:
    """A bounds-checked cursor over ``buf[pos:end]``."""

    __slots__ = ("buf", "pos", "end", "what")

    def __init__(self, buf, what: str = "message", pos: int = 0, end: int | None = None):
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end
        self.what = what

    def fail(self, problem: str) -> CorruptRecordError:
        return CorruptRecordError(f"{self.what}: {problem}", position=self.pos)

    def remaining(self) -> int:
        return self.end - self.pos

    def take(self, n: int, field: str) -> bytes:
        if n < 0 or n > self.end - self.pos:
            raise self.fail(f"{field}: {n} bytes needed, {self.end - self.pos} left")
        out = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return out

    def fixed(self, typ: str, field: str):
        s = FIXED_TYPES[typ]
        if s.size > self.end - self.pos:
            raise self.fail(f"{field}: {s.size} bytes needed, {self.end - self.pos} left")
        v = s.unpack_from(self.buf, self.pos)[0]
        self.pos += s.size
        return v

    def uvarint(self, field: str) -> int:
        value = shift = 0
        for _ in range(5):
            if self.pos >= self.end:
                raise self.fail(f"{field}: varint runs past the end")
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                if value > 0xFFFFFFFF:
                    raise self.fail(f"{field}: varint above 32 bits")
                return value
            shift += 7
        raise self.fail(f"{field}: varint longer than 5 bytes")


def _length(r: Reader, compact: bool, wide: bool, field: str) -> int:
    """A string/bytes/array length; -1 means null."""
    if compact:
        return r.uvarint(field) - 1
    return r.fixed("int32" if wide else "int16", field)


def _read_value(r: Reader, f: dict, version: int, flexible: bool, tagged: bool = False):
    typ = f["type"]
    name = f["name"]
    nullable = in_range(f["nullable"], version)
    if typ in FIXED_TYPES:
        return r.fixed(typ, name)
    if typ == "bool":
        return r.take(1, name) != b"\x00"
    if typ == "uuid":
        return uuid_str(r.take(16, name))
    if typ in ("string", "bytes", "records"):
        n = _length(r, flexible, typ != "string", name)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise r.fail(f"{name}: length {n} for a non-nullable {typ}")
        raw = r.take(n, name)
        if typ != "string":
            return raw
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise r.fail(f"{name}: not UTF-8") from None
    if typ == "struct":
        if nullable:
            # MessageDataGenerator: a tagged field's marker is an unsigned
            # varint (0: null), elsewhere an int8 (negative: null)
            if tagged:
                absent = r.uvarint(name) <= 0
            else:
                absent = r.fixed("int8", name) < 0
            if absent:
                return None
        return read_struct(r, f["fields"], version, flexible)
    if typ.startswith("[]"):
        n = _length(r, flexible, True, name)
        if n < 0:
            if n == -1 and nullable:
                return None
            raise r.fail(f"{name}: count {n} for a non-nullable array")
        elem = typ[2:]
        size = _MIN_SIZE.get(elem, 1)
        if n > r.remaining() // size:
            raise r.fail(f"{name}: {n} elements cannot fit in {r.remaining()} bytes")
        if elem in FIXED_TYPES:
            s = FIXED_TYPES[elem]
            out = list(struct.unpack_from(f">{n}{s.format[1:]}", r.buf, r.pos))
            r.pos += n * s.size
            return out
        sub = dict(f, type=elem, nullable=None)
        return [_read_value(r, sub, version, flexible) for _ in range(n)]
    raise r.fail(f"{name}: unknown type {typ!r}")


def read_struct(r: Reader, fields, version: int, flexible: bool) -> dict:
    out: dict = {}
    tagged: dict = {}
    for f in fields:
        if in_range(f["tagged"], version):
            tagged[f["tag"]] = f
            out[f["column"]] = f["default"]
        elif in_range(f["versions"], version):
            out[f["column"]] = _read_value(r, f, version, flexible)
        else:
            out[f["column"]] = None
    if flexible:
        count = r.uvarint("tagged field count")
        if count > r.remaining() // 2:
            raise r.fail(f"{count} tagged fields cannot fit in {r.remaining()} bytes")
        unknown = {}
        for _ in range(count):
            tag = r.uvarint("tag")
            size = r.uvarint("tagged field size")
            if size > r.remaining():
                raise r.fail(f"tag {tag}: {size} bytes needed, {r.remaining()} left")
            f = tagged.get(tag)
            if f is None:
                unknown[tag] = r.take(size, f"tag {tag}")
                continue
            sub = Reader(r.buf, r.what, r.pos, r.pos + size)
            out[f["column"]] = _read_value(sub, f, version, flexible, tagged=True)
            if sub.pos != sub.end:
                raise sub.fail(f"tag {tag}: {sub.end - sub.pos} bytes left in the field")
            r.pos += size
        if unknown:
            out["_unknown_tags"] = unknown
    return out


def is_flexible(name: str, version: int) -> bool:
    return in_range(MESSAGES[name]["flexible"], version)


def knows(name: str, version: int) -> bool:
    m = MESSAGES.get(name)
    return m is not None and in_range(m["valid"], version)


def decode(name: str, version: int, buf, pos: int = 0, end: int | None = None,
           *, whole: bool = True) -> dict:
    """The message ``name`` at ``version`` from ``buf[pos:end]`` as a dict
    keyed by snake_case field names (None for fields the version lacks).

    Where Kafka wrote another layout under the same version (``VARIANTS``:
    PartitionRecord v1 while it was ELR, Kafka 4.0's share-group records),
    the record is read with every layout of that version and the one that
    reads it exactly to its end is kept: a historical one names its commit
    under ``_schema_commit``. If several fit, one that knows every tagged
    field of the record comes first (a tag only the other layout names, as
    PartitionChangeRecord v1's ELR tags, decides), then the newest (the
    current layout, else the first variant listed); ``_schema_ambiguous``
    lists the commits of the others that fit too ("current" for the
    current layout); if none fits, the current layout's error is raised.

    ``whole``: the message must use every byte (trailing bytes are an error).
    """
    m = MESSAGES[name]
    if not in_range(m["valid"], version):
        raise CorruptRecordError(f"{name}: version {version} outside {m['valid']}")
    olds = [old for old in VARIANTS.get(name, ()) if in_range(old["valid"], version)]
    if not olds:
        return _decode(m, name, version, buf, pos, end, whole)
    fits: list[tuple[str, dict]] = []
    error = None
    for layout in [m] + olds:
        try:
            out = _decode(layout, name, version, buf, pos, end, whole)
        except CorruptRecordError as exc:
            error = error or exc
            continue
        fits.append((layout.get("commit", "current"), out))
    if not fits:
        raise error
    fits.sort(key=lambda fit: "_unknown_tags" in fit[1])      # stable: then the newest
    commit, out = fits[0]
    if commit != "current":
        out["_schema_commit"] = commit
    if len(fits) > 1:
        out["_schema_ambiguous"] = [c for c, _ in fits[1:]]
    return out


def _decode(m: dict, name: str, version: int, buf, pos: int, end, whole: bool) -> dict:
    r = Reader(buf, name, pos, end)
    out = read_struct(r, m["fields"], version, in_range(m["flexible"], version))
    if whole and r.pos != r.end:
        raise r.fail(f"{r.end - r.pos} trailing bytes")
    return out


def columns(name: str) -> list[str]:
    """Top-level snake_case field names of a message, in spec order."""
    return [f["column"] for f in MESSAGES[name]["fields"]]
