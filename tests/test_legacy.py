"""Legacy message sets (magic 0 and 1) decode to what kafka-python decodes.

Message sets are built by kafka-python's MemoryRecordsBuilder
(kafka_ref.legacy_message_set) or, where kafka-python cannot (magic-0 lz4
needs xxhash), by kafka_ref.legacy_message around kafka_ref.lz4_old_kafka.
Expected values come from kafka-python (kafka_ref.read_with_kafka_python)
and from the bytes, walked here with struct (SPEC.md section 5).
"""

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kbatch

from .digest import digest
from .kafka_ref import (build_batch, compress_records, legacy_message, legacy_message_set,
                        lz4_frame_header_checksum, lz4_old_kafka, read_with_kafka_python)

LAT = 1_650_000_000_123

RECORDS = [
    (1_600_000_000_000, b"k0", b"value-0"),
    (1_600_000_000_005, None, b"no key"),
    (1_599_999_999_000, b"", b""),            # empty key and value, older timestamp
    (1_600_000_000_010, b"tomb", None),       # null value (tombstone)
    (1_600_000_000_011, None, None),
    (-1, b"no-ts", b"timestamp -1"),
    (0, b"\xff\xfe", bytes(range(256)) * 8),  # not UTF-8, 2 KiB
]


def top_level(buf: bytes):
    """(position, offset, size, magic, attributes) of every top-level message."""
    out, pos = [], 0
    while pos + 17 <= len(buf):
        offset, size = struct.unpack_from(">qi", buf, pos)
        if pos + 12 + size > len(buf):
            break
        out.append((pos, offset, 12 + size, buf[pos + 16], buf[pos + 17]))
        pos += 12 + size
    return out


class Want:
    """Expected records, concatenated from kafka-python reads of parts.

    ``messages``: (position, offset field, size, magic) of every top-level
    message or batch; ``row_message``: the one holding each row.
    """

    def __init__(self):
        self.rows, self.magics, self.messages, self.row_message = [], [], [], []

    def add(self, kr, position, messages=None):
        """``kr``: kafka-python's read of a part placed at ``position``;
        ``messages``: its top-level messages when ``kr`` read something else
        (the uncompressed inner set of an old-lz4 wrapper)."""
        first = len(self.messages)
        if messages is None:
            self.messages += [(position + b["position"], b["base_offset"], b["size"], b["magic"])
                              for b in kr.batches]
            self.row_message += [first + r["batch"] for r in kr.records]
        else:
            self.messages += [(position + p, o, n, m) for p, o, n, m in messages]
            self.row_message += [first] * len(kr.records)
        self.rows += kr.data_tuples()
        self.magics += [self.messages[k][3] for k in self.row_message[len(self.magics):]]


def check(records, want: Want, size: int):
    offsets = [r[0] for r in want.rows]
    assert records.offset.tolist() == offsets
    assert records.timestamp.tolist() == [r[1] for r in want.rows]
    assert records.timestamp_type.tolist() == [r[2] for r in want.rows]
    assert records.key.to_pylist() == [r[3] for r in want.rows]
    assert records.value.to_pylist() == [r[4] for r in want.rows]
    assert records.headers.to_pylist() == [list(r[5]) for r in want.rows]
    assert all(r[5] == [] for r, m in zip(want.rows, want.magics) if m < 2)
    assert digest(records) == digest(want.rows)
    assert list(records) == [tuple(r) for r in want.rows]
    assert records.batches.magic[records.batch].tolist() == want.magics
    # one batch row per top-level message (a wrapper counts once)
    bt = records.batches
    assert bt.position.tolist() == [m[0] for m in want.messages]
    assert bt.size.tolist() == [m[2] for m in want.messages]
    assert bt.magic.tolist() == [m[3] for m in want.messages]
    legacy = [i for i, m in enumerate(want.messages) if m[3] < 2]
    assert [int(bt.last_offset[i]) for i in legacy] == [want.messages[i][1] for i in legacy]
    assert (bt.base_offset[records.batch] <= records.offset).all()
    assert (records.offset <= bt.last_offset[records.batch]).all()
    assert records.end.valid_bytes == size and records.end.trailing_bytes == 0
    assert records.end.reason is None


def one_set(records, magic, codec, base_offset, lat=None):
    buf = legacy_message_set(records, magic=magic, codec=codec, base_offset=base_offset,
                             log_append_time=lat)
    want = Want()
    want.add(read_with_kafka_python(buf), 0)
    assert want.magics == [magic] * len(records)
    return buf, want


