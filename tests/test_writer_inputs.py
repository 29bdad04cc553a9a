"""API input is input too: whatever a caller passes to the writer raises
ValueError (TypeError for a wrong type) or is written exactly; nothing
crashes the interpreter.

Malformed columns (offsets past the data, decreasing, negative, wrong dtype,
wrong shape, short validity bitmaps, inconsistent header columns) could reach
the compiled encoder (and ``take``'s kernel, pyarrow through ``to_arrow``),
so Hypothesis generates them here and a child process runs them: a segfault fails the test with the case that caused it instead of
killing pytest. A column the writer accepts must come back from kafka-python
exactly as ``to_pylist()`` reads it.

Scalar arguments (offsets, producer id/epoch, timestamps, codecs, sizes) are
plain Python: checked in this process, and nothing is created on disk when
they are refused.
"""

from __future__ import annotations

import io
import pathlib
import pickle
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kbatch
from kbatch.lib.columns import BinaryColumn, HeadersColumn
from kbatch.lib.writer import LogWriter, SegmentWriter, build_batch, control_batch

ROOT = pathlib.Path(__file__).resolve().parent.parent

# --- the child process -------------------------------------------------------

CHILD = r"""
import io, pickle, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[1] + "/tests")
from kbatch.lib.columns import BinaryColumn, HeadersColumn
from kbatch.lib.writer import write_segment
from kafka_ref import read_with_kafka_python

def column(spec, utf8=False):
    return BinaryColumn(*spec, utf8=utf8)

def run(case):
    kind, spec = case
    try:
        if kind == "binary":
            col = column(spec)
            n = len(col)
            # compiled code and pyarrow read through the offsets too
            for op in (lambda: col.to_arrow().to_pylist(),
                       lambda: col.take(np.arange(n)[::-1]).to_pylist()):
                try:
                    op()
                except (ValueError, TypeError, IndexError):
                    pass
            buf = io.BytesIO()
            write_segment(buf, {"key": col, "value": [b"v"] * n, "timestamp": [1] * n})
            expect = [(k, b"v", []) for k in col.to_pylist()]
        else:
            offsets, keys, values = spec
            col = HeadersColumn(offsets, column(keys, utf8=True), column(values))
            n = len(col)
            buf = io.BytesIO()
            write_segment(buf, {"value": [b"v"] * n, "headers": col, "timestamp": [1] * n})
            expect = [(None, b"v", [(k, v) for k, v in h]) for h in col.to_pylist()]
    except (ValueError, TypeError) as e:
        return "refused " + type(e).__name__
    got = [(r["key"], r["value"], r["headers"])
           for r in read_with_kafka_python(buf.getvalue(), check_crc=True).records]
    return "written" if got == expect else f"WRONG {got!r} != {expect!r}"

cases = pickle.load(open(sys.argv[2], "rb"))
for i, case in enumerate(cases):
    print(f"start {i}", flush=True)
    print(f"done {i} {run(case)}", flush=True)
"""


def run_isolated(cases, tmp_path) -> list[str]:
    """Outcome of every case, run in a child process; fails the test on a
    crash, naming the case."""
    path = tmp_path / "cases.pickle"
    path.write_bytes(pickle.dumps(cases))
    proc = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), str(path)],
                          capture_output=True, text=True, timeout=300)
    lines = proc.stdout.splitlines()
    if proc.returncode != 0:
        started = [ln for ln in lines if ln.startswith("start")]
        i = int(started[-1].split()[1]) if started else None
        pytest.fail(f"child exited with {proc.returncode} on case {i}: "
                    f"{cases[i] if i is not None else None!r}\n{proc.stderr[-2000:]}")
    outcomes = [ln.split(" ", 2)[2] for ln in lines if ln.startswith("done")]
    assert len(outcomes) == len(cases), proc.stderr[-2000:]
    return outcomes


# --- generated malformed columns ----------------------------------------------

INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint32, np.uint64]
big = st.integers(-(1 << 62), 1 << 62)
small = st.integers(-3, 24)


@st.composite
def arrays(draw, dtypes, values, max_len=7):
    dtype = draw(st.sampled_from(dtypes))
    vals = draw(st.lists(values, max_size=max_len))
    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    if info is not None:
        vals = [min(max(v, info.min), info.max) for v in vals]
    arr = np.array(vals, dtype=dtype)
    shape = draw(st.sampled_from(["flat", "2d", "strided"]))
    if shape == "2d" and arr.size:
        arr = arr.reshape(1, -1)
    elif shape == "strided" and arr.size:
        arr = np.repeat(arr, 2)[::2]       # not contiguous
    return arr


