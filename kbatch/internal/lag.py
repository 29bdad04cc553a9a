"""Consumer lag over time, from a broker data directory (or a backup).

For every offset commit in ``__consumer_offsets`` of a partition whose data
is in the directory, the log end offset *at the commit's time*: the offset
after the last batch appended by then. Batches are known from a walk over
their headers (records are not decoded); a batch counts as appended once
the largest batch timestamp so far (a running maximum, since CreateTime is
not monotonic) is at or before the commit time. So the lag is exact for
LogAppendTime topics and for producers whose clocks agree with the broker's,
and an estimate otherwise (never below the committed offset, when the log
holds it: the group read those records, so they were appended). Memory
held: the offset commits and one row per batch of one partition at a time.

A committed offset above the partition's log end (a topic deleted and
recreated, a truncated or partly copied log) has no lag: ``lag`` is null and
``reason`` says why (``committed_beyond_log_end``; ``log_end_unknown`` for a
partition here without segments). The data directory may be local or in
object storage (storage keywords as ``kbatch.open_log``).
"""

from __future__ import annotations

import numpy as np

from kbatch.lib.log import PartitionLog
from kbatch.lib.open import resolve
from kbatch.lib.paths import PathKind
from kbatch.lib.plan import log_end_offset
from kbatch.lib.storage import Storage

BEYOND, UNKNOWN = "committed_beyond_log_end", "log_end_unknown"


def end_offsets_at(log: PartitionLog, times_ms: np.ndarray) -> np.ndarray:
    """Log end offset at each time (ms); the first batch's base offset
    before anything was appended; for a log without batches, its last
    segment's base offset (-1 without segments)."""
    parts = [s.batch_bounds() for s in log.segments]
    parts = [p for p in parts if len(p)]
    if not parts:
        end = log.segments[-1].base_offset if log.segments else -1
        return np.full(len(times_ms), end, np.int64)
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
                      ("reason", pa.string()), ("record_offset", pa.int64()),
                      ("current", pa.bool_())])