# --- kafka-python message sets, every codec ---------------------------------------

CASES = [(0, c, None) for c in (0, 1, 2)] + [(1, c, lat) for c in (0, 1, 2, 3)
                                             for lat in (None, LAT)]


@pytest.mark.parametrize("base_offset", [0, 1 << 33])
@pytest.mark.parametrize("magic,codec,lat", CASES)
def test_message_set_matches_kafka_python(magic, codec, lat, base_offset):
    buf, want = one_set(RECORDS, magic, codec, base_offset, lat)
    assert [r[0] for r in want.rows] == list(range(base_offset, base_offset + len(RECORDS)))
    records = kbatch.read_segment(buf)
    check(records, want, len(buf))
    if magic == 0:
        assert set(records.timestamp.tolist()) == {-1}
        assert set(records.timestamp_type.tolist()) == {-1}
    elif lat is not None:
        assert set(records.timestamp.tolist()) == {LAT}
        assert set(records.timestamp_type.tolist()) == {1}
    else:
        assert records.timestamp.tolist() == [r[0] for r in RECORDS]
        assert set(records.timestamp_type.tolist()) == {0}
    assert records.batches.codec.tolist() == [m[4] & 7 for m in top_level(buf)]
    for n in (1, 2, 5):
        chunks = list(kbatch.iter_segment(buf, chunk_records=n))
        check(kbatch.Records.concat(chunks), want, len(buf))


@pytest.mark.parametrize("magic", [0, 1])
def test_single_messages_with_every_key_value_shape(magic):
    shapes = [(None, None), (None, b""), (b"", None), (b"", b""), (b"k", b"v"),
              (None, b"x" * 70000), (b"y" * 1000, None)]
    buf = b"".join(legacy_message(offset=10 + i, magic=magic, key=k, value=v, timestamp=100 + i)
                   for i, (k, v) in enumerate(shapes))
    want = Want()
    want.add(read_with_kafka_python(buf), 0)
    assert [(r[3], r[4]) for r in want.rows] == shapes
    check(kbatch.read_segment(buf), want, len(buf))


# --- formats mixed in one segment ----------------------------------------------------

def _old_lz4_wrapper(records, base_offset):
    """A magic-0 lz4 wrapper as Kafka 0.8/0.9 wrote it (broken header checksum),
    and what it holds according to kafka-python (read uncompressed)."""
    inner = legacy_message_set(records, magic=0, base_offset=base_offset)
    frame = lz4_old_kafka(inner)
    wrapper = legacy_message(offset=base_offset + len(records) - 1, magic=0, value=frame,
                             attributes=3)
    return wrapper, read_with_kafka_python(inner)


def mixed_segment():
    recs = RECORDS[:3]
    parts = []   # (bytes, kafka-python read, magic)
    offset = 0

    def legacy(magic, codec, lat=None):
        nonlocal offset
        b = legacy_message_set(recs, magic=magic, codec=codec, base_offset=offset,
                               log_append_time=lat)
        parts.append((b, read_with_kafka_python(b), magic))
        offset += len(recs)

    def v2(codec):
        nonlocal offset
        b = build_batch([(1_700_000_000_000 + i, b"v2k", b"v2-%d" % i, [("h", b"x")])
                         for i in range(2)], base_offset=offset, codec=codec)
        parts.append((b, read_with_kafka_python(b), 2))
        offset += 2

    legacy(0, 0)
    legacy(0, 1)
    w, kr = _old_lz4_wrapper(recs, offset)
    parts.append((w, kr, "old-lz4"))
    offset += len(recs)
    legacy(1, 0)
    legacy(1, 2, LAT)
    v2(0)
    legacy(1, 3)           # a downgrade after magic 2: the magic is read per batch
    v2(4)
    legacy(0, 2)
    legacy(1, 1, LAT)
    buf = b"".join(p[0] for p in parts)
    want = Want()
    pos = 0
    for b, kr, magic in parts:
        want.add(kr, pos, [(0, offset_of(b), len(b), 0)] if magic == "old-lz4" else None)
        pos += len(b)
    return buf, want, offset


def offset_of(message: bytes) -> int:
    return struct.unpack_from(">q", message)[0]


