"""``__transaction_state`` as a table, and the transactional ids behind
producer ids (to name a hanging transaction found in a data partition).

    transaction_log(source)      one row per record: transactional id, producer
                                 id/epoch, state, partitions, timestamps
    transactional_ids(source)    {producer_id: transactional_id} from that log
"""

from __future__ import annotations

from kbatch.internal.decode import decode_coordinator
from kbatch.internal.registry import TRANSACTION_STATES
from kbatch.internal.sources import iter_parts
from kbatch.internal.tables import record_meta_fields

TOPIC = "__transaction_state"


def transaction_log_schema():
    import pyarrow as pa
    part = pa.struct([("topic", pa.string()), ("partition_ids", pa.list_(pa.int32()))])
    ts = pa.timestamp("ms", tz="UTC")
    return pa.schema([
        pa.field("transactional_id", pa.string()), pa.field("producer_id", pa.int64()),
        pa.field("producer_epoch", pa.int16()), pa.field("state", pa.string()),
        pa.field("state_code", pa.int8()), pa.field("partitions", pa.list_(part)),
        pa.field("transaction_timeout_ms", pa.int32()),
        pa.field("last_update_timestamp", ts), pa.field("start_timestamp", ts),
        pa.field("previous_producer_id", pa.int64()), pa.field("next_producer_id", pa.int64()),
        pa.field("next_producer_epoch", pa.int16()),
        pa.field("client_transaction_version", pa.int16()), pa.field("tombstone", pa.bool_()),
        pa.field("value_version", pa.int16()), pa.field("error", pa.string()),
    ] + record_meta_fields())


def _rows(source, **options):
    for part in iter_parts(source, TOPIC, **options):
        rec = part.records
        keys = rec.key.to_arrow().to_pylist()
        values = rec.value.to_arrow().to_pylist()
        for i in range(len(rec)):
            d = decode_coordinator("transactions", keys[i], values[i])
            v = d["value"] or {}
            status = v.get("transaction_status")
            start = v.get("transaction_start_timestamp_ms")
            ts = int(rec.timestamp[i])
            yield {
                "transactional_id": (d["key"] or {}).get("transactional_id"),
                "producer_id": v.get("producer_id"), "producer_epoch": v.get("producer_epoch"),
                "state": (None if status is None
                          else TRANSACTION_STATES.get(status, f"Unknown({status})")),
                "state_code": status, "partitions": v.get("transaction_partitions"),
                "transaction_timeout_ms": v.get("transaction_timeout_ms"),
                "last_update_timestamp": v.get("transaction_last_update_timestamp_ms"),
                "start_timestamp": None if start in (None, -1) else start,
                "previous_producer_id": v.get("previous_producer_id"),
                "next_producer_id": v.get("next_producer_id"),
                "next_producer_epoch": v.get("next_producer_epoch"),
                "client_transaction_version": v.get("client_transaction_version"),
                "tombstone": d["tombstone"], "value_version": d["value_version"],
                "error": d["error"] or (None if d["known"] else "unknown type or version"),
                "topic": part.topic, "partition": part.partition, "file": part.file,
                "record_offset": int(rec.offset[i]),
                "record_timestamp": ts if ts != -1 else None}


def transaction_log(source, **options):
    """The transaction coordinator's log under ``source`` (a segment, a
    ``__transaction_state-N`` directory or a data directory) as a
    ``pyarrow.Table``, one row per record in partition and offset order.
    ``state`` is the coordinator's state name (Empty, Ongoing,
    PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead,
    PrepareEpochFence); ``partitions`` the topics and partitions in the
    transaction; ``previous_producer_id``, ``next_producer_id`` and
    ``next_producer_epoch`` (value version 1 tags, -1 when not written)
    link the producer ids of a transactional id (``producer_ids``).
    Memory held: one partition's records and the rows."""
    import pyarrow as pa
    return pa.Table.from_pylist(list(_rows(source, **options)), schema=transaction_log_schema())


def transactional_ids(source, **options) -> dict[int, str]:
    """``{producer_id: transactional_id}``: the latest record naming each
    producer id wins (a producer id is given to one transactional id; after
    an epoch exhaustion the coordinator moves the id on, and the new id
    appears in later records). Empty when ``source`` holds no
    ``__transaction_state`` partition."""
    out: dict[int, str] = {}
    try:
        for row in _rows(source, **options):
            if row["producer_id"] is not None and row["transactional_id"] is not None:
                out[row["producer_id"]] = row["transactional_id"]
                if row["previous_producer_id"] not in (None, -1):
                    out.setdefault(row["previous_producer_id"], row["transactional_id"])
    except (FileNotFoundError, NotADirectoryError):
        return {}
    return out
