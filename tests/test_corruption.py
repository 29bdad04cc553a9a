"""Hostile input: truncation, zero padding, bit flips, broken length fields,
CRC mismatches, decompression bombs and legacy message sets.

kbatch must either return records that make sense (the whole batches before
the damage, with ``Records.end`` saying where valid data ends) or raise
``CorruptRecordError`` with the file, byte position and base offset set;
never another exception, never a crash, never invented records.

The inputs are generated with seeded ``random.Random`` (kafka_ref), so every
run walks the same bytes; the loops are exhaustive over byte positions for
these small segments.
"""

import os
import pickle
import random
import struct
import tracemalloc
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kbatch
from kbatch import CorruptRecordError, DecompressionLimitError, KbatchError

from .kafka_ref import (ATTR_CONTROL, HEADER_V2, RandomChoices, batch_bounds, build_batch,
                        compress_records, control_batch, encode_record, fix_crc,
                        generate_segment, hypothesis_segments, legacy_message,
                        legacy_message_set, long_varint, lz4_old_kafka, raw_batch,
                        read_with_kafka_python, recompress, uvarint, varint)

END_REASONS = (None, "truncated", "zero_padding", "corrupt")


def fewer_examples(share):
    """A share of the active profile's examples, for the slower properties
    (the "long" profile still hunts harder)."""
    return settings(max_examples=max(5, int(settings.default.max_examples * share)))


# --- inputs ------------------------------------------------------------------

def _pick_segments(codecs, count, *, lo=300, hi=1500, min_batches=3, salt=0):
    """The first ``count`` seeded segments of ``codecs`` of a workable size."""
    found = []
    seed = 0
    while len(found) < count:
        rng = random.Random(salt * 100_000 + 1000 * codecs[0] + seed)
        buf, specs = generate_segment(RandomChoices(rng), codecs=codecs, max_batches=5,
                                      max_records=4, big=False)
        seed += 1
        wanted = set(codecs) - {0}
        have = {s.codec for s in specs if s.kind == "data"}
        if (lo <= len(buf) <= hi and len(specs) >= min_batches
                and (not wanted or wanted <= have)):
            found.append((f"codec{''.join(map(str, codecs))}-seed{seed - 1}", buf))
    return found


SEGMENTS = dict(
    [s for c in range(5) for s in _pick_segments((c,), 2)]
    + _pick_segments((0, 1, 2, 3, 4), 2, lo=600, hi=3000, salt=7))
# one segment per codec (plus one mixed) for the bit-by-bit loops
FLIP_SEGMENTS = {}
for _name, _buf in SEGMENTS.items():
    _key = _name.split("-")[0]
    if _key not in {n.split("-")[0] for n in FLIP_SEGMENTS} and len(_buf) <= 1500:
        FLIP_SEGMENTS[_name] = _buf


class Expected:
    """kafka-python's reading of the whole batches of ``buf`` before ``stop``."""

    def __init__(self, buf):
        self.buf = bytes(buf)
        self.bounds = batch_bounds(self.buf)
        assert self.bounds and self.bounds[-1][1] == len(self.buf)
        self.starts = [s for s, _ in self.bounds]
        self.ends = [e for _, e in self.bounds]
        self._cache = {}

    def valid_before(self, stop):
        """End of the last whole batch that ends at or before ``stop``."""
        return max([e for e in self.ends if e <= stop], default=0)

    def prefix(self, valid):
        if valid not in self._cache:
            kr = read_with_kafka_python(self.buf[:valid], check_crc=True)
            assert kr.valid_bytes == valid
            self._cache[valid] = (
                kr.column("offset"), kr.column("timestamp"), kr.column("key"),
                kr.column("value"), kr.column("headers"),
                [b["position"] for b in kr.batches], [r["offset"] for r in kr.control])
        return self._cache[valid]

    def batch_at(self, position):
        """(start, end) of the batch holding byte ``position``."""
        for s, e in self.bounds:
            if s <= position < e:
                return s, e
        raise AssertionError(position)


def summary(records):
    return (records.offset.tolist(), records.timestamp.tolist(), records.key.to_pylist(),
            records.value.to_pylist(), records.headers.to_pylist(),
            records.batches.position.tolist(), records.control.offset.tolist())


def check_sane(records, size, *, start=0, include_control=False):
    """Whatever kbatch returns is self-consistent: no invented records."""
    n = len(records)
    for col in (records.offset, records.timestamp, records.timestamp_type, records.batch):
        assert len(col) == n
    assert len(records.key) == len(records.value) == len(records.headers) == n
    end = records.end
    assert end is not None and end.reason in END_REASONS
    assert start <= end.valid_bytes <= size
    assert end.valid_bytes + end.trailing_bytes == size
    assert (end.error is not None) == (end.reason == "corrupt")
    if end.error is not None:
        assert isinstance(end.error, CorruptRecordError)
    if end.reason is None:
        assert end.trailing_bytes == 0
    bt = records.batches
    # the batches tile [start, valid_bytes) exactly
    pos = bt.position.tolist()
    sizes = bt.size.tolist()
    assert pos == sorted(pos)
    edge = start
    for p, s, m in zip(pos, sizes, bt.magic.tolist()):
        assert p == edge and s >= (HEADER_V2 if m == 2 else 26)   # legacy: 12 + 14
        edge = p + s
    assert edge == end.valid_bytes
    assert set(bt.magic.tolist()) <= {0, 1, 2}
    # every record belongs to a batch; a data batch yields recordsCount rows
    nb = len(bt)
    if n:
        assert 0 <= records.batch.min() and records.batch.max() < nb
        assert records.batch.tolist() == sorted(records.batch.tolist())
    per_batch = np.bincount(records.batch, minlength=nb) if n else np.zeros(nb, int)
    ctrl_per_batch = (np.bincount(records.control.batch, minlength=nb)
                      if len(records.control) else np.zeros(nb, int))
    for i in range(nb):
        if bt.is_control[i]:
            assert per_batch[i] == (bt.records_count[i] if include_control else 0)
            assert ctrl_per_batch[i] == bt.records_count[i]
        else:
            assert per_batch[i] == bt.records_count[i]
            assert ctrl_per_batch[i] == 0
    # LogAppendTime (magic 2): every record takes the batch's maxTimestamp
    if n:
        lat = (bt.timestamp_type[records.batch] == 1) & (bt.magic[records.batch] == 2)
        assert np.array_equal(records.timestamp[lat], bt.max_timestamp[records.batch][lat])
    # the Arrow export is valid (UTF-8 header keys, offsets in range)
    records.to_arrow().validate(full=True)
    records.headers.to_pylist()


def decode(buf, **kwargs):
    """("ok", records) or ("error", CorruptRecordError); anything else fails."""
    try:
        return "ok", kbatch.read_segment(buf, **kwargs)
    except CorruptRecordError as exc:
        return "error", exc


