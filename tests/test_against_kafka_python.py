"""kbatch decodes exactly what kafka-python decodes, field by field.

Segments are generated (kafka_ref.generate_segment): several batches of
every codec and codec variant, keys/values None vs b"" vs bytes, headers
with None/empty values and unicode keys, negative timestamp deltas,
producers with sequences and transactions, offset gaps, LogAppendTime,
control and empty batches. The same bytes go through kbatch and through
kafka-python (kafka_ref.read_with_kafka_python), and every column is compared.
"""

import mmap
import os
import pathlib
import random
import tempfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kbatch
from kbatch._core.coltable import FIXED_COLUMNS
from kbatch.lib.records import BATCH_COLUMNS

from .kafka_ref import (ATTR_DELETE_HORIZON, HEADER_V2, build_batch, control_batch,
                        empty_batch, hypothesis_segments, read_with_kafka_python)

SEGMENTS = hypothesis_segments()
SMALL_SEGMENTS = hypothesis_segments(big=False)

# kbatch column -> kafka_ref batch field (same names; listed to be explicit)
BATCH_FIELDS = (
    "base_offset", "last_offset", "position", "size", "magic", "codec",
    "timestamp_type", "is_transactional", "is_control", "partition_leader_epoch",
    "producer_id", "producer_epoch", "base_sequence", "base_timestamp",
    "max_timestamp", "records_count", "crc", "attributes", "has_delete_horizon",
)


def expected_sequence(kr, row):
    batch = kr.batches[row["batch"]]
    if batch["base_sequence"] == -1:
        return -1
    return (batch["base_sequence"] + row["offset"] - batch["base_offset"]) % (1 << 31)


def fewer_examples(share):
    """A share of the active profile's examples, for the slower properties
    (the "long" profile still hunts harder)."""
    return settings(max_examples=max(5, int(settings.default.max_examples * share)))


# --- comparison helpers ----------------------------------------------------

def assert_matches_kafka(records, kr, *, include_control=False, batch_source=None):
    """``records`` (kbatch) holds what ``kr`` (kafka-python) decoded
    (``batch_source``: each batch's index into ``records.sources``; all 0
    when None)."""
    rows = kr.rows if include_control else kr.records
    assert len(records) == len(rows)
    assert records.offset.dtype == np.int64 and records.timestamp.dtype == np.int64
    assert records.timestamp_type.dtype == np.int8 and records.batch.dtype == np.int32
    assert records.offset.tolist() == [r["offset"] for r in rows]
    assert records.timestamp.tolist() == [r["timestamp"] for r in rows]
    assert records.timestamp_type.tolist() == [r["timestamp_type"] for r in rows]
    assert records.key.to_pylist() == [r["key"] for r in rows]
    assert records.value.to_pylist() == [r["value"] for r in rows]
    assert records.headers.to_pylist() == [r["headers"] for r in rows]
    assert records.batch.tolist() == [r["batch"] for r in rows]
    assert records.is_control.tolist() == [r["is_control"] for r in rows]
    assert records.key.null_count == sum(r["key"] is None for r in rows)
    assert records.value.null_count == sum(r["value"] is None for r in rows)
    assert records.sequence.tolist() == [expected_sequence(kr, r) for r in rows]
    # row access agrees with the columns
    assert [tuple(r) for r in records] == [
        (r["offset"], r["timestamp"], r["timestamp_type"], r["key"], r["value"],
         r["headers"]) for r in rows]
    if len(rows):
        last = records[-1]
        assert (last.offset, last.key, last.value, last.headers) == (
            rows[-1]["offset"], rows[-1]["key"], rows[-1]["value"], rows[-1]["headers"])

    bt = records.batches
    assert len(bt) == len(kr.batches)
    assert set(bt.columns) == set(BATCH_COLUMNS)
    for name in BATCH_FIELDS:
        assert bt[name].tolist() == kr.batch_column(name), name
    assert bt.crc_valid.tolist() == [1] * len(kr.batches)   # validate_crc=True
    assert bt.source.tolist() == (batch_source or [0] * len(kr.batches))
    assert bt.has_delete_horizon.tolist() == [
        bool(b["attributes"] & ATTR_DELETE_HORIZON) for b in kr.batches]

    ctrl = records.control
    assert len(ctrl) == len(kr.control)
    for name in ("offset", "timestamp", "batch", "producer_id", "producer_epoch",
                 "type", "version", "coordinator_epoch"):
        assert getattr(ctrl, name).tolist() == [r[name] for r in kr.control], name
    assert ctrl.key.to_pylist() == [r["key"] for r in kr.control]
    assert ctrl.value.to_pylist() == [r["value"] for r in kr.control]
    names = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
             4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
    assert ctrl.type_names() == [names.get(r["type"], "UNKNOWN") for r in kr.control]
    # control batches carry exactly their one record, in the control table only
    for i, b in enumerate(kr.batches):
        if b["is_control"] and not include_control:
            assert i not in records.batch.tolist()


