"""iter_segment(isolation="read_committed"): one decode after a pass over the
batch headers and control records; the chunks equal read_segment's result
(and raise the same error where the data is damaged).

Truth for the transaction rules is tests/test_txn.py (a model written in the
tests); here the streaming path is held to the whole read on generated
transactional segments (aborts, commits, interleaved producers, markers in
any chunk) and on damaged copies of them.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import kbatch
from kbatch.errors import CorruptRecordError, FileChangedError

from .kafka_ref import ABORT, COMMIT, build_batch, control_batch, hypothesis_segments

RC = "read_committed"


def _rows(records):
    return list(zip(records.offset.tolist(), records.key.to_pylist(),
                    records.value.to_pylist()))


def _outcome(read):
    try:
        r = read()
        return ("ok", _rows(r), r.last_stable_offset)
    except CorruptRecordError as exc:
        return ("error", str(exc))


def _iter(buf, chunk_records, **options):
    return lambda: kbatch.Records.concat(
        list(kbatch.iter_segment(buf, isolation=RC, chunk_records=chunk_records, **options)))


@st.composite
def transactional_segments(draw):
    """Batches of 1-3 producers, each transaction committed, aborted or left
    open, plain batches between them."""
    out, offset = bytearray(), 0
    open_txn = {}
    out += build_batch([(1, None, b"first", [])], base_offset=0)
    offset = 1
    for _ in range(draw(st.integers(1, 12))):
        pid = draw(st.integers(1, 3))
        kind = draw(st.sampled_from(["data", "txn", "commit", "abort"]))
        if kind in ("commit", "abort"):
            if pid not in open_txn:
                continue
            del open_txn[pid]
            out += control_batch(base_offset=offset, producer_id=pid, producer_epoch=0,
                                 control_type=COMMIT if kind == "commit" else ABORT)
            offset += 1
            continue
        n = draw(st.integers(1, 4))
        recs = [(1000 + offset + i, b"p%d" % pid, b"o%d" % (offset + i), []) for i in range(n)]
        txn = kind == "txn"
        if txn:
            open_txn[pid] = True
        out += build_batch(recs, base_offset=offset, producer_id=pid if txn else -1,
                           producer_epoch=0 if txn else -1, transactional=txn)
        offset += n
    return bytes(out)


@given(transactional_segments(), st.sampled_from([1, 2, 5, 1000]))
def test_chunks_equal_read_segment(buf, chunk_records):
    whole = _outcome(lambda: kbatch.read_segment(buf, isolation=RC))
    assert _outcome(_iter(buf, chunk_records)) == whole


@given(transactional_segments(), st.data())
def test_damaged_segments_raise_what_read_segment_raises(buf, data):
    if not buf:
        return
    pos = data.draw(st.integers(0, len(buf) - 1))
    bad = bytearray(buf)
    bad[pos] ^= data.draw(st.integers(1, 255))
    bad = bytes(bad)
    whole = _outcome(lambda: kbatch.read_segment(bad, isolation=RC))
    assert _outcome(_iter(bad, 2)) == whole
    for mode in ("stop", "skip"):     # the exact path: one more decode
        whole = _outcome(lambda: kbatch.read_segment(bad, isolation=RC, on_corrupt=mode))
        assert _outcome(_iter(bad, 2, on_corrupt=mode)) == whole


@given(hypothesis_segments())
def test_generated_segments_of_every_codec(segment):
    buf, _ = segment
    whole = _outcome(lambda: kbatch.read_segment(buf, isolation=RC))
    assert _outcome(_iter(buf, 3)) == whole


def test_a_segment_that_changes_between_the_passes_is_refused(monkeypatch):
    """The decode must see the batches the header pass saw: a file replaced
    in between raises FileChangedError instead of misapplying verdicts."""
    import kbatch.lib.segment as seg

    first = build_batch([(1, b"k", b"a", [])], base_offset=0, producer_id=5,
                        producer_epoch=0, transactional=True)
    second = build_batch([(2, b"k", b"b", [])], base_offset=1)
    buf = bytes(first + second)
    real = seg.decode_chunks

    def one_batch_less(view, path, opts, *, control_only=False, stop=None, **kw):
        # the header pass (control_only) sees one batch less than the decode
        return real(view, path, opts, control_only=control_only,
                    stop=len(first) if control_only else stop, **kw)

    monkeypatch.setattr(seg, "decode_chunks", one_batch_less)
    with pytest.raises(FileChangedError, match="changed between"):
        list(kbatch.iter_segment(buf, isolation=RC))


def test_a_damaged_marker_decides_no_chunk():
    """An abort marker whose type byte reads "commit" fails its CRC: the
    stream raises before it yields a chunk (the transaction pass checks
    control batches' CRCs), instead of showing the aborted records first."""
    data = build_batch([(1, b"k", b"aborted", [])], base_offset=0, producer_id=5,
                       producer_epoch=0, transactional=True)
    marker = bytearray(control_batch(base_offset=1, producer_id=5, producer_epoch=0,
                                     control_type=ABORT))
    at = bytes(marker).rindex(b"\x08\x00\x00\x00\x00")   # key: version 0, type 0 (abort)
    marker[at + 4] = COMMIT
    tail = build_batch([(3, None, b"after", [])], base_offset=2)
    buf = bytes(data + marker + tail)
    seen = []
    with pytest.raises(CorruptRecordError, match="CRC"):
        for chunk in kbatch.iter_segment(buf, isolation=RC, chunk_records=1):
            seen.append(chunk)
    assert all(b"aborted" not in c.value.to_pylist() for c in seen)
    assert seen == []
    # without CRCs the marker is taken as written, as every read without CRCs does
    got = kbatch.Records.concat(list(kbatch.iter_segment(buf, isolation=RC, chunk_records=1,
                                                         validate_crc=False)))
    assert got.value.to_pylist() == [b"aborted", b"after"]
