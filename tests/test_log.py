"""Partition directories and broker data directories (kbatch.open_log,
kbatch.open_log_dir) on a real broker's data directory.

The reference for every range read is the whole partition, decoded segment
file by segment file with ``read_segment`` and concatenated here, filtered by
this file's own simple code: offsets in [lo, hi); ``start_timestamp=t``
starts at the earliest offset whose timestamp is >= t; ``end_timestamp=t``
stops before the earliest offset whose timestamp is >= t.
"""

import json
import random
import re
import shutil
import struct

import numpy as np
import pytest

import kbatch

from .conftest import CORPUS, NO_CORPUS, needs_corpus
from .digest import digest
from .kafka_ref import build_batch

DATA_DIR = CORPUS / "dipendrasaini__kafka-learnning-series" / "tmp" / "kafka-logs"
PARTITIONS = [f"invoice-{i}" for i in range(5)]
DELETE_PARENT = CORPUS / "apache__kafka" / "core" / "data" / "kafka-14696354110866436968"


def _expected_entries():
    path = CORPUS / "EXPECTED.jsonl"
    if not path.exists():
        return {}
    return {e["path"]: e for e in map(json.loads, path.read_text().splitlines())}


EXPECTED = _expected_entries()


# --- reference data ---------------------------------------------------------

class Ref:
    """A whole partition as plain numpy arrays, from read_segment per file."""

    def __init__(self, directory):
        files = sorted(p for p in directory.iterdir()
                       if p.suffix == ".log" and len(p.stem) == 20 and p.stem.isdigit())
        self.files = files
        parts = [kbatch.read_segment(p) for p in files]
        self.parts = parts
        self.offset = np.concatenate([r.offset for r in parts])
        self.timestamp = np.concatenate([r.timestamp for r in parts])
        self.value_len = np.concatenate([np.diff(r.value.offsets.astype(np.int64)) for r in parts])
        self.value_valid = np.concatenate([r.value.is_valid() for r in parts])
        self.value_data = np.concatenate([
            r.value.data[int(r.value.offsets[0]):int(r.value.offsets[-1])] for r in parts])
        self.value_start = np.concatenate([[0], np.cumsum(self.value_len)])
        self.key_len = np.concatenate([np.diff(r.key.offsets.astype(np.int64)) for r in parts])
        self.batch_base = np.concatenate([r.batches.base_offset for r in parts])
        self.batch_last = np.concatenate([r.batches.last_offset for r in parts])
        self.records = sum(len(r) for r in parts)
        self.digest = digest(row for r in parts for row in r)

    def bounds(self, start_offset=None, end_offset=None, start_timestamp=None,
               end_timestamp=None):
        """[lo, hi) of the read, computed from the arrays (None: empty)."""
        lo = -(1 << 62) if start_offset is None else start_offset
        hi = 1 << 62 if end_offset is None else end_offset
        if start_timestamp is not None:
            hits = np.flatnonzero(self.timestamp >= start_timestamp)
            if not len(hits):
                return None
            lo = max(lo, int(self.offset[hits[0]]))
        if end_timestamp is not None:
            hits = np.flatnonzero(self.timestamp >= end_timestamp)
            if len(hits):
                hi = min(hi, int(self.offset[hits[0]]))
        return lo, hi

    def mask(self, **bounds):
        b = self.bounds(**bounds)
        if b is None:
            return np.zeros(len(self.offset), bool), None
        lo, hi = b
        return (self.offset >= lo) & (self.offset < hi), b

    def check(self, got, **bounds):
        """``got`` holds exactly the reference records the bounds select."""
        mask, b = self.mask(**bounds)
        idx = np.flatnonzero(mask)
        assert len(got) == len(idx), bounds
        assert np.array_equal(got.offset, self.offset[idx]), bounds
        assert np.array_equal(got.timestamp, self.timestamp[idx]), bounds
        vlen = np.diff(got.value.offsets.astype(np.int64))
        assert np.array_equal(vlen, self.value_len[idx]), bounds
        assert np.array_equal(got.value.is_valid(), self.value_valid[idx]), bounds
        assert np.array_equal(np.diff(got.key.offsets.astype(np.int64)), self.key_len[idx])
        if len(idx):
            # offsets increase, so the selection is one contiguous run of bytes
            assert idx[-1] - idx[0] + 1 == len(idx)
            want = self.value_data[self.value_start[idx[0]]:self.value_start[idx[-1] + 1]]
            have = got.value.data[int(got.value.offsets[0]):int(got.value.offsets[-1])]
            assert np.array_equal(have, want), bounds
        # the batch table: the batches overlapping the range, records inside theirs
        if b is not None and b[0] < b[1]:
            lo, hi = b
            keep = (self.batch_last >= lo) & (self.batch_base < hi)
            assert np.array_equal(got.batches.base_offset, self.batch_base[keep]), bounds
        else:
            assert len(got.batches) == 0, bounds
        assert (got.batches.base_offset[got.batch] <= got.offset).all()
        assert (got.offset <= got.batches.last_offset[got.batch]).all()


