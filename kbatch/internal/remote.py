"""Tiered storage's ``__remote_log_metadata`` and share groups'
``__share_group_state``.

``remote_log_metadata(source)`` returns one row per remote log segment
event, joined into the segment's state over time:

    RemoteLogSegmentMetadataRecord        a segment is being copied (COPY_SEGMENT_STARTED)
    RemoteLogSegmentMetadataUpdateRecord  its state moves on (..._FINISHED, DELETE_...)
    RemotePartitionDeleteMetadataRecord   a whole partition is being deleted

State codes are Kafka's RemoteLogSegmentState / RemotePartitionDeleteState ids.
"""

from __future__ import annotations

import logging

from kbatch.internal.tables import iter_decoded, record_meta_fields, typed_table

log = logging.getLogger("kbatch")

SEGMENT_STATES = {0: "COPY_SEGMENT_STARTED", 1: "COPY_SEGMENT_FINISHED",
                  2: "DELETE_SEGMENT_STARTED", 3: "DELETE_SEGMENT_FINISHED"}
PARTITION_DELETE_STATES = {0: "DELETE_PARTITION_MARKED", 1: "DELETE_PARTITION_STARTED",
                           2: "DELETE_PARTITION_FINISHED"}


def remote_segments_schema():
    import pyarrow as pa
    return pa.schema([
        pa.field("remote_topic_id", pa.string()), pa.field("remote_topic", pa.string()),
        pa.field("remote_partition", pa.int32()), pa.field("segment_id", pa.string()),
        pa.field("event", pa.string()), pa.field("state", pa.string()),
        pa.field("start_offset", pa.int64()), pa.field("end_offset", pa.int64()),
        pa.field("broker_id", pa.int32()), pa.field("event_timestamp",
                                                    pa.timestamp("ms", tz="UTC")),
        pa.field("segment_size_in_bytes", pa.int32())] + record_meta_fields())


def _segment_rows(decoded):
    starts: dict = {}
    unread = sum(1 for _, d in decoded if not d["known"])
    if unread:
        log.warning("kbatch: %d __remote_log_metadata record(s) no schema reads (a newer "
                    "version, or damage) are not in the table (records() lists them)", unread)
    for meta, d in decoded:
        if not d["known"]:
            continue
        v, t = d["value"], d["type"]
        base = {k: meta[k] for k in ("topic", "partition", "file", "record_offset",
                                     "record_timestamp")}
        if t in ("RemoteLogSegmentMetadataRecord", "RemoteLogSegmentMetadataSnapshotRecord",
                 "RemoteLogSegmentMetadataUpdateRecord"):
            ident = v.get("remote_log_segment_id") or {}
            tip = ident.get("topic_id_partition") or {}
            seg = v.get("segment_id") or ident.get("id")
            if t != "RemoteLogSegmentMetadataUpdateRecord":
                starts[seg] = v
            first = starts.get(seg, v)
            yield {"remote_topic_id": tip.get("id"), "remote_topic": tip.get("name"),
                   "remote_partition": tip.get("partition"), "segment_id": seg,
                   "event": t, "state": SEGMENT_STATES.get(v.get("remote_log_segment_state"),
                                                          str(v.get("remote_log_segment_state"))),
                   "start_offset": first.get("start_offset"), "end_offset": first.get("end_offset"),
                   "broker_id": v.get("broker_id"), "event_timestamp": v.get("event_timestamp_ms"),
                   "segment_size_in_bytes": first.get("segment_size_in_bytes"), **base}
        elif t == "RemotePartitionDeleteMetadataRecord":
            tip = v.get("topic_id_partition") or {}
            yield {"remote_topic_id": tip.get("id"), "remote_topic": tip.get("name"),
                   "remote_partition": tip.get("partition"), "segment_id": None, "event": t,
                   "state": PARTITION_DELETE_STATES.get(
                       v.get("remote_partition_delete_state"),
                       str(v.get("remote_partition_delete_state"))),
                   "start_offset": None, "end_offset": None, "broker_id": v.get("broker_id"),
                   "event_timestamp": v.get("event_timestamp_ms"),
                   "segment_size_in_bytes": None, **base}


def remote_log_metadata(source, **options):
    """Remote segment events with their state, in record order (see the
    module docstring). ``typed_records(source, "remote-log-metadata",
    type)`` gives any record type with every field."""
    import pyarrow as pa
    decoded = list(iter_decoded(source, "remote-log-metadata", **options))
    return pa.Table.from_pylist(list(_segment_rows(decoded)), schema=remote_segments_schema())


def share_state(source, type: str = "ShareSnapshot", **options):
    """``__share_group_state`` records of one type ("ShareSnapshot" or
    "ShareUpdate"): group, topic id, partition, state epoch, start offset
    and the state batches, typed."""
    return typed_table(iter_decoded(source, "share-state", **options), "share-state", type)
