"""Test-side encoder and independent decoders for kbatch.internal's tests.

Nothing here imports kbatch.internal's wire code: the encoder walks the
schema table (data generated from Kafka's specs) with its own writer, and
the decoders are written by hand from Kafka's JSON specs, one per record
type, with ``struct`` and a tiny reader.
"""

from __future__ import annotations

import base64
import random
import struct


# --- a generic encoder over the schema table (test side) --------------------------

def _in(rng, v):
    return rng is not None and rng[0] <= v <= rng[1]


def uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_PACK = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint16": ">H",
         "uint32": ">I", "float64": ">d"}


def _len_prefix(n, flexible, wide):
    if flexible:
        return uvarint(n + 1)
    return struct.pack(">i" if wide else ">h", n)


def enc_value(f, v, version, flexible, typ=None):
    typ = typ or f["type"]
    if typ in _PACK:
        return struct.pack(_PACK[typ], v)
    if typ == "bool":
        return bytes([1 if v else 0])
    if typ == "uuid":
        raw = base64.urlsafe_b64decode(v + "==")
        assert len(raw) == 16
        return raw
    if typ in ("string", "bytes", "records"):
        if v is None:
            return _len_prefix(-1, flexible, typ != "string")
        raw = v.encode("utf-8") if typ == "string" else v
        return _len_prefix(len(raw), flexible, typ != "string") + raw
    if typ == "struct":
        if _in(f["nullable"], version) and not typ.startswith("[]"):
            # Kafka's MessageDataGenerator: readByte() < 0 is null; in a
            # tagged field readUnsignedVarint() <= 0 (written as varint 0)
            tagged = _in(f["tagged"], version)
            if v is None:
                return b"\x00" if tagged else b"\xff"
            return b"\x01" + enc_struct(f["fields"], v, version, flexible)
        return enc_struct(f["fields"], v, version, flexible)
    if typ.startswith("[]"):
        if v is None:
            return _len_prefix(-1, flexible, True)
        elem = typ[2:]
        parts = [enc_struct(f["fields"], x, version, flexible) if elem == "struct"
                 else enc_value(f, x, version, flexible, elem) for x in v]
        return _len_prefix(len(v), flexible, True) + b"".join(parts)
    raise AssertionError(typ)


def enc_struct(fields, values, version, flexible, extra_tags=()):
    out, tags = [], list(extra_tags)
    for f in fields:
        if _in(f["tagged"], version):
            if f["column"] in values and values[f["column"]] != f["default"]:
                tags.append((f["tag"], enc_value(f, values[f["column"]], version, flexible)))
        elif _in(f["versions"], version):
            out.append(enc_value(f, values[f["column"]], version, flexible))
    if flexible:
        tags.sort()
        out.append(uvarint(len(tags)))
        for tag, raw in tags:
            out.append(uvarint(tag) + uvarint(len(raw)) + raw)
    return b"".join(out)


# --- random values over the schema table ------------------------------------------

_RANGES = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}


def rand_value(f, version, rnd: random.Random, typ=None, depth=0):
    typ = typ or f["type"]
    if typ in _RANGES:
        b = _RANGES[typ]
        return rnd.choice([0, -1, 1, (1 << b) - 1, -(1 << b), rnd.randint(-(1 << b), (1 << b) - 1)])
    if typ == "uint16":
        return rnd.randint(0, 0xFFFF)
    if typ == "uint32":
        return rnd.randint(0, 0xFFFFFFFF)
    if typ == "float64":
        return rnd.choice([0.0, -1.5, 3.25e100])
    if typ == "bool":
        return rnd.random() < 0.5
    if typ == "uuid":
        return base64.urlsafe_b64encode(rnd.randbytes(16)).rstrip(b"=").decode()
    if typ == "string":
        return rnd.choice(["", "a", "groupé-✓", "x" * rnd.randint(0, 300)])
    if typ in ("bytes", "records"):
        return rnd.randbytes(rnd.choice([0, 1, 5, 200]))
    if typ == "struct":
        return rand_struct(f["fields"], version, rnd, depth + 1)
    if typ.startswith("[]"):
        n = rnd.choice([0, 1, 3]) if depth < 3 else 0
        return [rand_value(f, version, rnd, typ[2:], depth) for _ in range(n)]
    raise AssertionError(typ)


def rand_struct(fields, version, rnd, depth=0):
    out = {}
    for f in fields:
        if not (_in(f["versions"], version) or _in(f["tagged"], version)):
            continue
        if _in(f["nullable"], version) and rnd.random() < 0.3:
            out[f["column"]] = None
        elif _in(f["tagged"], version) and rnd.random() < 0.3:
            pass                                  # absent tagged field: its default
        else:
            out[f["column"]] = rand_value(f, version, rnd, depth=depth)
    return out