@pytest.fixture(scope="module")
def refs():
    if not DATA_DIR.is_dir():
        pytest.skip(NO_CORPUS)
    return {name: Ref(DATA_DIR / name) for name in PARTITIONS}


def random_bounds(rng, ref, segments):
    """Offset/timestamp bounds, biased to segment edges and exact timestamps."""
    first, last = int(ref.offset[0]), int(ref.offset[-1])
    edges = [s.base_offset for s in segments]
    idx_edges = []
    for s in segments:
        idx_edges += s.offset_index.offsets.tolist()[:3]

    def offset():
        kind = rng.random()
        if kind < 0.3:
            return rng.choice(edges + idx_edges) + rng.randint(-2, 2)
        if kind < 0.35:
            return rng.choice([first - 3, last, last + 1, last + 10, 0, -1])
        return rng.randint(first - 5, last + 5)

    tmin, tmax = int(ref.timestamp.min()), int(ref.timestamp.max())

    def timestamp():
        kind = rng.random()
        if kind < 0.4:
            return int(ref.timestamp[rng.randrange(len(ref.timestamp))]) + rng.choice([-1, 0, 0, 1])
        if kind < 0.5:
            return rng.choice([tmin - 100, tmin, tmax, tmax + 1, 0])
        return rng.randint(tmin - 10, tmax + 10)

    b = {}
    mode = rng.random()
    if mode < 0.45:
        lo = offset()
        hi = lo + rng.choice([0, 1, 2, rng.randint(1, 300), rng.randint(1, 40000)]) \
            if rng.random() < 0.7 else offset()
        b["start_offset"] = rng.choice([lo, lo, None])
        b["end_offset"] = rng.choice([hi, hi, None])
    elif mode < 0.8:
        t0 = timestamp()
        t1 = t0 + rng.choice([0, 1, rng.randint(1, 50), rng.randint(1, 3000)]) \
            if rng.random() < 0.7 else timestamp()
        b["start_timestamp"] = rng.choice([t0, t0, None])
        b["end_timestamp"] = rng.choice([t1, t1, None])
    else:
        b = {"start_offset": rng.choice([None, offset()]),
             "end_offset": rng.choice([None, offset()]),
             "start_timestamp": rng.choice([None, timestamp()]),
             "end_timestamp": rng.choice([None, timestamp()])}
    return b


def _pos_args(b):
    return (b.get("start_offset"), b.get("end_offset")), {
        k: b[k] for k in ("start_timestamp", "end_timestamp") if k in b}


# --- a partition read whole ---------------------------------------------------

@needs_corpus
@pytest.mark.parametrize("name", PARTITIONS)
def test_open_log_reads_the_segments_in_order(refs, name):
    ref = refs[name]
    log = kbatch.open_log(DATA_DIR / name)
    assert (log.topic, log.partition) == ("invoice", int(name[-1]))
    assert [s.path for s in log.segments] == ref.files
    assert [s.base_offset for s in log.segments] == [int(p.stem) for p in ref.files]
    assert len(log.segments) == 4
    got = log.read()
    assert len(got) == ref.records
    assert digest(got) == ref.digest
    # counts from the independent decoder (EXPECTED.jsonl)
    rel = [str(p.relative_to(CORPUS)) for p in ref.files]
    assert all(r in EXPECTED for r in rel)
    assert len(got) == sum(EXPECTED[r]["records"] for r in rel)
    assert len(got.batches) == sum(EXPECTED[r]["batches"] for r in rel)
    assert int(got.offset[0]) == EXPECTED[rel[0]]["first_offset"]
    assert int(got.offset[-1]) == EXPECTED[rel[-1]]["last_offset"]
    assert got.sources == [str(p) for p in ref.files]
    ref.check(got)
    chunks = list(log.iter(chunk_records=50))
    assert chunks[-1].end is not None
    assert chunks[-1].end.valid_bytes == ref.files[-1].stat().st_size
    ref.check(kbatch.Records.concat(chunks))


