"""``open_log_dir(...).read(threads=N)``: many segments, 1 thread vs all cores.

A broker data directory of 4 partitions x 10 segments (~25 MB each, written by
kbatch's writer): topic ``plain`` (2 partitions, uncompressed) and topic
``lz4`` (2 partitions, lz4). Each topic is read whole, and then both. The
decoder releases the GIL, so segments decode in parallel; the ratio of the
medians is the speed-up (lz4 batches are decompressed inside the GIL-free
walk too). The segments are dropped from the page cache and read back once
first (``datasets.read_back_from_disk``), as a copied log directory comes in.
"""

import os
import threading

import numpy as np
import pytest

import kbatch
from datasets import DATA_DIR, read_back_from_disk

LOGDIR = DATA_DIR / "logdir-v2"
PARTITIONS, SEGMENTS, PER_SEGMENT = 4, 10, 200_000


def _build():
    if (LOGDIR / "done").exists():
        return
    from kbatch.lib.writer import LogWriter
    rng = np.random.default_rng(3)
    pool = [bytes(rng.integers(32, 127, 100, dtype=np.uint8)) for _ in range(1024)]
    for p in range(PARTITIONS):
        topic = "lz4" if p % 2 else "plain"
        with LogWriter(LOGDIR / f"{topic}-{p // 2}", segment_bytes=24 << 20) as log:
            for s in range(SEGMENTS):
                n = PER_SEGMENT
                log.append({"key": [b"k%06d" % ((s * n + i) % 50_000) for i in range(n)],
                            "value": [pool[i % 1024] for i in range(n)],
                            "timestamp": 1_700_000_000_000 + np.arange(n)},
                           codec="lz4" if p % 2 else "none")
    (LOGDIR / "done").write_text("ok")


@pytest.fixture(scope="module")
def logdir():
    _build()
    for segment in sorted(LOGDIR.glob("*/*.log")):
        read_back_from_disk(segment)
    d = kbatch.open_log_dir(LOGDIR)
    counts = {}
    for topics in (["plain"], ["lz4"], None):
        parts = d.select(topics)
        records = sum(len(r) for r in d.read(topics, threads=1).values())
        counts[tuple(topics or ())] = (records, sum(s.size for p in parts for s in p.segments))
    return d, counts


@pytest.mark.parametrize("topics", [["plain"], ["lz4"], None],
                         ids=["plain", "lz4", "all"])
@pytest.mark.parametrize("threads", [1, os.cpu_count() or 1], ids=lambda t: f"{t}-threads")
def test_log_dir_read(benchmark, logdir, threads, topics):
    d, counts = logdir
    records, size = counts[tuple(topics or ())]
    what = "+".join(topics) if topics else "plain+lz4"
    benchmark.group = "open_log_dir"
    benchmark.extra_info.update(records=records, bytes=size, topics=what,
                                dataset=f"log dir {what}, {threads} thread(s)")
    got = benchmark.pedantic(
        lambda: sum(len(r) for r in d.read(topics, threads=threads).values()),
        rounds=5, iterations=1, warmup_rounds=1)
    assert got == records


@pytest.fixture(scope="module")
def plain_bytes(logdir):
    d, _ = logdir
    src = np.concatenate([np.fromfile(s.path, np.uint8) for p in d.select(["plain"])
                          for s in p.segments])
    return src, np.ones_like(src)


@pytest.mark.parametrize("threads", [1, os.cpu_count() or 1], ids=lambda t: f"{t}-threads")
def test_memory_copy_floor(benchmark, plain_bytes, threads):
    """Copying the plain topic's bytes (already in memory) into a buffer
    already touched, cut into one piece per thread: how far memory
    bandwidth lets a read scale with threads here, whatever it decodes."""
    src, dst = plain_bytes
    step = -(-len(src) // threads)

    def copy():
        def piece(i):
            np.copyto(dst[i * step:(i + 1) * step], src[i * step:(i + 1) * step])
        workers = [threading.Thread(target=piece, args=(i,)) for i in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    benchmark.group = "open_log_dir"
    benchmark.extra_info.update(records=0, bytes=len(src), topics="memory copy",
                                dataset=f"memory copy, {threads} thread(s)")
    benchmark.pedantic(copy, rounds=9, iterations=1, warmup_rounds=1)