def assert_same_records(a, b, *, same_source=True):
    """Two kbatch results hold the same columns (used for chunk concatenation);
    ``same_source=False`` when one was read from a file, the other from memory."""
    assert len(a) == len(b)
    for name in [c.name for c in FIXED_COLUMNS]:    # offset, timestamp, timestamp_type, batch
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    assert a.key == b.key and a.value == b.value and a.headers == b.headers
    assert a.key.to_pylist() == b.key.to_pylist()
    assert a.value.to_pylist() == b.value.to_pylist()
    assert a.headers.to_pylist() == b.headers.to_pylist()
    assert a.batches.columns == b.batches.columns and len(a.batches) == len(b.batches)
    for name in a.batches.columns:
        x, y = a.batches[name], b.batches[name]
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    if same_source:
        assert a.sources == b.sources
    for name in ("offset", "timestamp", "batch", "producer_id", "producer_epoch",
                 "type", "version", "coordinator_epoch"):
        assert np.array_equal(getattr(a.control, name), getattr(b.control, name)), name
    assert a.control.key.to_pylist() == b.control.key.to_pylist()
    assert a.control.value.to_pylist() == b.control.value.to_pylist()
    assert a.end == b.end


# what a chunk holds besides its payload (ROW_FIXED_BYTES, kbatch/_core/_columns.pxd):
# the fixed-width columns of kbatch/_core/coltable.py (offset, timestamp,
# timestamp type, batch index), key/value/header offsets 4 + 4 + 4 and the
# key and value validity bits (counted as a byte)
ROW_FIXED_BYTES = sum(c.width for c in FIXED_COLUMNS) + 13


def payload_bytes(records):
    """Keys, values and headers, plus the fixed bytes of every record: what
    ``chunk_bytes`` counts."""
    h = records.headers
    return int(records.key.lengths().sum() + records.value.lengths().sum()
               + h.keys.lengths().sum() + h.values.lengths().sum()
               + ROW_FIXED_BYTES * len(records))


# --- whole reads -----------------------------------------------------------

@given(SEGMENTS)
def test_read_segment_matches_kafka_python(segment):
    buf, _ = segment
    kr = read_with_kafka_python(buf, check_crc=True)
    assert kr.valid_bytes == len(buf)
    records = kbatch.read_segment(buf)
    assert_matches_kafka(records, kr)
    assert records.end == kbatch.SegmentEnd(len(buf), 0, None, None)
    assert records.path is None and records.sources == [None]


@given(SEGMENTS)
def test_generated_records_survive_the_round_trip(segment):
    """The generator's own records come back (guards the reference helpers)."""
    buf, specs = segment
    records = kbatch.read_segment(buf)
    want = [r for s in specs for r in s.records]
    assert records.key.to_pylist() == [r[1] for r in want]
    assert records.value.to_pylist() == [r[2] for r in want]
    assert records.headers.to_pylist() == [list(r[3]) for r in want]
    create = records.timestamp_type == 0
    assert records.timestamp[create].tolist() == [
        r[0] for r, c in zip(want, create.tolist()) if c]
    assert len(records.control) == sum(s.kind == "control" for s in specs)
    assert records.batches.codec.tolist() == [s.codec for s in specs]
    assert records.batches.base_offset.tolist() == [s.base_offset for s in specs]


