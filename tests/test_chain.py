"""A partition's segments decoded into one set of columns (``kbatch.lib.chain``).

``open_log_dir(...).read()`` and ``open_log(...).read()`` hand one decoder a
partition's segments one after another (``BatchDecoder.continue_with``)
instead of decoding each apart and joining them. What a correct read gives
comes from kafka-python, segment by segment
(``kafka_ref.read_with_kafka_python``), and, for damage, from the segment
files' own length fields; the per-segment path (``open_log(...).iter()``)
must agree with it field by field. read_committed against an independent
model: ``test_txn.py``.
"""

import os
import struct
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kbatch
from kbatch._core import _batch
from kbatch._core.coltable import FIXED_COLUMNS
from kbatch.errors import CorruptRecordError, DamagedLengthError, LimitExceededError
from kbatch.lib import chain
from kbatch.lib.log import _jobs
from kbatch.lib.segment import DecodeOptions
from kbatch.lib.sources import MappedFile

from .kafka_ref import build_batch, hypothesis_segments, read_with_kafka_python
from .test_against_kafka_python import BATCH_FIELDS, assert_matches_kafka
from .test_reliability_reads import N, T0, V, _write
from .test_zero_copy import _run_child

SEGMENT_LISTS = st.lists(st.one_of(hypothesis_segments(big=False),
                                   st.just((b"", []))),   # an empty segment file
                         min_size=1, max_size=4)


def _write_partition(root: Path, datas, name="t-0") -> list[Path]:
    part = root / name
    part.mkdir(parents=True)
    paths = []
    for i, data in enumerate(datas):
        path = part / f"{i * 1000:020d}.log"
        path.write_bytes(data)
        paths.append(path)
    return paths


class _Merged:
    """kafka-python's reads of several segments as one read: batch indexes
    run on over the segments; ``source`` says which segment a batch is in."""

    def __init__(self, datas):
        self.batches, self.records, self.rows, self.control, self.source = [], [], [], [], []
        for index, data in enumerate(datas):
            kr = read_with_kafka_python(data, check_crc=True)
            shift = len(self.batches)
            self.batches += kr.batches
            self.source += [index] * len(kr.batches)
            for name in ("records", "rows", "control"):
                getattr(self, name).extend(dict(r, batch=r["batch"] + shift)
                                           for r in getattr(kr, name))

    def batch_column(self, name):
        return [b[name] for b in self.batches]


def _assert_batches(records, merged, paths):
    assert records.sources == [str(p) for p in paths]
    assert records.batches.source.tolist() == merged.source
    for name in BATCH_FIELDS:
        assert records.batches[name].tolist() == [b[name] for b in merged.batches], name


def _assert_same(a, b):
    """Two reads of the same partition, every column and table equal (each
    batch from the same file; a file without batches may be listed or not)."""
    assert ([a.sources[i] for i in a.batches.source]
            == [b.sources[i] for i in b.batches.source])
    for name in [c.name for c in FIXED_COLUMNS]:    # offset, timestamp, timestamp_type, batch
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    for name in ("key", "value", "headers"):
        assert getattr(a, name).to_pylist() == getattr(b, name).to_pylist(), name
    assert sorted(a.batches.columns) == sorted(b.batches.columns)
    for name in a.batches.columns:
        if name != "source":
            assert np.array_equal(a.batches[name], b.batches[name]), name
    assert a.control.offset.tolist() == b.control.offset.tolist()
    assert a.control.batch.tolist() == b.control.batch.tolist()
    assert _end(a.end) == _end(b.end)


def _end(end):
    """A SegmentEnd as comparable values (its error as its message)."""
    return None if end is None else (end.valid_bytes, end.trailing_bytes, end.reason,
                                     None if end.error is None else str(end.error))