@needs_corpus
def test_iter_yields_no_empty_chunk_before_the_last():
    """'Yields every non-empty chunk, then the last chunk of the last segment
    read (maybe empty), which carries end' (PartitionLog.iter)."""
    log = kbatch.open_log(DATA_DIR / "invoice-0")
    for args, kw in [((), {}), ((100, 95000), {}), ((30000, 30700), {}), ((), {"chunk_records": 1})]:
        chunks = list(log.iter(*args, **{"chunk_records": 50, **kw}))
        assert [i for i, c in enumerate(chunks[:-1]) if len(c) == 0] == []
        assert chunks[-1].end is not None


@needs_corpus
@pytest.mark.parametrize("name", PARTITIONS)
def test_segment_indexes_parse_like_the_raw_files(name):
    """OffsetIndex/TimeIndex entries equal the big-endian entries of the
    files, read here with struct, up to the preallocated zero tail."""
    log = kbatch.open_log(DATA_DIR / name)
    for seg in log.segments:
        for path, fmt, got in ((seg.index_path, ">ii", seg.offset_index),
                               (seg.timeindex_path, ">qi", seg.time_index)):
            raw = path.read_bytes() if path.exists() else b""
            size = struct.calcsize(fmt)
            entries = [struct.unpack_from(fmt, raw, i) for i in range(0, len(raw) - size + 1, size)]
            live = []
            for k, (a, b) in enumerate(entries):
                rel, other = (a, b) if fmt == ">ii" else (b, a)
                if k > 0 and rel == 0 and other == 0:
                    break
                live.append((rel + seg.base_offset, other))
            if fmt == ">ii":
                have = list(zip(got.offsets.tolist(), got.positions.tolist()))
            else:
                have = list(zip(got.offsets.tolist(), got.timestamps.tolist()))
            assert have == live, path


# --- random ranges --------------------------------------------------------------

@needs_corpus
@pytest.mark.parametrize("name", PARTITIONS)
@pytest.mark.parametrize("use_index", [False, True], ids=["walk", "index"])
def test_random_offset_and_timestamp_ranges(use_index, refs, name):
    ref = refs[name]
    log = kbatch.open_log(DATA_DIR / name, use_index=use_index)
    rng = random.Random(f"ranges-{name}")
    for _ in range(120):
        b = random_bounds(rng, ref, log.segments)
        args, kw = _pos_args(b)
        ref.check(log.read(*args, **kw), **b)


@needs_corpus
@pytest.mark.parametrize("name", PARTITIONS)
@pytest.mark.parametrize("use_index", [False, True], ids=["walk", "index"])
def test_random_ranges_chunk_by_chunk(use_index, refs, name):
    ref = refs[name]
    log = kbatch.open_log(DATA_DIR / name, use_index=use_index)
    rng = random.Random(f"iter-{name}")
    for _ in range(25):
        b = random_bounds(rng, ref, log.segments)
        args, kw = _pos_args(b)
        chunks = list(log.iter(*args, chunk_records=rng.choice([1, 7, 64, 500, 5000]), **kw))
        assert chunks, b
        assert all(len(c) for c in chunks[:-1]), b
        ref.check(kbatch.Records.concat(chunks), **b)


@needs_corpus
@pytest.mark.parametrize("name", PARTITIONS)
@pytest.mark.parametrize("use_index", [False, True], ids=["walk", "index"])
def test_offset_for_timestamp(use_index, refs, name):
    ref = refs[name]
    log = kbatch.open_log(DATA_DIR / name, use_index=use_index)
    rng = random.Random(f"oft-{name}")
    tmin, tmax = int(ref.timestamp.min()), int(ref.timestamp.max())
    probes = [tmin - 1000, tmin, tmin + 1, tmax - 1, tmax, tmax + 1, 0, -1]
    probes += [int(t) for t in ref.timestamp[rng.sample(range(len(ref.timestamp)), 40)]]
    probes += [rng.randint(tmin, tmax) for _ in range(40)]
    for t in probes:
        hits = np.flatnonzero(ref.timestamp >= t)
        want = int(ref.offset[hits[0]]) if len(hits) else None
        assert log.offset_for_timestamp(t) == want, t


