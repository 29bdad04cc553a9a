"""The internal topics of the sample broker directory (``kbatch sample``).

Written after the data partitions, from what they hold:

    __consumer_offsets-N   consumer groups as a broker writes them: group
                           metadata (consumer protocol subscriptions and
                           assignments), offset commits every few minutes
                           with lag that grows and shrinks, a KIP-848 group
                           (ConsumerGroup* records), an old group whose
                           offsets expired (v1 values, tombstones)
    __transaction_state-N  the payments producers' transactional ids and
                           their state changes
    __cluster_metadata-0   a KRaft metadata log: features, the broker, the
                           topics and partitions, configs, ISR changes

Records are encoded by ``kbatch.internal.encode`` from the schema tables.
The group's partition is Kafka's: ``abs(java hashCode(group)) % 50``.
"""

from __future__ import annotations

import base64
import struct
from pathlib import Path

import numpy as np

from kbatch.internal.encode import coordinator_record, encode, metadata_record
from kbatch.internal.lag import end_offsets_at
from kbatch.lib.log import PartitionLog
from kbatch.lib.writer import LogWriter

OFFSETS_PARTITIONS = 50
STEP_MS = 5 * 60 * 1000


def java_hash(text: str) -> int:
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def offsets_partition(group: str) -> int:
    return (java_hash(group) & 0x7FFFFFFF) % OFFSETS_PARTITIONS


def _uuid(rng) -> str:
    return base64.urlsafe_b64encode(rng.bytes(16)).rstrip(b"=").decode()


def _subscription(topics: list[str], owned: dict[str, list[int]]) -> bytes:
    return struct.pack(">h", 1) + encode("ConsumerProtocolSubscription", 1, {
        "topics": topics, "user_data": None,
        "owned_partitions": [{"topic": t, "partitions": p} for t, p in owned.items()]})


def _assignment(assigned: dict[str, list[int]]) -> bytes:
    return struct.pack(">h", 1) + encode("ConsumerProtocolAssignment", 1, {
        "assigned_partitions": [{"topic": t, "partitions": p} for t, p in assigned.items()],
        "user_data": None})


