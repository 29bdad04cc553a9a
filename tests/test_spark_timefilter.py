"""Timestamp filters pushed down to format("kbatch"): pruning by day-widened
bounds never changes the rows (Spark applies the exact filter), records and
whole rolled segments (useIndex) outside are not decoded or shipped."""

import datetime
import pathlib

import numpy as np
import pytest

pytest.importorskip("pyspark")

import kbatch  # noqa: E402
from kbatch.spark import Options, plan  # noqa: E402
from kbatch.spark.timefilter import DAY_MS, narrow, prune, to_millis  # noqa: E402
from pyspark.sql.datasource import (EqualTo, GreaterThan, GreaterThanOrEqual,  # noqa: E402
                                    LessThan)

from .test_spark import spark  # noqa: E402,F401

T0 = 1_700_000_000_000
HOUR = 3_600_000


def _log(tmp_path):
    """A partition over 10 days, 200 records a day, several segments a day;
    one record without a timestamp is impossible in magic 2, so the
    -1 case is covered in test_prune_drops_records_outside_and_untimed."""
    part = tmp_path / "clicks-0"
    records = [(b"k", b"v%d" % i, T0 + i * (DAY_MS // 200), []) for i in range(2000)]
    kbatch.write_log(part, records, segment_bytes=4000, batch_records=10)
    return part


def test_bounds_are_widened_and_exact_values_converted():
    utc = datetime.datetime.fromtimestamp(T0 / 1000, tz=datetime.timezone.utc)
    assert to_millis(utc) == T0
    assert to_millis(utc.replace(tzinfo=None)) == T0         # naive: read as UTC
    assert to_millis("2024-01-01") is None
    lo, hi = narrow(GreaterThanOrEqual(("timestamp",), utc), None, None)
    assert (lo, hi) == (T0 - DAY_MS, None)
    lo, hi = narrow(LessThan(("timestamp",), utc), lo, hi)
    assert hi == T0 + DAY_MS + 1
    lo, hi = narrow(EqualTo(("timestamp",), utc + datetime.timedelta(days=3)), lo, hi)
    assert lo == T0 + 2 * DAY_MS and hi == T0 + DAY_MS + 1     # narrowed, never widened
    assert narrow(GreaterThan(("timestamp",), 5), None, None) == (None, None)


def test_prune_drops_records_outside_and_untimed():
    ts = np.array([-1, T0 - 1, T0, T0 + 5, T0 + 10], np.int64)
    rec = kbatch.read_segment(memoryview(_segment_bytes(ts)))
    assert rec.timestamp.tolist() == ts.tolist()
    assert prune(rec, None, None) is rec
    assert prune(rec, T0, T0 + 10).timestamp.tolist() == [T0, T0 + 5]
    assert prune(rec, None, T0 + 10).timestamp.tolist() == [T0 - 1, T0, T0 + 5]


def _segment_bytes(ts):
    """Magic 1 messages (they may carry -1), written by the test itself."""
    import struct
    import zlib
    out = b""
    for i, t in enumerate(ts.tolist()):
        body = struct.pack(">bbq", 1, 0, t) + struct.pack(">i", -1) + struct.pack(">i", 1) + b"v"
        msg = struct.pack(">I", zlib.crc32(body)) + body
        out += struct.pack(">qi", i, len(msg)) + msg
    return out


def test_use_index_skips_rolled_segments_older_than_the_bound(tmp_path):
    part = _log(tmp_path)
    cut = T0 + 7 * DAY_MS
    everything = plan(Options.parse({"path": str(part), "useIndex": "true"}))
    opts = Options.parse({"path": str(part), "useIndex": "true"})
    opts.ts_lo = cut - DAY_MS
    pruned = plan(opts)
    full = kbatch.open_log(part).read()
    assert len(pruned) < len(everything) / 2
    # every record at or after the widened bound lies in a planned segment
    kept = {s.path for s in pruned}
    for seg in kbatch.open_log(part).segments:
        rec = kbatch.read_segment(seg.path)
        if (rec.timestamp >= cut - DAY_MS).any():
            assert str(seg.path) in kept
    # with useIndex=false the indexes are not read: nothing is skipped
    walk = {"path": str(part), "useIndex": "false"}
    opts = Options.parse(walk)
    opts.ts_lo = cut - DAY_MS
    assert len(plan(opts)) == len(plan(Options.parse(walk))) > len(pruned)
    assert len(full) == 2000


def test_a_stale_time_index_does_not_skip_a_segment(tmp_path):
    """A rolled segment's .timeindex whose entries are ten days older than
    its records (a stale or damaged copy, in order, each entry 12 bytes:
    timestamp int64, relative offset int32), or cut to its first entry: the
    batch headers, not the index, decide, and the segment is planned."""
    import struct

    part = _log(tmp_path)
    cut = T0 + 7 * DAY_MS
    segs = kbatch.open_log(part).segments
    target = next(s for s in segs[:-1]
                  if (kbatch.read_segment(s.path).timestamp >= cut).any())
    ti = pathlib.Path(target.path).with_suffix(".timeindex")
    raw = ti.read_bytes()
    stale = b"".join(struct.pack(">qi", struct.unpack_from(">q", raw, i)[0] - 10 * DAY_MS,
                                 struct.unpack_from(">i", raw, i + 8)[0])
                     for i in range(0, len(raw), 12))
    for damaged in (stale, stale[:12]):
        ti.write_bytes(damaged)
        opts = Options.parse({"path": str(part), "useIndex": "true"})
        opts.ts_lo = cut
        assert str(target.path) in {s.path for s in plan(opts)}


def test_pushdown_on_and_off_give_the_same_rows(spark, tmp_path):  # noqa: F811
    from pyspark.sql import functions as F

    from kbatch.spark import register
    part = _log(tmp_path)
    lo = datetime.datetime.fromtimestamp((T0 + 6 * DAY_MS + 5 * HOUR) / 1000,
                                         tz=datetime.timezone.utc)
    hi = lo + datetime.timedelta(hours=30)

    def query(reader):
        return sorted(r["offset"] for r in reader.load(str(part))
                      .where((F.col("timestamp") >= F.lit(lo)) & (F.col("timestamp") < F.lit(hi)))
                      .select("offset").collect())
    off = query(spark.read.format("kbatch").option("useIndex", "true"))
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        register(spark)
        on = query(spark.read.format("kbatch").option("useIndex", "true"))
    finally:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
        register(spark)
    full = kbatch.open_log(part).read()
    lo_ms, hi_ms = int(lo.timestamp() * 1000), int(hi.timestamp() * 1000)
    want = full.offset[(full.timestamp >= lo_ms) & (full.timestamp < hi_ms)].tolist()
    assert on == off == want and len(want) > 100
