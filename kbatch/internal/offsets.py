"""``__consumer_offsets`` as tables: offset commits and group metadata.

    offset_commits(source)   one row per offset-commit record (key versions 0 and 1)
    group_metadata(source)   one row per classic group-metadata record (key version 2),
                             members with their consumer-protocol subscription and
                             assignment decoded
    group_records(source, type)  any other record type (KIP-848 ConsumerGroup*, StreamsGroup*,
                             ShareGroup*) with typed columns

``offset_commits`` decodes column-wise in the compiled ``_offsets`` kernel
(the record layout is drawn there); rows it leaves aside (unknown value
versions, tagged fields, damage) go through the schema-driven decoder and
come out decoded, or with ``error`` set. Memory held: one partition's
records and the columns built from them.
"""

from __future__ import annotations

import numpy as np

from kbatch._core._offsets import decode_offset_commits, gather_strings, string_bytes
from kbatch.errors import CorruptRecordError
from kbatch.internal import protocol as wire
from kbatch.internal.decode import decode_coordinator
from kbatch.internal.sources import iter_parts
from kbatch.internal.tables import record_meta_fields, typed_records

TOPIC = "__consumer_offsets"


def offset_commits_schema():
    import pyarrow as pa
    meta = record_meta_fields()
    # the offsets topic and the file: one value per partition, dictionary-encoded
    meta[0] = pa.field("topic", _DICT_STRING())
    meta[2] = pa.field("file", _DICT_STRING())
    return pa.schema(meta + [
        pa.field("group", pa.string()), pa.field("topic_name", pa.string()),
        pa.field("topic_partition", pa.int32()),
        pa.field("committed_offset", pa.int64()), pa.field("leader_epoch", pa.int32()),
        pa.field("metadata", pa.string()),
        pa.field("commit_timestamp", pa.timestamp("ms", tz="UTC")),
        pa.field("expire_timestamp", pa.timestamp("ms", tz="UTC")),
        pa.field("tombstone", pa.bool_()), pa.field("key_version", pa.int16()),
        pa.field("value_version", pa.int16()), pa.field("error", pa.string()),
        pa.field("producer_id", pa.int64()), pa.field("transaction", pa.string()),
        pa.field("transaction_end", pa.int64())])


# how a transactional offset commit's transaction ended (TxnOffsetCommit: the
# coordinator holds it pending until its producer's marker, see ``transactions``)
COMMITTED, ABORTED, OPEN = "committed", "aborted", "open"


def transactions(records, rows: np.ndarray) -> dict:
    """Per row of ``records`` in ``rows``: ``producer_id`` (of its batch),
    ``transaction`` (None: not in a transactional batch; else how its
    producer's next transaction marker after it ends the transaction:
    "committed", "aborted", or "open" when no marker follows in what was
    read) and ``transaction_end`` (that marker's offset, -1 when none)."""
    batch = records.batch[rows]
    pid = records.batches.producer_id[batch].astype(np.int64)
    txn = records.batches.is_transactional[batch].astype(bool)
    offsets = records.offset[rows]
    status = np.full(rows.size, None, object)
    end = np.full(rows.size, -1, np.int64)
    ctl = records.control
    ends = (ctl.type == 0) | (ctl.type == 1)
    markers: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for p in np.unique(pid[txn]).tolist():
        mine = np.flatnonzero(ends & (ctl.producer_id == p))
        order = np.argsort(ctl.offset[mine], kind="stable")
        markers[p] = (ctl.offset[mine][order], ctl.type[mine][order])
    for i in np.flatnonzero(txn).tolist():
        at, kinds = markers[int(pid[i])]
        k = int(np.searchsorted(at, offsets[i], side="right"))
        if k == len(at):
            status[i] = OPEN
        else:
            status[i] = COMMITTED if kinds[k] == 1 else ABORTED
            end[i] = at[k]
    return {"producer_id": pid, "transaction": status, "transaction_end": end}


def _transaction_columns(records, rows: np.ndarray) -> dict:
    import pyarrow as pa
    t = transactions(records, rows)
    return {"producer_id": pa.array(t["producer_id"], pa.int64()),
            "transaction": pa.array(t["transaction"].tolist(), pa.string()),
            "transaction_end": pa.array(t["transaction_end"], pa.int64(),
                                        mask=t["transaction_end"] < 0)}


# public column names: the record's own topic/partition are the offsets topic's
_RENAME = {"topic": "offsets_topic", "partition": "offsets_partition",
           "topic_name": "topic", "topic_partition": "partition"}