@given(SEGMENTS)
def test_include_control_puts_control_rows_in_order(segment):
    buf, _ = segment
    kr = read_with_kafka_python(buf, check_crc=True)
    records = kbatch.read_segment(buf, include_control=True)
    assert_matches_kafka(records, kr, include_control=True)
    # the data rows are exactly what a default read returns
    plain = kbatch.read_segment(buf)
    data = records.filter(~records.is_control)
    assert data.offset.tolist() == plain.offset.tolist()
    assert data.key.to_pylist() == plain.key.to_pylist()
    assert data.headers.to_pylist() == plain.headers.to_pylist()
    ctrl = records.filter(records.is_control)
    assert ctrl.offset.tolist() == records.control.offset.tolist()
    assert ctrl.key.to_pylist() == records.control.key.to_pylist()


@fewer_examples(0.4)
@given(SMALL_SEGMENTS)
def test_every_input_type_gives_the_same_records(segment):
    buf, _ = segment
    kr = read_with_kafka_python(buf, check_crc=True)
    ref = kbatch.read_segment(buf)
    assert_matches_kafka(ref, kr)

    sources = {
        "bytearray": bytearray(buf),
        "memoryview": memoryview(buf),
        "memoryview-slice": memoryview(b"\xff" * 3 + buf + b"\xee")[3:-1],
        "numpy": np.frombuffer(buf, dtype=np.uint8),
        "numpy-writable": np.array(np.frombuffer(buf, dtype=np.uint8)),
    }
    for name, source in sources.items():
        got = kbatch.read_segment(source)
        assert_same_records(got, ref)
        chunks = list(kbatch.iter_segment(source, chunk_records=2))
        assert_same_records(kbatch.Records.concat(chunks), ref)

    mm = mmap.mmap(-1, len(buf))
    mm.write(buf)
    assert_same_records(kbatch.read_segment(mm), ref)
    assert_same_records(kbatch.Records.concat(list(kbatch.iter_segment(mm))), ref)
    mm.close()   # no view of the mmap may outlive the read (BufferError)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "00000000000000000000.log")
        with open(path, "wb") as f:
            f.write(buf)
        for source in (path, pathlib.Path(path)):
            got = kbatch.read_segment(source)
            assert got.path == path and got.sources == [path]
            assert_same_records(got, ref, same_source=False)
            chunks = list(kbatch.iter_segment(source, chunk_records=3))
            assert all(c.path == path for c in chunks)
            cat = kbatch.Records.concat(chunks)
            assert cat.sources == [path] and cat.batches.source.tolist() == [0] * len(cat.batches)
            assert_same_records(cat, ref, same_source=False)
        # the result owns its memory: rewriting the file changes nothing
        keys = got.key.to_pylist()
        with open(path, "r+b") as f:
            f.write(b"\0" * len(buf))
        assert got.key.to_pylist() == keys
        assert got.offset.tolist() == kr.column("offset")


def _mapped(path):
    with open("/proc/self/maps") as f:
        return any(line.rstrip().endswith(str(path)) for line in f)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc (Linux)")
def test_path_is_memory_mapped_and_released(tmp_path):
    buf = b"".join([
        build_batch([(1, b"a", b"1" * 5000, [])], base_offset=0, codec=4),
        control_batch(base_offset=1, producer_id=3, producer_epoch=0),
        build_batch([(2, None, b"2", [("k", None)])], base_offset=2),
    ])
    kr = read_with_kafka_python(buf, check_crc=True)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(buf)
    records = kbatch.read_segment(path)
    assert_matches_kafka(records, kr)
    assert records.batches.position.tolist() == kr.batch_column("position")
    assert not _mapped(path), "read_segment left the file mapped"
    chunks = kbatch.iter_segment(path, chunk_records=1)
    first = next(chunks)
    assert _mapped(path), "iter_segment reads a path through a mapping"
    rest = list(chunks)
    assert not _mapped(path), "the mapping outlived the iterator"
    assert_same_records(kbatch.Records.concat([first, *rest]), records)
    # an iterator dropped half-way releases the file too
    chunks = kbatch.iter_segment(path, chunk_records=1)
    next(chunks)
    chunks.close()
    assert not _mapped(path)


def test_empty_inputs():
    for source in (b"", bytearray(), memoryview(b""), np.empty(0, np.uint8)):
        records = kbatch.read_segment(source)
        assert len(records) == 0 and len(records.batches) == 0 and len(records.control) == 0
        assert records.end == kbatch.SegmentEnd(0, 0, None, None)
        chunks = list(kbatch.iter_segment(source))
        assert len(chunks) == 1 and chunks[0].end == records.end