@needs_corpus
def test_select_offsets_matches_the_filter(refs):
    ref = refs["invoice-1"]
    whole = kbatch.open_log(DATA_DIR / "invoice-1").read()
    rng = random.Random("select")
    for _ in range(30):
        lo = rng.randint(-5, int(ref.offset[-1]) + 5)
        hi = lo + rng.randint(0, 20000)
        ref.check(whole.select_offsets(lo, hi), start_offset=lo, end_offset=hi)


@needs_corpus
@pytest.mark.parametrize("use_index", [False, True], ids=["walk", "index"])
def test_edge_ranges(use_index, refs):
    ref = refs["invoice-0"]
    log = kbatch.open_log(DATA_DIR / "invoice-0", use_index=use_index)
    last = int(ref.offset[-1])
    for lo, hi in [(0, 0), (5, 5), (10, 3), (last, last + 1), (last + 1, last + 100),
                   (-10, 1), (None, 0), (last, None), (last + 1, None), (0, 1 << 60)]:
        got = log.read(lo, hi)
        ref.check(got, start_offset=lo, end_offset=hi)
    tmax = int(ref.timestamp.max())
    assert len(log.read(start_timestamp=tmax + 1)) == 0
    assert len(log.read(end_timestamp=int(ref.timestamp.min()))) == 0
    ref.check(log.read(end_timestamp=tmax + 1), end_timestamp=tmax + 1)


# --- data directories ------------------------------------------------------------

@needs_corpus
def test_open_log_dir_lists_the_partitions(refs):
    logdir = kbatch.open_log_dir(DATA_DIR)
    assert logdir.topics == ["invoice"]
    assert [(p.topic, p.partition) for p in logdir.partitions] == [("invoice", i) for i in range(5)]
    p3 = logdir.partition("invoice", 3)
    assert p3.path == DATA_DIR / "invoice-3"
    with pytest.raises(KeyError):
        logdir.partition("invoice", 5)
    with pytest.raises(KeyError):
        logdir.partition("invoic", 0)


def _column(col):
    return (np.diff(col.offsets.astype(np.int64)), col.is_valid(),
            col.data[int(col.offsets[0]):int(col.offsets[-1])])


def _same(a, b):
    assert len(a) == len(b)
    assert np.array_equal(a.offset, b.offset)
    assert np.array_equal(a.timestamp, b.timestamp)
    assert np.array_equal(a.timestamp_type, b.timestamp_type)
    for x, y in ((a.key, b.key), (a.value, b.value)):
        for u, v in zip(_column(x), _column(y)):
            assert np.array_equal(u, v)
    assert np.array_equal(a.headers.counts(), b.headers.counts())
    assert np.array_equal(a.batches.base_offset, b.batches.base_offset)
    assert np.array_equal(a.batches.position, b.batches.position)
    assert np.array_equal(a.batch, b.batch)


@needs_corpus
def test_log_dir_read_threads(refs):
    logdir = kbatch.open_log_dir(DATA_DIR)
    one = logdir.read(threads=1)
    two = logdir.read(threads=2)
    assert sorted(one) == sorted(two) == [("invoice", i) for i in range(5)]
    for key in one:
        _same(one[key], two[key])
        refs[f"{key[0]}-{key[1]}"].check(one[key])
    with pytest.raises(kbatch.KbatchError, match="no topic 'nothing'.*topics: invoice"):
        logdir.read(topics=["nothing"], threads=2)
    only = logdir.read(topics=["invoice"], threads=2)
    assert sorted(only) == sorted(one)
    assert sorted(logdir.read("invoice", threads=2)) == sorted(one)


@needs_corpus
def test_delete_directory_is_skipped():
    if not DELETE_PARENT.is_dir():
        pytest.skip(NO_CORPUS)
    [doomed] = [p for p in DELETE_PARENT.iterdir() if p.name.endswith("-delete")]
    assert any(p.name.endswith(".log") for p in doomed.iterdir())
    logdir = kbatch.open_log_dir(DELETE_PARENT)
    assert logdir.partitions == []
    assert logdir.topics == []
    assert logdir.read(threads=2) == {}


def _segment_bytes(base_offset, values, ts0=1_700_000_000_000):
    return b"".join(build_batch([(ts0 + i, b"k%d" % i, v, [])], base_offset=base_offset + i)
                    for i, v in enumerate(values))


