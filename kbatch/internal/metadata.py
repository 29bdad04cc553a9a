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
"""

from __future__ import annotations

from dataclasses import dataclass

from kbatch.internal.tables import iter_decoded, record_meta_fields, records_table, typed_table

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

    def __repr__(self) -> str:
        return ("ClusterMetadata(" + ", ".join(
            f"{k}={len(getattr(self, k))} rows" for k in
            ("records", "topics", "partitions", "configs", "brokers", "features")) + ")")


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
    decoded = list(iter_decoded(source, "metadata", snapshots=snapshots, **options))
    topics, parts = _replay(decoded)
    topics_schema = pa.schema([pa.field("topic_id", pa.string()),
                               pa.field("topic_name", pa.string()),
                               pa.field("removed", pa.bool_())] + record_meta_fields())
    configs = typed_table(decoded, "metadata", "ConfigRecord")
    configs = configs.append_column("resource", pa.array(
        [RESOURCE_TYPES.get(x, str(x)) for x in configs.column("resource_type").to_pylist()],
        pa.string()))
    return ClusterMetadata(
        records=records_table(decoded, "metadata"),
        topics=pa.Table.from_pylist(topics, schema=topics_schema),
        partitions=pa.Table.from_pylist(parts, schema=_partitions_schema()),
        configs=configs,
        brokers=typed_table(decoded, "metadata", "RegisterBrokerRecord"),
        features=typed_table(decoded, "metadata", "FeatureLevelRecord"),
    )