def check_error(exc, size, *, path=None):
    assert isinstance(exc, CorruptRecordError) and isinstance(exc, KbatchError)
    assert isinstance(exc, ValueError)
    assert exc.path == (None if path is None else os.fspath(path))
    assert exc.position is not None and 0 <= exc.position <= size
    assert exc.batch_position is None or 0 <= exc.batch_position <= size
    assert exc.reason and str(exc)
    if exc.base_offset is not None:
        assert str(exc.base_offset) in str(exc)
    clone = pickle.loads(pickle.dumps(exc))
    assert type(clone) is type(exc)
    assert (clone.reason, clone.path, clone.position, clone.base_offset,
            clone.batch_position) == (exc.reason, exc.path, exc.position,
                                      exc.base_offset, exc.batch_position)


def base_offset_at(buf, position):
    return struct.unpack_from(">q", buf, position)[0]


# --- (a) truncation ----------------------------------------------------------

@pytest.mark.parametrize("name", sorted(SEGMENTS))
def test_truncated_at_every_byte(name):
    buf = SEGMENTS[name]
    exp = Expected(buf)
    size = len(buf)
    for t in range(size + 1):
        cut = buf[:t]
        valid = exp.valid_before(t)
        records = kbatch.read_segment(cut)   # SPEC 7: reported, never raised
        check_sane(records, t)
        assert summary(records) == exp.prefix(valid), t
        assert records.end.valid_bytes == valid, t
        assert records.end.trailing_bytes == t - valid
        if t == valid:
            assert records.end.reason is None
        elif any(cut[valid:]):
            assert records.end.reason == "truncated", t
        else:   # a tail of zero bytes (e.g. the high bytes of a small base offset)
            assert records.end.reason in ("truncated", "zero_padding"), t
        if t % 5 == 0 or t - valid in (1, 16, 17, 61) or t == size:
            if t == valid:
                assert len(kbatch.read_segment(cut, strict=True)) == len(records)
            else:
                with pytest.raises(CorruptRecordError) as info:
                    kbatch.read_segment(cut, strict=True)
                check_error(info.value, t)
                assert valid <= info.value.position <= t


@pytest.mark.parametrize("name", sorted(SEGMENTS)[::3])
def test_truncated_chunks_and_paths(name, tmp_path):
    buf = SEGMENTS[name]
    exp = Expected(buf)
    path = tmp_path / "00000000000000000000.log"
    for t in sorted({1, 16, 17, 60, 61, 62, *[e - 1 for e in exp.ends],
                     *[s + 30 for s in exp.starts]}):
        if t > len(buf):
            continue
        cut = buf[:t]
        whole = kbatch.read_segment(cut)
        chunks = list(kbatch.iter_segment(cut, chunk_records=1))
        assert all(c.end is None for c in chunks[:-1])
        assert chunks[-1].end == whole.end
        assert summary(kbatch.Records.concat(chunks)) == summary(whole)
        path.write_bytes(cut)
        from_file = kbatch.read_segment(path)
        assert summary(from_file) == summary(whole) and from_file.end == whole.end
        if whole.end.reason is not None:
            with pytest.raises(CorruptRecordError) as info:
                kbatch.read_segment(path, strict=True)
            check_error(info.value, t, path=path)
            with pytest.raises(CorruptRecordError):
                list(kbatch.iter_segment(path, strict=True, chunk_records=1))


# --- (b) zero padding ----------------------------------------------------------

PADS = (1, 2, 8, 11, 12, 13, 16, 17, 18, 48, 49, 60, 61, 62, 4096, 65536)


@pytest.mark.parametrize("name", sorted(SEGMENTS))
def test_zero_padding(name):
    buf = SEGMENTS[name]
    full = kbatch.read_segment(buf)
    for pad in PADS:
        padded = buf + bytes(pad)
        records = kbatch.read_segment(padded)
        check_sane(records, len(padded))
        assert summary(records) == summary(full)
        assert records.end == kbatch.SegmentEnd(len(buf), pad, "zero_padding", None)
        with pytest.raises(CorruptRecordError) as info:
            kbatch.read_segment(padded, strict=True)
        check_error(info.value, len(padded))
        assert info.value.position == len(buf)
        chunks = list(kbatch.iter_segment(padded, chunk_records=2))
        assert chunks[-1].end == records.end
        assert summary(kbatch.Records.concat(chunks)) == summary(full)


def test_preallocated_segment_file(tmp_path):
    buf = SEGMENTS[sorted(SEGMENTS)[0]]
    path = tmp_path / "00000000000000000000.log"
    with open(path, "wb") as f:
        f.write(buf)
        f.truncate(1 << 20)    # log.preallocate=true: sized up front, zero-filled
    records = kbatch.read_segment(path)
    assert summary(records) == summary(kbatch.read_segment(buf))
    assert records.end == kbatch.SegmentEnd(len(buf), (1 << 20) - len(buf), "zero_padding", None)
    assert records.path == str(path)
    with pytest.raises(CorruptRecordError) as info:
        kbatch.read_segment(path, strict=True)
    check_error(info.value, 1 << 20, path=path)
    assert info.value.position == len(buf)


def test_only_zeros():
    for size in (1, 16, 17, 61, 1000):
        records = kbatch.read_segment(bytes(size))
        assert len(records) == 0 and len(records.batches) == 0
        assert records.end == kbatch.SegmentEnd(0, size, "zero_padding", None)
        with pytest.raises(CorruptRecordError):
            kbatch.read_segment(bytes(size), strict=True)


