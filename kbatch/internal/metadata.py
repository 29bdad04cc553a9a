"""The KRaft cluster metadata log (``__cluster_metadata``) and its
``.checkpoint`` snapshots as tables.

``cluster_metadata(source)`` decodes every record once and returns a
``ClusterMetadata`` whose attributes are ``pyarrow.Table``s:

    records     every record: type, version, fields as JSON (unknown ones raw)
    topics      TopicRecord / RemoveTopicRecord: topic id, name, removed
    partitions  PartitionRecord / PartitionChangeRecord: the partition's state
                after each record (leader, ISR, replicas, ...), topic named
    configs     ConfigRecord: resource type and name, config name and value
    brokers     RegisterBrokerRecord with endpoints, rack, features, fencing
    features    FeatureLevelRecord: feature name and level over time

Partition state is replayed file by file, in offset order: a snapshot
starts from nothing, as Kafka loads it; a log starts from nothing too, so
the first changes of a partition created before the log's start keep null
for what they did not change. Topic names come from every TopicRecord seen
(topic ids are never reused).

Metadata transactions (KIP-868: BeginTransactionRecord ...
EndTransactionRecord or AbortTransactionRecord) apply as Kafka's
MetadataBatchLoader applies them: an aborted transaction's records, and
those of a transaction still open at the end of a file, are not in the
tables but ``records`` (which lists every record as written, with
``uncommitted``); a Begin inside a transaction, or an End or
Abort outside one, is a ``CorruptRecordError`` (the loader fails there).

A record no schema reads (a newer version, damage, a frame version other
than 1, which Kafka refuses) cannot be replayed: it is in ``records`` with
``known`` false (and its ``error`` where it is damage or Kafka refuses it),
in ``unread``, and a warning names how many; the state tables after it may
miss what it changed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kbatch.errors import CorruptRecordError
from kbatch.internal.tables import iter_decoded, record_meta_fields, records_table, typed_table

log = logging.getLogger("kbatch")

RESOURCE_TYPES = {2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS",
                  32: "GROUP"}


@dataclass
class ClusterMetadata:
    records: object
    topics: object
    partitions: object
    configs: object
    brokers: object
    features: object
    unread: object = None       # the records no schema read: the state tables lack them

    def __repr__(self) -> str:
        return ("ClusterMetadata(" + ", ".join(
            f"{k}={len(getattr(self, k))} rows" for k in
            ("records", "topics", "partitions", "configs", "brokers", "features", "unread")
            if getattr(self, k) is not None) + ")")


def applied(decoded) -> tuple[list, set]:
    """``(records Kafka's loader applies, ids of those it does not)``: per
    file, a transaction's records once its EndTransactionRecord comes, none
    of an aborted one or of one still open at the file's end (``id`` of the
    pair identifies a left-out record). A log whose first record is not
    offset 0 (its older segments deleted after a snapshot) may begin inside
    a transaction: records before a first End are that transaction's and
    apply, records before a first Abort do not. Where the replay starts
    clean (offset 0, a snapshot), an End or Abort without a Begin is damage,
    as in MetadataBatchLoader."""
    out, dropped, pending = [], set(), []
    state, current, clean = None, object(), True

    def close():
        dropped.update(id(x) for x in pending)
        pending.clear()
    for pair in decoded:
        meta, d = pair
        if meta["file"] != current:
            close()
            current = meta["file"]
            # a snapshot starts clean; a log does where it starts at offset 0
            clean = str(meta["file"]).endswith(".checkpoint") or meta["record_offset"] == 0
            state = None if clean else "unknown"
        t = d["type"] if d["known"] else None
        name = meta["file"] or f"{meta['topic']}-{meta['partition']}"
        where = f"record at offset {meta['record_offset']}"
        if t == "BeginTransactionRecord":
            if state == "open":
                raise CorruptRecordError(f"{where}: a BeginTransactionRecord inside a "
                                         "transaction", path=name)
            if state == "unknown":          # what came before was outside a transaction
                out.extend(pending)
                pending.clear()
            state = "open"
        elif t in ("EndTransactionRecord", "AbortTransactionRecord"):
            if state is None:
                raise CorruptRecordError(f"{where}: an {t} without a BeginTransactionRecord",
                                         path=name)
            if t == "EndTransactionRecord":
                out.extend(pending)
                pending.clear()
            else:
                close()
            state = None
        elif state in ("open", "unknown"):
            pending.append(pair)
        else:
            out.append(pair)
    if state == "unknown":                  # no marker at all: as read
        out.extend(pending)
        pending.clear()
    close()
    return out, dropped


def _meta(meta: dict) -> dict:
    return {k: meta[k] for k in ("topic", "partition", "file", "record_offset",
                                 "record_timestamp")}


def _partitions_schema():
    import pyarrow as pa
    ints = pa.list_(pa.int32())
    return pa.schema([
        pa.field("topic_id", pa.string()), pa.field("topic_name", pa.string()),
        pa.field("partition_id", pa.int32()), pa.field("change", pa.string()),
        pa.field("leader", pa.int32()), pa.field("leader_epoch", pa.int32()),
        pa.field("partition_epoch", pa.int32()), pa.field("isr", ints),
        pa.field("replicas", ints), pa.field("removing_replicas", ints),
        pa.field("adding_replicas", ints), pa.field("eligible_leader_replicas", ints),
        pa.field("leader_recovery_state", pa.int8())] + record_meta_fields())


_STATE = ("leader", "isr", "replicas", "removing_replicas", "adding_replicas",
          "eligible_leader_replicas", "leader_recovery_state")


def _replay(decoded):
    """Rows of the topics and partitions tables."""
    topics, parts = [], []
    # topic ids are never reused: a name learnt anywhere (a snapshot) names
    # the topic's partitions everywhere (the log)
    names = {d["value"]["topic_id"]: d["value"]["name"] for _, d in decoded
             if d["type"] == "TopicRecord" and d["known"]}
    state: dict = {}
    current_file = object()
    for meta, d in decoded:
        if meta["file"] != current_file:
            current_file = meta["file"]
            state = {}
        v, t = d["value"], d["type"]
        if not d["known"]:
            continue
        if t == "TopicRecord":
            topics.append({"topic_id": v["topic_id"], "topic_name": v["name"], "removed": False,
                           **_meta(meta)})
        elif t == "RemoveTopicRecord":
            topics.append({"topic_id": v["topic_id"], "topic_name": names.get(v["topic_id"]),
                           "removed": True, **_meta(meta)})
        elif t == "PartitionRecord":
            key = (v["topic_id"], v["partition_id"])
            s = {k: v.get(k) for k in _STATE}
            s["leader_epoch"] = v["leader_epoch"]
            s["partition_epoch"] = v["partition_epoch"]
            state[key] = s
            parts.append({"topic_id": key[0], "topic_name": names.get(key[0]),
                          "partition_id": key[1], "change": "PartitionRecord", **s,
                          **_meta(meta)})
        elif t == "PartitionChangeRecord":
            key = (v["topic_id"], v["partition_id"])
            s = dict(state.get(key) or {k: None for k in _STATE})
            # the epochs are bumped by the controller, not recorded in the change
            s["leader_epoch"] = s["partition_epoch"] = None
            if v["leader"] != -2:
                s["leader"] = v["leader"]
            for k in ("isr", "replicas", "removing_replicas", "adding_replicas",
                      "eligible_leader_replicas"):
                if v.get(k) is not None:
                    s[k] = v[k]
            if v.get("leader_recovery_state") not in (None, -1):
                s["leader_recovery_state"] = v["leader_recovery_state"]
            state[key] = s
            parts.append({"topic_id": key[0], "topic_name": names.get(key[0]),
                          "partition_id": key[1], "change": "PartitionChangeRecord", **s,
                          **_meta(meta)})
    return topics, parts


def cluster_metadata(source, *, snapshots: bool = True, **options) -> ClusterMetadata:
    """``source``: a ``.log`` or ``.checkpoint`` file, the
    ``__cluster_metadata-0`` directory (its log and, with ``snapshots``, each
    ``.checkpoint`` file) or a broker/controller data directory. Memory
    held: every decoded record of the source."""
    import pyarrow as pa
    every = list(iter_decoded(source, "metadata", snapshots=snapshots, **options))
    decoded, left_out = applied(every)
    unread = [(meta, d) for meta, d in every if not d["known"]]
    if unread:
        log.warning("kbatch: %d __cluster_metadata record(s) no schema reads (a newer version, "
                    "or damage): the state tables lack what they changed (ClusterMetadata.unread)",
                    len(unread))
    topics, parts = _replay(decoded)
    topics_schema = pa.schema([pa.field("topic_id", pa.string()),
                               pa.field("topic_name", pa.string()),
                               pa.field("removed", pa.bool_())] + record_meta_fields())
    configs = typed_table(decoded, "metadata", "ConfigRecord")
    configs = configs.append_column("resource", pa.array(
        [RESOURCE_TYPES.get(x, str(x)) for x in configs.column("resource_type").to_pylist()],
        pa.string()))
    records = records_table(every, "metadata")
    records = records.append_column("uncommitted", pa.array(
        [id(pair) in left_out for pair in every], pa.bool_()))
    return ClusterMetadata(
        records=records,
        topics=pa.Table.from_pylist(topics, schema=topics_schema),
        partitions=pa.Table.from_pylist(parts, schema=_partitions_schema()),
        configs=configs,
        brokers=typed_table(decoded, "metadata", "RegisterBrokerRecord"),
        features=typed_table(decoded, "metadata", "FeatureLevelRecord"),
        unread=records_table(unread, "metadata"),
    )
