"""Control record values: transaction markers and KRaft quorum records, decoded.

A control record (in a batch with attribute bit 5 set) has a 4-byte key

    version int16 (0; >= 0, higher versions read as 0) | type int16

and a value whose layout depends on the type. Every value starts with its own
int16 ``Version``; all integers are big-endian.

ABORT (0), COMMIT (1): EndTransactionMarker.java; EndTxnMarker.json (newer
Kafka, written version-prefixed: MessageUtil.toVersionPrefixedByteBuffer).
Not a flexible message: no tagged fields.

    version int16 | coordinator_epoch int32                        (6 bytes)

The other types are generated messages (LeaderChangeMessage.json,
SnapshotHeaderRecord.json, SnapshotFooterRecord.json, KRaftVersionRecord.json,
VotersRecord.json), all ``"validVersions": "0", "flexibleVersions": "0+"``,
read by ControlRecordUtils.java with the schema version fixed at 0. The int16
``Version`` is the message's first field (not a prefix added around it), so
the value is exactly the serialized message. "Flexible" serialization means:

    uvarint        unsigned LEB128, 7 bits a byte, at most 5 bytes
    compact array  uvarint (N + 1) then N elements (0 is null: an error here,
                   no field is nullable)
    compact string uvarint (length + 1) then UTF-8 bytes (length <= 0x7fff)
    uuid           16 bytes: most significant int64 | least significant int64
    tagged fields  uvarint count, then per field: uvarint tag | uvarint size |
                   size bytes. Closes every struct: the message itself, each
                   array element and each nested struct. None are defined for
                   these messages, so all are skipped.

LEADER_CHANGE (2), LeaderChangeMessage:

    Version int16 | LeaderId int32 |
    Voters:         compact array of (VoterId int32 | tagged fields) |
    GrantingVoters: compact array of (VoterId int32 | tagged fields) |
    tagged fields

SNAPSHOT_HEADER (3), SnapshotHeaderRecord:

    Version int16 | LastContainedLogTimestamp int64 | tagged fields

SNAPSHOT_FOOTER (4), SnapshotFooterRecord:

    Version int16 | tagged fields

KRAFT_VERSION (5), KRaftVersionRecord:

    Version int16 | KRaftVersion int16 | tagged fields

KRAFT_VOTERS (6), VotersRecord:

    Version int16 |
    Voters: compact array of
        VoterId int32 | VoterUuid uuid |
        Endpoints: compact array of
            Name compact string | Host compact string | Port uint16 |
            tagged fields
        KRaftVersionFeature (a struct, inline, not nullable):
            MinSupportedVersion int16 | MaxSupportedVersion int16 |
            tagged fields
        tagged fields
    tagged fields

A directory id (VoterUuid) is returned as Kafka prints it (Uuid.toString):
URL-safe base64 without padding, 22 characters, as in ``meta.properties``'s
``directory.id``; ``AAAAAAAAAAAAAAAAAAAAAA`` is the zero (unset) id.

Strictness: every read is bounds-checked and any problem raises
``CorruptRecordError``. A value whose own version is 0 must end exactly where
the version-0 layout ends. Kafka reads every value with the version-0 layout
and ignores what follows, so a value with a higher version (written by a
newer Kafka) is read the same way and its trailing bytes are ignored. A
negative version is corrupt (EndTransactionMarker.java rejects it too).
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from kbatch.errors import CorruptRecordError
from kbatch.wire import CONTROL_TYPE_NAMES as CONTROL_TYPES, ControlType

if TYPE_CHECKING:
    from kbatch.lib.records import ControlRecords

__all__ = ["parse_control_value", "decode_control_records", "CONTROL_TYPES"]

ABORT, COMMIT, LEADER_CHANGE = ControlType.ABORT, ControlType.COMMIT, ControlType.LEADER_CHANGE
SNAPSHOT_HEADER, SNAPSHOT_FOOTER = ControlType.SNAPSHOT_HEADER, ControlType.SNAPSHOT_FOOTER
KRAFT_VERSION, KRAFT_VOTERS = ControlType.KRAFT_VERSION, ControlType.KRAFT_VOTERS

_MAX_STRING = 0x7FFF  # the generated readers' limit on a string's length


class _Reader:
    """Bounds-checked big-endian reads over one value; errors name ``what``."""

    __slots__ = ("buf", "pos", "what")

    def __init__(self, buf: bytes, what: str):
        self.buf = buf
        self.pos = 0
        self.what = what

    def fail(self, problem: str, at: int | None = None) -> CorruptRecordError:
        at = self.pos if at is None else at
        return CorruptRecordError(
            f"{self.what} value: {problem} (byte {at} of {len(self.buf)})")

    def take(self, n: int, field: str) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise self.fail(f"{field} needs {n} bytes, {len(self.buf) - self.pos} left")
        out = self.buf[self.pos:end]
        self.pos = end
        return out

    def int16(self, field: str) -> int:
        return int.from_bytes(self.take(2, field), "big", signed=True)

    def uint16(self, field: str) -> int:
        return int.from_bytes(self.take(2, field), "big", signed=False)

    def int32(self, field: str) -> int:
        return int.from_bytes(self.take(4, field), "big", signed=True)

    def int64(self, field: str) -> int:
        return int.from_bytes(self.take(8, field), "big", signed=True)

    def uvarint(self, field: str) -> int:
        start = self.pos
        value = 0
        for shift in range(0, 35, 7):
            if self.pos >= len(self.buf):
                raise self.fail(f"{field}: varint runs past the end", start)
            b = self.buf[self.pos]
            self.pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
        raise self.fail(f"{field}: varint longer than 5 bytes", start)

    def uuid(self, field: str) -> str:
        return base64.urlsafe_b64encode(self.take(16, field)).rstrip(b"=").decode("ascii")

    def array_length(self, field: str) -> int:
        """A compact array's element count (non-nullable)."""
        start = self.pos
        n = self.uvarint(field) - 1
        if n < 0:
            raise self.fail(f"{field}: null array in a non-nullable field", start)
        if n > len(self.buf) - self.pos:  # every element takes at least a byte
            raise self.fail(f"{field}: {n} elements cannot fit in the "
                            f"{len(self.buf) - self.pos} bytes left", start)
        return n

    def string(self, field: str) -> str:
        """A compact string (non-nullable)."""
        start = self.pos
        n = self.uvarint(field) - 1
        if n < 0:
            raise self.fail(f"{field}: null string in a non-nullable field", start)
        if n > _MAX_STRING:
            raise self.fail(f"{field}: string length {n} over {_MAX_STRING}", start)
        raw = self.take(n, field)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise self.fail(f"{field}: invalid UTF-8 ({e.reason})", start) from None

    def tagged_fields(self, where: str) -> None:
        """Skip a tagged-field section (none is known in these messages)."""
        count = self.uvarint(f"{where} tagged field count")
        for _ in range(count):
            self.uvarint(f"{where} tag")
            size = self.uvarint(f"{where} tagged field size")
            self.take(size, f"{where} tagged field")

    def version(self) -> int:
        v = self.int16("Version")
        if v < 0:
            raise self.fail(f"negative version {v}", self.pos - 2)
        return v

    def finish(self, version: int) -> None:
        if version == 0 and self.pos != len(self.buf):
            raise self.fail(f"{len(self.buf) - self.pos} bytes after the end of "
                            f"a version 0 value")


