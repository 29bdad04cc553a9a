"""zero_copy=True: keys and values as Arrow binary views over the source's bytes.

Truth comes from outside kbatch: the corpus digests (EXPECTED.jsonl) and
kafka-python's decoding of Hypothesis-generated segments of every codec;
the copy mode is compared too (same records, same chunks). "No copy" is
checked from addresses: every long value's bytes lie inside the source
(plain batches) or inside a decompressed buffer the column holds.
"""

import gc
import io
import json
import os
import pathlib
import weakref

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kbatch
import kbatch.lib.decoder as decoder_mod
from kbatch._core.coltable import FIXED_COLUMNS
from kbatch.lib.columns import BinaryColumn
from kbatch.lib.views import ViewColumn

from .digest import digest
from .kafka_ref import (build_batch, hypothesis_segments, legacy_message_set,
                        read_with_kafka_python)

SEGMENTS = hypothesis_segments()
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _rows(records):
    return list(zip(records.offset.tolist(), records.timestamp.tolist(),
                    records.timestamp_type.tolist(), records.key.to_pylist(),
                    records.value.to_pylist(), records.headers.to_pylist()))


def assert_same(zc, copy):
    """A zero-copy read holds what the copy read holds, column by column."""
    assert isinstance(zc.key, ViewColumn) and isinstance(zc.value, ViewColumn)
    assert len(zc) == len(copy)
    for name in [c.name for c in FIXED_COLUMNS]:    # offset, timestamp, timestamp_type, batch
        assert np.array_equal(getattr(zc, name), getattr(copy, name)), name
    assert zc.key.to_pylist() == copy.key.to_pylist()
    assert zc.value.to_pylist() == copy.value.to_pylist()
    assert zc.key.null_count == copy.key.null_count
    assert zc.value.null_count == copy.value.null_count
    assert zc.headers == copy.headers
    assert np.array_equal(zc.batches.position, copy.batches.position)
    assert zc.control.key.to_pylist() == copy.control.key.to_pylist()
    assert zc.end == copy.end
    # element access goes through the same values
    for i in range(0, len(zc), max(1, len(zc) // 7)):
        assert zc.key[i] == copy.key[i] and zc.value[i] == copy.value[i]
        assert zc[i] == copy[i]


def _blob(rng, size):
    """``size`` bytes that compress (so the writer keeps the codec)."""
    word = rng.bytes(int(rng.integers(1, 6)))
    return (word * (size // len(word) + 1))[:size]


def _messages(n, seed=0):
    rng = np.random.default_rng(seed)
    sizes = [0, 1, 4, 11, 12, 13, 16, 100, 3000]
    return {
        "key": [None if i % 9 == 0 else _blob(rng, sizes[i % len(sizes)] % 17)
                for i in range(n)],
        "value": [None if i % 13 == 0 else _blob(rng, sizes[(i * 5) % len(sizes)])
                  for i in range(n)],
        "headers": [[("h", rng.bytes(i % 20))] if i % 4 == 0 else [] for i in range(n)],
        "timestamp": list(range(1000, 1000 + n)),
    }


def _address(buf) -> tuple[int, int]:
    arr = np.frombuffer(buf, np.uint8)
    return arr.ctypes.data, arr.ctypes.data + arr.size


def _long_value_addresses(arr: pa.Array) -> list[int]:
    """Addresses of the bytes of every value longer than 12 (out of line)."""
    views = np.frombuffer(arr.buffers()[1], np.int32).reshape(-1, 4)[arr.offset:]
    data = arr.buffers()[2:]
    return [data[b].address + off for length, _, b, off in views.tolist() if length > 12]


# --- independent truth --------------------------------------------------------

def _corpus_entries():
    from .conftest import CORPUS
    path = CORPUS / "EXPECTED.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_corpus_equals_expected_and_copy(corpus):
    """Every corpus file (magic 0, 1 and 2, every codec there): the zero-copy
    read has the recorded digest and equals the copy read."""
    entries = [e for e in _corpus_entries() if e["crc_errors"] == 0]
    assert entries
    for e in entries:
        path = corpus / e["path"]
        zc = kbatch.read_segment(path, zero_copy=True, on_corrupt="stop")
        assert digest(_rows(zc)) == e["digest"], e["path"]
        assert_same(zc, kbatch.read_segment(path, on_corrupt="stop"))
        assert zc.to_arrow().column("value").type == pa.binary_view()


@given(SEGMENTS)
def test_generated_segments_match_kafka_python(segment):
    """Every codec and variant, nulls, empty values, headers, control and
    empty batches: equal to kafka-python's decoding and to the copy mode."""
    buf, _ = segment
    kr = read_with_kafka_python(buf)
    zc = kbatch.read_segment(buf, zero_copy=True)
    assert zc.key.to_pylist() == kr.column("key")
    assert zc.value.to_pylist() == kr.column("value")
    assert zc.offset.tolist() == kr.column("offset")
    assert_same(zc, kbatch.read_segment(buf))
    with_control = kbatch.read_segment(buf, zero_copy=True, include_control=True)
    assert with_control.value.to_pylist() == [r["value"] for r in kr.rows]


@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("native", [True, False])
def test_every_codec_both_paths(tmp_path, monkeypatch, codec, native):
    """Codecs decompressed in the walk (into the arena) and by Python (the
    fed buffer kept) give the same values as kafka-python."""
    if not native:
        for name in ("NATIVE_LZ4", "NATIVE_GZIP", "NATIVE_SNAPPY", "NATIVE_ZSTD"):
            monkeypatch.setattr(decoder_mod, name, False)
    msgs = _messages(700, seed=CODECS[codec])
    path = tmp_path / "s.log"
    kbatch.write_segment(path, msgs, codec=codec, batch_records=50)
    kr = read_with_kafka_python(path.read_bytes())
    zc = kbatch.read_segment(path, zero_copy=True)
    assert set(zc.batches.codec.tolist()) == {CODECS[codec]}
    assert zc.value.to_pylist() == kr.column("value") == msgs["value"]
    assert zc.key.to_pylist() == kr.column("key") == msgs["key"]
    assert_same(zc, kbatch.read_segment(path))


@pytest.mark.parametrize("magic, codec", [(m, c) for m in (0, 1) for c in (0, 1, 2, 3)
                                          if (m, c) != (0, 3)])    # magic 0 has no lz4
def test_legacy_message_sets(magic, codec):
    """Magic 0/1 (plain: views into the source; compressed wrappers: into
    the decompressed bytes) equal kafka-python and the copy mode."""
    rng = np.random.default_rng(magic * 10 + codec)
    msgs = [(1000 + i, None if i % 5 == 0 else rng.bytes(i % 15),
             None if i % 7 == 0 else rng.bytes((i * 11) % 60)) for i in range(40)]
    buf = b"".join(legacy_message_set(msgs[i:i + 10], magic=magic, codec=codec,
                                      base_offset=i) for i in range(0, 40, 10))
    kr = read_with_kafka_python(buf)
    zc = kbatch.read_segment(buf, zero_copy=True)
    assert zc.value.to_pylist() == kr.column("value") == [m[2] for m in msgs]
    assert zc.key.to_pylist() == kr.column("key")
    assert_same(zc, kbatch.read_segment(buf))


# --- what users get -----------------------------------------------------------

def test_arrow_binary_view_points_into_the_mapped_file(tmp_path):
    """Plain batches: the Arrow data buffer is the mapped file itself, so
    every long value's bytes lie inside the mapping (no copy)."""
    msgs = _messages(500)
    path = tmp_path / "s.log"
    kbatch.write_segment(path, msgs)
    records = kbatch.read_segment(path, zero_copy=True)
    col = records.to_arrow().column("value").chunk(0)
    assert col.type == pa.binary_view()
    assert col.to_pylist() == msgs["value"]
    (window,) = records.value.buffers
    assert isinstance(window, memoryview) and window.readonly
    lo, hi = _address(window)
    mapped = np.frombuffer(window.obj, np.uint8)    # the whole mapping
    assert mapped.ctypes.data <= lo and hi <= mapped.ctypes.data + mapped.size
    addrs = _long_value_addresses(col)
    assert addrs and all(lo <= a < hi for a in addrs)
    # the key column shares the same data buffer
    assert records.key.buffers[0].obj is window.obj


def test_bytes_source_values_point_into_it():
    msgs = _messages(300)
    buf = bytearray(_segment_bytes(msgs, "none"))
    records = kbatch.read_segment(buf, zero_copy=True)
    lo, hi = _address(buf)
    addrs = _long_value_addresses(records.value.to_arrow())
    assert addrs and all(lo <= a < hi for a in addrs)
    with pytest.raises(BufferError):
        buf.extend(b"x")     # exported: the result pins it


def _segment_bytes(msgs, codec):
    import io
    out = io.BytesIO()
    kbatch.write_segment(out, msgs, codec=codec, batch_records=40)
    return out.getvalue()


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd", "snappy"])
def test_compressed_values_point_into_the_decompressed_buffers(codec):
    """Compressed batches: values stay where the codec wrote them; the
    column holds those buffers (no per-value copy, no second buffer)."""
    msgs = _messages(400)
    records = kbatch.read_segment(_segment_bytes(msgs, codec), zero_copy=True)
    assert CODECS[codec] in set(records.batches.codec.tolist())
    col = records.value.to_arrow()
    held = [_address(b) for b in records.value.buffers]
    # one arena (numpy) for the compressed batches, one window for plain ones
    assert sum(isinstance(b, np.ndarray) for b in records.value.buffers) == 1
    addrs = _long_value_addresses(col)
    assert addrs and all(any(lo <= a < hi for lo, hi in held) for a in addrs)
    assert col.to_pylist() == msgs["value"]


def test_lifetime_mapping_outlives_everything_but_the_result(tmp_path):
    """The result keeps the mapping: the file deleted, the Records dropped,
    gc run, its Arrow column still reads the values; the mapping goes with
    the last column pointing into it."""
    msgs = _messages(300)
    path = tmp_path / "s.log"
    kbatch.write_segment(path, msgs)
    records = kbatch.read_segment(path, zero_copy=True)
    mapping = weakref.ref(records.value.buffers[0].obj)
    arrow = records.to_arrow()
    value = records.value
    os.unlink(path)
    del records
    gc.collect()
    assert value.to_pylist() == msgs["value"] and value[1] == msgs["value"][1]
    del value
    gc.collect()
    assert mapping() is not None
    assert arrow.column("value").to_pylist() == msgs["value"]
    del arrow
    gc.collect()
    assert mapping() is None


def test_lifetime_of_decompressed_buffers():
    msgs = _messages(300)
    records = kbatch.read_segment(_segment_bytes(msgs, "lz4"), zero_copy=True)
    arrow = records.value.to_arrow()
    del records
    gc.collect()
    np.empty(1 << 22, np.uint8).fill(0xAB)    # reuse freed memory if any was freed
    assert arrow.to_pylist() == msgs["value"]


def test_pandas_take_concat_and_slices():
    msgs = _messages(600)
    data = _segment_bytes(msgs, "none")
    zc = kbatch.read_segment(data, zero_copy=True)
    copy = kbatch.read_segment(data)
    df = zc.to_pandas()
    assert list(df["value"]) == msgs["value"] and list(df["key"]) == msgs["key"]
    arrow_df = zc.to_pandas(binary="arrow")
    assert str(arrow_df["value"].dtype) == "binary_view[pyarrow]"
    assert arrow_df["value"].array._pa_array.to_pylist() == msgs["value"]
    idx = np.array([5, 0, 599, 13, 13, 300])
    assert zc.take(idx).value.to_pylist() == [msgs["value"][i] for i in idx]
    assert zc.value[10:20].to_pylist() == msgs["value"][10:20]
    assert zc.filter(zc.offset % 3 == 0).key.to_pylist() == msgs["key"][::3]
    # concat of views (buffer numbers shifted) and of views with a copy
    both = kbatch.Records.concat([zc.slice(0, 300), kbatch.read_segment(_segment_bytes(
        msgs, "zstd"), zero_copy=True).slice(300, 600)])
    assert both.value.to_pylist() == msgs["value"]
    mixed = kbatch.Records.concat([zc.slice(0, 200), copy.slice(200, 600)])
    assert isinstance(mixed.value, ViewColumn)
    assert mixed.value.to_pylist() == msgs["value"]
    assert mixed.value == copy.value and zc.value == copy.value
    assert list(zc) == list(copy)
    assert zc.nbytes > 0


def test_arrow_c_stream_polars_duckdb():
    msgs = _messages(200)
    zc = kbatch.read_segment(_segment_bytes(msgs, "none"), zero_copy=True)
    table = pa.table(zc)
    assert table.column("value").to_pylist() == msgs["value"]
    polars = pytest.importorskip("polars")
    assert polars.DataFrame(zc)["value"].to_list() == msgs["value"]


@pytest.mark.parametrize("codec", ["none", "lz4"])
def test_iter_chunks_equal_the_copy_chunks(tmp_path, codec):
    msgs = _messages(900)
    path = tmp_path / "s.log"
    kbatch.write_segment(path, msgs, codec=codec, batch_records=30)
    for kw in ({"chunk_records": 100}, {"chunk_bytes": 5000}):
        zc = list(kbatch.iter_segment(path, zero_copy=True, **kw))
        copy = list(kbatch.iter_segment(path, **kw))
        assert [len(c) for c in zc] == [len(c) for c in copy]
        for a, b in zip(zc, copy):
            assert_same(a, b)


def test_open_log_and_open_log_dir(tmp_path):
    msgs = _messages(800)
    root = tmp_path / "data"
    part = root / "t-0"
    kbatch.write_log(part, msgs, codec="snappy", segment_bytes=20000)
    log = kbatch.open_log(part)
    assert_same(log.read(zero_copy=True), log.read())
    assert_same(log.read(100, 700, zero_copy=True), log.read(100, 700))
    chunks = list(log.iter(chunk_records=128, zero_copy=True))
    assert kbatch.Records.concat(chunks).value.to_pylist() == msgs["value"]
    zc = kbatch.open_log_dir(root).read(zero_copy=True, threads=2)
    copy = kbatch.open_log_dir(root).read(threads=2)
    assert list(zc) == list(copy) == [("t", 0)]
    assert_same(zc["t", 0], copy["t", 0])


def test_read_committed_and_skip(tmp_path):
    """Dropped batches and damaged ranges: same records as the copy mode."""
    msgs = _messages(200)
    path = tmp_path / "t.log"
    kbatch.write_segment(path, msgs, producer_id=7, producer_epoch=0,
                         transactional=True, commit=True, batch_records=20)
    assert_same(kbatch.read_segment(path, zero_copy=True, isolation="read_committed"),
                kbatch.read_segment(path, isolation="read_committed"))
    raw = bytearray(_segment_bytes(msgs, "lz4"))
    raw[200] ^= 0xFF     # inside the first batch: CRC mismatch
    assert_same(kbatch.read_segment(bytes(raw), zero_copy=True, on_corrupt="skip"),
                kbatch.read_segment(bytes(raw), on_corrupt="skip"))


def test_default_is_copy_and_views_only_when_asked():
    data = _segment_bytes(_messages(50), "none")
    assert isinstance(kbatch.read_segment(data).value, BinaryColumn)
    assert kbatch.read_segment(data).to_arrow().column("value").type == pa.binary()
    assert isinstance(kbatch.read_segment(data, zero_copy=True).headers.keys, BinaryColumn)


def test_spark_arrow_casts_views_to_binary():
    pytest.importorskip("pyspark")
    from kbatch.spark.arrow import arrow_schema, to_record_batch
    msgs = _messages(100)
    zc = kbatch.read_segment(_segment_bytes(msgs, "none"), zero_copy=True)
    batch = to_record_batch(zc, "t", 0, arrow_schema(["key", "value", "offset"]))
    assert batch.schema.field("value").type == pa.binary()
    assert batch.column(1).to_pylist() == msgs["value"]


def test_zero_copy_after_copy_reads_reuses_pooled_memory(tmp_path):
    """A zero-copy read right after copy reads (the memory pool then holds
    their big blocks) neither crashes nor reserves room for value bytes it
    never writes (regression: a view column's byte count was taken for a
    buffer length and "grown" from a NULL buffer)."""
    rng = np.random.default_rng(5)
    msgs = {"value": [_blob(rng, 2000 + i % 50) for i in range(6000)]}
    path = tmp_path / "big.log"
    kbatch.write_segment(path, msgs, batch_records=100)
    for _ in range(2):
        assert len(kbatch.read_segment(path)) == 6000
    for codec_path in (path, _segment_bytes(msgs, "gzip")):
        records = kbatch.read_segment(codec_path, zero_copy=True)
        assert records.value.to_pylist() == msgs["value"]


def _outcome(buf, **kw):
    try:
        r = kbatch.read_segment(buf, **kw)
    except kbatch.KbatchError as exc:
        return type(exc).__name__
    return (_rows(r), r.end.valid_bytes, r.end.reason, len(r.batches))


_DAMAGE_BASE = {c: _segment_bytes(_messages(120, seed=3), c) for c in ("none", "lz4", "gzip")}


@settings(max_examples=40)
@given(codec=st.sampled_from(sorted(_DAMAGE_BASE)),
       flips=st.lists(st.tuples(st.floats(0, 1), st.integers(0, 7)), min_size=1, max_size=4),
       cut=st.floats(0.5, 1), on_corrupt=st.sampled_from(["raise", "stop", "skip"]))
def test_damaged_segments_same_outcome_as_copy(codec, flips, cut, on_corrupt):
    """Bit flips and truncation: zero copy raises, stops or skips exactly as
    the copy mode does (CRC off too, so damaged records reach the loop)."""
    buf = bytearray(_DAMAGE_BASE[codec])
    for where, bit in flips:
        buf[int(where * (len(buf) - 1))] ^= 1 << bit
    buf = bytes(buf[:int(len(buf) * cut)])
    for crc in (True, False):
        kw = {"on_corrupt": on_corrupt, "validate_crc": crc}
        assert _outcome(buf, zero_copy=True, **kw) == _outcome(buf, **kw)


def _run_child(code: str) -> "subprocess.CompletedProcess":
    import subprocess
    import sys
    import textwrap

    env = {k: v for k, v in os.environ.items() if k != "PYTHONFAULTHANDLER"}
    safe = ["-P"] if sys.flags.safe_path else []   # make test-asan: the sanitized build
    root = pathlib.Path(__file__).resolve().parent.parent
    return subprocess.run([sys.executable, *safe, "-c", textwrap.dedent(code)], cwd=root,
                          capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("keep", ["records", "arrow"])
def test_truncated_after_a_zero_copy_read_does_not_kill_the_process(tmp_path, keep):
    """The file shrinks after the read, then the values are touched: through
    kbatch's accessors (``records``: MappingInvalidatedError) or through an
    Arrow array that outlived the Records (``arrow``: the lost bytes read as
    zeros). Run in a child so a SIGBUS fails the test, not the run."""
    path = tmp_path / "s.log"
    msgs = {"value": [bytes([65 + i % 26]) * 5000 for i in range(400)]}
    kbatch.write_segment(path, msgs)
    child = _run_child(f"""
        import gc, os
        import kbatch
        from kbatch.errors import MappingInvalidatedError
        path = {str(path)!r}
        records = kbatch.read_segment(path, zero_copy=True)
        assert records.value[399] == {msgs["value"][399]!r}
        if {keep!r} == "arrow":
            arr = records.to_arrow().column("value").chunk(0)
            del records
            gc.collect()
            os.truncate(path, 4096)
            tail = arr[399].as_py()            # a lost page: zeros, no signal
            assert tail == bytes(len(tail)), tail[:8]
            print("survived")
        else:
            os.truncate(path, 4096)
            try:
                records.value[398]              # the page faults during this read
            except MappingInvalidatedError as exc:
                assert path in str(exc), exc
                print("raised")
            try:
                records.value.to_pylist()
            except MappingInvalidatedError as exc:
                assert path in str(exc), exc
                print("raised")
            try:
                records.value[399]
            except MappingInvalidatedError:
                print("raised-again")
            try:
                records.to_arrow()
            except MappingInvalidatedError:
                print("raised-arrow")
    """)
    assert child.returncode == 0, child.stderr[-2000:]
    expected = ["survived"] if keep == "arrow" else ["raised", "raised", "raised-again", "raised-arrow"]
    assert child.stdout.split() == expected, child.stdout


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_read_committed_with_aborted_batches(codec):
    """Aborted batches are left out of the views, and their decompressed
    bytes out of the buffers the result keeps."""
    from kbatch.lib.writer import ABORT, COMMIT, SegmentWriter
    out = io.BytesIO()
    with SegmentWriter(out, batch_records=10, codec=codec) as w:
        for k in range(12):
            w.append([(b"k%d-%d" % (k, i), b"v" * 40 + b"%d" % k, 1000 + i)
                      for i in range(10)], producer_id=5, producer_epoch=0, transactional=True)
            w.marker(ABORT if k % 3 == 0 else COMMIT, producer_id=5)
    data = out.getvalue()
    zc = kbatch.read_segment(data, zero_copy=True, isolation="read_committed")
    copy = kbatch.read_segment(data, isolation="read_committed")
    assert_same(zc, copy)
    assert len(copy) == 80
    if codec != "none":     # the arena holds the 8 kept batches' records only
        everything = kbatch.read_segment(data, zero_copy=True)
        held = sum(len(b) for b in zc.value.buffers)
        assert held < sum(len(b) for b in everything.value.buffers) * 0.8