def _strings(data: np.ndarray, start, length, rows: np.ndarray):
    """The strings of ``rows`` as an Arrow string array, or None when some
    are not valid UTF-8."""
    import pyarrow as pa
    total = string_bytes(length, rows)
    out_off = np.empty(rows.size + 1, np.int32)
    out_data = np.empty(total, np.uint8)
    _, ascii_only = gather_strings(data, start, length, rows, out_off, out_data)
    arr = pa.Array.from_buffers(pa.string(), rows.size,
                                [None, pa.py_buffer(out_off), pa.py_buffer(out_data)])
    if not ascii_only:
        try:
            arr.validate(full=True)
        except pa.ArrowInvalid:
            return None
    return arr


def _constant(value, m: int):
    """A column holding one string (or null) m times, dictionary-encoded."""
    import pyarrow as pa
    if value is None:
        return pa.nulls(m, _DICT_STRING())
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(m, np.int32)),
                                          pa.array([value], pa.string()))


def _DICT_STRING():
    import pyarrow as pa
    return pa.dictionary(pa.int32(), pa.string())


def _prim(values: np.ndarray, typ, valid: np.ndarray | None = None):
    import pyarrow as pa
    n = len(values)
    if valid is None or valid.all():
        return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(np.ascontiguousarray(values))])
    bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(typ, n, [bitmap, pa.py_buffer(np.ascontiguousarray(values))],
                                 null_count=int(n - valid.sum()))


def _as_int64(offsets: np.ndarray) -> np.ndarray:
    return offsets if offsets.dtype == np.int64 else offsets.astype(np.int64)


def _validity(col, n: int) -> np.ndarray:
    if col.validity is None:
        return np.ones(n, np.uint8)
    return np.unpackbits(col.validity, count=n, bitorder="little")


def decode_commits(records, topic=None, partition=None, file=None):
    """The offset-commit rows of one ``Records`` (see ``offset_commits``)."""
    import pyarrow as pa
    n = len(records)
    key, value = records.key, records.value
    cols = {name: np.empty(n, dt) for name, dt in (
        ("status", np.int8), ("kver", np.int16), ("vver", np.int16), ("part", np.int32),
        ("off", np.int64), ("epoch", np.int32), ("commit", np.int64), ("expire", np.int64),
        ("gs", np.int64), ("gl", np.int32), ("ts", np.int64), ("tl", np.int32),
        ("ms", np.int64), ("ml", np.int32))}
    kvalid = _validity(key, n)
    vvalid = _validity(value, n)
    decode_offset_commits(_as_int64(key.offsets), key.data, _as_int64(value.offsets), value.data,
                          vvalid, *cols.values())
    status = cols["status"]
    status[kvalid == 0] = 1                  # a null key is no offset commit
    fast = np.flatnonzero(status == 0)
    slow = np.flatnonzero(status == 2)
    tomb = vvalid[fast] == 0
    live = ~tomb
    vver = cols["vver"][fast]
    group = _strings(key.data, cols["gs"], cols["gl"], fast)
    tname = _strings(key.data, cols["ts"], cols["tl"], fast)
    meta = _strings(value.data, cols["ms"], cols["ml"], fast)
    if group is None or tname is None or meta is None:
        # some string is not UTF-8: leave every row to the checked decoder
        slow = np.sort(np.concatenate([slow, fast]))
        fast = fast[:0]
        return decode_commits_slow(records, slow, topic, partition, file)
    ts = records.timestamp[fast]
    m = fast.size
    table = pa.table({
        "topic": _constant(topic, m),
        "partition": pa.array(np.full(m, -1 if partition is None else partition, np.int32),
                              mask=np.full(m, partition is None)),
        "file": _constant(file, m),
        "record_offset": _prim(records.offset[fast], pa.int64()),
        "record_timestamp": _prim(ts, pa.timestamp("ms", tz="UTC"), ts != -1),
        "group": group, "topic_name": tname,
        "topic_partition": _prim(cols["part"][fast], pa.int32()),
        "committed_offset": _prim(cols["off"][fast], pa.int64(), live),
        "leader_epoch": _prim(cols["epoch"][fast], pa.int32(), live & (vver >= 3)),
        "metadata": meta if not tomb.any() else pa.compute.if_else(
            pa.array(live), meta, pa.nulls(m, pa.string())),
        "commit_timestamp": _prim(cols["commit"][fast], pa.timestamp("ms", tz="UTC"), live),
        "expire_timestamp": _prim(cols["expire"][fast], pa.timestamp("ms", tz="UTC"),
                                  live & (vver == 1)),
        "tombstone": pa.array(tomb),
        "key_version": _prim(cols["kver"][fast], pa.int16()),
        "value_version": _prim(vver, pa.int16(), live),
        "error": pa.nulls(m, pa.string()),
        **_transaction_columns(records, fast),
    }, schema=offset_commits_schema())
    if slow.size:
        extra = decode_commits_slow(records, slow, topic, partition, file)
        order = np.argsort(np.concatenate([fast, slow]), kind="stable")
        table = pa.concat_tables([table, extra]).take(pa.array(order))
    return table