def test_torn_write_in_preallocated_segment():
    """A crash mid-append in a preallocated segment: part of a batch, then zeros.
    Kafka's recovery keeps the whole batches before it; kbatch must not invent
    records: it reports the end there, or raises (then ``on_corrupt="stop"``
    reports it)."""
    buf = SEGMENTS[sorted(SEGMENTS)[0]]
    exp = Expected(buf)
    s, e = exp.bounds[-1]
    keeps = [k for k in (20, 61, (e - s) // 2, e - s - 1) if any(buf[s + k:e])]
    assert keeps
    for keep in keeps:   # (zeros that complete the batch would not tear it)
        torn = buf[:s + keep] + bytes(4096)
        status, out = decode(torn)
        if status == "ok":
            check_sane(out, len(torn))
            assert summary(out) == exp.prefix(s) and out.end.valid_bytes == s
        else:
            check_error(out, len(torn))
            assert out.batch_position == s
            stopped = kbatch.read_segment(torn, on_corrupt="stop")
            assert summary(stopped) == exp.prefix(s)
            assert stopped.end.valid_bytes == s and stopped.end.reason == "corrupt"


# --- (c) bit flips ---------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(FLIP_SEGMENTS))
def test_every_bit_flip_with_crc_validation(name):
    buf = FLIP_SEGMENTS[name]
    exp = Expected(buf)
    full = kbatch.read_segment(buf)
    full_sum = summary(full)
    size = len(buf)
    for byte in range(size):
        s, e = exp.batch_at(byte)
        rel = byte - s
        bi = exp.starts.index(s)
        for bit in range(8):
            bad = bytearray(buf)
            bad[byte] ^= 1 << bit
            status, out = decode(bytes(bad))
            where = (byte, bit, rel)
            if status == "error":
                check_error(out, size)
            else:
                check_sane(out, size)
            if rel >= 17:
                # inside the CRC (or the CRC itself): always detected, at this batch
                assert status == "error", where
                assert out.batch_position == s, where
                assert out.base_offset == base_offset_at(buf, s), where
                assert s <= out.position < e, where
                assert "CRC" in out.reason, where
            elif rel < 8:
                # baseOffset: same data, this batch's offsets move
                assert status == "ok", where
                delta = base_offset_at(bad, s) - base_offset_at(buf, s)
                rows = full.batch == bi
                want = full.offset + np.where(rows, delta, 0)
                assert out.offset.tolist() == want.tolist(), where
                assert out.batches.base_offset[bi] == base_offset_at(bad, s)
                assert summary(out)[1:6] == full_sum[1:6]
                assert out.end == full.end
            elif rel < 12:
                # batchLength: detected, or the data "ends" there as truncated
                if status == "ok":
                    assert summary(out) == exp.prefix(s), where
                    assert out.end.valid_bytes == s and out.end.reason == "truncated", where
                else:
                    assert out.batch_position == s and s <= out.position <= e, where
            elif rel < 16:
                # partitionLeaderEpoch: outside the CRC, nothing else changes
                assert status == "ok", where
                assert summary(out) == full_sum
                epoch = struct.unpack_from(">i", bad, s + 12)[0]
                assert out.batches.partition_leader_epoch[bi] == epoch
            else:
                # magic: 2 -> 0/1 (legacy, not a valid message either) or unknown
                # (read as a legacy message: its own checks or its CRC-32 refuse it)
                assert status == "error", where
                assert out.batch_position == s and s <= out.position < e, where


def test_bit_flip_errors_name_the_file(tmp_path):
    """The same flips read from a file: the error names it, at the same byte."""
    name = sorted(FLIP_SEGMENTS)[-1]
    buf = FLIP_SEGMENTS[name]
    path = tmp_path / "00000000000000012345.log"
    flips = [(byte, bit) for byte in range(len(buf)) for bit in range(8)][::23]
    for byte, bit in flips:
        bad = bytearray(buf)
        bad[byte] ^= 1 << bit
        path.write_bytes(bad)
        status, out = decode(bytes(bad))
        try:
            from_file = kbatch.read_segment(path)
        except CorruptRecordError as exc:
            assert status == "error", (byte, bit)
            check_error(exc, len(buf), path=path)
            assert str(path) in str(exc)
            assert (exc.position, exc.batch_position, exc.base_offset, exc.reason) == (
                out.position, out.batch_position, out.base_offset, out.reason)
        else:
            assert status == "ok", (byte, bit)
            assert summary(from_file) == summary(out) and from_file.end == out.end
            assert from_file.path == str(path)


def int64(values):
    """kafka-python adds with Python ints; Kafka (and kbatch) wrap at 64 bits."""
    return [(v + (1 << 63)) % (1 << 64) - (1 << 63) for v in values]


def _kafka_python_or_none(buf):
    try:
        kr = read_with_kafka_python(buf)
    except Exception:   # kafka-python raises many types on garbage
        return None
    return kr


@pytest.mark.parametrize("name", sorted(FLIP_SEGMENTS))
def test_every_bit_flip_without_crc_validation(name):
    """Without the CRC, any outcome is allowed but a foreign exception or
    nonsense; where kafka-python also reads the damaged bytes to the same
    end, both must agree."""
    buf = FLIP_SEGMENTS[name]
    size = len(buf)
    rng = random.Random(name)
    compared = 0
    for byte in range(size):
        for bit in range(8):
            bad = bytearray(buf)
            bad[byte] ^= 1 << bit
            bad = bytes(bad)
            status, out = decode(bad, validate_crc=False)
            if status == "error":
                check_error(out, size)
                continue
            check_sane(out, size)
            assert set(out.batches.crc_valid.tolist()) <= {-1, 0, 1}
            if rng.random() < 0.25:
                kr = _kafka_python_or_none(bad)
                if (kr is not None and out.end.reason in (None, "truncated")
                        and kr.valid_bytes == out.end.valid_bytes
                        and all(b.get("magic") == 2 for b in kr.batches)):
                    compared += 1
                    assert out.offset.tolist() == int64(kr.column("offset")), (byte, bit)
                    assert out.timestamp.tolist() == int64(kr.column("timestamp")), (byte, bit)
                    assert out.key.to_pylist() == kr.column("key"), (byte, bit)
                    assert out.value.to_pylist() == kr.column("value"), (byte, bit)
                    assert out.headers.to_pylist() == kr.column("headers"), (byte, bit)
                    assert out.control.offset.tolist() == [r["offset"] for r in kr.control]
    assert compared > 0


@fewer_examples(2 / 3)
@given(hypothesis_segments(max_batches=4, max_records=4, big=False), st.data())
def test_random_overwrites_never_escape(segment, data):
    """Several random bytes overwritten anywhere, every option combination:
    the outcome is records that make sense or a CorruptRecordError."""
    buf, _ = segment
    bad = bytearray(buf)
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(bad) - 1))
        bad[pos] = data.draw(st.sampled_from([0x00, 0xFF, 0x7F, 0x80, bad[pos] ^ 0x40,
                                              data.draw(st.integers(0, 255))]))
    if data.draw(st.booleans()):
        bad = bad[:data.draw(st.integers(0, len(bad)))]
    bad = bytes(bad)
    for kwargs in ({}, {"validate_crc": False}, {"validate_crc": False, "include_control": True},
                   {"validate_crc": False, "on_corrupt": "stop"}):
        status, out = decode(bad, **kwargs)
        if status == "error":
            check_error(out, len(bad))
        else:
            check_sane(out, len(bad), include_control=kwargs.get("include_control", False))
        try:
            chunks = list(kbatch.iter_segment(bad, chunk_records=1, **kwargs))
        except CorruptRecordError as exc:
            assert status == "error", "iter_segment raised where read_segment did not"
            assert (exc.position, exc.batch_position) == (out.position, out.batch_position)
        else:
            assert status == "ok", "iter_segment returned where read_segment raised"
            assert summary(kbatch.Records.concat(chunks)) == summary(out)
            assert chunks[-1].end.valid_bytes == out.end.valid_bytes


# --- (d) broken length fields and varints --------------------------------------

PID, EPOCH = 77, 1


def _around(middle: bytes):
    """A valid batch, ``middle``, another valid batch; ``middle`` at base offset 10."""
    first = build_batch([(1000, b"a", b"first", [("h", b"1")])], base_offset=0,
                        producer_id=PID, producer_epoch=EPOCH, base_sequence=0)
    last = build_batch([(3000, b"c", b"last", [])], base_offset=20)
    return first, middle, last


