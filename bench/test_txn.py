"""read_committed against read_uncommitted on a transactional segment.

The segment (5 M records, ~16 KB batches of small records, written once by
kbatch's writer): eight transactional producers interleaved batch by batch,
each transaction 2-12 batches long, one in eight aborted, plus a
non-transactional producer; one transaction is left open at the end, so the
LSO is below the log end. Every round decodes the same bytes in memory.

``read_segment`` resolves transactions on the batch table it already
decoded, so its read_committed cost is the filtering (numpy masks over
batches, then a take of the kept rows). ``iter_segment`` resolves them
first with a full decode pass (so its chunks equal ``read_segment`` even on
corrupt data): about twice the work, shown here as well.
"""

import numpy as np
import pytest

import kbatch
from datasets import DATA_DIR

PATH = DATA_DIR / "txn-v1.log"
RECORDS = 5_000_000
BATCH = 130                      # records per batch (~16 KB of 100-byte values)


def _build():
    if PATH.exists():
        return
    from kbatch.writer import ABORT, COMMIT, SegmentWriter
    rng = np.random.default_rng(11)
    pool = [bytes(rng.integers(32, 127, 100, dtype=np.uint8)) for _ in range(512)]
    producers = list(range(1000, 1008))
    left = {p: int(rng.integers(2, 13)) for p in producers}
    tmp = PATH.with_suffix(".tmp")
    written, k = 0, 0
    with SegmentWriter(tmp, batch_records=BATCH, batch_bytes=1 << 20) as w:
        while written < RECORDS:
            n = min(BATCH, RECORDS - written)
            batch = {"key": [b"key-%d" % ((written + i) % 9973) for i in range(n)],
                     "value": [pool[(written + i) % 512] for i in range(n)],
                     "timestamp": 1_700_000_000_000 + written + np.arange(n)}
            k += 1
            if k % 9 == 0:                              # a plain producer
                w.append(batch)
            else:
                pid = producers[k % len(producers)]
                w.append(batch, producer_id=pid, producer_epoch=0, transactional=True)
                left[pid] -= 1
                if left[pid] == 0 and written + n < RECORDS:
                    w.marker(ABORT if rng.random() < 0.125 else COMMIT, producer_id=pid)
                    left[pid] = int(rng.integers(2, 13))
            written += n
        # close every transaction but one (left open: the LSO stays below it)
        for pid in producers[1:]:
            w.marker(COMMIT, producer_id=pid)
    tmp.rename(PATH)


@pytest.fixture(scope="module")
def txn_segment():
    _build()
    data = PATH.read_bytes()
    committed = kbatch.read_segment(data, isolation="read_committed")
    assert 0 < len(committed) < RECORDS
    assert committed.last_stable_offset < int(kbatch.read_segment(data).offset[-1])
    return data, len(committed)


def _bench(benchmark, name, fn, data, want):
    benchmark.group = "read_committed"
    benchmark.extra_info.update(records=RECORDS, bytes=len(data), dataset="transactional",
                                mode=name)
    got = benchmark.pedantic(fn, rounds=7, iterations=1, warmup_rounds=1)
    assert got == want


def test_read_uncommitted(benchmark, txn_segment):
    data, _ = txn_segment
    _bench(benchmark, "read_segment, read_uncommitted",
           lambda: len(kbatch.read_segment(data)), data, RECORDS)


def test_read_committed(benchmark, txn_segment):
    data, kept = txn_segment
    _bench(benchmark, "read_segment, read_committed",
           lambda: len(kbatch.read_segment(data, isolation="read_committed")), data, kept)


def test_iter_read_uncommitted(benchmark, txn_segment):
    data, _ = txn_segment
    _bench(benchmark, "iter_segment (1 M-record chunks), read_uncommitted",
           lambda: sum(len(c) for c in kbatch.iter_segment(data, chunk_records=1 << 20)),
           data, RECORDS)


def test_iter_read_committed(benchmark, txn_segment):
    data, kept = txn_segment
    _bench(benchmark, "iter_segment (1 M-record chunks), read_committed",
           lambda: sum(len(c) for c in kbatch.iter_segment(
               data, chunk_records=1 << 20, isolation="read_committed")), data, kept)