def offsets_strategy():
    monotone = st.lists(st.integers(0, 6), min_size=0, max_size=6).map(
        lambda steps: np.cumsum([0] + steps).astype(np.int64))
    return st.one_of(
        monotone,                                            # plausible
        monotone.map(lambda a: a + 3),                       # shifted past the data
        arrays(INT_DTYPES, st.one_of(small, big)),           # anything
        arrays([np.float64, np.float32], small),             # wrong dtype
        st.just([0, 1, 2]),                                  # not an array
    )


@st.composite
def binary_spec(draw):
    offsets = draw(offsets_strategy())
    data = draw(st.one_of(
        st.binary(max_size=16).map(lambda b: np.frombuffer(b, np.uint8).copy()),
        arrays([np.int32, np.int8], small),
        st.just(b"abc"),
    ))
    validity = draw(st.one_of(
        st.none(),
        st.binary(max_size=2).map(lambda b: np.frombuffer(b, np.uint8).copy()),
        arrays([np.int64, np.uint8], st.integers(0, 255), max_len=2),
    ))
    null_count = draw(st.integers(-2, 8))
    return offsets, data, validity, null_count


@st.composite
def valid_binary_spec(draw, utf8=False):
    values = draw(st.lists(st.one_of(st.none(), st.text(max_size=4) if utf8 else
                                     st.binary(max_size=4)), max_size=6))
    col = BinaryColumn.from_pylist(values)
    return col.offsets, col.data, col.validity, col.null_count


@st.composite
def headers_spec(draw):
    return (draw(offsets_strategy()),
            draw(st.one_of(valid_binary_spec(utf8=True), binary_spec())),
            draw(st.one_of(valid_binary_spec(), binary_spec())))


@settings(max_examples=15)
@given(st.lists(st.one_of(st.tuples(st.just("binary"), binary_spec()),
                          st.tuples(st.just("headers"), headers_spec())),
                min_size=1, max_size=25))
def test_malformed_columns_are_refused_or_written_exactly(tmp_path_factory, cases):
    outcomes = run_isolated(cases, tmp_path_factory.mktemp("cases"))
    wrong = [(c, o) for c, o in zip(cases, outcomes) if not o.startswith(("refused", "written"))]
    assert not wrong, wrong


# --- the crafted cases of issue 11, each named ------------------------------

CRAFTED = [
    ("offsets past the data", ("binary", (np.array([0, 1 << 40]), np.zeros(4, np.uint8),
                                          None, 0))),
    ("decreasing offsets", ("binary", (np.array([5, 0]), np.zeros(8, np.uint8), None, 0))),
    ("negative offsets", ("binary", (np.array([-8, 0]), np.zeros(8, np.uint8), None, 0))),
    ("float offsets", ("binary", (np.array([0.0, 1.0]), np.zeros(8, np.uint8), None, 0))),
    ("int32 data", ("binary", (np.array([0, 1]), np.zeros(8, np.int32), None, 0))),
    ("2-D offsets", ("binary", (np.array([[0, 1]]), np.zeros(8, np.uint8), None, 0))),
    ("short validity", ("binary", (np.arange(20), np.zeros(20, np.uint8),
                                   np.zeros(1, np.uint8), 3))),
    ("null count without bitmap", ("binary", (np.array([0, 1]), np.zeros(1, np.uint8),
                                              None, 1))),
    ("headers past their entries", ("headers", (np.array([0, 9]), *[
        (np.array([0, 1]), np.frombuffer(b"k", np.uint8).copy(), None, 0)] * 2))),
    ("headers decreasing", ("headers", (np.array([1, 0]), *[
        (np.array([0, 1]), np.frombuffer(b"k", np.uint8).copy(), None, 0)] * 2))),
    ("header key split inside a character", ("headers", (np.array([0, 2]), (
        np.array([0, 1, 2]), np.frombuffer("é".encode(), np.uint8).copy(), None, 0), (
        np.array([0, 1, 2]), np.zeros(2, np.uint8), None, 0)))),
    ("null header key", ("headers", (np.array([0, 1]), (
        np.array([0, 0]), np.zeros(0, np.uint8), np.zeros(1, np.uint8), 1), (
        np.array([0, 1]), np.zeros(1, np.uint8), None, 0)))),
]