def _hostile(records_area: bytes, count: int, codec: int = 0, **kw):
    kw.setdefault("last_offset_delta", max(count - 1, 0))
    batch = raw_batch(records_area, records_count=count, base_offset=10,
                      base_timestamp=2000, **kw)
    return recompress(batch, codec) if codec else batch


GOOD = encode_record(0, 0, b"key", b"value", [("h", b"v")])
HUGE = (1 << 31) - 1


def _record_body(*fields: bytes) -> bytes:
    """A record whose length prefix matches its fields."""
    body = b"".join(fields)
    return varint(len(body)) + body


A, T0, O0, NULL = b"\0", varint(0), varint(0), varint(-1)

# (name, records area, recordsCount); each must be refused
HOSTILE_RECORDS = [
    ("count-negative", GOOD, -1),
    ("count-min-int", GOOD, -(1 << 31)),
    ("count-huge", GOOD, HUGE),
    ("count-one-more", GOOD, 2),
    ("count-zero-with-bytes", GOOD, 0),
    ("count-fewer", GOOD + GOOD, 1),
    ("record-length-huge", varint(HUGE) + GOOD[1:], 1),
    ("record-length-negative", varint(-2) + GOOD[1:], 1),
    ("record-length-short", varint(len(GOOD) - 2) + GOOD[1:], 1),
    ("record-length-long", varint(len(GOOD)) + GOOD[1:] + b"\0", 1),
    ("record-length-6-byte-varint", long_varint(len(GOOD) - 1, 6) + GOOD[1:], 1),
    ("varint-runs-off-the-end", b"\x80\x80\x80\x80" + b"\x80" * 10, 2),
    ("key-length-huge", _record_body(A, T0, O0, varint(HUGE), b"k" * 8), 1),
    ("key-length-past-record", _record_body(A, T0, O0, varint(4), b"kk", NULL) + b"kk", 1),
    ("value-length-huge", _record_body(A, T0, O0, NULL, varint(1 << 30), b"v"), 1),
    ("header-count-huge", _record_body(A, T0, O0, NULL, NULL, varint(1 << 30), b"\0\0"), 1),
    ("header-count-negative", _record_body(A, T0, O0, NULL, NULL, varint(-2)), 1),
    ("header-count-more-than-present", _record_body(A, T0, O0, NULL, NULL, varint(3),
                                                    varint(1), b"k", NULL), 1),
    ("header-count-6-byte-varint", _record_body(A, T0, O0, NULL, NULL, long_varint(0, 6)), 1),
    ("timestamp-11-byte-varlong", _record_body(A, b"\x80" * 10 + b"\x00", O0, NULL, NULL,
                                               varint(0)), 1),
    ("offset-delta-6-byte-varint", _record_body(A, T0, long_varint(0, 6), NULL, NULL,
                                                varint(0)), 1),
    ("header-key-null", _record_body(A, T0, O0, NULL, NULL, varint(1), NULL, NULL), 1),
    ("header-key-length-negative", _record_body(A, T0, O0, NULL, NULL, varint(1),
                                                varint(-2), NULL), 1),
    ("header-key-length-huge", _record_body(A, T0, O0, NULL, NULL, varint(1),
                                            varint(HUGE), b"k", NULL), 1),
    ("header-value-length-huge", _record_body(A, T0, O0, NULL, NULL, varint(1), varint(1),
                                              b"k", varint(HUGE)), 1),
    ("header-key-invalid-utf8", _record_body(A, T0, O0, NULL, NULL, varint(1), varint(2),
                                             b"\xff\xfe", NULL), 1),
    ("header-key-overlong-utf8", _record_body(A, T0, O0, NULL, NULL, varint(1), varint(2),
                                              b"\xc0\x80", NULL), 1),
    ("header-key-surrogate", _record_body(A, T0, O0, NULL, NULL, varint(1), varint(3),
                                          b"\xed\xa0\x80", NULL), 1),
    ("header-key-truncated-utf8", _record_body(A, T0, O0, NULL, NULL, varint(1), varint(1),
                                               b"\xe6", NULL), 1),
    ("fields-shorter-than-length", _record_body(A, T0, O0, NULL, NULL, varint(0), b"\0\0"), 1),
    ("record-without-headers-count", _record_body(A, T0, O0, NULL, NULL), 1),
    ("trailing-bytes", GOOD + b"\0", 1),
    ("truncated-record", GOOD[:-2], 1),
]


def check_refused_middle(first, middle, last, *, compressed, **kwargs):
    """``middle`` must be refused: CorruptRecordError pointing at it, and with
    ``on_corrupt="stop"`` the first batch alone, the end at the middle one."""
    buf = first + middle + last
    s, e = len(first), len(first) + len(middle)
    with pytest.raises(CorruptRecordError) as info:
        kbatch.read_segment(buf, **kwargs)
    exc = info.value
    check_error(exc, len(buf))
    assert exc.base_offset == 10 and exc.batch_position == s
    assert s <= exc.position <= e   # (e: "records end after 1 of 2")
    if compressed:
        assert exc.position == s
    stopped = kbatch.read_segment(buf, on_corrupt="stop", **kwargs)
    check_sane(stopped, len(buf))
    assert stopped.offset.tolist() == [0] and stopped.value.to_pylist() == [b"first"]
    assert len(stopped.batches) == 1
    assert stopped.end.reason == "corrupt" and stopped.end.valid_bytes == s
    assert stopped.end.trailing_bytes == len(buf) - s
    assert isinstance(stopped.end.error, CorruptRecordError)
    assert stopped.end.error.batch_position == s
    chunks = list(kbatch.iter_segment(buf, on_corrupt="stop", chunk_records=1, **kwargs))
    assert summary(kbatch.Records.concat(chunks)) == summary(stopped)
    assert chunks[-1].end.reason == "corrupt"
    with pytest.raises(CorruptRecordError):
        list(kbatch.iter_segment(buf, chunk_records=1, **kwargs))
    return exc


@pytest.mark.parametrize("codec", [0, 1, 4])
@pytest.mark.parametrize("name,area,count", HOSTILE_RECORDS, ids=[c[0] for c in HOSTILE_RECORDS])
def test_hostile_records_are_refused(name, area, count, codec):
    first, middle, last = _around(_hostile(area, count, codec))
    check_refused_middle(first, middle, last, compressed=codec != 0)
    check_refused_middle(first, middle, last, compressed=codec != 0, validate_crc=False)
    # the control path decodes records the same way
    ctrl = bytearray(middle)
    attributes = struct.unpack_from(">h", ctrl, 21)[0] | ATTR_CONTROL
    struct.pack_into(">h", ctrl, 21, attributes)
    check_refused_middle(first, bytes(fix_crc(ctrl)), last, compressed=codec != 0)