def test_mixed_magics_in_one_segment_decode_in_order():
    buf, want, end = mixed_segment()
    assert [r[0] for r in want.rows] == list(range(end))
    assert sorted(set(want.magics)) == [0, 1, 2]
    records = kbatch.read_segment(buf)
    check(records, want, len(buf))
    # headers survive on the magic-2 rows only
    assert [h for h, m in zip(records.headers.to_pylist(), want.magics) if m == 2] == \
        [[("h", b"x")]] * want.magics.count(2)
    for n in (1, 4):
        check(kbatch.Records.concat(list(kbatch.iter_segment(buf, chunk_records=n))),
              want, len(buf))


def test_mixed_magics_in_a_partition_directory(tmp_path):
    buf, want, end = mixed_segment()
    part = tmp_path / "legacy.topic-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(buf)
    log = kbatch.open_log(part)
    assert (log.topic, log.partition) == ("legacy.topic", 0)
    check(log.read(), want, len(buf))
    offsets = [r[0] for r in want.rows]
    for lo, hi in [(0, 1), (2, 7), (5, 6), (9, end), (end - 1, end + 5), (4, 4)]:
        got = log.read(lo, hi)
        assert got.offset.tolist() == [o for o in offsets if lo <= o < hi]
        assert got.value.to_pylist() == [r[4] for r in want.rows if lo <= r[0] < hi]
    report = kbatch.verify(part)
    assert report.ok, [s.problems() for s in report.segments]
    assert report.records == len(want.rows)


# --- lz4 in magic 0: the header checksum old Kafka wrote ---------------------------

def test_magic0_lz4_with_the_broken_header_checksum():
    recs = [(0, b"key-%d" % i, b"lz4 value %d " % i * (i + 1)) for i in range(12)]
    wrapper, kr = _old_lz4_wrapper(recs, 500)
    frame = wrapper[26:]                     # offset, size, crc, magic, attrs, key -1, len
    assert frame[:4] == b"\x04\x22\x4d\x18"
    pos, broken = lz4_frame_header_checksum(frame, broken=True)
    _, correct = lz4_frame_header_checksum(frame, broken=False)
    assert frame[pos] == broken != correct   # really the wrong checksum
    want = Want()
    want.add(kr, 0, [(0, 511, len(wrapper), 0)])
    assert want.magics == [0] * len(recs)
    records = kbatch.read_segment(wrapper)
    check(records, want, len(wrapper))
    assert records.offset.tolist() == list(range(500, 512))
    assert records.batches.codec.tolist() == [3]


def test_magic0_lz4_with_a_correct_header_checksum():
    """Kafka reads magic-0 lz4 without checking the descriptor checksum, so
    frames with the right one decode too."""
    recs = [(0, None, b"a" * 100), (0, b"k", b"b")]
    inner = legacy_message_set(recs, magic=0, base_offset=7)
    for variant in ("lz4", "lz4-checksums"):
        wrapper = legacy_message(offset=8, magic=0, attributes=3,
                                 value=compress_records(inner, 3, variant))
        records = kbatch.read_segment(wrapper)
        assert records.offset.tolist() == [7, 8]
        assert records.value.to_pylist() == [b"a" * 100, b"b"]
        assert records.key.to_pylist() == [None, b"k"]


# --- CRC-32 of legacy messages -------------------------------------------------------

def _flips(buf):
    """(what, position of the flipped byte, message) for every top-level
    message: its stored CRC, and the first byte of its key and of its value
    (covered by the CRC; lengths left alone so the layout stays valid)."""
    out = []
    for msg in top_level(buf):
        pos, _, size, magic, attrs = msg
        out.append(("stored-crc", pos + 12, msg))
        if attrs & 7:
            continue
        at = pos + (18 if magic == 0 else 26)
        key_len, = struct.unpack_from(">i", buf, at)
        if key_len > 0:
            out.append(("key", at + 4, msg))
        at += 4 + max(key_len, 0)
        value_len, = struct.unpack_from(">i", buf, at)
        if value_len > 0:
            out.append(("value", at + 4, msg))
    return out