def test_crafted_malformed_columns_are_refused(tmp_path):
    outcomes = run_isolated([c for _, c in CRAFTED], tmp_path)
    assert [(name, o) for (name, _), o in zip(CRAFTED, outcomes)] == [
        (name, o) for (name, _), o in zip(CRAFTED, outcomes) if o.startswith("refused")]


# --- scalar arguments -----------------------------------------------------------

ROWS = [(b"k", b"v", 1000)]
BAD_INT = st.one_of(st.floats(allow_nan=True), st.text(max_size=3), st.none(),
                    st.booleans(), st.just(b"1"), st.just([1]))


def out_of(lo: int, hi: int):
    return st.one_of(st.integers(max_value=lo - 1), st.integers(min_value=hi + 1))


ARGUMENTS = {
    # write_segment keyword: values that must be refused
    "base_offset": st.one_of(out_of(0, (1 << 63) - 1), BAD_INT),
    "producer_id": st.one_of(out_of(-1, (1 << 63) - 1), BAD_INT),
    "producer_epoch": st.one_of(out_of(-1, (1 << 15) - 1),
                                BAD_INT.filter(lambda v: v is not None)),
    "batch_records": st.one_of(out_of(1, (1 << 31) - 1), BAD_INT),
    "batch_bytes": st.one_of(out_of(1, (1 << 31) - 1), BAD_INT),
    "codec": st.one_of(st.text(max_size=6).filter(
        lambda s: s.lower() not in ("none", "gzip", "snappy", "lz4", "zstd")),
        st.integers().filter(lambda i: i not in range(5)), st.booleans(), st.floats()),
    "timestamp_type": st.text(max_size=8).filter(lambda s: s not in ("create", "log_append")),
    "log_append_time": st.one_of(out_of(-1, (1 << 63) - 1),
                                 BAD_INT.filter(lambda v: v is not None)),
}


@settings(max_examples=40)
@given(st.sampled_from(sorted(ARGUMENTS)).flatmap(
    lambda name: st.tuples(st.just(name), ARGUMENTS[name])))
def test_bad_scalar_arguments_are_refused_before_any_file(tmp_path_factory, arg):
    name, value = arg
    path = tmp_path_factory.mktemp("w") / "s.log"
    with pytest.raises((ValueError, TypeError)):
        kbatch.write_segment(path, ROWS, producer_id=7, **{name: value}) \
            if name == "producer_epoch" else kbatch.write_segment(path, ROWS, **{name: value})
    assert not path.exists()


@settings(max_examples=40)
@given(st.one_of(
    st.lists(st.one_of(out_of(-1, (1 << 63) - 1), st.floats(), st.text(max_size=2)),
             min_size=1, max_size=3),
    st.lists(st.integers(-1, 10), min_size=2, max_size=2).map(lambda t: [t]),   # 2-D
    st.just([1, 2, 3]),                                                         # wrong length
))
def test_bad_timestamps_are_refused(tmp_path_factory, stamps):
    path = tmp_path_factory.mktemp("w") / "s.log"
    n = len(stamps) if len(stamps) != 3 else 2
    with pytest.raises((ValueError, TypeError)):
        kbatch.write_segment(path, {"value": [b"v"] * n, "timestamp": stamps})
    assert not path.exists()


@pytest.mark.parametrize("records", [
    None, b"bytes", "text", 5, [b"not a row"], [(b"k",)], [(b"k", b"v", 1, [], 9)],
    [(b"k", 5)], [(5, b"v")], [(b"k", b"v", 1, [("key",)])], [(b"k", b"v", 1, [(5, b"v")])],
    [(b"k", b"v", 1, [("k", 5)])], [(b"k", b"v", 1, [(b"\xff", b"v")])],
    {"key": [b"k"]}, {"value": [b"v"], "key": [b"k", b"k"]}, {"value": [b"v"], "extra": [1]},
    {"value": [b"v"], "offset": [-5]}, {"value": [b"v"], "headers": [[], []]},
])
def test_malformed_records_are_refused(tmp_path, records):
    path = tmp_path / "s.log"
    with pytest.raises((ValueError, TypeError)):
        kbatch.write_segment(path, records, keep_offsets=True)
    assert not path.exists()