@needs_corpus
def test_transient_files_and_directories_are_skipped(tmp_path):
    root = _writable_copy(DELETE_PARENT, tmp_path / "data")
    live = root / "test-topic-0"
    live.mkdir()
    (live / "00000000000000000000.log").write_bytes(_segment_bytes(0, [b"a", b"b"]))
    (live / "00000000000000000002.log").write_bytes(_segment_bytes(2, [b"c"]))
    # what the broker leaves while deleting, cleaning and swapping segments
    (live / "00000000000000000000.log.deleted").write_bytes(_segment_bytes(0, [b"old"]))
    (live / "00000000000000000000.log.cleaned").write_bytes(_segment_bytes(0, [b"cleaned"]))
    (live / "00000000000000000002.log.swap").write_bytes(_segment_bytes(2, [b"swap"]))
    (live / "00000000000000000000.index.deleted").write_bytes(struct.pack(">ii", 1, 999))
    (live / "00000000000000000003.log.deleted").write_bytes(_segment_bytes(3, [b"gone"]))
    for transient in ("test-topic-1.0123456789abcdef-future", "test-topic-2-stray",
                      "test-topic-7-delete"):
        d = root / transient
        d.mkdir()
        (d / "00000000000000000000.log").write_bytes(_segment_bytes(0, [b"ghost"]))
    logdir = kbatch.open_log_dir(root)
    assert [(p.topic, p.partition) for p in logdir.partitions] == [("test-topic", 0)]
    log = logdir.partition("test-topic", 0)
    assert [s.path.name for s in log.segments] == ["00000000000000000000.log",
                                                    "00000000000000000002.log"]
    got = log.read()
    assert got.value.to_pylist() == [b"a", b"b", b"c"]
    assert got.offset.tolist() == [0, 1, 2]
    out = logdir.read(threads=2)
    assert list(out) == [("test-topic", 0)]
    assert out[("test-topic", 0)].value.to_pylist() == [b"a", b"b", b"c"]
    report = kbatch.verify(root)
    assert [s.path for s in report.segments] == [str(s.path) for s in log.segments]
    assert report.ok


@pytest.mark.parametrize("dirname,topic,partition", [
    ("my-topic.v2-3", "my-topic.v2", 3),
    ("a.b.c-10", "a.b.c", 10),
    ("x--0", "x-", 0),
    ("__consumer_offsets-49", "__consumer_offsets", 49),
    ("orders-delete-me-7", "orders-delete-me", 7),
])
def test_topic_names_with_dashes_and_dots(tmp_path, dirname, topic, partition):
    root = tmp_path / "data"
    part = root / dirname
    part.mkdir(parents=True)
    (part / "00000000000000000040.log").write_bytes(_segment_bytes(40, [b"v1", b"v2"]))
    (root / "not-a-partition").mkdir()          # no number after the last '-'
    (root / "nodash").mkdir()
    log = kbatch.open_log(part)
    assert (log.topic, log.partition) == (topic, partition)
    assert [s.base_offset for s in log.segments] == [40]
    assert log.read().offset.tolist() == [40, 41]
    logdir = kbatch.open_log_dir(root)
    assert logdir.topics == [topic]
    assert [(p.topic, p.partition) for p in logdir.partitions] == [(topic, partition)]
    assert logdir.partition(topic, partition).path == part
    assert logdir.read(threads=1)[(topic, partition)].value.to_pylist() == [b"v1", b"v2"]


# --- index files: preallocated and damaged ------------------------------------------

def _writable_copy(src, dst):
    """A copy of a (read-only) corpus tree that the test may change."""
    shutil.copytree(src, dst)
    dst.chmod(0o755)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    return dst


def _copy_partition(tmp_path, name="invoice-2"):
    return _writable_copy(DATA_DIR / name, tmp_path / name)


