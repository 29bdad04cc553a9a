"""A realistic broker data directory, for ``make run``, demos and benchmarks.

    orders-0..2            lz4 then zstd (a config change), idempotent producer,
                           2 headers per record, skewed customer keys
    page-views-0..3        snappy and uncompressed, the bulk of the data,
                           Zipf-skewed page keys, some null keys
    payments-0..1          gzip, two transactional producers, committed and
                           aborted transactions interleaved
    inventory.events-v2-0  LogAppendTime, tombstones (null values)
    __consumer_offsets-N   consumer groups committing offsets (with lag), group metadata
    __transaction_state-N  the payments producers' transactional ids
    __cluster_metadata-0   a KRaft metadata log (kbatch.internal.sample_topics)

Segments roll at ``segment_bytes`` (1 MiB: several per partition) with their
indexes; the directory also holds the broker's checkpoint files. The values
are JSON-like text; keys are assigned to partitions by a hash, as a producer
would. Everything is deterministic for a given seed.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kbatch.lib.writer import LogWriter

START_MS = 1_793_577_600_000          # 2026-11-02T00:00:00Z


@dataclass
class SampleSummary:
    """What was written: records per partition, and what read_committed keeps."""

    directory: str
    records: dict = field(default_factory=dict)     # "topic-p" -> data records
    committed: dict = field(default_factory=dict)   # "topic-p" -> read_committed records
    internal: dict = field(default_factory=dict)    # internal topic dir -> records

    @property
    def total(self) -> int:
        return sum(self.records.values())


def _partition_of(keys: list, partitions: int, rng: np.random.Generator) -> np.ndarray:
    out = np.empty(len(keys), np.int64)
    for i, k in enumerate(keys):
        out[i] = (zlib.crc32(k) % partitions) if k is not None else rng.integers(partitions)
    return out


def _timestamps(rng: np.random.Generator, n: int, span_ms: int) -> np.ndarray:
    """Increasing with jitter: CreateTime is not monotonic in a real log."""
    base = START_MS + np.sort(rng.integers(0, span_ms, n))
    return base + rng.integers(-500, 500, n)


def _orders(rng, n):
    customers = rng.zipf(1.4, n) % 50_000
    keys = [b"customer-%05d" % c for c in customers]
    amounts = rng.integers(100, 50_000, n)
    items = rng.integers(1, 9, n)
    values = [b'{"order_id":%d,"customer":"c%05d","amount":%d.%02d,"currency":"EUR","items":%d,'
              b'"status":"%s"}' % (1_000_000 + i, c, a // 100, a % 100, it,
                                   (b"placed", b"paid", b"shipped")[i % 3])
              for i, (c, a, it) in enumerate(zip(customers.tolist(), amounts.tolist(),
                                                 items.tolist()))]
    headers = [[("trace-id", b"%016x" % t), ("source", b"checkout-service")]
               for t in rng.integers(0, 2**63, n).tolist()]
    return keys, values, headers


def _page_views(rng, n):
    pages = rng.zipf(1.2, n) % 2_000
    users = rng.integers(0, 200_000, n)
    keys = [None if u % 17 == 0 else b"/page/%d" % p for p, u in zip(pages.tolist(), users.tolist())]
    values = [b'{"user":%d,"page":"/page/%d","ms":%d,"agent":"%s"}'
              % (u, p, d, (b"web", b"ios", b"android")[u % 3])
              for u, p, d in zip(users.tolist(), pages.tolist(),
                                 rng.integers(5, 9_000, n).tolist())]
    return keys, values, None


def _payments(rng, n):
    accounts = rng.zipf(1.6, n) % 5_000
    keys = [b"acct-%04d" % a for a in accounts.tolist()]
    values = [b'{"payment":%d,"account":%d,"cents":%d}' % (i, a, c)
              for i, (a, c) in enumerate(zip(accounts.tolist(),
                                             rng.integers(1, 10**6, n).tolist()))]
    headers = [[("idempotency-key", b"%012x" % x)] for x in rng.integers(0, 2**48, n).tolist()]
    return keys, values, headers


def _inventory(rng, n):
    skus = rng.integers(0, 3_000, n)
    keys = [b"sku-%04d" % s for s in skus.tolist()]
    values = [None if q == 0 else b'{"sku":%d,"qty":%d}' % (s, q)
              for s, q in zip(skus.tolist(), rng.integers(0, 40, n).tolist())]
    return keys, values, None


def _select(items, rows):
    return None if items is None else [items[i] for i in rows]


def write_sample(directory, *, records: int = 1_500_000, seed: int = 7,
                 segment_bytes: int = 1 << 20, internal: bool = True) -> SampleSummary:
    """Write the sample broker data directory; returns what it holds
    (``internal``: with the internal topics, see the module docstring)."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    summary = SampleSummary(str(root))
    share = {"page-views": 0.46, "orders": 0.30, "payments": 0.17, "inventory.events-v2": 0.07}
    plan = {  # topic: (partitions, generator)
        "page-views": (4, _page_views), "orders": (3, _orders),
        "payments": (2, _payments), "inventory.events-v2": (1, _inventory)}
    checkpoints = []
    for topic, (partitions, make) in plan.items():
        n = int(records * share[topic])
        keys, values, headers = make(rng, n)
        stamps = _timestamps(rng, n, 6 * 3600 * 1000)
        parts = _partition_of(keys, partitions, rng)
        for p in range(partitions):
            rows = np.flatnonzero(parts == p)
            cols = {"key": _select(keys, rows), "value": _select(values, rows),
                    "timestamp": stamps[rows], "headers": _select(headers, rows)}
            name = f"{topic}-{p}"
            written, kept, end = _write_partition(root / name, topic, p, cols, rng, segment_bytes)
            summary.records[name] = written
            summary.committed[name] = kept
            checkpoints.append((topic, p, end))
    if internal:
        from kbatch.internal.sample_topics import write_internal_topics
        span = 6 * 3600 * 1000
        summary.internal = write_internal_topics(
            root, {t: n for t, (n, _) in plan.items()}, START_MS, START_MS + span, seed)
        checkpoints += _internal_ends(root)
    _broker_files(root, checkpoints)
    return summary