def _lag_curve(n: int, peak: int, centre: float, rng) -> np.ndarray:
    """Lag that builds up during an incident and drains after it."""
    x = np.linspace(0, 1, n)
    bump = np.exp(-((x - centre) / 0.08) ** 2) * peak
    return (bump + rng.integers(0, max(peak // 50, 2), n)).astype(np.int64)


class _Offsets:
    """Records per ``__consumer_offsets`` partition, in time order at the end."""

    def __init__(self):
        self.rows: dict[int, list] = {}

    def add(self, group: str, record: tuple, ts: int) -> None:
        self.rows.setdefault(offsets_partition(group), []).append((record[0], record[1], ts))


def _classic_group(out: _Offsets, root: Path, group: str, topic: str, partitions: int,
                   start: int, end: int, peak: int, rng) -> None:
    members = [f"consumer-{group}-{i}-{_uuid(rng)[:8]}" for i in range(2)]
    owned = {m: list(range(i, partitions, 2)) for i, m in enumerate(members)}
    value = {"protocol_type": "consumer", "generation": 1, "protocol": "range",
             "leader": members[0], "current_state_timestamp": start,
             "members": [{"member_id": m, "group_instance_id": None,
                          "client_id": f"{group}-client", "client_host": f"/10.0.0.{i + 11}",
                          "rebalance_timeout": 300000, "session_timeout": 45000,
                          "subscription": _subscription([topic], {topic: owned[m]}),
                          "assignment": _assignment({topic: owned[m]})}
                         for i, m in enumerate(members)]}
    out.add(group, coordinator_record("GroupMetadataKey", 2, {"group": group},
                                      "GroupMetadataValue", 3, value), start)
    times = np.arange(start + STEP_MS, end + STEP_MS, STEP_MS, dtype=np.int64)
    incident = rng.uniform(0.35, 0.65)          # the group's slow hour, all partitions
    for p in range(partitions):
        leo = end_offsets_at(PartitionLog(root / f"{topic}-{p}"), times)
        curve = _lag_curve(len(times), int(peak * rng.uniform(0.6, 1.0)),
                           incident + rng.uniform(-0.02, 0.02), rng)
        committed = np.maximum.accumulate(np.maximum(leo - curve, 0))
        for t, c in zip(times.tolist(), committed.tolist()):
            out.add(group, coordinator_record(
                "OffsetCommitKey", 1, {"group": group, "topic": topic, "partition": p},
                "OffsetCommitValue", 3, {"offset": c, "leader_epoch": 3, "metadata": "",
                                         "commit_timestamp": t}), t)


def _expired_group(out: _Offsets, group: str, start: int) -> None:
    for p in range(2):
        key = {"group": group, "topic": "payments", "partition": p}
        out.add(group, coordinator_record("OffsetCommitKey", 1, key, "OffsetCommitValue", 1,
                                          {"offset": 100 * (p + 1), "metadata": "batch-7",
                                           "commit_timestamp": start,
                                           "expire_timestamp": start + 3600_000}), start)
        out.add(group, coordinator_record("OffsetCommitKey", 1, key, None, 0, None),
                start + 3600_000)
    out.add(group, coordinator_record("GroupMetadataKey", 2, {"group": group}, None, 0, None),
            start + 3600_001)


def _kip848_group(out: _Offsets, root: Path, group: str, topic: str, topic_id: str,
                  start: int, end: int, rng) -> None:
    member = f"{_uuid(rng)}"
    recs = [
        coordinator_record("ConsumerGroupMetadataKey", 3, {"group_id": group},
                           "ConsumerGroupMetadataValue", 0, {"epoch": 4}),
        coordinator_record("ConsumerGroupMemberMetadataKey", 5,
                           {"group_id": group, "member_id": member},
                           "ConsumerGroupMemberMetadataValue", 0,
                           {"instance_id": None, "rack_id": "eu-west-1a",
                            "client_id": f"{group}-client", "client_host": "/10.0.0.40",
                            "subscribed_topic_names": [topic], "subscribed_topic_regex": None,
                            "rebalance_timeout_ms": 300000, "server_assignor": "uniform"}),
        coordinator_record("ConsumerGroupTargetAssignmentMemberKey", 7,
                           {"group_id": group, "member_id": member},
                           "ConsumerGroupTargetAssignmentMemberValue", 0,
                           {"topic_partitions": [{"topic_id": topic_id, "partitions": [0]}]}),
        coordinator_record("ConsumerGroupCurrentMemberAssignmentKey", 8,
                           {"group_id": group, "member_id": member},
                           "ConsumerGroupCurrentMemberAssignmentValue", 0,
                           {"member_epoch": 4, "previous_member_epoch": 3, "state": 0,
                            "assigned_partitions": [{"topic_id": topic_id, "partitions": [0]}],
                            "partitions_pending_revocation": []}),
        coordinator_record("OffsetCommitKey", 1, {"group": group, "topic": topic, "partition": 0},
                           "OffsetCommitValue", 4, {"offset": 0, "leader_epoch": 3,
                                                    "metadata": "", "commit_timestamp": start}),
    ]
    for i, r in enumerate(recs):
        out.add(group, r, start + i)
    # then it commits every step, a little behind the log end (its data is
    # stamped by the broker, LogAppendTime: the lag is exact)
    times = np.arange(start + STEP_MS, end + STEP_MS, STEP_MS, dtype=np.int64)
    leo = end_offsets_at(PartitionLog(root / f"{topic}-0"), times)
    behind = rng.integers(5, 60, len(times))
    committed = np.maximum.accumulate(np.maximum(leo - behind, 0))
    for t, c in zip(times.tolist(), committed.tolist()):
        out.add(group, coordinator_record(
            "OffsetCommitKey", 1, {"group": group, "topic": topic, "partition": 0},
            "OffsetCommitValue", 4, {"offset": c, "leader_epoch": 3, "metadata": "",
                                     "commit_timestamp": t}), t)


def _transactions(root: Path, producers: list[int], start: int, end: int, rng) -> int:
    """``__transaction_state``: a few state changes per transactional id."""
    rows: dict[int, list] = {}
    for pid in producers:
        tid = f"payments-tx-{pid}"
        part = (java_hash(tid) & 0x7FFFFFFF) % OFFSETS_PARTITIONS
        t = start
        for txn in range(int(rng.integers(4, 8))):
            for status, parts in ((0 if txn == 0 else 4, []), (1, [0, 1]), (2, [0, 1]),
                                  (4, [])):
                value = {"producer_id": pid, "producer_epoch": 0,
                         "transaction_timeout_ms": 60000, "transaction_status": status,
                         "transaction_partitions": [{"topic": "payments",
                                                     "partition_ids": parts}] if parts else [],
                         "transaction_last_update_timestamp_ms": t,
                         "transaction_start_timestamp_ms": t if status in (1, 2) else -1}
                k, v = coordinator_record("TransactionLogKey", 0, {"transactional_id": tid},
                                          "TransactionLogValue", 0, value)
                rows.setdefault(part, []).append((k, v, t))
                t += int(rng.integers(1, (end - start) // 40))
    n = 0
    for part, recs in rows.items():
        recs.sort(key=lambda r: r[2])
        with LogWriter(root / f"__transaction_state-{part}", batch_records=50) as log:
            log.append([(k, v, t) for k, v, t in recs])
        n += len(recs)
    return n


def _metadata(root: Path, topics: dict[str, tuple[int, str]], start: int, rng) -> int:
    recs = [metadata_record("FeatureLevelRecord", 0, {"name": "metadata.version",
                                                       "feature_level": 20}),
            metadata_record("RegisterBrokerRecord", 3, {
                "broker_id": 1, "incarnation_id": _uuid(rng), "broker_epoch": 5,
                "end_points": [{"name": "PLAINTEXT", "host": "localhost", "port": 9092,
                                "security_protocol": 0}],
                "features": [{"name": "metadata.version", "min_supported_version": 1,
                              "max_supported_version": 20}],
                "rack": None, "fenced": False, "in_controlled_shutdown": False})]
    for topic, (partitions, topic_id) in topics.items():
        recs.append(metadata_record("TopicRecord", 0, {"name": topic, "topic_id": topic_id}))
        for p in range(partitions):
            recs.append(metadata_record("PartitionRecord", 1, {
                "partition_id": p, "topic_id": topic_id, "replicas": [1], "isr": [1],
                "removing_replicas": [], "adding_replicas": [], "leader": 1,
                "leader_epoch": 3, "partition_epoch": 3,
                "directories": [_uuid(rng)]}))
    recs.append(metadata_record("ConfigRecord", 0, {"resource_type": 2, "resource_name": "orders",
                                                    "name": "compression.type",
                                                    "value": "zstd"}))
    recs.append(metadata_record("PartitionChangeRecord", 0, {
        "partition_id": 0, "topic_id": topics["payments"][1], "isr": [1], "leader": 1}))
    with LogWriter(root / "__cluster_metadata-0", batch_records=20) as log:
        log.append([(None, v, start + i) for i, v in enumerate(recs)])
    return len(recs)


def write_internal_topics(root, data_topics: dict[str, int], start_ms: int, end_ms: int,
                          seed: int = 7) -> dict[str, int]:
    """Write the internal topics beside the data partitions already in
    ``root`` (``data_topics``: topic -> partitions); returns records per
    internal partition directory."""
    root = Path(root)
    rng = np.random.default_rng(seed + 1000)
    topic_ids = {t: (n, _uuid(rng)) for t, n in data_topics.items()}
    offsets = _Offsets()
    _classic_group(offsets, root, "order-service", "orders", data_topics["orders"],
                   start_ms, end_ms, 1500, rng)
    _classic_group(offsets, root, "analytics", "page-views", data_topics["page-views"],
                   start_ms, end_ms, 9000, rng)
    _expired_group(offsets, "nightly-batch", start_ms)
    _kip848_group(offsets, root, "inventory-sync", "inventory.events-v2",
                  topic_ids["inventory.events-v2"][1], start_ms, end_ms, rng)
    written = {}
    for part, rows in offsets.rows.items():
        rows.sort(key=lambda r: r[2])
        name = f"__consumer_offsets-{part}"
        with LogWriter(root / name, batch_records=100) as log:
            log.append([(k, v, t) for k, v, t in rows])
        written[name] = len(rows)
    producers = [2001 + 10 * p + i for p in range(data_topics["payments"]) for i in (0, 1)]
    written["__transaction_state"] = _transactions(root, producers, start_ms, end_ms, rng)
    written["__cluster_metadata-0"] = _metadata(root, topic_ids, start_ms, rng)
    return written