def expected(fields, values, version):
    """What a decoder must return for ``values``: every field of the
    message, None for fields the version lacks, defaults for absent tags."""
    out = {}
    for f in fields:
        if _in(f["tagged"], version):
            v = values.get(f["column"], f["default"])
        elif _in(f["versions"], version):
            v = values[f["column"]]
        else:
            out[f["column"]] = None
            continue
        if v is not None and f["type"] == "struct":
            v = expected(f["fields"], v, version)
        elif v is not None and f["type"] == "[]struct":
            v = [expected(f["fields"], x, version) for x in v]
        out[f["column"]] = v
    return out


# --- a small reader for the hand-written decoders ----------------------------------

class R:
    def __init__(self, buf, pos=0):
        self.b, self.p = bytes(buf), pos

    def fix(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.p)
        self.p += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def uv(self):
        n = s = 0
        while True:
            c = self.b[self.p]
            self.p += 1
            n |= (c & 0x7F) << s
            if c < 0x80:
                return n
            s += 7

    def raw(self, n):
        assert 0 <= n <= len(self.b) - self.p
        v = self.b[self.p:self.p + n]
        self.p += n
        return v

    def s16(self):             # classic string, int16 length
        n = self.fix(">h")
        return None if n < 0 else self.raw(n).decode()

    def b32(self):
        n = self.fix(">i")
        return None if n < 0 else self.raw(n)

    def cs(self):              # compact string
        n = self.uv() - 1
        return None if n < 0 else self.raw(n).decode()

    def uuid(self):
        return base64.urlsafe_b64encode(self.raw(16)).rstrip(b"=").decode()

    def carr(self, read):
        n = self.uv() - 1
        return None if n < 0 else [read() for _ in range(n)]

    def tags(self):
        out = {}
        for _ in range(self.uv()):
            tag = self.uv()
            out[tag] = self.raw(self.uv())
        return out

    def done(self):
        assert self.p == len(self.b), f"{len(self.b) - self.p} bytes left"


# --- __consumer_offsets: offset commits and group metadata (hand-written) ----------

def ref_offset_commit(key: bytes, value: bytes | None) -> dict:
    r = R(key)
    kver = r.fix(">h")
    assert kver in (0, 1)
    group, topic = r.s16(), r.s16()
    partition = r.fix(">i")
    r.done()
    out = dict(group=group, topic=topic, partition=partition, committed_offset=None,
               leader_epoch=None, metadata=None, commit_timestamp=None, expire_timestamp=None,
               tombstone=value is None, value_version=None)
    if value is None:
        return out
    r = R(value)
    v = out["value_version"] = r.fix(">h")
    out["committed_offset"] = r.fix(">q")
    if v >= 3:
        out["leader_epoch"] = r.fix(">i")
    out["metadata"] = r.cs() if v >= 4 else r.s16()
    out["commit_timestamp"] = r.fix(">q")
    if v == 1:
        out["expire_timestamp"] = r.fix(">q")
    if v >= 4:
        r.tags()
    r.done()
    return out


def _topic_partitions(r):
    n = r.fix(">i")
    out = []
    for _ in range(n):
        t = r.s16()
        m = r.fix(">i")
        out.append({"topic": t, "partitions": [r.fix(">i") for _ in range(m)]})
    return out


def ref_subscription(raw: bytes) -> dict:
    r = R(raw)
    v = r.fix(">h")
    topics = [r.s16() for _ in range(r.fix(">i"))]
    out = {"version": v, "topics": topics, "user_data": r.b32(), "owned_partitions": None,
           "generation_id": None, "rack_id": None, "read_version": 0}
    # later versions only append fields; a writer may stop early (KafkaJS
    # writes version 1 without owned partitions): fields not there are None,
    # and read_version is the last version whose fields were there
    if v >= 1 and r.p < len(r.b):
        out["owned_partitions"] = _topic_partitions(r)
        out["read_version"] = 1
    if v >= 2 and r.p < len(r.b):
        out["generation_id"] = r.fix(">i")
        out["read_version"] = 2
    if v >= 3 and r.p < len(r.b):
        out["rack_id"] = r.s16()
        out["read_version"] = 3
    if v <= 3:
        r.done()
    return out


def ref_assignment(raw: bytes) -> dict:
    r = R(raw)
    v = r.fix(">h")
    # (versions 0 to 3 have the same fields)
    return {"version": v, "assigned_partitions": _topic_partitions(r), "user_data": r.b32(),
            "read_version": min(v, 3)}


