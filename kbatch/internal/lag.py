"""Consumer lag over time, from a broker data directory (or a backup).

For every offset commit in ``__consumer_offsets`` of a partition whose data
is in the directory, the log end offset *at the commit's time*: the offset
after the last batch appended by then. Batches are known from a walk over
their headers (records are not decoded); a batch counts as appended once
the largest batch timestamp so far (a running maximum, since CreateTime is
not monotonic) is at or before the commit time. So the lag is exact for
LogAppendTime topics and for producers whose clocks agree with the broker's,
and an estimate otherwise. Memory held: the offset commits and one row per
batch of one partition at a time.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from kbatch.lib.log import PartitionLog


def end_offsets_at(log: PartitionLog, times_ms: np.ndarray) -> np.ndarray:
    """Log end offset at each time (ms); the first batch's base offset
    before anything was appended; -1 for an empty log."""
    parts = [s.batch_bounds() for s in log.segments]
    parts = [p for p in parts if len(p)]
    if not parts:
        return np.full(len(times_ms), -1, np.int64)
    bounds = np.concatenate(parts)
    appended_by = np.maximum.accumulate(bounds["max_timestamp"])
    ends = bounds["last_offset"] + 1
    k = np.searchsorted(appended_by, times_ms, side="right")
    return np.where(k > 0, ends[np.maximum(k - 1, 0)], bounds["base_offset"][0])


def lag_schema():
    import pyarrow as pa
    ts = pa.timestamp("ms", tz="UTC")
    return pa.schema([("group", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
                      ("commit_timestamp", ts), ("committed_offset", pa.int64()),
                      ("log_end_offset", pa.int64()), ("lag", pa.int64()),
                      ("record_offset", pa.int64()), ("current", pa.bool_())])


def consumer_lag(data_dir, *, groups=None):
    """Per group, topic and partition, each committed offset over time beside
    the log end offset at that time, as a ``pyarrow.Table`` sorted by group,
    topic, partition and commit time: ``group, topic, partition,
    commit_timestamp, committed_offset, log_end_offset, lag`` (never below
    0) ``, record_offset`` (of the commit record), ``current`` (the group's
    live offset: its last commit for the partition, not deleted by a later
    tombstone). Tombstones, undecodable records and partitions whose data is
    not in ``data_dir`` are left out. ``groups``: only these group names."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from kbatch.internal.offsets import offset_commits
    root = Path(os.fspath(data_dir))
    commits = offset_commits(root)
    commits = commits.filter(pc.is_null(commits.column("error")))
    # a key's records all lie in one offsets partition, in record order
    last = {}
    for i, key in enumerate(zip(commits.column("group").to_pylist(),
                                commits.column("topic").to_pylist(),
                                commits.column("partition").to_pylist())):
        last[key] = i
    current = np.zeros(len(commits), bool)
    current[list(last.values())] = True
    commits = commits.append_column("current", pa.array(current))
    keep = pc.invert(commits.column("tombstone"))
    if groups is not None:
        keep = pc.and_(keep, pc.is_in(commits.column("group"), pa.array(list(groups), pa.string())))
    commits = commits.filter(keep).select(["group", "topic", "partition", "commit_timestamp",
                                           "committed_offset", "record_offset", "current"])
    if not len(commits):
        return lag_schema().empty_table()
    commit_ms = commits.column("commit_timestamp").cast(pa.int64()).to_numpy(zero_copy_only=False)
    topics = commits.column("topic").to_pylist()
    partitions = commits.column("partition").to_numpy(zero_copy_only=False)
    leo = np.full(len(commits), -1, np.int64)
    keys = {}
    for i, key in enumerate(zip(topics, partitions.tolist())):
        keys.setdefault(key, []).append(i)
    for (topic, part), rows in keys.items():
        d = root / f"{topic}-{part}"
        if not d.is_dir():
            continue
        rows = np.asarray(rows)
        leo[rows] = end_offsets_at(PartitionLog(d), commit_ms[rows])
    have = leo >= 0
    committed = commits.column("committed_offset").to_numpy(zero_copy_only=False)
    lag = np.maximum(leo - committed, 0)
    table = commits.append_column("log_end_offset", pa.array(leo)) \
                   .append_column("lag", pa.array(lag))
    table = table.filter(pa.array(have)).select(lag_schema().names).cast(lag_schema())
    return table.sort_by([("group", "ascending"), ("topic", "ascending"),
                          ("partition", "ascending"), ("commit_timestamp", "ascending"),
                          ("record_offset", "ascending")])


def latest_lag(lag_table):
    """The live offset of each (group, topic, partition) of ``consumer_lag``:
    its ``current`` rows (partitions whose offsets were deleted drop out)."""
    return lag_table.filter(lag_table.column("current"))
