"""Arrow, pandas, polars and duckdb take kbatch's Records directly.

Values are checked against kafka-python's reading of the same bytes.
"""

import numpy as np
import pyarrow as pa
import pytest

import kbatch

from .kafka_ref import build_batch, read_with_kafka_python


@pytest.fixture(scope="module")
def segment():
    recs = [(1_700_000_000_000 + i, None if i % 5 == 0 else b"k%d" % i,
             None if i % 7 == 0 else b"value-%d" % i,
             [("trace", b"t%d" % i), ("empty", None)] if i % 3 == 0 else [])
            for i in range(300)]
    return b"".join(build_batch(recs[i:i + 50], base_offset=i) for i in range(0, 300, 50))


@pytest.fixture(scope="module")
def expected(segment):
    return read_with_kafka_python(segment).records


def test_arrow_c_stream_into_pyarrow(segment, expected):
    records = kbatch.read_segment(segment)
    table = pa.table(records)          # through __arrow_c_stream__
    assert table.num_rows == len(expected)
    assert table.column("value").to_pylist() == [r["value"] for r in expected]
    assert table.column("headers").to_pylist()[3] == [
        {"key": k, "value": v} for k, v in expected[3]["headers"]]


def test_polars_takes_records(segment, expected):
    pl = pytest.importorskip("polars")
    df = pl.DataFrame(records := kbatch.read_segment(segment))
    assert df.height == len(records)
    assert df["key"].to_list() == [r["key"] for r in expected]
    assert df["offset"].to_list() == [r["offset"] for r in expected]


def test_duckdb_queries_records(segment, expected):
    duckdb = pytest.importorskip("duckdb")
    records = kbatch.read_segment(segment)  # noqa: F841  (found by duckdb by name)
    got = duckdb.sql('select count(*), max("offset"), sum(octet_length(value)), '
                     'count(key) from records').fetchall()[0]
    values = [r["value"] for r in expected]
    assert got == (len(expected), expected[-1]["offset"],
                   sum(len(v) for v in values if v is not None),
                   sum(r["key"] is not None for r in expected))


def test_pandas_bytes_and_arrow_backed(segment, expected):
    records = kbatch.read_segment(segment)
    plain = records.to_pandas()
    assert plain["value"].tolist() == [r["value"] for r in expected]
    assert plain["headers"].tolist() == [r["headers"] for r in expected]
    arrow = records.to_pandas(binary="arrow")
    assert str(arrow["value"].dtype).startswith("binary")
    chunk = arrow["value"].array._pa_array.chunks[0]
    # pyarrow-backed: the value buffer is kbatch's, not a copy
    assert chunk.buffers()[2].address == records.value.data.ctypes.data
    with pytest.raises(ValueError):
        records.to_pandas(binary="strings")


def test_to_arrow_is_zero_copy_for_buffers(segment):
    records = kbatch.read_segment(segment)
    table = records.to_arrow()
    assert table.column("key").chunk(0).buffers()[2].address == records.key.data.ctypes.data
    assert table.column("offset").chunk(0).buffers()[1].address == records.offset.ctypes.data
    ts = table.column("timestamp").chunk(0)
    assert ts.type == pa.timestamp("ms", tz="UTC")
    assert ts.buffers()[1].address == records.timestamp.ctypes.data
    assert np.array_equal(table.column("sequence").to_numpy(), records.sequence)


def test_the_public_names_of_the_issues_are_at_the_top_level(tmp_path):
    """The API contract: these names are used as ``kbatch.<name>``."""
    for name in ("read_segment", "iter_segment", "Records", "CorruptRecordError", "KbatchError",
                 "open_log", "open_log_dir", "verify", "transactions", "write_segment",
                 "write_log", "LogWriter", "SegmentWriter"):
        assert name in kbatch.__all__ and callable(getattr(kbatch, name)), name
    first, last = kbatch.write_log(tmp_path / "t-0", [(b"k", b"v", 1000 + i) for i in range(5)])
    assert (first, last) == (0, 4)
    assert kbatch.open_log(tmp_path / "t-0").read().offset.tolist() == [0, 1, 2, 3, 4]
    kbatch.write_segment(tmp_path / "s.log", [(None, b"x", 1000, [("h", None)])], codec="zstd")
    assert [tuple(r) for r in kbatch.read_segment(tmp_path / "s.log")] == [
        (0, 1000, 0, None, b"x", [("h", None)])]


def test_column_slices_follow_python_slices():
    """``col[a:b:c]`` is ``col.to_pylist()[a:b:c]`` for binary and header
    columns (and costs the rows taken, not the column's length)."""
    recs = [(None if i % 5 == 0 else b"k%d" % i, None if i % 7 == 0 else b"v" * i, 1000 + i,
             [("h", None if i % 3 else b"x")] * (i % 3)) for i in range(60)]
    buf = b"".join(build_batch([r[2:3] + r[:2] + r[3:] for r in recs[i:i + 9]], base_offset=i)
                   for i in range(0, 60, 9))
    rec = kbatch.read_segment(buf)
    for sl in [slice(None), slice(3, 10), slice(None, None, -1), slice(-5, None), slice(10, 3),
               slice(0, 60, 7), slice(-100, 100), slice(50, 2, -3)]:
        assert rec.key[sl].to_pylist() == rec.key.to_pylist()[sl], sl
        assert rec.value[sl].to_pylist() == rec.value.to_pylist()[sl], sl
        assert rec.headers[sl].to_pylist() == rec.headers.to_pylist()[sl], sl