def _check_many(ref, log, seed, n=30):
    rng = random.Random(seed)
    ref.check(log.read())
    for _ in range(n):
        b = random_bounds(rng, ref, log.segments)
        args, kw = _pos_args(b)
        ref.check(log.read(*args, **kw), **b)
    for _ in range(n // 4):
        b = random_bounds(rng, ref, log.segments)
        args, kw = _pos_args(b)
        ref.check(kbatch.Records.concat(list(log.iter(*args, chunk_records=7, **kw))), **b)


@needs_corpus
@pytest.mark.parametrize("use_index", [False, True], ids=["walk", "index"])
def test_preallocated_index_tails(use_index, refs, tmp_path):
    """Index files of an active segment are preallocated: zeros after the
    last entry. The zero tail is not made of entries; reads are unchanged."""
    ref = refs["invoice-2"]
    part = _copy_partition(tmp_path)
    original = kbatch.open_log(DATA_DIR / "invoice-2", use_index=use_index)
    grown = 0
    for seg in original.segments:
        for suffix, entry in ((".index", 8), (".timeindex", 12)):
            p = part / (seg.path.stem + suffix)
            if p.exists() and p.stat().st_size >= entry:
                with open(p, "ab") as f:
                    f.write(bytes(entry * 1000))
                grown += 1
    assert grown == 6
    log = kbatch.open_log(part, use_index=use_index)
    for a, b in zip(original.segments, log.segments):
        assert np.array_equal(a.offset_index.offsets, b.offset_index.offsets)
        assert np.array_equal(a.offset_index.positions, b.offset_index.positions)
        assert np.array_equal(a.time_index.timestamps, b.time_index.timestamps)
        assert np.array_equal(a.time_index.offsets, b.time_index.offsets)
        assert b.offset_index.file_entries in (0, len(a.offset_index) + 1000)
    _check_many(ref, log, "prealloc")
    report = kbatch.verify(part)
    assert report.ok, [s.problems() for s in report.segments]


@needs_corpus
@pytest.mark.parametrize("use_index", [False, True], ids=["walk", "index"])
def test_all_zero_index_of_the_active_segment(use_index, refs, tmp_path):
    """The last (active) segment with index files that are only zeros."""
    ref = refs["invoice-2"]
    part = _copy_partition(tmp_path)
    last = sorted(part.glob("*.log"))[-1]
    last.with_suffix(".index").write_bytes(bytes(8 * 4096))
    last.with_suffix(".timeindex").write_bytes(bytes(12 * 4096))
    log = kbatch.open_log(part, use_index=use_index)
    assert len(log.segments[-1].offset_index) <= 1
    assert len(log.segments[-1].time_index) <= 1
    _check_many(ref, log, "all-zero", n=30)


def _rewrite_index(path, change):
    raw = bytearray(path.read_bytes())
    entries = [list(struct.unpack_from(">ii", raw, i)) for i in range(0, len(raw) - 7, 8)]
    change(entries)
    path.write_bytes(b"".join(struct.pack(">ii", *e) for e in entries))


def _batch_positions(data: bytes):
    pos, out = 0, []
    while pos + 12 <= len(data):
        length, = struct.unpack_from(">i", data, pos + 8)
        if length <= 0 or pos + 12 + length > len(data):
            break
        out.append(pos)
        pos += 12 + length
    return out


def _damage(kind, size, positions):
    def change(entries):
        n = len(entries)
        for k, e in enumerate(entries):
            if kind == "past-the-end":
                e[1] = size + 1000 * (k + 1)
            elif kind == "mid-batch":
                e[1] += 7
            elif kind == "negative":
                e[1] = -(k + 1) * 16
            elif kind == "shifted":     # each entry names the position of a later batch
                e[1] = positions[min(positions.index(e[1]) + 3, len(positions) - 1)] \
                    if e[1] in positions else e[1]
            elif kind == "earlier":     # each entry names an earlier batch (a safe lie)
                e[1] = positions[max(positions.index(e[1]) - 2, 0)] if e[1] in positions else 0
            elif kind == "offsets-too-low":
                e[0] = e[0] // 3
            elif kind == "offsets-too-high":
                e[0] = e[0] + 5000
            elif kind == "reversed":
                pass
        if kind == "reversed":
            entries.reverse()
        if kind == "garbage" and n:
            rng = random.Random(size)
            for e in entries:
                e[0], e[1] = rng.randint(0, 1 << 20), rng.randint(0, size)
    return change


DAMAGE = ["past-the-end", "mid-batch", "negative", "shifted", "earlier",
          "offsets-too-low", "offsets-too-high", "reversed", "garbage"]


@needs_corpus
@pytest.mark.parametrize("kind", DAMAGE)
@pytest.mark.parametrize("use_index", [False, True], ids=["walk", "index"])
def test_damaged_offset_index_gives_identical_reads(use_index, refs, tmp_path, kind):
    ref = refs["invoice-2"]
    part = _copy_partition(tmp_path)
    damaged = []
    for log_path in sorted(part.glob("*.log")):
        index = log_path.with_suffix(".index")
        if not index.exists() or index.stat().st_size < 16:
            continue
        data = log_path.read_bytes()
        _rewrite_index(index, _damage(kind, len(data), _batch_positions(data)))
        damaged.append(log_path)
    assert len(damaged) == 3
    log = kbatch.open_log(part, use_index=use_index)
    _check_many(ref, log, f"damaged-{kind}")
    report = kbatch.verify(part)
    assert not report.ok
    by_path = {s.path: s for s in report.segments}
    if kind != "earlier":
        for p in damaged:
            assert by_path[str(p)].index_problems, (kind, p)
    else:
        assert any(by_path[str(p)].index_problems for p in damaged)
    for s in report.segments:
        assert not s.crc_failures and s.end_reason is None


@needs_corpus
def test_verify_is_clean_on_the_real_partitions():
    report = kbatch.verify(DATA_DIR)
    assert len(report.segments) == 20
    assert report.records == sum(
        EXPECTED[str(s.path.relative_to(CORPUS))]["records"]
        for name in PARTITIONS for s in kbatch.open_log(DATA_DIR / name).segments)
    for s in report.segments:
        assert s.valid_bytes == s.size and s.trailing_bytes == 0
        assert not s.crc_failures and not s.offset_problems


@needs_corpus
@pytest.mark.parametrize("kind", ["timestamps-too-low", "offsets-too-high", "offsets-too-low",
                                  "reversed", "garbage"])
@pytest.mark.parametrize("use_index", [False, True], ids=["walk", "index"])
def test_damaged_time_index_gives_identical_reads(use_index, refs, tmp_path, kind):
    """The module promises that a damaged index never changes what a read
    returns; the time index is an index too."""
    ref = refs["invoice-2"]
    part = _copy_partition(tmp_path)
    tmin = int(ref.timestamp.min())
    for ti in part.glob("*.timeindex"):
        raw = ti.read_bytes()
        entries = [list(struct.unpack_from(">qi", raw, i)) for i in range(0, len(raw) - 11, 12)]
        grng = random.Random(ti.name)
        for k, e in enumerate(entries):
            if kind == "timestamps-too-low":
                e[0] = tmin - 1000 + k          # still increasing, all below every record
            elif kind == "offsets-too-high":
                e[1] = e[1] + 20000
            elif kind == "offsets-too-low":
                e[1] = e[1] // 2
            elif kind == "garbage":
                e[0], e[1] = tmin + grng.randint(-5000, 5000), grng.randint(0, 1 << 16)
        if kind == "reversed":
            entries.reverse()
        ti.write_bytes(b"".join(struct.pack(">qi", *e) for e in entries))
    log = kbatch.open_log(part, use_index=use_index)
    rng = random.Random(kind)
    probes = [tmin, tmin + 1] + [int(t) for t in rng.sample(ref.timestamp.tolist(), 30)]
    got = {t: log.offset_for_timestamp(t) for t in probes}
    want = {}
    for t in probes:
        hits = np.flatnonzero(ref.timestamp >= t)
        want[t] = int(ref.offset[hits[0]]) if len(hits) else None
    assert got == want
    for t in probes[:10]:
        ref.check(log.read(start_timestamp=t), start_timestamp=t)
    report = kbatch.verify(part)
    assert any(s.timeindex_problems for s in report.segments)


def test_time_index_entry_that_agrees_with_its_batch_but_not_with_the_log(tmp_path):
    """A time-index entry (T, O) promises that every record up to O is at most
    T. Here the entry matches the batch holding O (its max timestamp is T) but
    an earlier batch is newer, so the promise is false. verify() reports it;
    the exhaustive seek (``use_index=False``: a walk over the batch headers)
    is exact anyway; by default (``use_index=True``) the seek trusts an
    entry that passes the checks, as Kafka does (proving the running maximum
    would mean reading every batch header before the entry), and this lie
    steers it."""
    part = tmp_path / "skew-0"
    part.mkdir()
    a = build_batch([(1000, None, b"new", [])], base_offset=0)
    b = build_batch([(500, None, b"old", [])], base_offset=1)
    (part / "00000000000000000000.log").write_bytes(a + b)
    (part / "00000000000000000000.index").write_bytes(struct.pack(">ii", 1, len(a)))
    (part / "00000000000000000000.timeindex").write_bytes(struct.pack(">qi", 500, 1))
    report = kbatch.verify(part)
    assert not report.ok
    problems = report.segments[0].timeindex_problems
    assert any("below the largest timestamp before it (1000)" in p for p in problems), problems
    exact = [(400, 0), (500, 0), (800, 0), (1000, 0), (1001, None)]
    log = kbatch.open_log(part, use_index=False)
    for t, want in exact:
        assert log.offset_for_timestamp(t) == want, t
    assert log.read(start_timestamp=800).value.to_pylist() == [b"new", b"old"]
    steered = kbatch.open_log(part)
    assert steered.offset_for_timestamp(800) is None
    (part / "00000000000000000000.timeindex").unlink()
    steered = kbatch.open_log(part, use_index=True)
    for t, want in exact:
        assert steered.offset_for_timestamp(t) == want, t


@needs_corpus
@pytest.mark.parametrize("name", PARTITIONS)
def test_use_index_seeks_without_walking_the_segments(refs, name, monkeypatch):
    """With good index files, use_index=True reads ranges and timestamp seeks
    from the index entries alone: no walk over a segment's batch headers."""
    ref = refs[name]

    def no_walk(self):
        raise AssertionError(f"walked {self.path.name}")

    monkeypatch.setattr(kbatch.lib.log.Segment, "batch_bounds", no_walk)
    log = kbatch.open_log(DATA_DIR / name, use_index=True)
    rng = random.Random(f"no-walk-{name}")
    for _ in range(40):
        b = random_bounds(rng, ref, log.segments)
        args, kw = _pos_args(b)
        ref.check(log.read(*args, **kw), **b)
    with pytest.raises(AssertionError, match="walked"):
        kbatch.open_log(DATA_DIR / name, use_index=False).read(
            int(ref.offset[len(ref.offset) // 2]))


# --- other broker directories of the corpus ----------------------------------------------

LOG_DIRS = [
    CORPUS / "DonaldY__kafka-2.7.1" / "kafka-logs",                  # compacted, base offsets > 0
    CORPUS / "mscaldas2012__kafka-connect-spooldir" / "kafka-data",  # empty logs, LAT, lz4
    CORPUS / "taha-hachidi__LogFile" / "kafka-data" / "data",        # thousands of batches, KRaft
    CORPUS / "xpxwo100__bullShit" / "tmp" / "kafka-logs",            # magic 1
    CORPUS / "asayers__kafkalite" / "tests" / "test-data" / "fs-data",  # magic 0 wrappers
    CORPUS / "ronem123__rupia-transaction-service" / "kafka-logs",   # large base offset
]


@needs_corpus
@pytest.mark.parametrize("root", LOG_DIRS, ids=lambda p: p.parts[len(CORPUS.parts)])
def test_log_dir_read_matches_expected_per_file(root):
    """Every partition read on two threads, split back into its files (the
    batch table's ``source``), gives each file's EXPECTED digest."""
    if not root.is_dir():
        pytest.skip(NO_CORPUS)
    logdir = kbatch.open_log_dir(root)
    out = logdir.read(threads=2)
    assert sorted(out) == sorted((p.topic, p.partition) for p in logdir.partitions)
    files = 0
    for p in logdir.partitions:
        rec = out[(p.topic, p.partition)]
        src_of_record = rec.batches.source[rec.batch]
        rows = list(rec)
        for seg in p.segments:
            entry = EXPECTED.get(str(seg.path.relative_to(CORPUS)))
            if entry is None:
                assert seg.path.stat().st_size == 0
                continue
            files += 1
            k = rec.sources.index(str(seg.path))
            mine = [r for r, s in zip(rows, src_of_record.tolist()) if s == k]
            assert len(mine) == entry["records"], seg.path
            assert digest(mine) == entry["digest"], seg.path
            assert int((rec.batches.source == k).sum()) == entry["batches"], seg.path
        if p.segments and len(rec):
            assert (np.diff(rec.offset) > 0).all()
    prefix = str(root.relative_to(CORPUS)) + "/"
    listed = [k for k in EXPECTED if k.startswith(prefix)
              and re.fullmatch(r"[^/]+-\d+/\d{20}\.log", k[len(prefix):])
              and not k[len(prefix):].split("/")[0].endswith(("-delete", "-future", "-stray"))]
    assert files == len(listed) > 0