def ref_group_metadata(key: bytes, value: bytes | None) -> dict:
    r = R(key)
    assert r.fix(">h") == 2
    group = r.s16()
    r.done()
    out = {"group": group, "tombstone": value is None}
    if value is None:
        return out
    r = R(value)
    v = r.fix(">h")
    flex = v >= 4
    s = r.cs if flex else r.s16

    def by(raw_len):
        n = (r.uv() - 1) if flex else r.fix(">i")
        return None if n < 0 else r.raw(n)

    out.update(value_version=v, protocol_type=s(), generation=r.fix(">i"), protocol=s(),
               leader=s(), current_state_timestamp=r.fix(">q") if v >= 2 else None)
    n = (r.uv() - 1) if flex else r.fix(">i")
    members = []
    for _ in range(n):
        m = {"member_id": s(), "group_instance_id": s() if v >= 3 else None,
             "client_id": s(), "client_host": s(),
             "rebalance_timeout": r.fix(">i") if v >= 1 else None,
             "session_timeout": r.fix(">i"), "subscription": by(0), "assignment": by(0)}
        if flex:
            r.tags()
        members.append(m)
    if flex:
        r.tags()
    r.done()
    out["members"] = members
    return out


# --- __cluster_metadata records present in the corpus (hand-written) ---------------

def _endpoint(r):
    e = {"name": r.cs(), "host": r.cs(), "port": r.fix(">H"), "security_protocol": r.fix(">h")}
    r.tags()
    return e


def _feature(r):
    f = {"name": r.cs(), "min_supported_version": r.fix(">h"),
         "max_supported_version": r.fix(">h")}
    r.tags()
    return f


def _int32s(r):
    return r.carr(lambda: r.fix(">i"))


def _tag_int32s(raw):
    rr = R(raw)
    v = _int32s(rr)
    rr.done()
    return v


def ref_metadata(value: bytes) -> tuple[int, int, dict]:
    """(api key, version, fields) of a __cluster_metadata record value."""
    r = R(value)
    assert r.uv() == 1                     # frame version
    key, v = r.uv(), r.uv()
    d: dict = {}
    if key == 0:                           # RegisterBrokerRecord
        d["broker_id"] = r.fix(">i")
        d["is_migrating_zk_broker"] = bool(r.fix(">b")) if v >= 2 else None
        d["incarnation_id"] = r.uuid()
        d["broker_epoch"] = r.fix(">q")
        d["end_points"] = r.carr(lambda: _endpoint(r))
        d["features"] = r.carr(lambda: _feature(r))
        d["rack"] = r.cs()
        d["fenced"] = bool(r.fix(">b"))
        d["in_controlled_shutdown"] = bool(r.fix(">b")) if v >= 1 else None
        t = r.tags()
        if v >= 3:
            if 0 in t:
                rr = R(t[0])
                d["log_dirs"] = rr.carr(rr.uuid)
            else:
                d["log_dirs"] = []
    elif key == 2:                         # TopicRecord
        d = {"name": r.cs(), "topic_id": r.uuid()}
        r.tags()
    elif key == 3:                         # PartitionRecord
        d = {"partition_id": r.fix(">i"), "topic_id": r.uuid(), "replicas": _int32s(r),
             "isr": _int32s(r), "removing_replicas": _int32s(r),
             "adding_replicas": _int32s(r), "leader": r.fix(">i"),
             "leader_epoch": r.fix(">i"), "partition_epoch": r.fix(">i")}
        # v1 had two layouts in Kafka's history: Directories (current) or, in
        # trunk before a94bc8d6d52, ELR tags 1 and 2 with no Directories
        save = r.p
        try:
            if v >= 1:
                d["directories"] = r.carr(r.uuid)
            t = r.tags()
            r.done()
        except (AssertionError, IndexError, struct.error):
            r.p = save
            d.pop("directories", None)
            t = r.tags()
        d["leader_recovery_state"] = t[0][0] if 0 in t else 0
        if 1 in t:
            d["eligible_leader_replicas"] = _tag_int32s(t[1])
        if 2 in t:
            d["last_known_elr"] = _tag_int32s(t[2])
    elif key == 4:                         # ConfigRecord
        d = {"resource_type": r.fix(">b"), "resource_name": r.cs(), "name": r.cs(),
             "value": r.cs()}
        r.tags()
    elif key == 5:                         # PartitionChangeRecord
        d = {"partition_id": r.fix(">i"), "topic_id": r.uuid()}
        t = r.tags()
        d["isr"] = _tag_int32s(t[0]) if 0 in t else None
        d["leader"] = struct.unpack(">i", t[1])[0] if 1 in t else -2
        d["replicas"] = _tag_int32s(t[2]) if 2 in t else None
        d["removing_replicas"] = _tag_int32s(t[3]) if 3 in t else None
        d["adding_replicas"] = _tag_int32s(t[4]) if 4 in t else None
        d["leader_recovery_state"] = struct.unpack(">b", t[5])[0] if 5 in t else -1
        if v >= 2:
            d["eligible_leader_replicas"] = _tag_int32s(t[6]) if 6 in t else None
            d["last_known_elr"] = _tag_int32s(t[7]) if 7 in t else None
        if v >= 1 and 8 in t:
            rr = R(t[8])
            d["directories"] = rr.carr(rr.uuid)
    elif key == 12:                        # FeatureLevelRecord
        d = {"name": r.cs(), "feature_level": r.fix(">h")}
        r.tags()
    elif key == 15:                        # ProducerIdsRecord
        d = {"broker_id": r.fix(">i"), "broker_epoch": r.fix(">q"),
             "next_producer_id": r.fix(">q")}
        r.tags()
    elif key == 17:                        # BrokerRegistrationChangeRecord
        d = {"broker_id": r.fix(">i"), "broker_epoch": r.fix(">q")}
        t = r.tags()
        d["fenced"] = struct.unpack(">b", t[0])[0] if 0 in t else 0
        if v >= 1:
            d["in_controlled_shutdown"] = struct.unpack(">b", t[1])[0] if 1 in t else 0
    elif key == 20:                        # NoOpRecord
        r.tags()
    elif key == 21:                        # ZkMigrationStateRecord
        d = {"zk_migration_state": r.fix(">b")}
        r.tags()
    elif key == 23:                        # BeginTransactionRecord
        t = r.tags()
        if 0 in t:
            d["name"] = R(t[0]).cs()
    elif key == 24:                        # EndTransactionRecord
        r.tags()
    elif key == 27:                        # RegisterControllerRecord
        d = {"controller_id": r.fix(">i"), "incarnation_id": r.uuid(),
             "zk_migration_ready": bool(r.fix(">b")),
             "end_points": r.carr(lambda: _endpoint(r)),
             "features": r.carr(lambda: _feature(r))}
        r.tags()
    else:
        raise KeyError(key)
    r.done()
    return key, v, d


