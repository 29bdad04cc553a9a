"""A partition whose segments hold some offsets twice (a restore beside a
newer generation of a segment): the read returns what the files hold and
warns once, naming the offsets and where they appear again, since a broker
serves each offset once; a healthy partition reads without the warning.
The partitions come from the tests' own encoder (tests/kafka_ref.py)."""

from __future__ import annotations

import logging

import kbatch
from tests.kafka_ref import build_batch, read_with_kafka_python
from tests.lifecycle_ref import write_partition

T0 = 1_700_000_000_000


def _rows(*pairs):
    return [(T0, k, v, []) for k, v in pairs]


def test_overlapping_segments_are_warned_of(tmp_path, caplog):
    seg0 = [build_batch(_rows((b"a", b"old0"), (b"b", b"old1"), (b"k", b"old2"),
                              (b"k", b"old3")), base_offset=0)]
    seg2 = [build_batch(_rows((b"k", b"new2"), (b"b", b"new3")), base_offset=2),
            build_batch(_rows((b"z", b"new4")), base_offset=4)]
    src = write_partition(tmp_path / "t-0", [seg0, seg2])
    truth = [r["offset"] for seg in (seg0, seg2)
             for r in read_with_kafka_python(b"".join(seg)).records]
    with caplog.at_level(logging.WARNING, logger="kbatch"):
        got = kbatch.open_log(src).read()
    assert got.offset.tolist() == truth == [0, 1, 2, 3, 2, 3, 4]
    warned = [r for r in caplog.records if getattr(r, "repeated", None)]
    assert len(warned) == 1 and warned[0].repeated == (2, 3)
    assert "00000000000000000002.log" in warned[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="kbatch"):
        kbatch.open_log(src).read(view="latest")
    assert [getattr(r, "repeated", None) for r in caplog.records] == [(2, 3)]
    assert not kbatch.verify(src).ok


def test_a_healthy_partition_reads_without_the_warning(tmp_path, caplog):
    segs = [[build_batch(_rows((b"a", b"1"), (b"b", b"2")), base_offset=0)],
            [build_batch(_rows((b"a", b"3")), base_offset=2),
             build_batch(_rows((b"c", b"4")), base_offset=3)]]
    src = write_partition(tmp_path / "t-0", segs)
    with caplog.at_level(logging.WARNING, logger="kbatch"):
        assert kbatch.open_log(src).read().offset.tolist() == [0, 1, 2, 3]
        kbatch.open_log_dir(tmp_path).read()
    assert not [r for r in caplog.records if getattr(r, "repeated", None)]


def test_chunked_reads_warn_of_offsets_met_again(tmp_path, caplog):
    """``iter()`` (one record a chunk: the repeat lies across chunks and
    segments: the batch at 2 follows offsets 0..3) and ``level="batches"``
    warn as ``read()`` does, once. A healthy partition iterates without it."""
    seg0 = [build_batch(_rows((b"a", b"0"), (b"b", b"1"), (b"c", b"2")), base_offset=0)]
    seg3 = [build_batch(_rows((b"d", b"3")), base_offset=3),
            build_batch(_rows((b"c", b"x"), (b"e", b"y")), base_offset=2)]
    seg5 = [build_batch(_rows((b"f", b"5")), base_offset=5)]
    src = write_partition(tmp_path / "t-0", [seg0, seg3, seg5])
    calls = [lambda log: [c.offset.tolist() for c in log.iter(chunk_records=1)],
             lambda log: log.read(level="batches").num_rows,
             lambda log: log.read()]
    for call in calls:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kbatch"):
            call(kbatch.open_log(src))
        assert [getattr(r, "repeated", None) for r in caplog.records
                if getattr(r, "repeated", None)] == [(2, 3)]
    caplog.clear()
    healthy = write_partition(tmp_path / "h-0", [seg0, seg5])
    with caplog.at_level(logging.WARNING, logger="kbatch"):
        assert [c.offset.tolist() for c in kbatch.open_log(healthy).iter(chunk_records=1)
                if len(c)] == [[0, 1, 2], [5]]
        assert kbatch.open_log(healthy).read(level="batches").num_rows == 2
    assert not [r for r in caplog.records if getattr(r, "repeated", None)]
