"""The table view (``read(view="latest")``) next to a plain read of the
same partition.

Two changelog partitions, written by aiokafka's compiled batch builder (an
implementation independent of kbatch), 2 M records each in 4 segments of
~16 KB batches, keys of 10-12 bytes, values of 100 bytes, one record in 20
a tombstone:

    changelog-10k   updates of 10 000 keys (each key rewritten ~200 times)
    changelog-1m    updates of 1 000 000 keys (most keys written once or twice)

Every round reads the partition from its (cached) files twice, back to back:
``open_log(p).read()`` then ``open_log(p).read(view="latest")``; the median
of the per-round ratios (plain time / latest time: the latest view's speed
as a fraction of a plain read's) is ``extra_info["speed_ratio"]``. The goal
is 0.7 or more. The machine is shared: only the paired ratios are
comparable, not the absolute times.
"""

import os
import random
import struct
import time

import numpy as np
import pytest

import kbatch
from datasets import DATA_DIR

RECORDS = 2_000_000
SEGMENTS = 4
DATASETS = {"changelog-10k": 10_000, "changelog-1m": 1_000_000}


def _build(name: str, keys: int):
    from aiokafka.record._crecords.default_records import DefaultRecordBatchBuilder
    path = DATA_DIR / f"{name}-v1" / "changelog-0"
    if path.exists():
        return path
    tmp = path.with_name("changelog-0.tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    rng = random.Random(5)
    value = b"v" * 100
    per_segment = RECORDS // SEGMENTS
    offset = 0
    for _ in range(SEGMENTS):
        seg = tmp / f"{offset:020d}.log"
        end = offset + per_segment
        with open(seg, "wb") as out:
            while offset < end:
                builder = DefaultRecordBatchBuilder(2, 0, 0, -1, -1, -1, 16 * 1024)
                delta = 0
                while offset + delta < end:
                    i = offset + delta
                    key = b"key-%08d" % rng.randrange(keys)
                    meta = builder.append(delta, 1_700_000_000_000 + i, key,
                                          None if i % 20 == 0 else value, [])
                    if meta is None:
                        break
                    delta += 1
                batch = bytearray(builder.build())
                struct.pack_into(">q", batch, 0, offset)
                out.write(batch)
                offset += delta
    os.replace(tmp, path)
    return path


@pytest.fixture(scope="module", params=list(DATASETS))
def changelog(request):
    path = _build(request.param, DATASETS[request.param])
    log = kbatch.open_log(path)
    table = log.read(view="latest")
    assert 0 < len(table) <= DATASETS[request.param]
    return request.param, log, len(table)


def test_latest_paired(benchmark, changelog):
    """One round: a plain read, then the table view, each timed."""
    name, log, rows = changelog
    ratios = []

    def pair():
        t0 = time.perf_counter()
        n_all = len(log.read())
        t1 = time.perf_counter()
        n_table = len(log.read(view="latest"))
        t2 = time.perf_counter()
        ratios.append((t1 - t0) / (t2 - t1))
        return n_all, n_table

    benchmark.group = "latest (paired)"
    got = benchmark.pedantic(pair, rounds=9, iterations=1, warmup_rounds=1)
    assert got == (RECORDS, rows)
    q = np.percentile(ratios, [25, 50, 75])
    benchmark.extra_info.update(dataset=name, records=RECORDS, rows=rows,
                                speed_ratio=float(q[1]),
                                ratio_quartiles=[float(q[0]), float(q[2])])