def decode_commits_slow(records, rows: np.ndarray, topic=None, partition=None, file=None):
    """Rows through the schema-driven decoder (errors kept, never raised)."""
    import pyarrow as pa
    out = []
    txn = transactions(records, rows)
    for j, i in enumerate(rows.tolist()):
        d = decode_coordinator("offsets", records.key[i], records.value[i])
        k = d["key"] or {}
        v = d["value"] or {}
        ts = int(records.timestamp[i])
        out.append({"topic": topic, "partition": partition, "file": file,
                    "record_offset": int(records.offset[i]),
                    "record_timestamp": ts if ts != -1 else None,
                    "group": k.get("group"), "topic_name": k.get("topic"),
                    "topic_partition": k.get("partition"),
                    "committed_offset": v.get("offset"), "leader_epoch": v.get("leader_epoch"),
                    "metadata": v.get("metadata"), "commit_timestamp": v.get("commit_timestamp"),
                    "expire_timestamp": v.get("expire_timestamp"), "tombstone": d["tombstone"],
                    "key_version": d["key_version"], "value_version": d["value_version"],
                    "error": d["error"] or (None if d["known"] else
                                            f"unknown value version {d['value_version']}"),
                    "producer_id": int(txn["producer_id"][j]),
                    "transaction": txn["transaction"][j],
                    "transaction_end": int(txn["transaction_end"][j])
                    if txn["transaction_end"][j] >= 0 else None})
    return pa.Table.from_pylist(out, schema=offset_commits_schema())


def offset_commits(source, **options):
    """Every offset commit under ``source`` (a segment file, a
    ``__consumer_offsets-N`` directory or a broker data directory) as a
    ``pyarrow.Table``, in partition then offset order:

    ``group, topic, partition, committed_offset, leader_epoch`` (null before
    value version 3), ``metadata, commit_timestamp, expire_timestamp`` (only
    value version 1 has it), ``tombstone`` (a deleted commit: value fields
    null), ``record_offset, record_timestamp``, the versions, ``error`` (a
    record that could not be decoded, its fields null), where the record
    lies: ``offsets_topic, offsets_partition, file``, and for a
    transactional commit (TxnOffsetCommit: the coordinator holds it pending
    until its producer's transaction marker, applies it on COMMIT and drops
    it on ABORT) ``producer_id``, ``transaction`` ("committed", "aborted",
    or "open": no marker after it in what was read; null for an ordinary
    commit) and ``transaction_end`` (the marker's offset). ``consumer_lag``
    replays them as the coordinator does.
    """
    import pyarrow as pa
    parts = [decode_commits(p.records, p.topic, p.partition, p.file)
             for p in iter_parts(source, TOPIC, **options)]
    table = pa.concat_tables(parts) if parts else offset_commits_schema().empty_table()
    return _public(table)


def _public(table):
    names = [_RENAME.get(n, n) for n in table.column_names]
    table = table.rename_columns(names)
    first = ["group", "topic", "partition", "committed_offset", "leader_epoch", "metadata",
             "commit_timestamp", "expire_timestamp", "tombstone", "record_offset",
             "record_timestamp"]
    return table.select(first + [n for n in names if n not in first])


# --- group metadata --------------------------------------------------------

def _protocol(name: str, raw: bytes | None) -> tuple[dict | None, str | None]:
    """A consumer-protocol subscription/assignment: int16 version + struct,
    and why it did not parse (None when it did, or when there are no bytes:
    a member between rebalances has an empty assignment).

    Versions only ever append fields, so a newer version than the table
    knows is read as the newest known (trailing bytes allowed), and a value
    that stops after an older version's fields (KafkaJS writes version 1
    subscriptions without owned partitions) is read as that older version:
    the fields it lacks are null, and ``read_version`` says which version's
    fields were read (Kafka's own deserializer refuses such a value).
    """
    if raw is None or len(raw) == 0:
        return None, None
    what = "an assignment" if name.endswith("Assignment") else "a subscription"
    if len(raw) < 2:
        return None, f"{what} of {len(raw)} byte(s)"
    version = int.from_bytes(raw[:2], "big", signed=True)
    if version < 0:
        return None, f"{what} of version {version}"
    top = min(version, wire.MESSAGES[name]["valid"][1])
    for v in range(top, -1, -1):
        try:
            fields = wire.decode(name, v, raw, 2, whole=v == version or v < top)
            return dict(fields, version=version, read_version=v), None
        except CorruptRecordError:
            continue
    return None, f"{what} (version {version}) that no version's fields read"