def _end_txn_marker(r: _Reader) -> dict:
    version = r.version()
    epoch = r.int32("coordinator_epoch")
    r.finish(version)
    return {"version": version, "coordinator_epoch": epoch}


def _voter_ids(r: _Reader, field: str) -> list[int]:
    ids = []
    for _ in range(r.array_length(field)):
        ids.append(r.int32(f"{field} VoterId"))
        r.tagged_fields(f"{field} element")
    return ids


def _leader_change(r: _Reader) -> dict:
    version = r.version()
    leader = r.int32("LeaderId")
    voters = _voter_ids(r, "Voters")
    granting = _voter_ids(r, "GrantingVoters")
    r.tagged_fields("message")
    r.finish(version)
    return {"version": version, "leader_id": leader, "voters": voters,
            "granting_voters": granting}


def _snapshot_header(r: _Reader) -> dict:
    version = r.version()
    ts = r.int64("LastContainedLogTimestamp")
    r.tagged_fields("message")
    r.finish(version)
    return {"version": version, "last_contained_log_timestamp": ts}


def _snapshot_footer(r: _Reader) -> dict:
    version = r.version()
    r.tagged_fields("message")
    r.finish(version)
    return {"version": version}


def _kraft_version(r: _Reader) -> dict:
    version = r.version()
    kv = r.int16("KRaftVersion")
    r.tagged_fields("message")
    r.finish(version)
    return {"version": version, "kraft_version": kv}