def test_empty_file(tmp_path):
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(b"")
    records = kbatch.read_segment(path)
    assert len(records) == 0 and records.end == kbatch.SegmentEnd(0, 0, None, None)


# --- chunking --------------------------------------------------------------

def check_chunks(chunks, full, kr, *, chunk_records, chunk_bytes):
    """Chunks hold whole batches, cut where the options say, and add up to ``full``."""
    assert chunks, "iter_segment yields at least one chunk"
    assert all(c.end is None for c in chunks[:-1])
    assert chunks[-1].end == full.end
    data_per_batch = [0] * len(kr.batches)
    for r in kr.records:
        data_per_batch[r["batch"]] += 1
    first = 0
    for i, chunk in enumerate(chunks):
        m = len(chunk.batches)
        if i < len(chunks) - 1:
            assert m > 0, "a chunk before the last one is never empty"
        # whole batches, in order: this chunk's batch rows are the next m of full
        assert chunk.batches.position.tolist() == full.batches.position[first:first + m].tolist()
        assert chunk.batch.tolist() == sorted(chunk.batch.tolist())
        counts = np.bincount(chunk.batch, minlength=m).tolist() if len(chunk) else [0] * m
        assert counts == data_per_batch[first:first + m]
        assert chunk.control.batch.tolist() == [
            r["batch"] - first for r in kr.control if first <= r["batch"] < first + m]
        if m:
            rows, size = len(chunk), payload_bytes(chunk)
            last = chunk.slice(len(chunk) - counts[-1], len(chunk))
            before_rows, before_size = rows - counts[-1], size - payload_bytes(last)
            # the chunk was not full before its last batch ...
            assert before_rows < chunk_records and before_size < chunk_bytes
            # ... and chunks before the last one end because they are full
            if i < len(chunks) - 1:
                assert rows >= chunk_records or size >= chunk_bytes
        first += m
    assert first == len(full.batches)
    assert_same_records(kbatch.Records.concat(chunks), full)


@given(SEGMENTS)
def test_same_output_whatever_the_chunking(segment):
    buf, _ = segment
    kr = read_with_kafka_python(buf, check_crc=True)
    full = kbatch.read_segment(buf)
    assert_matches_kafka(full, kr)
    big = 1 << 30
    for k in range(1, len(full) + 2):
        chunks = list(kbatch.iter_segment(buf, chunk_records=k))
        check_chunks(chunks, full, kr, chunk_records=k, chunk_bytes=big)
    for b in (1, 2, 7, 64, 500, 4000):
        chunks = list(kbatch.iter_segment(buf, chunk_bytes=b))
        check_chunks(chunks, full, kr, chunk_records=big, chunk_bytes=b)
        chunks = list(kbatch.iter_segment(buf, chunk_bytes=b, chunk_records=3))
        check_chunks(chunks, full, kr, chunk_records=3, chunk_bytes=b)


@given(SEGMENTS)
def test_chunking_with_control_rows(segment):
    buf, _ = segment
    kr = read_with_kafka_python(buf, check_crc=True)
    full = kbatch.read_segment(buf, include_control=True)
    assert_matches_kafka(full, kr, include_control=True)
    for k in (1, 2, 5):
        chunks = list(kbatch.iter_segment(buf, chunk_records=k, include_control=True))
        assert_same_records(kbatch.Records.concat(chunks), full)
        assert all(c.end is None for c in chunks[:-1]) and chunks[-1].end is not None


@given(SEGMENTS, st.data())
def test_concat_of_any_split_of_the_chunks(segment, data):
    """Concatenating chunk groups, then the groups, is the same as one concat."""
    buf, _ = segment
    full = kbatch.read_segment(buf)
    chunks = list(kbatch.iter_segment(buf, chunk_records=1))
    cut = data.draw(st.integers(0, len(chunks)))
    left = kbatch.Records.concat(chunks[:cut]) if cut else None
    right = kbatch.Records.concat(chunks[cut:]) if cut < len(chunks) else None
    parts = [p for p in (left, right) if p is not None]
    assert_same_records(kbatch.Records.concat(parts), full)


def test_iter_segment_rejects_bad_chunk_sizes():
    buf = build_batch([(0, b"k", b"v", [])])
    with pytest.raises(ValueError):
        kbatch.iter_segment(buf, chunk_records=0)
    with pytest.raises(ValueError):
        kbatch.iter_segment(buf, chunk_bytes=0)


