"""LogWriter's time roll (``segment_ms``) against a model of Kafka's rule.

The model below is written from Kafka's LogSegment (not from kbatch):

    shouldRoll:         size > maxSegmentBytes - messagesSize
                        || (size > 0 && timeWaitedForRoll(now, maxTimestampInMessages)
                                        > maxSegmentMs - rollJitterMs)      (jitter 0)
                        || an index full || an offset not relative to the base
    timeWaitedForRoll:  ts = rollingBasedTimestamp (loaded if empty)
                        ts >= 0 ? messageTimestamp - ts : now - created
    append:             physicalPosition == 0 -> rollingBasedTimestamp =
                                                 largestTimestampMs (the append's)
    loadFirstBatchTimestamp (a segment object made again, as at a restart):
                        the file's first batch's maxTimestamp

Batches are built by kafka-python (``kafka_ref.build_batch``) and appended
unchanged (``append_batch``: a follower's append of one fetch, or a
leader's of one producer batch); where the records went is read back with
kafka-python from each segment file, and the segments' base offsets are the
file names.
"""

from __future__ import annotations

import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kbatch.lib.writer import LogWriter, write_log
from tests.kafka_ref import build_batch, read_with_kafka_python


def model_segments(appends, segment_ms, clock_at):
    """The base offsets of the segments Kafka makes of ``appends`` (each a
    list of (offset, max timestamp) batches); ``clock_at(i)``: the wall
    clock at append ``i`` (a segment's creation time is the clock at the
    append that rolled it, or at the start)."""
    bases, size, rolling, created = [0], 0, None, clock_at(-1)
    for i, batches in enumerate(appends):
        largest = max(ts for _, ts in batches)
        if size > 0:
            waited = largest - rolling if rolling >= 0 else clock_at(i) - created
            if waited > segment_ms:
                bases.append(batches[0][0])
                size, rolling, created = 0, None, clock_at(i)
        if size == 0:
            rolling = largest
        size += len(batches)
    return bases


def segments_on_disk(path: pathlib.Path) -> dict[int, list[int]]:
    """Base offset (file name) -> the offsets kafka-python reads there."""
    out = {}
    for log in sorted(path.glob("*.log")):
        read = read_with_kafka_python(log.read_bytes(), check_crc=True)
        out[int(log.stem)] = [r["offset"] for r in read.records]
    return out


timestamps = st.one_of(st.just(-1), st.integers(0, 50), st.integers(1_700_000_000_000, 1_700_000_000_100))


@settings(max_examples=60, deadline=None)
@given(appends=st.lists(st.lists(timestamps, min_size=1, max_size=3), min_size=1, max_size=12),
       segment_ms=st.integers(1, 40), ticks=st.lists(st.integers(0, 30), min_size=13,
                                                      max_size=13))
def test_segments_roll_where_kafka_rolls_them(tmp_path_factory, appends, segment_ms, ticks):
    """Appends of one to three batches (one record each, timestamp -1
    included: a segment whose first append has none rolls by the clock)."""
    clock_times = [sum(ticks[:i + 2]) for i in range(-1, 12)]   # at the start, then per append
    now = [clock_times[0]]
    path = tmp_path_factory.mktemp("roll") / "t-0"
    placed, offset = [], 0
    with LogWriter(path, segment_ms=segment_ms, clock=lambda: now[0],
                   preallocate_indexes=False) as log:
        for i, stamps in enumerate(appends):
            batches, data = [], b""
            for ts in stamps:
                data += build_batch([(ts, b"k", b"v", [])], base_offset=offset)
                batches.append((offset, ts))
                offset += 1
            now[0] = clock_times[i + 1]
            log.append_batch(data)
            placed.append(batches)
    want = model_segments(placed, segment_ms, lambda i: clock_times[i + 1])
    got = segments_on_disk(path)
    assert sorted(got) == want
    assert [o for base in sorted(got) for o in got[base]] == list(range(offset))


def test_a_restart_rolls_by_the_first_batch_not_the_first_append(tmp_path):
    """An append of two batches (max timestamps 100 and 300) starts the
    segment: its roll timestamp is 300 (the append's largest). After a
    restart it is loaded from the file's first batch: 100."""
    first = build_batch([(100, b"k", b"v", [])], base_offset=0) + \
        build_batch([(300, b"k", b"v", [])], base_offset=1)
    for restart, rolled in ((False, False), (True, True)):
        path = tmp_path / f"r{int(restart)}" / "t-0"
        with LogWriter(path, segment_ms=250, preallocate_indexes=False) as log:
            log.append_batch(first)
            if restart:
                log.restart()
            # 360 - 300 = 60 (no roll); 360 - 100 = 260 > 250 (roll)
            log.append_batch(build_batch([(360, b"k", b"v", [])], base_offset=2))
        assert sorted(segments_on_disk(path)) == ([0, 2] if rolled else [0])


def test_records_written_by_the_writer_roll_by_their_timestamps(tmp_path):
    """The leader path (``append``: the writer encodes each batch), with a
    broker's default 7 days and one record per batch."""
    day = 24 * 60 * 60 * 1000
    stamps = [0, 3 * day, 7 * day, 7 * day + 1, 9 * day, 15 * day, 30 * day]
    rows = [{"key": b"k", "value": b"v", "timestamp": t} for t in stamps]
    path = tmp_path / "t-0"
    write_log(path, rows, batch_records=1, segment_ms=7 * day)
    # from 0: 3d and 7d stay (7 days is not more than 7 days), 7d + 1 rolls;
    # from 7d + 1: 9d stays, 15d rolls (8d - 1 later); from 15d: 30d rolls
    assert segments_on_disk(path) == {0: [0, 1, 2], 3: [3, 4], 5: [5], 6: [6]}


def test_segment_ms_is_checked(tmp_path):
    with pytest.raises(ValueError):
        LogWriter(tmp_path / "a-0", segment_ms=0)
    with pytest.raises(TypeError):
        LogWriter(tmp_path / "b-0", segment_ms=1.5)
    with pytest.raises(TypeError):
        LogWriter(tmp_path / "c-0", clock=5)
    with pytest.raises(ValueError):
        write_log(tmp_path / "d-0", [(b"k", b"v")], segment_ms=-1)
    assert not (tmp_path / "d-0").exists()