def test_hostile_records_are_refused_by_kafka_python_too():
    """Guards the hostile inputs: kafka-python refuses every one of them except
    over-long varints (it reads up to 10 bytes where Kafka stops at 5)."""
    lax = {"record-length-6-byte-varint", "header-count-6-byte-varint",
           "offset-delta-6-byte-varint"}
    for name, area, count in HOSTILE_RECORDS:
        buf = _hostile(area, count)
        if name in lax:
            read_with_kafka_python(buf)
        else:
            with pytest.raises(Exception):
                read_with_kafka_python(buf)


def test_long_but_legal_varints_decode():
    """Non-minimal varints up to 5 bytes (varlongs up to 10) are legal."""
    body = (b"\0" + long_varint(-7, 10) + long_varint(3, 5) + long_varint(2, 5) + b"ab"
            + long_varint(-1, 5) + long_varint(1, 5) + long_varint(1, 5) + b"k"
            + long_varint(0, 5))
    area = long_varint(len(body), 5) + body
    batch = _hostile(area, 1, last_offset_delta=3)   # the record's offset delta
    records = kbatch.read_segment(batch)
    kr = read_with_kafka_python(batch, check_crc=True)
    assert records.offset.tolist() == kr.column("offset") == [13]
    assert records.timestamp.tolist() == kr.column("timestamp") == [1993]
    assert records.key.to_pylist() == [b"ab"] and records.value.to_pylist() == [None]
    assert records.headers.to_pylist() == kr.column("headers") == [[("k", b"")]]


BATCH_LENGTHS = [0, 1, 13, 14, 21, 48, 49, 50, HUGE, -1, -49, -(1 << 31)]


@pytest.mark.parametrize("length", BATCH_LENGTHS)
@pytest.mark.parametrize("validate_crc", [True, False])
def test_broken_batch_length(length, validate_crc):
    first, middle, last = _around(build_batch(
        [(2000, b"b", b"middle", []), (2001, None, b"x", [])], base_offset=10))
    bad = bytearray(middle)
    struct.pack_into(">i", bad, 8, length)
    buf = first + bytes(bad) + last
    s = len(first)
    status, out = decode(buf, validate_crc=validate_crc)
    if status == "error":
        check_error(out, len(buf))
        assert out.batch_position == s and out.base_offset == 10
        assert s <= out.position <= len(buf)
        stopped = kbatch.read_segment(buf, validate_crc=validate_crc, on_corrupt="stop")
        assert stopped.value.to_pylist() == [b"first"]
        assert stopped.end.reason == "corrupt" and stopped.end.valid_bytes == s
    else:
        check_sane(out, len(buf))
        assert out.value.to_pylist() == [b"first"], "records past a broken length"
        assert out.end.valid_bytes == s
        assert out.end.reason == "truncated"
        with pytest.raises(CorruptRecordError):
            kbatch.read_segment(buf, validate_crc=validate_crc, strict=True)


def test_batch_length_running_past_the_file_is_an_end():
    # a torn tail: nothing valid after the batch whose length runs past the end
    first, middle, last = _around(build_batch([(2000, b"b", b"m", [])], base_offset=10))
    buf = first + middle[:-5]
    records = kbatch.read_segment(buf)
    assert records.value.to_pylist() == [b"first"]
    assert records.end == kbatch.SegmentEnd(len(first), len(buf) - len(first), "truncated", None)


def test_batch_length_running_past_the_file_with_a_valid_batch_after_it_is_corrupt():
    # the length field is damaged: a valid batch follows, so this is no torn tail
    first, middle, last = _around(build_batch([(2000, b"b", b"m", [])], base_offset=10))
    bad = bytearray(middle)
    struct.pack_into(">i", bad, 8, len(middle) - 12 + len(last) + 1)
    buf = first + bytes(bad) + last
    with pytest.raises(CorruptRecordError) as info:
        kbatch.read_segment(buf)
    assert info.value.batch_position == len(first)
    stopped = kbatch.read_segment(buf, on_corrupt="stop")
    assert stopped.value.to_pylist() == [b"first"]
    assert stopped.end.reason == "corrupt" and stopped.end.valid_bytes == len(first)
    skipped = kbatch.read_segment(buf, on_corrupt="skip")
    assert skipped.value.to_pylist() == [b"first", b"last"]
    assert [(r.start, r.stop, r.reason) for r in skipped.skipped] == [
        (len(first), len(first) + len(middle), "truncated")]


@pytest.mark.parametrize("magic", [0, 1, 3, 9, 127, -1, -126])
def test_unknown_or_legacy_magic_in_a_v2_batch(magic):
    first, middle, last = _around(build_batch([(2000, b"b", b"m", [])], base_offset=10))
    bad = bytearray(middle)
    bad[16] = magic & 0xFF
    buf = first + bytes(bad) + last
    for validate_crc in (True, False):
        with pytest.raises(KbatchError) as info:
            kbatch.read_segment(buf, validate_crc=validate_crc)
        assert isinstance(info.value, CorruptRecordError)
        check_error(info.value, len(buf))
        assert info.value.batch_position == len(first)
        assert len(first) <= info.value.position < len(first) + len(middle)
        stopped = kbatch.read_segment(buf, validate_crc=validate_crc, on_corrupt="stop")
        assert stopped.value.to_pylist() == [b"first"]
        assert stopped.end.reason == "corrupt" and stopped.end.valid_bytes == len(first)


def test_limits_refuse_big_batches():
    batch = build_batch([(0, b"k", b"v" * 100, [("a", b""), ("b", None), ("c", b"x")]),
                         (1, None, None, [])], base_offset=5)
    ok = kbatch.read_segment(batch, max_batch_bytes=len(batch) - 12,
                             max_records_per_batch=2, max_headers_per_record=3)
    assert len(ok) == 2
    for kwargs in ({"max_batch_bytes": len(batch) - 13}, {"max_records_per_batch": 1},
                   {"max_headers_per_record": 2}):
        for codec in (0, 3):
            buf = recompress(batch, codec) if codec else batch
            if "max_batch_bytes" in kwargs and codec:
                kwargs = {"max_batch_bytes": len(buf) - 13}
            with pytest.raises(CorruptRecordError) as info:
                kbatch.read_segment(buf, **kwargs)
            check_error(info.value, len(buf))
            assert info.value.base_offset == 5
            stopped = kbatch.read_segment(buf, on_corrupt="stop", **kwargs)
            assert len(stopped) == 0 and stopped.end.reason == "corrupt"
    for bad in ({"max_decompressed_bytes": 0}, {"max_decompressed_bytes": 1 << 30},
                {"on_corrupt": "skip it"}, {"max_batch_bytes": -1}):
        with pytest.raises(ValueError):
            kbatch.read_segment(batch, **bad)


# --- (e) CRC mismatch ----------------------------------------------------------