# --- Arrow and pandas ----------------------------------------------------------

@given(SEGMENTS)
def test_to_arrow_schema_and_values(segment):
    import pyarrow as pa
    import pyarrow.compute as pc

    buf, _ = segment
    kr = read_with_kafka_python(buf, check_crc=True)
    records = kbatch.read_segment(buf)
    table = records.to_arrow()
    table.validate(full=True)
    schema = table.schema
    assert schema.field("offset").type == pa.int64()
    assert schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    assert schema.field("timestamp_type").type == pa.int8()
    assert schema.field("key").type == pa.binary()
    assert schema.field("value").type == pa.binary()
    headers_type = schema.field("headers").type
    assert pa.types.is_list(headers_type)
    assert headers_type.value_type == pa.struct([("key", pa.string()), ("value", pa.binary())])
    # the table's fixed columns with an Arrow type (offset, timestamp,
    # timestamp_type first), then key, value, headers
    fixed = [c.name for c in FIXED_COLUMNS if c.arrow is not None]
    assert fixed[:3] == ["offset", "timestamp", "timestamp_type"]
    assert table.column_names[:len(fixed) + 3] == fixed + ["key", "value", "headers"]
    assert table.num_rows == len(kr.records)

    rows = kr.records
    assert table["offset"].to_pylist() == [r["offset"] for r in rows]
    ts = table["timestamp"]
    assert ts.is_null().to_pylist() == [r["timestamp"] == -1 for r in rows]
    assert ts.null_count == sum(r["timestamp"] == -1 for r in rows)
    assert pc.cast(ts, pa.int64()).to_pylist() == [
        None if r["timestamp"] == -1 else r["timestamp"] for r in rows]
    assert table["timestamp_type"].to_pylist() == [r["timestamp_type"] for r in rows]
    assert table["key"].to_pylist() == [r["key"] for r in rows]
    assert table["value"].to_pylist() == [r["value"] for r in rows]
    assert table["headers"].to_pylist() == [
        [{"key": k, "value": v} for k, v in r["headers"]] for r in rows]
    batch_of = [kr.batches[r["batch"]] for r in rows]
    assert table["producer_id"].to_pylist() == [b["producer_id"] for b in batch_of]
    assert table["producer_epoch"].to_pylist() == [b["producer_epoch"] for b in batch_of]
    assert table["partition_leader_epoch"].to_pylist() == [
        b["partition_leader_epoch"] for b in batch_of]
    assert table["is_transactional"].to_pylist() == [b["is_transactional"] for b in batch_of]
    assert table["is_control"].to_pylist() == [False] * len(rows)
    assert table["sequence"].to_pylist() == [expected_sequence(kr, r) for r in rows]

    # the Arrow C stream hands over the same table
    assert pa.table(records).equals(table)

    df = records.to_pandas()
    assert len(df) == len(rows)
    assert df["offset"].tolist() == [r["offset"] for r in rows]
    assert df["key"].tolist() == [r["key"] for r in rows]
    assert df["value"].tolist() == [r["value"] for r in rows]
    assert df["headers"].tolist() == [r["headers"] for r in rows]
    assert df["timestamp"].isna().tolist() == [r["timestamp"] == -1 for r in rows]
    df_arrow = records.to_pandas(binary="arrow")
    assert len(df_arrow) == len(rows)
    assert df_arrow["value"].tolist() == [
        r["value"] if r["value"] is not None else df_arrow["value"].dtype.na_value
        for r in rows]


@given(SEGMENTS, st.data())
def test_take_and_slices_keep_values(segment, data):
    """Selections of the result agree with kafka-python too (Arrow export of
    a non-contiguous take exercises the rebased offsets)."""
    buf, _ = segment
    kr = read_with_kafka_python(buf, check_crc=True)
    records = kbatch.read_segment(buf)
    n = len(records)
    idx = data.draw(st.lists(st.integers(0, max(n - 1, 0)), max_size=12)) if n else []
    picked = records.take(np.array(idx, dtype=np.int64))
    rows = [kr.records[i] for i in idx]
    assert picked.offset.tolist() == [r["offset"] for r in rows]
    assert picked.key.to_pylist() == [r["key"] for r in rows]
    assert picked.value.to_pylist() == [r["value"] for r in rows]
    assert picked.headers.to_pylist() == [r["headers"] for r in rows]
    table = picked.to_arrow()
    table.validate(full=True)
    assert table["headers"].to_pylist() == [
        [{"key": k, "value": v} for k, v in r["headers"]] for r in rows]
    lo = data.draw(st.integers(0, n))
    hi = data.draw(st.integers(lo, n))
    part = records.slice(lo, hi)
    assert part.value.to_pylist() == [r["value"] for r in kr.records[lo:hi]]
    assert part.headers.to_pylist() == [r["headers"] for r in kr.records[lo:hi]]
    part.to_arrow().validate(full=True)


