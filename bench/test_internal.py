"""Offset-commit decoding into Arrow (kbatch.internal.offset_commits).

The dataset: a ``__consumer_offsets`` segment of 2 M offset-commit records
(key version 1, value version 3: what brokers since 2.1 write), 40 groups
over 25 topics of 12 partitions, uncompressed batches of 500 records, written
once by kbatch's writer. Two measurements:

- ``from Records``: the records already read (``read_segment``) into Arrow
  columns: group, topic, partition, committed offset, leader epoch,
  metadata, timestamps, tombstone. This is the decode the issue asks for:
  >= 5 M rows/s on one core.
- ``from the file``: ``offset_commits(path)`` end to end (segment read
  included; the file is in the page cache).

Timed in CPU seconds of the process (``time.process_time``): the decode runs
on one thread, and the shared bench machine's load would otherwise show up
as wall-clock time the decoder did not use.
"""

import struct
import time

import numpy as np
import pytest

import kbatch
from datasets import DATA_DIR
from kbatch.internal.offsets import decode_commits, offset_commits

PATH = DATA_DIR / "__consumer_offsets-0" / "00000000000000000000.log"
RECORDS = 2_000_000


def _build():
    if PATH.exists():
        return
    from kbatch.lib.writer import SegmentWriter
    rng = np.random.default_rng(5)
    groups = [b"group-%02d-" % i + b"x" * int(rng.integers(0, 20)) for i in range(40)]
    topics = [b"topic-%02d-events" % i for i in range(25)]
    PATH.parent.mkdir(parents=True, exist_ok=True)
    tmp = PATH.with_suffix(".tmp")
    chunk = 100_000
    with SegmentWriter(tmp, batch_records=500, batch_bytes=1 << 20) as w:
        for start in range(0, RECORDS, chunk):
            g = rng.integers(0, len(groups), chunk)
            t = rng.integers(0, len(topics), chunk)
            p = rng.integers(0, 12, chunk)
            off = rng.integers(0, 1 << 32, chunk)
            keys, values = [], []
            for i in range(chunk):
                grp, top = groups[g[i]], topics[t[i]]
                keys.append(struct.pack(">hh", 1, len(grp)) + grp + struct.pack(">h", len(top))
                            + top + struct.pack(">i", int(p[i])))
                values.append(struct.pack(">hqihq", 3, int(off[i]), 7, 0,
                                          1_700_000_000_000 + start + i))
            w.append({"key": keys, "value": values,
                      "timestamp": 1_700_000_000_000 + start + np.arange(chunk)})
    tmp.rename(PATH)


@pytest.fixture(scope="module")
def offsets_records():
    _build()
    return kbatch.read_segment(PATH)


@pytest.mark.benchmark(group="internal", timer=time.process_time)
def test_offset_commits_from_records(benchmark, offsets_records):
    table = benchmark(decode_commits, offsets_records, "__consumer_offsets", 0)
    assert len(table) == RECORDS and table.column("error").null_count == RECORDS
    benchmark.extra_info.update(records=RECORDS, bytes=PATH.stat().st_size, mode="from Records")


@pytest.mark.benchmark(group="internal", timer=time.process_time)
def test_offset_commits_from_file(benchmark, offsets_records):
    table = benchmark(offset_commits, PATH)
    assert len(table) == RECORDS
    benchmark.extra_info.update(records=RECORDS, bytes=PATH.stat().st_size, mode="from the file")