def _three_batches(codec=0):
    parts = [
        build_batch([(1, b"a", b"one", [])], base_offset=100, codec=codec),
        build_batch([(2, b"b", b"two", [("h", None)]), (3, None, b"three", [])],
                    base_offset=101, codec=codec, producer_id=PID, producer_epoch=EPOCH,
                    base_sequence=0),
        build_batch([(4, b"c", b"four", [])], base_offset=103, codec=codec),
    ]
    return parts


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("how", ["stored-crc", "payload"])
def test_crc_mismatch(codec, how, tmp_path):
    parts = _three_batches(codec)
    middle = bytearray(parts[1])
    if how == "stored-crc":
        middle[20] ^= 0x01
    else:
        # a byte of the records that still decodes: the last byte of the batch
        # (a value byte when uncompressed; in a compressed stream it may break it)
        middle[40] ^= 0x10   # baseTimestamp: covered by the CRC, still decodable
    buf = parts[0] + bytes(middle) + parts[2]
    s, e = len(parts[0]), len(parts[0]) + len(middle)
    with pytest.raises(CorruptRecordError) as info:
        kbatch.read_segment(buf)
    exc = info.value
    check_error(exc, len(buf))
    assert exc.base_offset == 101 and "101" in str(exc)
    assert exc.batch_position == s and s <= exc.position < e
    assert "CRC" in exc.reason
    # the same from a file names the file
    path = tmp_path / "00000000000000000100.log"
    path.write_bytes(buf)
    with pytest.raises(CorruptRecordError) as info:
        kbatch.read_segment(path)
    check_error(info.value, len(buf), path=path)
    assert str(path) in str(info.value)
    # without validation the batch decodes like kafka-python decodes it
    records = kbatch.read_segment(buf, validate_crc=False)
    check_sane(records, len(buf))
    kr = read_with_kafka_python(buf)
    assert not kr.batches[1]["crc_valid"]
    assert records.offset.tolist() == kr.column("offset") == [100, 101, 102, 103]
    assert records.timestamp.tolist() == kr.column("timestamp")
    assert records.value.to_pylist() == kr.column("value")
    assert records.headers.to_pylist() == kr.column("headers")
    assert records.batches.crc_valid[1] != 1, "an unchecked or wrong CRC reported as valid"
    # on_corrupt="stop": the batches before the bad one, the end at it
    stopped = kbatch.read_segment(buf, on_corrupt="stop")
    check_sane(stopped, len(buf))
    assert stopped.offset.tolist() == [100] and len(stopped.batches) == 1
    assert stopped.end.reason == "corrupt" and stopped.end.valid_bytes == s
    assert stopped.end.trailing_bytes == len(buf) - s
    assert stopped.end.error.base_offset == 101
    chunks = list(kbatch.iter_segment(buf, on_corrupt="stop", chunk_records=1))
    assert summary(kbatch.Records.concat(chunks)) == summary(stopped)
    assert chunks[-1].end.reason == "corrupt"
    stopped_file = kbatch.read_segment(path, on_corrupt="stop")
    assert stopped_file.end.error.path == str(path)


def test_crc_mismatch_in_first_control_and_empty_batches():
    cases = [
        control_batch(base_offset=5, producer_id=PID, producer_epoch=EPOCH, control_type=1),
        raw_batch(b"", records_count=0, base_offset=5, last_offset_delta=3),
    ]
    for batch in cases:
        bad = bytearray(batch)
        bad[-1] ^= 0x80
        for buf in (bytes(bad), bytes(bad) + build_batch([(0, None, b"x", [])], base_offset=9)):
            with pytest.raises(CorruptRecordError) as info:
                kbatch.read_segment(buf)
            assert info.value.base_offset == 5 and info.value.batch_position == 0
            stopped = kbatch.read_segment(buf, on_corrupt="stop")
            assert len(stopped.batches) == 0 and len(stopped.control) == 0
            assert stopped.end.valid_bytes == 0 and stopped.end.reason == "corrupt"


def test_crc_valid_column_is_never_a_lie():
    """crc_valid: 1 checked and valid, 0 wrong, -1 not checked."""
    parts = _three_batches()
    middle = bytearray(parts[1])
    middle[20] ^= 0x01
    buf = parts[0] + bytes(middle) + parts[2]
    records = kbatch.read_segment(buf, validate_crc=False)
    assert records.batches.crc_valid.tolist()[1] in (0, -1)
    assert set(records.batches.crc_valid.tolist()) <= {0, -1, 1}
    good = kbatch.read_segment(parts[0] + parts[2])
    assert good.batches.crc_valid.tolist() == [1, 1]


# --- (f) decompression bombs ------------------------------------------------------

BOMB_VARIANTS = [(1, "gzip"), (1, "gzip-multi-member"), (2, "xerial"), (2, "xerial-le"),
                 (2, "raw"), (3, "lz4"), (3, "lz4-checksums"), (4, "zstd"),
                 (4, "zstd-no-size-multi-frame")]


@pytest.fixture(scope="module")
def bomb_area():
    return encode_record(0, 0, b"bomb", bytes(10_000_000), [("h", b"")])


@pytest.mark.parametrize("codec,variant", BOMB_VARIANTS, ids=[v for _, v in BOMB_VARIANTS])
def test_decompression_bomb(codec, variant, bomb_area):
    head = build_batch([(0, b"ok", b"before", [])], base_offset=0)
    compressed = compress_records(bomb_area, codec, variant)
    assert len(compressed) < 1_000_000
    bomb = raw_batch(compressed, records_count=1, base_offset=1, attributes=codec)
    buf = head + bomb
    with pytest.raises(DecompressionLimitError) as info:
        kbatch.read_segment(buf, max_decompressed_bytes=1 << 20)
    exc = info.value
    assert isinstance(exc, CorruptRecordError) and isinstance(exc, KbatchError)
    check_error(exc, len(buf))
    assert exc.base_offset == 1 and exc.batch_position == len(head)
    assert exc.position == len(head)
    with pytest.raises(DecompressionLimitError):
        list(kbatch.iter_segment(buf, max_decompressed_bytes=1 << 20, chunk_records=1))
    stopped = kbatch.read_segment(buf, max_decompressed_bytes=1 << 20, on_corrupt="stop")
    assert stopped.value.to_pylist() == [b"before"]
    assert stopped.end.reason == "corrupt" and stopped.end.valid_bytes == len(head)
    assert isinstance(stopped.end.error, DecompressionLimitError)
    # the limit is on the decompressed size: exactly at it passes, one below fails
    exact = len(bomb_area)
    records = kbatch.read_segment(buf, max_decompressed_bytes=exact)
    assert records.key.to_pylist() == [b"ok", b"bomb"]
    assert records.value.lengths().tolist() == [6, 10_000_000]
    with pytest.raises(DecompressionLimitError):
        kbatch.read_segment(buf, max_decompressed_bytes=exact - 1)


GZIP_TAILS = [b"\0\0\0\0", b"not gzip", b"\x1f\x8bxxxxxxxxxxxxxxx",
              # the start of another member, cut short (Java's GZIPInputStream
              # ignores it, as compression.py promises)
              b"\x1f", b"\x1f\x8b", b"\x1f\x8b\x08", b"\x1f\x8b\x08\0\0\0\0\0\0\xff"]