def _member_type():
    import pyarrow as pa
    part = pa.struct([("topic", pa.string()), ("partitions", pa.list_(pa.int32()))])
    sub = pa.struct([("version", pa.int16()), ("topics", pa.list_(pa.string())),
                     ("user_data", pa.binary()), ("owned_partitions", pa.list_(part)),
                     ("generation_id", pa.int32()), ("rack_id", pa.string()),
                     ("read_version", pa.int16())])
    asg = pa.struct([("version", pa.int16()), ("assigned_partitions", pa.list_(part)),
                     ("user_data", pa.binary()), ("read_version", pa.int16())])
    return pa.struct([("member_id", pa.string()), ("group_instance_id", pa.string()),
                      ("client_id", pa.string()), ("client_host", pa.string()),
                      ("rebalance_timeout", pa.int32()), ("session_timeout", pa.int32()),
                      ("subscription", sub), ("assignment", asg),
                      ("subscription_raw", pa.binary()), ("assignment_raw", pa.binary())])


def group_metadata_schema():
    import pyarrow as pa
    return pa.schema([pa.field("group", pa.string()), pa.field("protocol_type", pa.string()),
                      pa.field("generation", pa.int32()), pa.field("protocol", pa.string()),
                      pa.field("leader", pa.string()),
                      pa.field("current_state_timestamp", pa.timestamp("ms", tz="UTC")),
                      pa.field("members", pa.list_(_member_type())),
                      pa.field("tombstone", pa.bool_()), pa.field("record_offset", pa.int64()),
                      pa.field("record_timestamp", pa.timestamp("ms", tz="UTC")),
                      pa.field("value_version", pa.int16()),
                      pa.field("offsets_partition", pa.int32()), pa.field("error", pa.string())])


def group_metadata(source, **options):
    """Classic group-metadata records (key version 2) as a ``pyarrow.Table``:
    protocol type and name, generation, leader, and the members (client id,
    host, timeouts), with the consumer protocol's subscription (topics,
    owned partitions, ...) and assignment decoded when the protocol type is
    "consumer" (the raw bytes kept beside). Tombstones mark deleted groups."""
    import pyarrow as pa
    rows = []
    for part in iter_parts(source, TOPIC, **options):
        rec = part.records
        keys = rec.key.to_arrow().to_pylist()
        values = rec.value.to_arrow().to_pylist()
        for i, k in enumerate(keys):
            if k is None or len(k) < 2 or k[:2] != b"\x00\x02":
                continue
            d = decode_coordinator("offsets", k, values[i])
            v = d["value"] or {}
            consumer = v.get("protocol_type") == "consumer"
            members, problems = None, []
            if d["value"] is not None:
                members = []
                for m in v["members"]:
                    sub = asg = None
                    if consumer:
                        sub, why = _protocol("ConsumerProtocolSubscription", m["subscription"])
                        if why:
                            problems.append(f"member {m['member_id']}: {why}")
                        asg, why = _protocol("ConsumerProtocolAssignment", m["assignment"])
                        if why:
                            problems.append(f"member {m['member_id']}: {why}")
                    members.append(dict(m, subscription=sub, assignment=asg,
                                        subscription_raw=m["subscription"],
                                        assignment_raw=m["assignment"]))
            ts = int(rec.timestamp[i])
            rows.append({"group": (d["key"] or {}).get("group"),
                         "protocol_type": v.get("protocol_type"), "generation": v.get("generation"),
                         "protocol": v.get("protocol"), "leader": v.get("leader"),
                         "current_state_timestamp": v.get("current_state_timestamp"),
                         "members": members, "tombstone": d["tombstone"],
                         "record_offset": int(rec.offset[i]),
                         "record_timestamp": ts if ts != -1 else None,
                         "value_version": d["value_version"], "offsets_partition": part.partition,
                         "error": d["error"] or (None if d["known"] else "unknown version")
                         or ("; ".join(problems) if problems else None)})
    return pa.Table.from_pylist(rows, schema=group_metadata_schema())


def group_records(source, type: str, **options):
    """Records of another ``__consumer_offsets`` type (e.g.
    "ConsumerGroupMemberMetadata", "ConsumerGroupTargetAssignmentMember",
    "ShareGroupMetadata") with every key and value field typed."""
    return typed_records(source, "offsets", type, **options)
