"""What a broker knows: internal topics, producer state and checkpoints as tables.

    offset_commits(source)        __consumer_offsets offset commits
    group_metadata(source)        classic group metadata, members, consumer protocol
    group_records(source, type)   KIP-848 / share group records, typed
    transaction_log(source)       __transaction_state
    transactional_ids(source)     producer id -> transactional id
    producer_ids(transaction_log) each transactional id's producer ids, linked (KIP-890)
    cluster_metadata(source)      __cluster_metadata log and .checkpoint snapshots
    remote_log_metadata(source)   __remote_log_metadata (tiered storage segment states)
    share_state(source)           __share_group_state
    records(source, family)       any of these, every record, fields as JSON
    record_counts(source, family) rows per (type, version)
    producer_snapshot(path)       producer-state .snapshot files
    checkpoints(data_dir)         high watermarks, log start, recovery points, epochs
    visible_ranges(data_dir)      what a consumer could fetch, per partition
    consumer_lag(data_dir)        committed offset vs log end offset over time

``source``: a segment file, a partition directory or a broker data
directory. Every table is a ``pyarrow.Table`` with the record's own offset
and timestamp beside the decoded fields. The schemas are data
(``_schemas.py``, generated from Kafka's JSON message specs); record types
or versions no schema knows come out raw, with their type and version.
"""

from kbatch.lib.checkpoints import checkpoints, read_checkpoint
from kbatch.internal.lag import consumer_lag, latest_lag
from kbatch.internal.metadata import ClusterMetadata, cluster_metadata
from kbatch.internal.offsets import group_metadata, group_records, offset_commits
from kbatch.internal.producer_ids import producer_ids
from kbatch.internal.remote import remote_log_metadata, share_state
from kbatch.internal.snapshot import producer_snapshot, read_producer_snapshot
from kbatch.internal.tables import record_counts, records, typed_records
from kbatch.internal.transactions import transaction_log, transactional_ids
from kbatch.lib.visibility import visible_ranges

__all__ = [
    "ClusterMetadata", "checkpoints", "cluster_metadata", "consumer_lag", "group_metadata",
    "group_records", "latest_lag", "offset_commits", "producer_ids", "producer_snapshot", "read_checkpoint",
    "read_producer_snapshot", "record_counts", "records", "remote_log_metadata",
    "share_state", "transaction_log", "transactional_ids", "typed_records", "visible_ranges",
]
