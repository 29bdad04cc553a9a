"""read_committed against read_uncommitted on a transactional segment.

The segment (5 M records, ~16 KB batches of small records, written once by
kbatch's writer): eight transactional producers interleaved batch by batch,
each transaction 2-12 batches long, one in eight aborted, plus a
non-transactional producer; one transaction is left open at the end, so the
LSO is below the log end. Every round decodes the same bytes in memory.

``read_segment`` and ``iter_segment`` resolve transactions from a cheap pass
over the batch headers and control records (control batches' CRCs checked),
then decode once, leaving out the records of aborted and open transactions
as they go: the read_committed cost is that first pass plus numpy masks over
the batch table (iter_segment: and a check of each chunk's batches against
the first pass).

The machine is shared and noisy, and separate benchmarks drift apart by more
than the 10% being measured, so ``test_read_committed_paired`` times both
isolations back to back in every round and reports the median of the
per-round ratios (``extra_info["ratio_median"]``).
"""

import time

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
    from kbatch.lib.writer import ABORT, COMMIT, SegmentWriter
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


def _whole(data, **kw):
    return len(kbatch.read_segment(data, **kw))


def _chunked(data, **kw):
    return sum(len(c) for c in kbatch.iter_segment(data, chunk_records=1 << 20, **kw))


@pytest.mark.parametrize("reader", ["read_segment", "iter_segment"])
def test_read_committed_paired(benchmark, txn_segment, reader):
    """One round: read_uncommitted then read_committed, each timed; the
    ratio of the two in the same round cancels the machine's drift."""
    data, kept = txn_segment
    read = _whole if reader == "read_segment" else _chunked
    ratios = []

    def pair():
        t0 = time.perf_counter()
        n_all = read(data)
        t1 = time.perf_counter()
        n_committed = read(data, isolation="read_committed")
        t2 = time.perf_counter()
        ratios.append((t2 - t1) / (t1 - t0))
        return n_all, n_committed

    benchmark.group = "read_committed (paired)"
    benchmark.extra_info["reader"] = reader
    got = benchmark.pedantic(pair, rounds=15, iterations=1, warmup_rounds=1)
    assert got == (RECORDS, kept)
    ratios = ratios[1:]  # the warm-up round
    benchmark.extra_info.update(records=2 * RECORDS, bytes=2 * len(data),
                                dataset="transactional", mode="paired",
                                ratio_median=float(np.median(ratios)),
                                ratio_quartiles=[float(q) for q in np.percentile(ratios, [25, 75])])