def consumer_lag(data_dir, *, groups=None, absent: bool = False, **storage):
    """Per group, topic and partition, each committed offset over time beside
    the log end offset at that time, as a ``pyarrow.Table`` sorted by group,
    topic, partition and commit time: ``group, topic, partition,
    commit_timestamp, committed_offset, log_end_offset, lag`` (never below
    0; null when the commit is beyond the log end or the log end is
    unknown) ``, reason`` (why ``lag`` is null: ``committed_beyond_log_end``,
    ``log_end_unknown``) ``, record_offset`` (of the commit record),
    ``current`` (the group's live offset, as the group coordinator replays
    the commits: ``live_commits``; transactional commits count once their
    transaction commits). Tombstones, undecodable records and transactional
    commits that were aborted or are still open are left out, and so are
    partitions whose data is not in ``data_dir``
    (``absent=True``: only those, with null log end and lag: what
    ``commits_without_data`` lists). ``groups``: only these group names."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from kbatch.internal.offsets import offset_commits
    found = resolve(data_dir, Storage.of(**storage))
    here = ({} if found.kind is PathKind.SEGMENT else
            {(p.topic, p.partition): p for p in found.partitions()})
    commits = offset_commits(found)
    commits = commits.filter(pc.is_null(commits.column("error")))
    commits = commits.append_column("current", pa.array(live_commits(commits)))
    # a transactional commit aborted, or still open, never took effect
    took = pc.fill_null(pc.equal(commits.column("transaction"), "committed"), True)
    keep = pc.and_(pc.invert(commits.column("tombstone")), took)
    if groups is not None:
        keep = pc.and_(keep, pc.is_in(commits.column("group"), pa.array(list(groups), pa.string())))
    commits = commits.filter(keep).select(["group", "topic", "partition", "commit_timestamp",
                                           "committed_offset", "record_offset", "current"])
    if not len(commits):
        return lag_schema().empty_table()
    commit_ms = commits.column("commit_timestamp").cast(pa.int64()).to_numpy(zero_copy_only=False)
    topics = commits.column("topic").to_pylist()
    partitions = commits.column("partition").to_numpy(zero_copy_only=False)
    committed = commits.column("committed_offset").to_numpy(zero_copy_only=False)
    leo = np.full(len(commits), -1, np.int64)
    final = np.full(len(commits), -1, np.int64)      # the partition's log end now
    present = np.zeros(len(commits), bool)
    keys = {}
    for i, key in enumerate(zip(topics, partitions.tolist())):
        keys.setdefault(key, []).append(i)
    for key, rows in keys.items():
        if key not in here:
            continue
        rows = np.asarray(rows)
        present[rows] = True
        log = PartitionLog.at(here[key], found.storage)
        leo[rows] = end_offsets_at(log, commit_ms[rows])
        final[rows] = log_end_offset(log.segments, False) if log.segments else -1
    if absent:
        return _absent(commits, ~present)
    unknown = final < 0
    beyond = ~unknown & (committed > final)
    # what the group read was appended by the time it committed
    leo = np.where(~unknown & ~beyond, np.maximum(leo, committed), leo)
    lag = np.maximum(leo - committed, 0)
    reason = np.where(unknown, UNKNOWN, np.where(beyond, BEYOND, None))
    table = commits.append_column("log_end_offset", pa.array(leo, mask=unknown)) \
                   .append_column("lag", pa.array(lag, mask=unknown | beyond)) \
                   .append_column("reason", pa.array(reason.tolist(), pa.string()))
    table = table.filter(pa.array(present)).select(lag_schema().names).cast(lag_schema())
    return table.sort_by([("group", "ascending"), ("topic", "ascending"),
                          ("partition", "ascending"), ("commit_timestamp", "ascending"),
                          ("record_offset", "ascending")])


def live_commits(commits) -> np.ndarray:
    """bool per row of ``offset_commits``: the group's live offset for its
    partition, as the group coordinator's replay leaves it
    (``OffsetMetadataManager.replay``/``replayEndTransactionMarker``). A
    key's records all lie in one offsets partition; in offset order, with
    each transaction marker at its offset: an ordinary commit is the live
    one; a transactional commit waits for its producer's marker (the last
    of a producer's commits for the key before it counts); COMMIT makes
    it live when its record offset is above the live one's (a later
    ordinary commit keeps its place), ABORT drops it; a tombstone deletes
    the live offset and every commit still waiting; an open transaction
    never counts. Keeps in memory one list of events per key."""
    cols = {n: commits.column(n).to_pylist() for n in (
        "group", "topic", "partition", "tombstone", "record_offset", "producer_id",
        "transaction", "transaction_end")}
    events: dict[tuple, list] = {}
    for i, key in enumerate(zip(cols["group"], cols["topic"], cols["partition"])):
        at = events.setdefault(key, [])
        at.append((cols["record_offset"][i], 0, i))
        if cols["transaction"][i] in ("committed", "aborted"):
            at.append((cols["transaction_end"][i], 1, i))
    live = np.zeros(len(commits), bool)
    for at in events.values():
        current, waiting, ended = None, {}, set()
        for offset, kind, i in sorted(at):
            pid = cols["producer_id"][i]
            if kind == 1:                     # the marker of i's transaction
                if (offset, pid) in ended:
                    continue                  # one marker ends all of its commits
                ended.add((offset, pid))
                row = waiting.pop(pid, None)
                if row is not None and cols["transaction"][row] == "committed" and (
                        current is None
                        or cols["record_offset"][row] > cols["record_offset"][current]):
                    current = row
            elif cols["tombstone"][i]:
                current, waiting = None, {}
            elif cols["transaction"][i] is not None:
                waiting[pid] = i
            else:
                current = i
        if current is not None:
            live[current] = True
    return live


def _absent(commits, rows: np.ndarray):
    """The commits of ``rows`` (partitions not in the directory), in the lag
    table's columns with null log end and lag."""
    import pyarrow as pa
    part = commits.filter(pa.array(rows))
    n = len(part)
    table = part.append_column("log_end_offset", pa.nulls(n, pa.int64())) \
                .append_column("lag", pa.nulls(n, pa.int64())) \
                .append_column("reason", pa.nulls(n, pa.string()))
    return table.select(lag_schema().names).cast(lag_schema()).sort_by(
        [("group", "ascending"), ("topic", "ascending"), ("partition", "ascending"),
         ("commit_timestamp", "ascending")])


def commits_without_data(data_dir, *, groups=None, **storage) -> dict[str, list[str]]:
    """``{group: sorted topics}`` of the groups that committed offsets for
    partitions whose data is not in ``data_dir`` (other brokers' partitions,
    deleted topics, a partial copy): what ``kbatch lag`` names."""
    table = latest_lag(consumer_lag(data_dir, groups=groups, absent=True, **storage))
    out: dict[str, set] = {}
    for group, topic in zip(table.column("group").to_pylist(), table.column("topic").to_pylist()):
        out.setdefault(group, set()).add(topic)
    return {g: sorted(t) for g, t in sorted(out.items())}


def latest_lag(lag_table):
    """The live offset of each (group, topic, partition) of ``consumer_lag``:
    its ``current`` rows (partitions whose offsets were deleted drop out)."""
    return lag_table.filter(lag_table.column("current"))