def _write_partition(path: Path, topic: str, partition: int, cols: dict, rng,
                     segment_bytes: int) -> tuple[int, int, int]:
    """Returns (records written, records a read_committed reader sees, next offset)."""
    n = len(cols["value"])
    take = lambda a, b: {k: (v[a:b] if v is not None else None) for k, v in cols.items()}  # noqa: E731
    with LogWriter(path, codec="none", segment_bytes=segment_bytes, batch_records=500,
                   partition_leader_epoch=3) as log:
        if topic == "orders":
            half = n // 2
            log.append(take(0, half), producer_id=1001 + partition, codec="lz4")
            log.append(take(half, n), producer_id=1001 + partition, codec="zstd")
            return n, n, log.next_offset
        if topic == "page-views":
            third = n // 3
            log.append(take(0, third), codec="none")
            log.append(take(third, n), codec="snappy")
            return n, n, log.next_offset
        if topic == "inventory.events-v2":
            # LogAppendTime: the broker stamps each append; here in 24 appends over
            # the sample's six hours, each stamped with its records' latest time
            # (deterministic: the consumer-lag demo does not depend on the clock)
            step = max(1, -(-n // 24))
            for a in range(0, n, step):
                b = min(a + step, n)
                stamp = int(np.max(cols["timestamp"][a:b])) if b > a else START_MS
                log.append(take(a, b), timestamp_type="log_append", log_append_time=stamp)
            return n, n, log.next_offset
        # payments: two transactional producers, transactions interleaved
        producers = [2001 + 10 * partition, 2002 + 10 * partition]
        pos, kept, open_rows = 0, 0, {pid: 0 for pid in producers}
        txn = 0
        while pos < n:
            pid = producers[txn % 2]
            size = int(rng.integers(50, 400))
            log.append(take(pos, min(pos + size, n)), producer_id=pid, transactional=True,
                       codec="gzip")
            open_rows[pid] += min(pos + size, n) - pos
            pos += size
            other = producers[(txn + 1) % 2]
            if open_rows[other] or pos >= n:   # end the other producer's open transaction
                for done in ([other] if pos < n else producers):
                    if open_rows[done]:
                        commit = rng.random() > 0.2
                        log.end_transaction(done, commit=commit, coordinator_epoch=1)
                        kept += open_rows[done] if commit else 0
                        open_rows[done] = 0
            txn += 1
        return n, kept, log.next_offset


def _internal_ends(root: Path) -> list:
    from kbatch.lib.log import PartitionLog
    from kbatch.lib.paths import parse_partition_dir
    out = []
    for d in sorted(root.iterdir()):
        parsed = parse_partition_dir(d.name)
        if d.is_dir() and parsed and parsed[0].startswith("__"):
            bounds = [s.batch_bounds() for s in PartitionLog(d).segments]
            ends = [int(b["last_offset"][-1]) + 1 for b in bounds if len(b)]
            out.append((*parsed, max(ends, default=0)))
    return out


# What a consumer could fetch differs from what is on disk in two partitions:
# page-views-0's last records were not yet replicated when the broker wrote its
# high watermark, and retention moved inventory.events-v2-0's log start.
UNREPLICATED = {("page-views", 0): 250}
LOG_START = {("inventory.events-v2", 0): 1000}


def _broker_files(root: Path, checkpoints: list) -> None:
    (root / "meta.properties").write_text(
        "version=1\nbroker.id=1\ncluster.id=kbatch-sample-cluster\n")
    head = f"0\n{len(checkpoints)}\n"
    (root / "recovery-point-offset-checkpoint").write_text(
        head + "".join(f"{t} {p} {o}\n" for t, p, o in checkpoints))
    (root / "replication-offset-checkpoint").write_text(
        head + "".join(f"{t} {p} {max(o - UNREPLICATED.get((t, p), 0), 0)}\n"
                       for t, p, o in checkpoints))
    (root / "log-start-offset-checkpoint").write_text(
        head + "".join(f"{t} {p} {min(LOG_START.get((t, p), 0), o)}\n"
                       for t, p, o in checkpoints))
    (root / "cleaner-offset-checkpoint").write_text("0\n0\n")