@pytest.mark.parametrize("tail", GZIP_TAILS)
def test_gzip_bytes_after_the_last_member_are_ignored(tail):
    area = encode_record(0, 0, b"k", b"v" * 50)
    for stream in (compress_records(area, 1, "gzip"),
                   compress_records(area, 1, "gzip-multi-member")):
        batch = raw_batch(stream + tail, records_count=1, attributes=1)
        assert kbatch.read_segment(batch).value.to_pylist() == [b"v" * 50]


def test_gzip_truncated_only_member_is_refused():
    area = encode_record(0, 0, b"k", b"v" * 500)
    stream = compress_records(area, 1, "gzip")
    for cut in (1, 2, 10, len(stream) // 2, len(stream) - 8, len(stream) - 1):
        batch = raw_batch(stream[:cut], records_count=1, attributes=1)
        with pytest.raises(CorruptRecordError) as info:
            kbatch.read_segment(batch)
        check_error(info.value, len(batch))
        assert info.value.batch_position == 0


def test_snappy_block_declaring_a_huge_length():
    area = uvarint((1 << 32) - 1) + b"\x00" * 20
    for framed in (area, b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
                   + struct.pack(">i", len(area)) + area):
        batch = raw_batch(framed, records_count=1, attributes=2)
        with pytest.raises(CorruptRecordError) as info:
            kbatch.read_segment(batch, max_decompressed_bytes=1 << 20)
        check_error(info.value, len(batch))


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_bomb_memory_stays_near_the_limit(codec):
    """A 64 MiB bomb read with a 1 MiB limit never holds much more than the
    limit (traced Python allocations)."""
    size = 64 << 20
    if codec == 1:
        comp = zlib.compressobj(1, zlib.DEFLATED, 31)
        chunk = bytes(1 << 20)
        stream = b"".join(comp.compress(chunk) for _ in range(size >> 20)) + comp.flush()
    else:
        stream = compress_records(bytes(size), codec)
    bomb = raw_batch(stream, records_count=1, attributes=codec)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        with pytest.raises(DecompressionLimitError):
            kbatch.read_segment(bomb, max_decompressed_bytes=1 << 20)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 24 << 20, f"peak {peak} bytes for a 1 MiB limit"


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_compressed_streams(codec):
    """Records areas that are not valid streams of their codec."""
    rng = random.Random(codec)
    good = compress_records(encode_record(0, 0, b"k", b"v" * 50), codec)
    streams = [b"", b"\x00", rng.randbytes(40), good[:len(good) // 2], good[:-1],
               good[:4] + rng.randbytes(len(good) - 4)]
    for stream in streams:
        batch = raw_batch(stream, records_count=1, attributes=codec)
        status, out = decode(batch)
        if status == "error":
            check_error(out, len(batch))
            assert out.batch_position == 0
        else:
            check_sane(out, len(batch))
            kr = _kafka_python_or_none(batch)
            if kr is not None:
                assert out.value.to_pylist() == kr.column("value")


# --- (g) legacy message sets ----------------------------------------------------

LEGACY = [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2), (1, 3)]
LEGACY_RECORDS = [(1_600_000_000_000 + i, None if i == 1 else b"k%d" % i,
                   b"" if i == 2 else (None if i == 4 else b"value-%d" % i)) for i in range(5)]


def check_legacy_result(source, *, kwargs=None):
    """Decoded exactly like kafka-python, or refused with a KbatchError."""
    kr = read_with_kafka_python(source)
    try:
        records = kbatch.read_segment(source, **(kwargs or {}))
    except KbatchError as exc:
        assert isinstance(exc, CorruptRecordError)
        check_error(exc, len(source))
        return None
    check_sane(records, len(source))
    assert records.offset.tolist() == kr.column("offset")
    assert records.timestamp.tolist() == kr.column("timestamp")
    assert records.timestamp_type.tolist() == kr.column("timestamp_type")
    assert records.key.to_pylist() == kr.column("key")
    assert records.value.to_pylist() == kr.column("value")
    assert records.headers.to_pylist() == kr.column("headers")
    assert records.batch.tolist() == kr.column("batch")
    assert records.batches.position.tolist() == kr.batch_column("position")
    assert records.batches.magic.tolist() == kr.batch_column("magic")
    assert records.end == kbatch.SegmentEnd(len(source), 0, None, None)
    return records


@pytest.mark.parametrize("magic,codec", LEGACY)
def test_legacy_message_sets_decode_or_are_refused(magic, codec):
    lats = (None, 1_700_000_000_000) if magic == 1 else (None,)
    for lat in lats:
        buf = legacy_message_set(LEGACY_RECORDS, magic=magic, codec=codec, base_offset=50,
                                 log_append_time=lat)
        kr = read_with_kafka_python(buf)
        assert kr.column("value") == [r[2] for r in LEGACY_RECORDS]
        assert kr.column("offset") == list(range(50, 55))
        v2 = build_batch([(0, b"x", b"v2", [("h", b"")])], base_offset=60, codec=codec)
        v2_before = build_batch([(0, b"x", b"v2", [])], base_offset=40)
        # a log switches format mid-segment after an upgrade (SPEC 5)
        for source in (buf, buf + v2, v2_before + buf, v2_before + buf + v2):
            records = check_legacy_result(source)
            if records is not None:
                assert records.offset.tolist() == kr.column("offset") or len(source) > len(buf)
                chunks = list(kbatch.iter_segment(source, chunk_records=1))
                assert summary(kbatch.Records.concat(chunks)) == summary(records)
                if lat is not None:
                    assert set(records.timestamp_type.tolist()) >= {1}


def test_legacy_lz4_with_old_kafka_header_checksum():
    """Kafka 0.8/0.9 wrote magic-0 lz4 frames whose header checksum also hashed
    the magic bytes; Kafka's reader accepts them (SPEC 6)."""
    inner = legacy_message_set([(0, b"k", b"a"), (0, None, b"b")], magic=0, base_offset=70)
    plain = read_with_kafka_python(inner)
    for stream in (lz4_old_kafka(inner), compress_records(inner, 3)):
        wrapper = legacy_message(offset=71, magic=0, value=stream, attributes=3)
        try:
            records = kbatch.read_segment(wrapper)
        except KbatchError as exc:
            check_error(exc, len(wrapper))
            continue
        assert records.offset.tolist() == plain.column("offset") == [70, 71]
        assert records.value.to_pylist() == [b"a", b"b"]
        assert records.timestamp.tolist() == [-1, -1]


def test_legacy_corner_cases_are_refused():
    """A nested wrapper, a wrapper with no messages or a null value, an
    unknown codec, a size below the minimum: each a CorruptRecordError."""
    plain = legacy_message(offset=0, magic=1, value=b"v", timestamp=5)
    nested_inner = legacy_message(offset=0, magic=1, value=compress_records(plain, 1),
                                  attributes=1, timestamp=5)
    cases = {
        "nested": legacy_message(offset=0, magic=1, value=compress_records(nested_inner, 1),
                                 attributes=1, timestamp=5),
        "empty-wrapper": legacy_message(offset=0, magic=1, value=compress_records(b"", 1),
                                        attributes=1, timestamp=5),
        "null-wrapper": legacy_message(offset=0, magic=1, value=None, attributes=1, timestamp=5),
        "codec-5": legacy_message(offset=0, magic=1, value=b"x", attributes=5, timestamp=5),
        "codec-4-legacy": legacy_message(offset=0, magic=1, value=compress_records(plain, 4),
                                         attributes=4, timestamp=5),
        "inner-offset-above-wrapper": legacy_message(
            offset=0, magic=1, attributes=1, timestamp=5,
            value=compress_records(legacy_message(offset=3, magic=1, value=b"v",
                                                  timestamp=5), 1))[:0]
        + legacy_message(offset=2, magic=1, attributes=1, timestamp=5,
                         value=compress_records(legacy_message(offset=3, magic=1, value=b"v",
                                                               timestamp=5), 1)),
    }
    size13 = bytearray(legacy_message(offset=0, magic=0, value=b""))
    struct.pack_into(">i", size13, 8, 13)
    cases["size-below-minimum"] = bytes(size13) + bytes(30)
    v1_small = bytearray(legacy_message(offset=0, magic=1, value=b"", timestamp=1))
    struct.pack_into(">i", v1_small, 8, 21)
    cases["v1-size-below-22"] = bytes(v1_small[:12 + 21]) + bytes(30)
    head = build_batch([(0, b"k", b"first", [])], base_offset=0)
    for name, message in cases.items():
        buf = head + message
        with pytest.raises(CorruptRecordError) as info:
            kbatch.read_segment(buf)
        check_error(info.value, len(buf))
        assert info.value.batch_position == len(head), name
        stopped = kbatch.read_segment(buf, on_corrupt="stop")
        assert stopped.value.to_pylist() == [b"first"], name
        assert stopped.end.reason == "corrupt" and stopped.end.valid_bytes == len(head), name


def _legacy_segment():
    return (build_batch([(5, b"a", b"v2-first", [])], base_offset=10)
            + legacy_message_set([(7, b"k", b"plain"), (8, None, b"")], magic=0, base_offset=11)
            + legacy_message_set([(9, b"w", b"x" * 40), (10, b"z", None)], magic=1, codec=1,
                                 base_offset=13)
            + legacy_message_set([(11, b"s", b"y" * 30)], magic=1, codec=2, base_offset=15)
            + build_batch([(12, None, b"v2-last", [])], base_offset=16, codec=4))


def test_legacy_segment_truncated_and_padded():
    buf = _legacy_segment()
    exp = Expected(buf)
    check_legacy_result(buf)
    for t in range(len(buf) + 1):
        valid = exp.valid_before(t)
        records = kbatch.read_segment(buf[:t])
        check_sane(records, t)
        assert summary(records) == exp.prefix(valid), t
        assert records.end.valid_bytes == valid
    for pad in PADS:
        records = kbatch.read_segment(buf + bytes(pad))
        assert summary(records) == exp.prefix(len(buf))
        assert records.end == kbatch.SegmentEnd(len(buf), pad, "zero_padding", None)


def test_legacy_segment_bit_flips():
    """Legacy entries: the CRC-32 covers [magic, end); offset and size are outside."""
    buf = _legacy_segment()
    exp = Expected(buf)
    size = len(buf)
    magics = {s: buf[s + 16] for s in exp.starts}
    for byte in range(size):
        s, e = exp.batch_at(byte)
        rel = byte - s
        for bit in range(8):
            bad = bytearray(buf)
            bad[byte] ^= 1 << bit
            for validate_crc in (True, False):
                status, out = decode(bytes(bad), validate_crc=validate_crc)
                if status == "error":
                    check_error(out, size)
                else:
                    check_sane(out, size)
                if validate_crc and rel >= (17 if magics[s] == 2 else 12):
                    assert status == "error", (byte, bit)
                    assert out.batch_position == s, (byte, bit)
                    assert s <= out.position <= e, (byte, bit)


def test_legacy_empty_values_at_the_start_of_a_chunk():
    """Empty keys/values appended into a fresh chunk (nothing allocated yet).

    Values are right in a normal build; a KBATCH_SANITIZE=1 build aborts here
    (UBSan: memcpy into a NULL data buffer, from _legacy._append through
    binary_append_unchecked, when 0 bytes were reserved)."""
    parts = [legacy_message(offset=i, magic=m, key=k, value=v, timestamp=i)
             for i, (m, k, v) in enumerate([(0, None, b""), (1, b"", None), (1, b"", b""),
                                            (0, b"k", b"v")])]
    buf = b"".join(parts)
    kr = read_with_kafka_python(buf)
    for chunks in ([kbatch.read_segment(buf)], list(kbatch.iter_segment(buf, chunk_records=1))):
        records = kbatch.Records.concat(chunks)
        assert records.key.to_pylist() == kr.column("key") == [None, b"", b"", b"k"]
        assert records.value.to_pylist() == kr.column("value") == [b"", None, b"", b"v"]
        assert records.timestamp.tolist() == kr.column("timestamp") == [-1, 1, 2, -1]


LEGACY_FUZZ_INPUTS = [
    _legacy_segment(),
    legacy_message(offset=9, magic=0, attributes=3, value=lz4_old_kafka(
        legacy_message_set([(0, b"k", b"a" * 30), (0, None, b"")], magic=0, base_offset=8))),
    legacy_message_set([(5, b"k", b"v" * 20), (6, None, None)], magic=1, codec=3, base_offset=3,
                       log_append_time=77),
]


@fewer_examples(2 / 3)
@given(st.sampled_from(range(len(LEGACY_FUZZ_INPUTS))), st.data())
def test_random_overwrites_of_legacy_segments_never_escape(which, data):
    bad = bytearray(LEGACY_FUZZ_INPUTS[which])
    for _ in range(data.draw(st.integers(1, 4))):
        pos = data.draw(st.integers(0, len(bad) - 1))
        bad[pos] = data.draw(st.sampled_from([0x00, 0xFF, 0x7F, 0x80, bad[pos] ^ 0x01,
                                              data.draw(st.integers(0, 255))]))
    if data.draw(st.booleans()):
        bad = bad[:data.draw(st.integers(0, len(bad)))]
    bad = bytes(bad)
    for kwargs in ({}, {"validate_crc": False}, {"validate_crc": False, "on_corrupt": "stop"}):
        status, out = decode(bad, **kwargs)
        if status == "error":
            check_error(out, len(bad))
        else:
            check_sane(out, len(bad))
            chunks = list(kbatch.iter_segment(bad, chunk_records=1, **kwargs))
            assert summary(kbatch.Records.concat(chunks)) == summary(out)