@settings(max_examples=max(10, settings.default.max_examples // 3), deadline=None)
@given(SEGMENT_LISTS)
def test_log_dir_read_equals_kafka_python_segment_by_segment(segments):
    datas = [data for data, _ in segments]
    merged = _Merged(datas)
    with tempfile.TemporaryDirectory() as tmp:
        paths = _write_partition(Path(tmp), datas)
        logdir = kbatch.open_log_dir(tmp)
        log = kbatch.open_log(paths[0].parent)
        # iter() decodes segment by segment: the path runs replace
        per_segment = kbatch.Records.concat(list(log.iter()))
        _assert_same(log.read(), per_segment)
        committed = log.read(isolation="read_committed")
        _assert_same(committed, kbatch.Records.concat(list(log.iter(isolation="read_committed"))))
        assert committed.last_stable_offset == log.transaction_state().last_stable_offset
        for threads in (1, 2):    # one run; two runs joined (when there are 2 segments)
            got = logdir.read(threads=threads)[("t", 0)]
            assert_matches_kafka(got, merged, batch_source=merged.source)
            _assert_batches(got, merged, paths)
            assert got.control.offset.tolist() == [r["offset"] for r in merged.control]
            assert got.end.reason is None and got.end.valid_bytes == len(datas[-1])
            _assert_same(got, per_segment)
            views = logdir.read(threads=threads, zero_copy=True)[("t", 0)]
            assert_matches_kafka(views, merged, batch_source=merged.source)
            _assert_batches(views, merged, paths)
        with_control = logdir.read(include_control=True)[("t", 0)]
        assert_matches_kafka(with_control, merged, include_control=True,
                             batch_source=merged.source)
        projected = logdir.read(columns=["offset", "key"])[("t", 0)]
        assert projected.offset.tolist() == [r["offset"] for r in merged.records]
        assert projected.key.to_pylist() == [r["key"] for r in merged.records]


@settings(max_examples=max(10, settings.default.max_examples // 3), deadline=None)
@given(SEGMENT_LISTS, st.integers(1, 4000))
def test_chunks_inside_and_across_segments(segments, chunk_bytes):
    """A run whose columns fill several chunks (cut inside a segment and
    across segment boundaries) holds the same as kafka-python's reads."""
    datas = [data for data, _ in segments]
    merged = _Merged(datas)
    with tempfile.TemporaryDirectory() as tmp:
        paths = _write_partition(Path(tmp), datas)
        pieces = [chain.Piece(MappedFile(p), torn_ok=p == paths[-1]) for p in paths]
        got = chain.decode_run(pieces, DecodeOptions(), chunk_bytes=chunk_bytes)
        assert_matches_kafka(got, merged, batch_source=merged.source)
        _assert_batches(got, merged, paths)


# --- written partitions and damage -------------------------------------------------

# partitions: test_reliability_reads._write (N records, value V(i) at offset i,
# stamped T0 + 1000 * i, in 4 segments of 70 records and an active one of 50)

def _batch_starts(path):
    """Byte position of every batch, from the length fields."""
    data, out, pos = path.read_bytes(), [], 0
    while pos + 12 <= len(data):
        out.append(pos)
        pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
    return out


@pytest.fixture(scope="module")
def written_partition(tmp_path_factory):
    part, segs = _write(tmp_path_factory.mktemp("ranges"))
    rows = [r for s in segs for r in read_with_kafka_python(s.read_bytes()).records]
    return part, rows


@settings(max_examples=max(10, settings.default.max_examples // 2), deadline=None)
@given(st.integers(-5, N + 5), st.integers(-5, N + 5), st.integers(0, N), st.integers(0, N))
def test_ranges_are_one_run_and_equal_kafka_python(written_partition, a, b, t0, t1):
    """Offset and exact-timestamp ranges over several segments (cut inside
    the first and last): the records kafka-python finds there."""
    part, rows = written_partition
    log = kbatch.open_log(part)
    lo, hi = sorted((max(a, 0), max(b, 0)))
    got = log.read(lo, hi)
    want = [r for r in rows if lo <= r["offset"] < hi]
    assert got.offset.tolist() == [r["offset"] for r in want]
    assert got.value.to_pylist() == [r["value"] for r in want]
    _assert_same(got, kbatch.Records.concat(list(log.iter(lo, hi))))
    start, stop = sorted((T0 + 1000 * t0, T0 + 1000 * t1))
    exact = log.read(start_timestamp=start, end_timestamp=stop, timestamp_mode="exact")
    assert exact.offset.tolist() == [r["offset"] for r in rows
                                     if start <= r["timestamp"] < stop]


def _outcome(read):
    try:
        return read()
    except CorruptRecordError as exc:
        return (type(exc), exc.path, exc.position, exc.batch_position)


@settings(max_examples=max(10, settings.default.max_examples // 2), deadline=None)
@given(st.data())
def test_damage_gives_what_the_segment_by_segment_path_gives(tmp_path_factory, data):
    """Bytes flipped, segments cut short or padded with zeros, in any
    segment: read() (one run) raises, stops or skips exactly where iter()
    (segment by segment) does, whether the log dir cuts the partition or not."""
    root = tmp_path_factory.mktemp("damage")
    part, segs = _write(root)
    for _ in range(data.draw(st.integers(1, 3), label="damages")):
        victim = data.draw(st.sampled_from(segs), label="segment")
        raw = bytearray(victim.read_bytes())
        kind = data.draw(st.sampled_from(["flip", "cut", "zeros"]), label="kind")
        at = data.draw(st.integers(0, max(len(raw) - 1, 0)), label="at")
        if kind == "flip" and raw:
            raw[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
        elif kind == "cut":
            del raw[at:]
        else:
            raw += bytes(data.draw(st.integers(1, 300), label="zeros"))
        victim.write_bytes(bytes(raw))
    log = kbatch.open_log(part)
    for mode in ("raise", "stop", "skip"):
        run = _outcome(lambda: log.read(on_corrupt=mode))
        apart = _outcome(lambda: kbatch.Records.concat(list(log.iter(on_corrupt=mode))))
        if isinstance(apart, tuple):
            assert run == apart, mode
            continue
        _assert_same(run, apart)
        assert run.skipped == apart.skipped, mode
        for threads in (1, 2):
            by_dir = _outcome(lambda: kbatch.open_log_dir(root).read(on_corrupt=mode,
                                                                     threads=threads))
            got = by_dir[("t", 0)]
            _assert_same(got, apart)
            assert got.skipped == apart.skipped, (mode, threads)


@pytest.mark.parametrize("threads", [1, 2])
def test_torn_tail_of_an_inner_segment_raises_where_the_segment_path_does(tmp_path, threads):
    part, segs = _write(tmp_path)
    victim = segs[1]
    cut = _batch_starts(victim)[3]
    victim.write_bytes(victim.read_bytes()[:cut + 30])
    with pytest.raises(CorruptRecordError, match="not the last segment") as info:
        kbatch.open_log_dir(tmp_path).read(threads=threads)
    assert (info.value.path, info.value.position) == (str(victim), cut)


def test_zero_padding_of_an_inner_segment_raises(tmp_path):
    part, segs = _write(tmp_path)
    with open(segs[0], "ab") as f:
        f.write(b"\0" * 512)
    with pytest.raises(CorruptRecordError, match="zero bytes") as info:
        kbatch.open_log_dir(tmp_path).read(threads=1)
    assert info.value.path == str(segs[0])


def test_damaged_length_in_an_inner_segment_raises(tmp_path):
    """A length field made larger than the file while whole batches follow
    it: a damaged length, not a torn tail."""
    part, segs = _write(tmp_path)
    victim = segs[1]
    at = _batch_starts(victim)[2]
    data = bytearray(victim.read_bytes())
    struct.pack_into(">i", data, at + 8, len(data))
    victim.write_bytes(bytes(data))
    with pytest.raises(DamagedLengthError) as info:
        kbatch.open_log_dir(tmp_path).read(threads=1)
    assert (info.value.path, info.value.batch_position) == (str(victim), at)


def test_crc_damage_names_its_segment(tmp_path):
    part, segs = _write(tmp_path)
    victim = segs[2]
    at = _batch_starts(victim)[1]
    data = bytearray(victim.read_bytes())
    data[at + 70] ^= 0x01
    victim.write_bytes(bytes(data))
    with pytest.raises(CorruptRecordError, match="CRC") as info:
        kbatch.open_log_dir(tmp_path).read(threads=1)
    assert (info.value.path, info.value.batch_position) == (str(victim), at)


def test_torn_tail_of_the_last_segment_is_reported(tmp_path):
    part, segs = _write(tmp_path)
    last = segs[-1]
    starts = _batch_starts(last)
    last.write_bytes(last.read_bytes()[:starts[-1] + 20])
    got = kbatch.open_log_dir(tmp_path).read(threads=1)[("t", 0)]
    kept = sum(len(read_with_kafka_python(s.read_bytes()).records) for s in segs)
    assert got.value.to_pylist() == [V(i) for i in range(kept)]
    assert (got.end.reason, got.end.valid_bytes, got.end.trailing_bytes) == (
        "truncated", starts[-1], 20)
    _assert_same(got, kbatch.Records.concat(list(kbatch.open_log(part).iter())))


def test_max_read_bytes_bounds_the_whole_partition(tmp_path):
    """The limit holds for the partition's columns together, as in
    ``open_log(...).read``, not segment by segment."""
    part, segs = _write(tmp_path)
    whole = kbatch.open_log(part).read()
    limit = whole.nbytes - 1
    assert limit > max(kbatch.read_segment(s).nbytes for s in segs)
    with pytest.raises(LimitExceededError):
        kbatch.open_log(part).read(max_read_bytes=limit)
    for threads in (1, 2):    # 2: the partition is cut into runs, each under the limit
        with pytest.raises(LimitExceededError) as info:
            kbatch.open_log_dir(tmp_path).read(max_read_bytes=limit, threads=threads)
        assert str(part) in str(info.value)
    got = kbatch.open_log_dir(tmp_path).read(max_read_bytes=2 * whole.nbytes, threads=1)
    assert len(got[("t", 0)]) == N


def test_codecs_and_legacy_segments_in_one_run(tmp_path):
    """Segments of every codec, decompressed in the walk, in one run."""
    datas, offset = [], 0
    for codec in (0, 1, 2, 3, 4):
        parts = []
        for _ in range(3):
            records = [(1_700_000_000_000 + i, b"k%d" % i, b"value %d" % (offset + i) * 5, [])
                       for i in range(20)]
            parts.append(build_batch(records, codec=codec, base_offset=offset))
            offset += 20
        datas.append(b"".join(parts))
    paths = _write_partition(tmp_path, datas)
    got = kbatch.open_log_dir(tmp_path).read(threads=1)[("t", 0)]
    merged = _Merged(datas)
    assert_matches_kafka(got, merged, batch_source=merged.source)
    _assert_batches(got, merged, paths)


def test_zero_copy_run_survives_an_inner_segment_truncated_after_the_read(tmp_path):
    """One zero_copy result points into every segment's mapping: cutting an
    inner segment short afterwards makes the next access raise (naming that
    file), not kill the process. In a child, so a SIGBUS fails the test."""
    part = tmp_path / "t-0"
    values = [bytes([65 + i % 26]) * 5000 for i in range(120)]
    kbatch.write_log(part, {"value": values}, segment_bytes=150_000, batch_records=5)
    segs = sorted(part.glob("*.log"))
    assert len(segs) >= 3
    child = _run_child(f"""
        import os
        import kbatch
        from kbatch.errors import MappingInvalidatedError
        records = kbatch.open_log({str(part)!r}).read(zero_copy=True)
        assert len(records.sources) == {len(segs)} and len(records.value.buffers) >= {len(segs)}
        assert records.value.to_pylist() == [bytes([65 + i % 26]) * 5000 for i in range(120)]
        os.truncate({str(segs[1])!r}, 4096)
        try:
            records.value.to_pylist()
        except MappingInvalidatedError as exc:
            assert {str(segs[1])!r} in str(exc), exc
            print("raised")
        try:
            records.to_arrow()
        except MappingInvalidatedError:
            print("raised-arrow")
    """)
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.split() == ["raised", "raised-arrow"], child.stdout


def test_zero_copy_run_copies_when_the_guard_table_is_full(tmp_path, monkeypatch):
    """A mapping the SIGBUS guard cannot register (its table is full) turns
    the whole run into copies, as read_segment turns a segment."""
    part, segs = _write(tmp_path)
    seen = []

    class Full(chain.SourceHold):
        def __init__(self, view, path=None):
            super().__init__(view, path)
            seen.append(path)
            if len(seen) == 2:
                self.guard, self.guarded = None, False

    monkeypatch.setattr(chain, "SourceHold", Full)
    got = kbatch.open_log(part).read(zero_copy=True)
    assert len(seen) == 2 and not hasattr(got.value, "views")
    assert got.value.to_pylist() == [V(i) for i in range(N)]


# --- how partitions are cut into runs ----------------------------------------------

class _FakeSegment:
    def __init__(self, path):
        self.path = path
        self.source = MappedFile(path)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 5000), min_size=1, max_size=12), st.integers(1, 8))
def test_split_runs_cuts_consecutive_runs_of_about_equal_bytes(sizes, pieces):
    with tempfile.TemporaryDirectory() as tmp:
        segs = []
        for i, n in enumerate(sizes):
            path = Path(tmp) / f"{i:020d}.log"
            path.write_bytes(b"x" * n)
            segs.append(_FakeSegment(path))
        runs = chain.split_runs(segs, pieces)
        assert chain.split_runs(segs, pieces, sizes) == runs     # sizes given, not stat'ed
        assert [s for run in runs for s in run] == segs      # in order, each once
        assert all(runs) and len(runs) <= min(pieces, len(segs))
        share = sum(sizes) / min(pieces, len(segs))
        for run in runs:   # a run passes its share by less than one segment
            assert sum(os.path.getsize(s.path) for s in run[:-1]) <= share + 1e-9


def test_runs_follow_the_threads(tmp_path):
    """One run per partition when the partitions are enough for the
    threads; a partition larger than its share is cut."""
    for name in ("a-0", "b-0"):
        _write(tmp_path, name)
    parts = kbatch.open_log_dir(tmp_path).partitions
    assert [len(j[1]) for j in _jobs(parts, 1)] == [len(p.segments) for p in parts]
    assert len(_jobs(parts, 2)) == 2
    assert len(_jobs(parts[:1], 2)) == 2
    one = kbatch.open_log_dir(tmp_path).read(threads=1)
    two = kbatch.open_log_dir(tmp_path).read(threads=2)
    for key in one:
        _assert_same(one[key], two[key])


# --- the decoder's switch to the next source -----------------------------------------

def test_continue_with_needs_a_finished_source():
    batch = build_batch([(0, b"k", b"v", [])], codec=0)
    dec = _batch.BatchDecoder(batch)
    with pytest.raises(RuntimeError, match="decoded to its end"):
        dec.continue_with(batch)
    assert dec.run() == _batch.STATUS_END
    dec.continue_with(batch + batch, start=len(batch))
    assert dec.run() == _batch.STATUS_END
    assert dec.batch_rows == 2 and dec.max_last_offset() == 0 and dec.max_last_offset(2) is None
    taken = dec.take()
    assert taken["batches"]["position"].tolist() == [0, len(batch)]
    zc = _batch.BatchDecoder(batch, zero_copy=True)
    zc.run()
    with pytest.raises(RuntimeError, match="replace_source_windows"):
        zc.continue_with(batch)
    [(start, stop)] = zc.source_windows()
    with pytest.raises(ValueError, match="size"):
        zc.replace_source_windows([b"x"])
    own = bytes(batch[start:stop])     # the window's bytes, a buffer of their own
    zc.replace_source_windows([own])
    assert zc.source_windows() == []
    zc.continue_with(batch)
    assert zc.run() == _batch.STATUS_END
    buffers = zc.take()["data"]["buffers"]
    assert buffers[0] is own and isinstance(buffers[1], tuple)
    with pytest.raises(ValueError, match="start"):
        dec.continue_with(batch, start=len(batch) + 1)