# --- fixed corners --------------------------------------------------------------

def test_control_types_and_kraft_records():
    """ABORT/COMMIT markers carry the coordinator epoch; KRaft and unknown types
    are control records too (epoch -1), none of them data."""
    pid, epoch = 42, 3
    parts = [
        build_batch([(10, b"a", b"1", [])], base_offset=0, producer_id=pid,
                    producer_epoch=epoch, base_sequence=0, transactional=True),
        control_batch(base_offset=1, producer_id=pid, producer_epoch=epoch,
                      control_type=0, coordinator_epoch=7, timestamp=11),
        control_batch(base_offset=2, producer_id=pid, producer_epoch=epoch,
                      control_type=1, coordinator_epoch=8, timestamp=12, codec=1),
        control_batch(base_offset=3, control_type=2, transactional=False,
                      value=b"\x00\x00leader", timestamp=13),
        control_batch(base_offset=4, control_type=3, transactional=False, value=b"",
                      timestamp=14, codec=4),
        control_batch(base_offset=5, control_type=99, transactional=False, value=None,
                      timestamp=15),
        control_batch(base_offset=6, control_type=0, coordinator_epoch=1, timestamp=16,
                      producer_id=pid, producer_epoch=epoch, value=b"\x00\x00"),
        build_batch([(20, None, b"2", [])], base_offset=7),
    ]
    buf = b"".join(parts)
    kr = read_with_kafka_python(buf, check_crc=True)
    records = kbatch.read_segment(buf)
    assert_matches_kafka(records, kr)
    assert records.offset.tolist() == [0, 7]
    ctrl = records.control
    assert ctrl.offset.tolist() == [1, 2, 3, 4, 5, 6]
    assert ctrl.type.tolist() == [0, 1, 2, 3, 99, 0]
    assert ctrl.coordinator_epoch.tolist() == [7, 8, -1, -1, -1, -1]
    assert ctrl.timestamp.tolist() == [11, 12, 13, 14, 15, 16]
    assert ctrl.producer_id.tolist() == [pid, pid, -1, -1, -1, pid]
    assert ctrl.batch.tolist() == [1, 2, 3, 4, 5, 6]
    assert ctrl.type_names() == ["ABORT", "COMMIT", "LEADER_CHANGE", "SNAPSHOT_HEADER",
                                 "UNKNOWN", "ABORT"]
    assert ctrl[1].type_name == "COMMIT" and ctrl[1].coordinator_epoch == 8
    with_ctrl = kbatch.read_segment(buf, include_control=True)
    assert with_ctrl.offset.tolist() == list(range(8))
    assert with_ctrl.is_control.tolist() == [False] + [True] * 6 + [False]


def test_empty_batches_keep_offsets_and_producer_state():
    parts = [
        build_batch([(1, b"k", b"v", [])], base_offset=100, producer_id=9,
                    producer_epoch=2, base_sequence=5),
        empty_batch(base_offset=101, last_offset_delta=4, producer_id=9, producer_epoch=2,
                    base_sequence=6, attributes=4),   # codec bits, no records
        empty_batch(base_offset=106, last_offset_delta=0, attributes=1),
        build_batch([(2, b"k", None, [])], base_offset=107, offset_deltas=[3],
                    last_offset_delta=9),
    ]
    buf = b"".join(parts)
    kr = read_with_kafka_python(buf, check_crc=True)
    records = kbatch.read_segment(buf)
    assert_matches_kafka(records, kr)
    assert records.offset.tolist() == [100, 110]
    assert records.batches.records_count.tolist() == [1, 0, 0, 1]
    assert records.batches.last_offset.tolist() == [100, 105, 106, 116]
    assert records.batches.size.tolist()[1:3] == [HEADER_V2, HEADER_V2]
    assert records.batches.codec.tolist() == [0, 4, 1, 0]
    assert records.batch.tolist() == [0, 3]