@pytest.mark.parametrize("magic,codec", [(0, 0), (1, 0), (0, 1), (1, 2), (1, 3)])
def test_crc_corruption(magic, codec, tmp_path):
    buf = legacy_message_set(RECORDS[:4], magic=magic, codec=codec, base_offset=40)
    assert kbatch.read_segment(buf).offset.tolist() == [40, 41, 42, 43]
    flips = _flips(buf)
    assert len(flips) == (4 + 2 + 2 if codec == 0 else 1)
    for what, at, (pos, offset, size, _, attrs) in flips:
        bad = bytearray(buf)
        bad[at] ^= 0x5A
        bad = bytes(bad)
        stored, = struct.unpack_from(">I", bad, pos + 12)
        assert stored != zlib.crc32(bad[pos + 16:pos + size])
        with pytest.raises(kbatch.CorruptRecordError) as info:
            kbatch.read_segment(bad)
        err = info.value
        assert err.batch_position == pos, what
        assert pos <= err.position < pos + size, what
        first_inner = offset - (3 if attrs & 7 else 0)
        assert err.base_offset in (offset, first_inner), what
        # without the check the bytes decode as kafka-python decodes them
        want = Want()
        want.add(read_with_kafka_python(bad), 0)
        records = kbatch.read_segment(bad, validate_crc=False)
        check(records, want, len(bad))
        # stop at the corrupt message
        stopped = kbatch.read_segment(bad, on_corrupt="stop")
        assert stopped.end.reason == "corrupt" and stopped.end.valid_bytes == pos
        assert stopped.offset.tolist() == [r[0] for r in want.rows if r[0] < first_inner]
        path = tmp_path / "00000000000000000040.log"
        path.write_bytes(bad)
        [seg] = kbatch.verify(path).segments
        assert [p for p, _ in seg.crc_failures] == [pos], what
        assert not seg.ok


def test_crc_of_a_message_inside_a_compressed_wrapper():
    """The inner messages of a wrapper carry their own CRC-32."""
    inner = bytearray(legacy_message_set(RECORDS[:3], magic=1, base_offset=0))
    first = top_level(bytes(inner))[1]
    inner[first[0] + 12] ^= 0x01                     # the second inner message's CRC
    wrapper = legacy_message(offset=12, magic=1, attributes=1, timestamp=5,
                             value=compress_records(bytes(inner), 1))
    assert read_with_kafka_python(wrapper).column("offset") == [10, 11, 12]
    with pytest.raises(kbatch.CorruptRecordError) as info:
        kbatch.read_segment(wrapper)
    assert info.value.batch_position == 0
    records = kbatch.read_segment(wrapper, validate_crc=False)
    assert records.offset.tolist() == [10, 11, 12]
    assert records.value.to_pylist() == [r[2] for r in RECORDS[:3]]


# --- a property over random legacy message sets ---------------------------------------

blobs = st.one_of(st.none(), st.just(b""), st.binary(min_size=1, max_size=60))


@st.composite
def legacy_parts(draw):
    parts = []
    offset = draw(st.sampled_from([0, 1, 1 << 35]))
    for _ in range(draw(st.integers(1, 4))):
        magic = draw(st.sampled_from([0, 1, 1, 2]))
        n = draw(st.integers(1, 5))
        recs = [(draw(st.sampled_from([-1, 0, draw(st.integers(0, 1 << 42))])),
                 draw(blobs), draw(blobs)) for _ in range(n)]
        offset += draw(st.sampled_from([0, 0, draw(st.integers(1, 1000))]))
        if magic == 2:
            codec = draw(st.sampled_from([0, 1, 4]))
            parts.append(("v2", build_batch([(max(t, 0), k, v, []) for t, k, v in recs],
                                            base_offset=offset, codec=codec), None))
        else:
            codec = draw(st.sampled_from([0, 1, 2, 3]))
            lat = draw(st.sampled_from([None, None, LAT])) if magic == 1 else None
            if magic == 0 and codec == 3:
                wrapper, kr = _old_lz4_wrapper(recs, offset)
                parts.append(("old-lz4", wrapper, kr))
            else:
                parts.append((f"v{magic}", legacy_message_set(
                    recs, magic=magic, codec=codec, base_offset=offset,
                    log_append_time=lat), None))
        offset += n
    return parts


@settings(max_examples=40, deadline=None)
@given(legacy_parts())
def test_random_legacy_message_sets(parts):
    want = Want()
    pos = 0
    for kind, b, kr in parts:
        if kind == "old-lz4":
            want.add(kr, pos, [(0, offset_of(b), len(b), 0)])
        else:
            want.add(read_with_kafka_python(b), pos)
        pos += len(b)
    buf = b"".join(b for _, b, _ in parts)
    check(kbatch.read_segment(buf), want, len(buf))
    check(kbatch.Records.concat(list(kbatch.iter_segment(buf, chunk_records=2))), want, len(buf))
    # a truncated copy keeps the whole messages before the cut
    cut = len(buf) - 1
    short = kbatch.read_segment(buf[:cut])
    last_start = want.messages[-1][0]
    assert short.end.valid_bytes == last_start
    assert short.end.reason == "truncated"
    assert short.offset.tolist() == [
        r[0] for r, k in zip(want.rows, want.row_message) if k < len(want.messages) - 1]


