"""columns=[...]: a projected read returns exactly the asked columns.

Truth comes from outside kbatch: kafka-python's decoding of Hypothesis
segments (every codec, legacy magic 0/1, headers, nulls, control batches)
and the corpus's EXPECTED.jsonl (records, first/last/next offsets). Columns
left out are ``MissingColumn`` and raise ``ColumnNotReadError``.
"""

import itertools
import json

import numpy as np
import pytest
from hypothesis import given

import kbatch
import kbatch.lib.decoder as decoder_mod
from kbatch.errors import ArgumentError, ColumnNotReadError, CorruptRecordError
from kbatch.lib.columns import MissingColumn
from kbatch.lib.segment import PROJECTABLE

from .kafka_ref import (hypothesis_segments, legacy_message_set, read_with_kafka_python)

SEGMENTS = hypothesis_segments()
# every subset of the projectable columns (63)
SUBSETS = [c for r in range(1, len(PROJECTABLE) + 1)
           for c in itertools.combinations(PROJECTABLE, r)]
BINARY = ("key", "value", "headers")


def assert_projection(part, kr, cols):
    """``part`` (a projected read) holds kafka-python's values for every
    asked column and a MissingColumn of the right length for the others."""
    assert len(part) == len(kr.records)
    assert part.offset.tolist() == kr.column("offset")
    assert part.timestamp.tolist() == kr.column("timestamp")
    assert part.timestamp_type.tolist() == kr.column("timestamp_type")
    for name in BINARY:
        col = getattr(part, name)
        if name in cols:
            assert col.to_pylist() == kr.column(name), name
        else:
            assert isinstance(col, MissingColumn) and len(col) == len(kr.records), name
            assert name not in part.to_arrow().column_names


@given(SEGMENTS)
def test_every_subset_equals_kafka_python(segment):
    buf, _ = segment
    kr = read_with_kafka_python(buf)
    for cols in SUBSETS:
        assert_projection(kbatch.read_segment(buf, columns=list(cols)), kr, cols)
        if "key" in cols or "value" in cols:    # the view loop keeps one or both
            assert_projection(kbatch.read_segment(buf, columns=list(cols), zero_copy=True),
                              kr, cols)


@given(SEGMENTS)
def test_the_skimmed_and_skipped_loops_with_the_python_codecs(segment):
    """Offsets only (the record loop that jumps over key, value, headers) and
    offsets + headers (the loop that walks but does not store keys/values),
    with compressed batches decompressed by Python and fed back."""
    buf, _ = segment
    kr = read_with_kafka_python(buf)
    saved = {n: getattr(decoder_mod, n) for n in
             ("NATIVE_LZ4", "NATIVE_GZIP", "NATIVE_SNAPPY", "NATIVE_ZSTD")}
    try:
        for n in saved:
            setattr(decoder_mod, n, False)
        for cols in (("offset",), ("offset", "headers"), ("value",), ("offset", "key")):
            assert_projection(kbatch.read_segment(buf, columns=list(cols)), kr, cols)
    finally:
        for n, v in saved.items():
            setattr(decoder_mod, n, v)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2])
def test_legacy_and_magic_2_in_one_segment(magic, codec):
    """A segment written before and after a message-format upgrade: legacy
    messages then magic-2 batches, projected."""
    rng = np.random.default_rng(magic * 7 + codec)
    msgs = [(1000 + i, None if i % 5 == 0 else rng.bytes(i % 15),
             None if i % 7 == 0 else rng.bytes((i * 11) % 60)) for i in range(30)]
    legacy = b"".join(legacy_message_set(msgs[i:i + 10], magic=magic, codec=codec,
                                         base_offset=i) for i in range(0, 30, 10))
    buf = legacy + _magic2_tail(base_offset=30)
    kr = read_with_kafka_python(buf)
    for cols in SUBSETS:
        assert_projection(kbatch.read_segment(buf, columns=list(cols)), kr, cols)


def _magic2_tail(base_offset):
    from .kafka_ref import build_batch
    records = [(5000 + i, b"k%d" % i, None if i == 3 else b"v" * i, [("h", b"x")] * (i % 3))
               for i in range(8)]
    return bytes(build_batch(records, base_offset=base_offset))


def _corpus_entries():
    from .conftest import CORPUS
    path = CORPUS / "EXPECTED.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_corpus_offsets_match_expected(corpus):
    """Every corpus file read as offset + timestamp: the record count and
    the first/last/next offsets EXPECTED.jsonl records."""
    entries = [e for e in _corpus_entries() if e["crc_errors"] == 0]
    assert entries
    for e in entries:
        r = kbatch.read_segment(corpus / e["path"], columns=["offset", "timestamp"],
                                on_corrupt="stop")
        assert len(r) == e["records"], e["path"]
        assert isinstance(r.value, MissingColumn)
        if e["records"]:
            assert int(r.offset[0]) >= e["first_offset"], e["path"]
            assert int(r.offset[-1]) <= e["last_offset"], e["path"]
        assert r.end.valid_bytes == e["valid_bytes"], e["path"]