def _voters(r: _Reader) -> dict:
    version = r.version()
    voters = []
    for _ in range(r.array_length("Voters")):
        voter_id = r.int32("VoterId")
        directory = r.uuid("VoterUuid")
        endpoints = []
        for _ in range(r.array_length("Endpoints")):
            name = r.string("Endpoint Name")
            host = r.string("Endpoint Host")
            port = r.uint16("Endpoint Port")
            r.tagged_fields("Endpoint")
            endpoints.append({"name": name, "host": host, "port": port})
        lo = r.int16("MinSupportedVersion")
        hi = r.int16("MaxSupportedVersion")
        r.tagged_fields("KRaftVersionFeature")
        r.tagged_fields("Voter")
        voters.append({"voter_id": voter_id, "voter_directory_id": directory,
                       "endpoints": endpoints,
                       "kraft_version_feature": {"min_supported_version": lo,
                                                 "max_supported_version": hi}})
    r.tagged_fields("message")
    r.finish(version)
    return {"version": version, "voters": voters}


_PARSERS = {
    ABORT: _end_txn_marker, COMMIT: _end_txn_marker, LEADER_CHANGE: _leader_change,
    SNAPSHOT_HEADER: _snapshot_header, SNAPSHOT_FOOTER: _snapshot_footer,
    KRAFT_VERSION: _kraft_version, KRAFT_VOTERS: _voters,
}


def _as_bytes(b) -> bytes | None:
    return None if b is None else bytes(b)


def _check_key(type: int, name: str, key: bytes) -> None:
    if len(key) < 4:
        raise CorruptRecordError(f"{name} key: {len(key)} bytes, a control key has 4")
    version = int.from_bytes(key[0:2], "big", signed=True)
    if version < 0:
        raise CorruptRecordError(f"{name} key: negative version {version}")
    key_type = int.from_bytes(key[2:4], "big", signed=True)
    if key_type != type:
        raise CorruptRecordError(f"{name} key: it names type {key_type}, not {type}")


def parse_control_value(type: int, key: bytes | None, value: bytes | None) -> dict:
    """Decode one control record's value (layouts in the module docstring).

    ``type`` is the control type from the key (``ControlRecords.type``).
    When ``key`` is given for a known type it is checked: 4 bytes or more, a
    non-negative version and the same type. Returns a dict with ``"type"``
    (the name) and the decoded fields; an unknown type gives ``{"type":
    "UNKNOWN", "raw_key": key, "raw_value": value}``. Raises
    ``CorruptRecordError`` for a malformed key or value (a known type with no
    value included).
    """
    type = int(type)
    key = _as_bytes(key)
    value = _as_bytes(value)
    parser = _PARSERS.get(type)
    if parser is None:
        return {"type": "UNKNOWN", "raw_key": key, "raw_value": value}
    name = CONTROL_TYPES[type]
    if key is not None:
        _check_key(type, name, key)
    if value is None:
        raise CorruptRecordError(f"{name} value: null")
    return {"type": name, **parser(_Reader(value, name))}


def decode_control_records(control: ControlRecords) -> list[dict]:
    """``parse_control_value`` over every record of ``control``, with its
    ``"offset"`` added. A malformed record raises ``CorruptRecordError``
    naming its offset."""
    out = []
    types = control.type.tolist()
    offsets = control.offset.tolist()
    for i, (t, offset) in enumerate(zip(types, offsets)):
        try:
            decoded = parse_control_value(t, control.key[i], control.value[i])
        except CorruptRecordError as e:
            raise CorruptRecordError(f"control record at offset {offset}: {e.reason}") from e
        out.append({"offset": offset, **decoded})
    return out