# --- corners of the legacy layout, against kafka-python ----------------------------------

def _wrap(inner: bytes, *, offset: int, magic: int, codec: int = 1, timestamp: int = 50,
          lat: bool = False):
    return legacy_message(offset=offset, magic=magic, attributes=codec | (8 if lat else 0),
                          timestamp=timestamp, value=compress_records(inner, codec))


CORNERS = {
    # magic 0 has no timestamp type, whatever attribute bit 3 says
    "magic0-attribute-bit3": lambda: (
        legacy_message(offset=0, magic=0, attributes=0x08, value=b"v")
        + legacy_message(offset=1, magic=0, attributes=0xF0, value=b"w")),
    # a magic-1 wrapper whose inner offsets are already absolute
    "magic1-absolute-inner": lambda: _wrap(
        legacy_message_set([(5, b"a", b"1"), (6, b"b", b"2"), (7, None, b"3")], magic=1,
                           base_offset=100), offset=102, magic=1),
    # magic 0 inner offsets are taken as they are
    "magic0-inner-as-is": lambda: _wrap(
        legacy_message_set([(0, b"a", b"1"), (0, None, b"2")], magic=0, base_offset=40),
        offset=41, magic=0),
    # the wrapper's timestamp type wins over an inner message's bit
    "inner-lat-bit-under-createtime": lambda: _wrap(
        legacy_message(offset=0, magic=1, attributes=0x08, timestamp=42, value=b"y"),
        offset=9, magic=1),
    "inner-createtime-under-lat": lambda: _wrap(
        legacy_message(offset=0, magic=1, timestamp=42, value=b"y")
        + legacy_message(offset=1, magic=1, timestamp=43, value=b"z"),
        offset=9, magic=1, lat=True, timestamp=77),
    # several wrappers and plain messages in a row, snappy and gzip
    "wrappers-in-a-row": lambda: (
        _wrap(legacy_message_set([(1, b"k", b"a")] * 3, magic=1, base_offset=0), offset=2,
              magic=1, codec=2)
        + legacy_message(offset=3, magic=1, timestamp=4, value=b"plain")
        + _wrap(legacy_message_set([(1, b"k", b"b")] * 2, magic=1, base_offset=0), offset=5,
                magic=1, codec=1)),
}


@pytest.mark.parametrize("name", sorted(CORNERS))
def test_legacy_corners_match_kafka_python(name):
    buf = CORNERS[name]()
    want = Want()
    want.add(read_with_kafka_python(buf), 0)
    records = kbatch.read_segment(buf)
    check(records, want, len(buf))
    check(kbatch.Records.concat(list(kbatch.iter_segment(buf, chunk_records=1))), want, len(buf))


@pytest.mark.parametrize("magic", [0, 1])
def test_a_crc_error_inside_a_wrapper_names_its_first_inner_offset(magic):
    """A CRC mismatch in the second message of a gzip wrapper at offset 4
    holding offsets 3 and 4 (magic 1: relative 0 and 1; magic 0: absolute):
    the error names the batch by its base offset, 3 (the skipped range's
    offsets agree), not the wrapper's own offset (its last)."""
    import gzip
    inner_offsets = (0, 1) if magic == 1 else (3, 4)
    ts = {} if magic == 0 else {"timestamp": 1000}
    inner = bytearray(b"".join(legacy_message(offset=o, magic=magic, value=b"in%d" % o, **ts)
                               for o in inner_offsets))
    inner[-1] ^= 0xFF                                   # the second message's value
    head = b"".join(legacy_message(offset=i, magic=magic, value=b"v%d" % i, **ts)
                    for i in range(3))
    wrapper = legacy_message(offset=4, magic=magic, value=gzip.compress(bytes(inner)),
                             attributes=1, **ts)
    data = head + wrapper + legacy_message(offset=5, magic=magic, value=b"tail", **ts)
    with pytest.raises(kbatch.CorruptRecordError, match="CRC") as info:
        kbatch.read_segment(data)
    assert (info.value.base_offset, info.value.position) == (3, len(head))
    skipped = kbatch.read_segment(data, on_corrupt="skip").skipped
    assert [(s.offset_before, s.offset_after) for s in skipped] == [(2, 5)]