def test_log_append_time_uses_max_timestamp():
    buf = build_batch([(5, b"a", b"1", []), (-50, b"b", b"2", [])], log_append_time=777,
                      codec=3, base_offset=10)
    kr = read_with_kafka_python(buf, check_crc=True)
    records = kbatch.read_segment(buf)
    assert_matches_kafka(records, kr)
    assert records.timestamp.tolist() == [777, 777]
    assert records.timestamp_type.tolist() == [1, 1]
    assert records.batches.timestamp_type.tolist() == [1]


# --- large segments: buffers past 1 MiB (mapped, pooled, reused) -------------

def _large_segment(seed, batches=8):
    """A few MB: buffers big enough for kbatch's mapped/pooled column memory."""
    rng = random.Random(seed)
    parts, offset = [], rng.randint(0, 1 << 30)
    for _ in range(batches):
        records = []
        for _ in range(rng.randint(40, 120)):
            value = rng.choice([None, b"", rng.randbytes(rng.randint(10, 2000)) * rng.randint(1, 40)])
            key = rng.choice([None, b"", rng.randbytes(rng.randint(1, 40))])
            headers = [(rng.choice(["a", "trace-id", "é"]), rng.choice([None, b"", rng.randbytes(8)]))
                       for _ in range(rng.randint(0, 3))]
            records.append((rng.randint(0, 1 << 41), key, value, headers))
        codec = rng.choice([0, 0, 3, 4])
        pid = rng.choice([-1, 7])
        parts.append(build_batch(records, codec=codec, base_offset=offset, producer_id=pid,
                                 producer_epoch=1 if pid >= 0 else -1,
                                 base_sequence=offset % 1000 if pid >= 0 else -1))
        offset += len(records) + rng.randint(0, 3)
        if rng.random() < 0.5:
            parts.append(control_batch(base_offset=offset, producer_id=7, producer_epoch=1))
            offset += 1
    return b"".join(parts)


@pytest.fixture(scope="module")
def large_segments():
    out = []
    for seed in range(3):
        buf = _large_segment(seed)
        out.append((buf, read_with_kafka_python(buf, check_crc=True)))
    # values alone fill column buffers well past the 1 MiB mapping threshold
    assert all(sum(len(v or b"") for v in kr.column("value")) > 2 << 20 for _, kr in out)
    return out


def test_large_segments_repeatedly(large_segments):
    """Whole reads and chunked reads, results dropped between rounds so the
    next round decodes into recycled memory: always kafka-python's values."""
    for _round in range(3):
        for buf, kr in large_segments:
            records = kbatch.read_segment(buf)
            assert_matches_kafka(records, kr)
            del records
            seen = 0
            for chunk in kbatch.iter_segment(buf, chunk_bytes=1 << 20, chunk_records=150):
                rows = kr.records[seen:seen + len(chunk)]
                assert chunk.offset.tolist() == [r["offset"] for r in rows]
                assert chunk.key.to_pylist() == [r["key"] for r in rows]
                assert chunk.value.to_pylist() == [r["value"] for r in rows]
                assert chunk.headers.to_pylist() == [r["headers"] for r in rows]
                assert chunk.value.null_count == sum(r["value"] is None for r in rows)
                seen += len(chunk)
                del chunk, rows
            assert seen == len(kr.records)


def test_concurrent_reads_in_threads(large_segments):
    """The decoder releases the GIL: reads in several threads at once (sharing
    the memory pool) each return exactly kafka-python's values."""
    jobs = [large_segments[i % len(large_segments)] for i in range(12)]

    def work(job):
        buf, kr = job
        if len(buf) % 2:
            chunks = list(kbatch.iter_segment(buf, chunk_records=100))
            records = kbatch.Records.concat(chunks)
        else:
            records = kbatch.read_segment(buf)
        ok = (records.offset.tolist() == kr.column("offset")
              and records.key.to_pylist() == kr.column("key")
              and records.value.to_pylist() == kr.column("value")
              and records.headers.to_pylist() == kr.column("headers")
              and records.control.offset.tolist() == [r["offset"] for r in kr.control])
        return ok

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(work, jobs))
    assert results == [True] * len(jobs)