@given(SEGMENTS)
def test_chunks_concat_and_take(segment):
    buf, _ = segment
    kr = read_with_kafka_python(buf)
    cols = ("offset", "key")
    chunks = list(kbatch.iter_segment(buf, columns=list(cols), chunk_records=3))
    joined = kbatch.Records.concat(chunks) if chunks else kbatch.read_segment(buf, columns=list(cols))
    assert_projection(joined, kr, cols)
    if len(joined):
        half = joined.take(np.arange(0, len(joined), 2))
        assert half.key.to_pylist() == kr.column("key")[::2]
        assert isinstance(half.value, MissingColumn) and len(half.value) == len(half)


def test_missing_columns_raise_and_name_the_projection():
    buf = _magic2_tail(0)
    r = kbatch.read_segment(buf, columns=["offset"])
    with pytest.raises(ColumnNotReadError, match=r"'value' was not read \(columns=\[offset\]\)"):
        r.value[0]
    with pytest.raises(ColumnNotReadError):
        r.headers.to_pylist()
    with pytest.raises(ColumnNotReadError):
        r[0]
    assert isinstance(ColumnNotReadError("x"), LookupError)
    assert r.nbytes < kbatch.read_segment(buf).nbytes
    df = r.to_pandas()
    assert "value" not in df.columns and df["offset"].tolist() == list(range(8))


@pytest.mark.parametrize("bad, match", [
    (["offst"], "unknown column 'offst'"),
    ([], "columns is empty"),
    ("offset", "a list of column names"),
    (["batch"], "unknown column 'batch'"),
    (5, "a list of column names"),
])
def test_bad_projections_are_refused(bad, match):
    with pytest.raises(ArgumentError, match=match):
        kbatch.read_segment(_magic2_tail(0), columns=bad)


def test_zero_copy_with_a_projection():
    buf = _magic2_tail(0)
    r = kbatch.read_segment(buf, columns=["offset", "value"], zero_copy=True)
    assert r.value.to_pylist() == kbatch.read_segment(buf).value.to_pylist()
    assert isinstance(r.key, MissingColumn)
    r = kbatch.read_segment(buf, columns=["offset"], zero_copy=True)
    assert isinstance(r.value, MissingColumn)


def _flip(buf: bytes, pos: int) -> bytes:
    out = bytearray(buf)
    out[pos] ^= 0x5A
    return bytes(out)


@given(SEGMENTS)
def test_damage_is_found_as_in_a_full_read(segment):
    """A byte flipped anywhere: with the CRC on, the projected read raises
    (or stops) exactly where the full read does."""
    buf, _ = segment
    if not buf:
        return
    for pos in range(0, len(buf), max(1, len(buf) // 5)):
        bad = _flip(buf, pos)
        outcomes = []
        for cols in (None, ["offset"], ["offset", "headers"]):
            try:
                r = kbatch.read_segment(bad, columns=cols)
                outcomes.append(("ok", r.offset.tolist(), r.end))
            except CorruptRecordError as exc:
                outcomes.append((type(exc).__name__, exc.position, exc.base_offset))
        assert outcomes[1] == outcomes[0] and outcomes[2] == outcomes[0], pos


def test_structural_damage_without_crc_in_the_walked_loop():
    """CRC off: a header count that overruns its record is still refused when
    the headers are walked (offset + headers); an offsets-only read checks
    each record's framing, not its inner fields (documented)."""
    from .kafka_ref import build_batch, varint
    good = bytes(build_batch([(1, b"k", b"v", [("h", b"x")])]))
    # the header count is the byte after the value; make it claim 60 headers
    tail = good.rindex(b"v") + 1
    assert good[tail] == varint(1)[0]
    bad = good[:tail] + varint(60) + good[tail + 1:]
    with pytest.raises(CorruptRecordError):
        kbatch.read_segment(bad, validate_crc=False, columns=["offset", "headers"])
    with pytest.raises(CorruptRecordError):
        kbatch.read_segment(bad, validate_crc=False)
    with pytest.raises(CorruptRecordError):       # the CRC catches it in any mode
        kbatch.read_segment(bad, columns=["offset"])
    r = kbatch.read_segment(bad, validate_crc=False, columns=["offset"])
    assert r.offset.tolist() == [0]


def test_read_committed_and_logs(tmp_path):
    """Projection through open_log / open_log_dir and read_committed."""
    root = tmp_path / "logs"
    w = kbatch.LogWriter(root / "t-0")
    for i, commit in enumerate((True, False, True)):
        w.append([(b"k%d" % i, b"v", 10 + i, [])], producer_id=7, transactional=True)
        w.end_transaction(7, commit=commit)
    w.close()
    kbatch.write_log(root / "t-1", [(None, b"x", 1, [])] * 5)
    log = kbatch.open_log(root / "t-0")
    full = log.read(isolation="read_committed")
    part = log.read(isolation="read_committed", columns=["offset", "key"])
    assert part.offset.tolist() == full.offset.tolist()
    assert part.key.to_pylist() == full.key.to_pylist()
    assert isinstance(part.value, MissingColumn)
    both = kbatch.open_log_dir(root).read(columns=["offset"])
    assert len(full) == 2 and part.key.to_pylist() == [b"k0", b"k2"]
    assert sorted(both) == [("t", 0), ("t", 1)]
    assert [len(both[k]) for k in sorted(both)] == [3, 5]
    assert all(isinstance(r.value, MissingColumn) for r in both.values())