def test_keep_offsets_must_increase_and_fit_int32_deltas():
    with pytest.raises(ValueError):
        kbatch.write_segment(io.BytesIO(), {"value": [b"a", b"b"], "offset": [5, 5]},
                             keep_offsets=True)
    # one segment holds offsets up to 2**31 - 1 past its base (int32 relative
    # offsets in its indexes); LogWriter rolls instead (next test)
    with pytest.raises(ValueError, match="segment based at 0"):
        kbatch.write_segment(io.BytesIO(), {"value": [b"a", b"b"], "offset": [0, 1 << 32]},
                             keep_offsets=True)


def test_log_writer_rolls_before_relative_offsets_overflow(tmp_path):
    with LogWriter(tmp_path / "t-0", preallocate_indexes=False) as log:
        log.append({"value": [b"a", b"b"], "offset": [0, (1 << 31) + 5]}, keep_offsets=True)
    names = sorted(p.name for p in (tmp_path / "t-0").glob("*.log"))
    assert names == ["00000000000000000000.log", f"{(1 << 31) + 5:020d}.log"]


@pytest.mark.parametrize("call", [
    lambda w: w.marker(2, producer_id=1),
    lambda w: w.marker(1, producer_id=-1),
    lambda w: w.marker(1, producer_id=1, producer_epoch=1 << 15),
    lambda w: w.marker(1, producer_id=1, coordinator_epoch=1 << 31),
    lambda w: w.marker(1, producer_id=1, timestamp=-2),
    lambda w: w.append(ROWS, transactional=True),
    lambda w: w.append(ROWS, producer_id=1, producer_epoch=-2),
    lambda w: w.append_batch(b"\x00" * 10),
    lambda w: w.append_batch("text"),
    lambda w: w.append_batch(build_batch(b"", count=0, base_offset=0, last_offset_delta=0,
                                         base_timestamp=0, max_timestamp=0)[:-1] + b"\x01"),
])
def test_segment_writer_methods_refuse_bad_arguments(call):
    with SegmentWriter(io.BytesIO()) as w:
        w.append(ROWS)
        with pytest.raises((ValueError, TypeError)):
            call(w)


@pytest.mark.parametrize("kwargs", [
    {"segment_bytes": 0}, {"segment_bytes": "1"}, {"index_interval_bytes": -1},
    {"base_offset": -1}, {"codec": "brotli"}, {"partition_leader_epoch": 1 << 31},
    {"time_index_offset": "max"}, {"batch_records": 0},
])
def test_log_writer_refuses_bad_options_before_creating_the_directory(tmp_path, kwargs):
    with pytest.raises((ValueError, TypeError)):
        LogWriter(tmp_path / "t-0", **kwargs)
    assert not (tmp_path / "t-0").exists()


def test_append_batch_refuses_offsets_that_do_not_follow(tmp_path):
    batch = build_batch(b"", count=0, base_offset=0, last_offset_delta=0,
                        base_timestamp=0, max_timestamp=0)
    with LogWriter(tmp_path / "t-0") as log:
        log.append_batch(batch)
        with pytest.raises(ValueError, match="follow"):
            log.append_batch(batch)
        with pytest.raises(ValueError):
            control_batch(3, base_offset=1, producer_id=1, producer_epoch=0, timestamp=0)


def test_columns_constructors_check_types_at_once():
    with pytest.raises(TypeError):
        BinaryColumn([0, 1], np.zeros(1, np.uint8))
    with pytest.raises(ValueError):
        BinaryColumn(np.zeros(0, np.int64), np.zeros(1, np.uint8))
    with pytest.raises(ValueError):
        BinaryColumn(np.array([0, 1]), np.zeros(1, np.uint8), np.zeros(1, np.uint8), -1)
    with pytest.raises(TypeError):
        HeadersColumn(np.array([0]), [], [])