# --- KRaft snapshots: what Kafka's RecordsSnapshotReader refuses -------------------

SNAPSHOT_HEADER = 3            # ControlRecordType.SNAPSHOT_HEADER


def _zigzag(r: R) -> int:
    n = r.uv()
    return (n >> 1) ^ -(n & 1)


def ref_snapshot_refusal(buf: bytes) -> str | None:
    """The exception message Kafka's RecordsSnapshotReader (over
    RecordsIterator, raft/) throws loading the snapshot file ``buf``, or
    None when it loads. RecordsIterator.nextBatch: every batch must be a
    DefaultRecordBatch (magic 2); RecordsSnapshotReader.nextBatch: the first
    batch must be a control batch with at least one record (a data batch
    has no control records), its first record a SnapshotHeader. Nothing
    else about the order is checked (no footer). This model: whole batches
    with valid CRCs, the first uncompressed (as KRaft writes control
    batches)."""
    pos = 0
    while pos + 17 <= len(buf):
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        if buf[pos + 16] != 2:
            return "DefaultRecordBatch expected by record type was LegacyFileChannelRecordBatch"
        if pos == 0:
            attributes, = struct.unpack_from(">h", buf, 21)
            count, = struct.unpack_from(">i", buf, 57)
            if not attributes & 0x20 or count == 0:
                return "First batch is not a control batch with at least one record"
            r = R(buf, 61)                  # the first record (DefaultRecord)
            _zigzag(r)                      # length
            r.fix(">b")                     # attributes
            _zigzag(r)                      # timestamp delta
            _zigzag(r)                      # offset delta
            _zigzag(r)                      # key length
            _, ctype = r.fix(">hh")         # the key: ControlRecordType.parse
            if ctype != SNAPSHOT_HEADER:
                return f"First control record is not a snapshot header ({ctype})"
        pos += 12 + size
    return None


# --- the frame of __cluster_metadata / __remote_log_metadata values ----------------

def ref_frame_refusal(value: bytes) -> str | None:
    """The MetadataParseException message of AbstractApiMessageSerde.read
    (server-common/) on the frame version that opens ``value``, or None
    where it goes on to read the api key: the frame version is read first,
    as an unsigned varint that must fit a short (unsignedIntToShort), and
    only frame version 1 is read."""
    frame = R(value).uv()
    if frame > 0x7FFF:
        return "Value for frame version was too large."
    if frame == 0:
        return ("Could not deserialize metadata record with frame version 0. Note that upgrades "
                "from the preview release of KRaft in 2.8 to newer versions are not supported.")
    if frame != 1:
        return (f"Could not deserialize metadata record due to unknown frame version {frame}"
                "(only frame version 1 is supported)")
    return None