def test_the_asked_codec_is_written_even_where_it_does_not_pay(tmp_path):
    """Kafka's MemoryRecordsBuilder writes the configured codec whatever the
    gain: one 50-byte random value in each codec is read back by
    kafka-python with that codec and the same value."""
    from tests.kafka_ref import read_with_kafka_python
    value = np.random.default_rng(1).bytes(50)
    for codec, number in (("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4)):
        buf = io.BytesIO()
        w = SegmentWriter(buf, codec=codec)
        w.append([{"value": value}])
        got = read_with_kafka_python(buf.getvalue())
        assert got.batches[0]["codec"] == number, codec
        assert [r["value"] for r in got.records] == [value]


def test_producer_state_a_broker_refuses_is_refused(tmp_path):
    """ProducerAppendInfo: an older epoch than a producer's latest is
    refused; a new epoch (a batch's or a marker's) starts its sequence again
    at 0; a non-transactional batch while the producer's transaction is open
    is refused; a log append time below 0 is refused."""
    from tests.kafka_ref import read_with_kafka_python
    with LogWriter(tmp_path / "t-0") as w:
        w.append([{"value": b"a"}, {"value": b"b"}], producer_id=7, producer_epoch=0,
                 transactional=True)
        with pytest.raises(ValueError, match="open transaction"):
            w.append([{"value": b"x"}], producer_id=7, producer_epoch=0)
        w.end_transaction(7, commit=True, producer_epoch=0)
        w.append([{"value": b"c"}], producer_id=7, producer_epoch=1, transactional=True)
        w.end_transaction(7, commit=False, producer_epoch=2)  # an abort that bumps the epoch
        w.append([{"value": b"d"}, {"value": b"e"}], producer_id=7, producer_epoch=2)
        with pytest.raises(ValueError, match="epoch 1 is older"):
            w.append([{"value": b"f"}], producer_id=7, producer_epoch=1)
        with pytest.raises(ValueError, match="epoch 0 is older"):
            w.end_transaction(7, commit=True, producer_epoch=0)
        with pytest.raises(ValueError, match="log_append_time"):
            w.append([{"value": b"g"}], timestamp_type="log_append", log_append_time=-1)
    got = read_with_kafka_python(next((tmp_path / "t-0").glob("*.log")).read_bytes())
    data = [b for b in got.batches if not b["is_control"]]
    assert [(b["producer_epoch"], b["base_sequence"]) for b in data] == [(0, 0), (1, 0), (2, 0)]


def test_a_directory_holding_a_log_is_refused_and_left_as_it_was(tmp_path):
    """The writer starts new logs only: a second write_log, or a LogWriter,
    into a directory holding segments used to overwrite the segment at its
    base offset (offsets lost, or written twice) with no error."""
    part = tmp_path / "t-0"
    kbatch.write_log(part, [{"key": b"k%d" % i, "value": b"v"} for i in range(30)],
                     segment_bytes=1000)
    before = {p.name: p.read_bytes() for p in part.iterdir()}
    with pytest.raises(kbatch.ArgumentError, match="already holds a log"):
        kbatch.write_log(part, [{"value": b"new"}])
    with pytest.raises(kbatch.ArgumentError, match="already holds a log"):
        kbatch.LogWriter(part, base_offset=30)
    assert {p.name: p.read_bytes() for p in part.iterdir()} == before


def test_a_row_with_an_unknown_field_is_refused_before_anything_is_written(tmp_path):
    # "valeu" would have been written as a null value: a tombstone
    for row in ({"key": b"u", "valeu": b"x"}, {"value": b"x", "offset": 5}):
        with pytest.raises(ValueError, match="unknown field"):
            kbatch.write_log(tmp_path / "t-0", [row])
        assert not (tmp_path / "t-0").exists()


def test_header_bytes_count_toward_batch_bytes(tmp_path):
    """Records whose bytes are all in one 300 KB header: batches stay near
    batch_bytes (one record each here), as kafka-python reads them; they
    were cut as if headers weighed 8 bytes, into a 900-record batch of
    270 MB that kbatch's own decompression cap then refused."""
    from tests.kafka_ref import read_with_kafka_python
    rows = [{"value": b"v", "headers": [("h", b"x" * 300_000)]} for _ in range(20)]
    kbatch.write_log(tmp_path / "t-0", rows, codec="zstd")
    [seg] = (tmp_path / "t-0").glob("*.log")
    batches = read_with_kafka_python(seg.read_bytes())
    assert [b["records_count"] for b in batches.batches] == [1] * 20
    assert [r["headers"][0][1] for r in batches.records] == [b"x" * 300_000] * 20
    assert len(kbatch.open_log(tmp_path / "t-0").read()) == 20


def test_only_a_log_makes_a_directory_taken(tmp_path, capfd):
    """Files that are not segments (notes.log, a folder x.log, .deleted
    leftovers a broker deletes) do not make a directory taken; kbatch
    sample --force into a directory holding a sample says so up front."""
    from kbatch.tools.cli import main
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "notes.log").write_text("n")
    (part / "x.log").mkdir()
    (part / "00000000000000000000.log.deleted").write_bytes(b"old")
    kbatch.write_log(part, [{"value": b"v"}])
    assert len(kbatch.open_log(part).read()) == 1
    assert main(["sample", str(tmp_path / "s"), "--records", "200"]) == 0
    assert main(["sample", str(tmp_path / "s"), "--records", "200", "--force"]) == 2
    assert "already holds logs" in capfd.readouterr().err


def test_records_of_aborted_or_open_transactions_are_refused(tmp_path):
    """Records read with read_uncommitted that hold an aborted transaction's
    records, or an open one's (no marker among them: a range cut before its
    marker), would be written as plain records that every consumer of the
    copy sees: refused before anything is written. Committed transactions
    and read_committed reads are written; a mapping of the columns writes
    every record, as asked. The partition comes from the tests' own encoder."""
    from tests.kafka_ref import ABORT, COMMIT, build_batch as ref_batch, \
        control_batch as ref_control, read_with_kafka_python
    from tests.lifecycle_ref import write_partition
    t = 1_700_000_000_000
    batches = [
        ref_batch([(t, b"k", b"plain", [])], base_offset=0),
        ref_batch([(t, b"k", b"committed", [])], base_offset=1, producer_id=5,
                  producer_epoch=0, base_sequence=0, transactional=True),
        ref_control(base_offset=2, producer_id=5, producer_epoch=0, control_type=COMMIT),
        ref_batch([(t, b"k", b"aborted", [])], base_offset=3, producer_id=7,
                  producer_epoch=0, base_sequence=0, transactional=True),
        ref_control(base_offset=4, producer_id=7, producer_epoch=0, control_type=ABORT),
    ]
    src = kbatch.open_log(write_partition(tmp_path / "t-0", [batches]))
    values = [r["value"] for r in read_with_kafka_python(b"".join(batches)).records]
    assert values == [b"plain", b"committed", b"aborted"]
    for name, records in (("whole", src.read()), ("open", src.read(0, 2)),
                          ("open-only", src.read(3, 4))):
        with pytest.raises(ValueError, match="of open transactions|of aborted"):
            kbatch.write_log(tmp_path / f"{name}-0", records)
        assert not (tmp_path / f"{name}-0").exists()
    # committed only: written (its marker is among the records)
    kbatch.write_log(tmp_path / "committed-0", src.read(0, 3))
    # read_committed: what a consumer sees, written
    kbatch.write_log(tmp_path / "rc-0", src.read(isolation="read_committed"))
    rc = b"".join(p.read_bytes() for p in sorted((tmp_path / "rc-0").glob("*.log")))
    assert [r["value"] for r in read_with_kafka_python(rc).records] == values[:2]
    # an aborted record joined to a read_committed read is still an aborted
    # record: its ABORT marker is among them
    r = src.read()
    joined = kbatch.Records.concat([r.take(np.array([2])), src.read(isolation="read_committed")])
    with pytest.raises(ValueError, match="1 record.s. of aborted"):
        kbatch.write_log(tmp_path / "joined-0", joined)
    # a join holds a read_committed read's LSO only where every part has one:
    # an open transaction's record (its marker outside the range) joined
    # after or before a read_committed read is refused, not written as data
    rc_read = src.read(0, 3, isolation="read_committed")    # no marker of pid 7
    for order in ((src.read(3, 4), rc_read), (rc_read, src.read(3, 4))):
        joined = kbatch.Records.concat(list(order))
        assert joined.last_stable_offset is None
        with pytest.raises(ValueError, match="1 of open transactions"):
            kbatch.write_log(tmp_path / "open-joined-0", joined)
        assert not (tmp_path / "open-joined-0").exists()
    both = kbatch.Records.concat([rc_read, rc_read])
    assert both.last_stable_offset == rc_read.last_stable_offset
    # an empty part holds no record: it does not take the join's LSO away
    for k, empty in enumerate((kbatch.Records.empty(), src.read(0, 0))):
        joined = kbatch.Records.concat([rc_read, empty])
        assert joined.last_stable_offset == rc_read.last_stable_offset
        kbatch.write_log(tmp_path / f"with-empty{k}-0", joined)
    # every record as a plain record, asked for with a mapping of the columns
    kbatch.write_log(tmp_path / "all-0", {"key": r.key, "value": r.value,
                                          "timestamp": r.timestamp, "headers": r.headers})
    every = b"".join(p.read_bytes() for p in sorted((tmp_path / "all-0").glob("*.log")))
    assert [r["value"] for r in read_with_kafka_python(every).records] == values


def test_a_join_of_two_partitions_pairs_markers_within_each(tmp_path):
    """One producer's transactions in two partitions: committed in t-0,
    aborted in t-1. Joined (``Records.concat``), t-1's ABORT ends only
    t-1's transaction: the read_committed join is written whole, and a
    read_uncommitted join is refused for t-1's aborted records alone."""
    from tests.kafka_ref import ABORT, COMMIT, build_batch as ref_batch, \
        control_batch as ref_control, read_with_kafka_python
    from tests.lifecycle_ref import write_partition
    t = 1_700_000_000_000
    committed = [ref_batch([(t, b"k", b"c%d" % i, []) for i in range(3)], base_offset=0,
                           producer_id=7, producer_epoch=0, base_sequence=0,
                           transactional=True),
                 ref_batch([(t, b"k", b"p%d" % i, []) for i in range(7)], base_offset=3),
                 ref_control(base_offset=10, producer_id=7, producer_epoch=0,
                             control_type=COMMIT)]
    aborted = [ref_batch([(t, b"k", b"a%d" % i, []) for i in range(2)], base_offset=0,
                         producer_id=7, producer_epoch=0, base_sequence=0, transactional=True),
               ref_batch([(t, b"k", b"q%d" % i, []) for i in range(3)], base_offset=2),
               ref_control(base_offset=5, producer_id=7, producer_epoch=0, control_type=ABORT)]
    write_partition(tmp_path / "data" / "t-0", [committed])
    write_partition(tmp_path / "data" / "t-1", [aborted])
    d = kbatch.open_log_dir(tmp_path / "data")
    rc = d.read(isolation="read_committed")
    for i, order in enumerate(([("t", 0), ("t", 1)], [("t", 1), ("t", 0)])):
        kbatch.write_log(tmp_path / f"rc{i}-0", kbatch.Records.concat([rc[k] for k in order]))
        got = b"".join(p.read_bytes() for p in sorted((tmp_path / f"rc{i}-0").glob("*.log")))
        want = {("t", 0): [b"c0", b"c1", b"c2"] + [b"p%d" % j for j in range(7)],
                ("t", 1): [b"q0", b"q1", b"q2"]}
        assert [r["value"] for r in read_with_kafka_python(got).records] == \
            [v for k in order for v in want[k]]
    ru = d.read()
    with pytest.raises(ValueError, match="^2 record.s. of aborted and 0 of open"):
        kbatch.write_log(tmp_path / "ru-0", kbatch.Records.concat([ru[("t", 0)], ru[("t", 1)]]))


def test_two_copies_of_one_partition_are_one_partition_and_markers_are_not_data(tmp_path):
    """A transaction read from one copy of partition t-0 (``arch/t-0``) and
    its COMMIT from another (``live/t-0``): one partition, so the joined
    read_uncommitted records are committed and written. Control records
    taken in as rows (``include_control=True``) are refused: written, they
    would be data records."""
    from tests.kafka_ref import COMMIT, build_batch as ref_batch, \
        control_batch as ref_control, read_with_kafka_python
    from tests.lifecycle_ref import write_partition
    t = 1_700_000_000_000
    txn = ref_batch([(t, b"k", b"x%d" % i, []) for i in range(3)], base_offset=0,
                    producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    marker = ref_control(base_offset=3, producer_id=7, producer_epoch=0, control_type=COMMIT)
    write_partition(tmp_path / "arch" / "t-0", [[txn]])
    write_partition(tmp_path / "live" / "t-0", [[marker]])
    joined = kbatch.Records.concat([kbatch.open_log(tmp_path / "arch" / "t-0").read(),
                                    kbatch.open_log(tmp_path / "live" / "t-0").read()])
    kbatch.write_log(tmp_path / "out-0", joined)
    got = b"".join(p.read_bytes() for p in sorted((tmp_path / "out-0").glob("*.log")))
    assert [r["value"] for r in read_with_kafka_python(got).records] == [b"x0", b"x1", b"x2"]
    with_markers = kbatch.read_segment(txn + marker, include_control=True)
    with pytest.raises(ValueError, match="1 control record.s. .* would be written as data"):
        kbatch.write_log(tmp_path / "markers-0", with_markers)
