"""gzip, snappy and zstd batches decompressed in the compiled walk (no GIL)
against the Python path of ``compression.py`` and against the reference
libraries (zlib/gzip, python-snappy, zstandard): the same bytes, the same
accept/refuse decisions, the same records and errors.

``_codecs.decompress(codec, data, limit)`` is the native path on its own (None
when it refuses); ``compression.decompress`` is the Python path (CodecError
when it refuses).
"""

import gzip
import os
import random
import struct
import subprocess
import sys
import zlib

import pytest
import snappy
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kbatch
from kbatch._core import _codecs
from kbatch._core import _gzip
from kbatch.lib import compression
from kbatch.lib import decoder, segment
from kbatch.lib.compression import CodecError, snappy_xerial_bytes

from .kafka_ref import (RandomChoices, VARIANTS, build_batch, compress_records, fix_crc,
                        generate_segment, raw_batch)
from .native_paths import flip_bits, same_outcome
from .test_against_kafka_python import assert_same_records

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
NATIVE_FLAGS = {GZIP: "NATIVE_GZIP", SNAPPY: "NATIVE_SNAPPY", LZ4: "NATIVE_LZ4",
                ZSTD: "NATIVE_ZSTD"}
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                       HealthCheck.data_too_large])


def _python(codec, data, limit):
    try:
        return compression.decompress(codec, data, limit)
    except CodecError:
        return None


def _native(codec, data, limit):
    """The native path; gzip through zlib-ng and through zlib, which must agree."""
    if codec != GZIP:
        return _codecs.decompress(codec, bytes(data), limit)
    try:
        results = [(_gzip.select(ng), _codecs.decompress(codec, bytes(data), limit))[1]
                   for ng in (True, False)]
    finally:
        _gzip.select()
    assert results[0] == results[1]
    return results[0]


@pytest.fixture(params=["zlib-ng", "zlib"])
def gzip_library(request):
    """gzip inflated by zlib-ng (the default) or by zlib (the fallback)."""
    assert _gzip.select(request.param == "zlib-ng").startswith(request.param + " ")
    yield request.param
    _gzip.select()


def test_native_paths_are_in_use():
    # zlib-ng and zstandard (dependencies) and the Cython snappy decoder are on
    # every machine the project installs on: none may silently fall back
    assert all(_codecs.native_codecs().values()), _codecs.native_codecs()
    assert _codecs.native_codecs()["gzip"].startswith("zlib-ng ")
    assert _gzip.select(False).startswith("zlib ")  # the fallback is there too
    _gzip.select()


# --- payloads and how the reference libraries compress them ------------------

def _payload(draw):
    kind = draw(st.sampled_from(["random", "repetitive", "empty", "big"]))
    if kind == "random":
        return draw(st.binary(max_size=3000))
    if kind == "repetitive":
        return draw(st.binary(min_size=1, max_size=40)) * draw(st.integers(1, 5000))
    if kind == "big":  # several blocks / many elements
        rng = random.Random(draw(st.integers(0, 1 << 30)))
        return b"".join(rng.randbytes(rng.randint(0, 300)) + bytes(rng.randint(0, 3000))
                        for _ in range(rng.randint(1, 200)))
    return b""


def _gzip_member(draw, data):
    how = draw(st.sampled_from(["gzip", "zlib", "header-fields"]))
    level = draw(st.sampled_from([0, 1, 6, 9]))
    if how == "gzip":
        return gzip.compress(data, compresslevel=level)
    stream = zlib.compressobj(level, zlib.DEFLATED, 31, draw(st.integers(1, 9)),
                              draw(st.sampled_from([zlib.Z_DEFAULT_STRATEGY, zlib.Z_FILTERED,
                                                    zlib.Z_HUFFMAN_ONLY, zlib.Z_RLE,
                                                    zlib.Z_FIXED])))
    member = stream.compress(data) + stream.flush()
    if how == "zlib":
        return member
    # FEXTRA, FNAME, FCOMMENT and FHCRC, as other writers set them
    flags = draw(st.integers(0, 0x1F)) & 0x1E
    header = bytearray(b"\x1f\x8b\x08" + bytes([flags]) + member[4:10])
    if flags & 0x04:
        extra = draw(st.binary(max_size=20))
        header += struct.pack("<H", len(extra)) + extra
    if flags & 0x08:
        header += draw(st.binary(max_size=10)).replace(b"\0", b"x") + b"\0"
    if flags & 0x10:
        header += draw(st.binary(max_size=10)).replace(b"\0", b"x") + b"\0"
    if flags & 0x02:
        header += struct.pack("<H", zlib.crc32(header) & 0xFFFF)
    return bytes(header) + member[10:]


def _split(data, parts):
    step = max(1, -(-len(data) // parts))
    return [data[i:i + step] for i in range(0, len(data), step)] or [b""]


def _zstd_skippable(draw):
    body = draw(st.binary(max_size=20))
    return struct.pack("<II", 0x184D2A50 + draw(st.integers(0, 15)), len(body)) + body


@st.composite
def streams(draw, codec):
    """``(codec, data, compressed)``: ``data`` compressed as some writer would."""
    data = _payload(draw)
    parts = _split(data, draw(st.integers(1, 4)))
    if codec == GZIP:
        out = b"".join(_gzip_member(draw, p) for p in parts)
    elif codec == SNAPPY:
        how = draw(st.sampled_from(["raw", "xerial", "xerial-le", "kafka"]))
        if how == "raw":
            out = snappy.compress(data)
        elif how == "xerial":
            out = snappy_xerial_bytes(data)
        else:
            order = "<" if how == "xerial-le" else ">"
            out = b"\x82SNAPPY\x00" + struct.pack(order + "ii", 1, 1) + b"".join(
                struct.pack(">i", len(b)) + b for b in map(snappy.compress, parts))
    else:
        frames = []
        for p in parts:
            if draw(st.booleans()):
                frames.append(_zstd_skippable(draw))
            frames.append(zstandard.ZstdCompressor(
                level=draw(st.sampled_from([-5, 1, 3, 19])),
                write_content_size=draw(st.booleans()),
                write_checksum=draw(st.booleans())).compress(p))
        out = b"".join(frames)
    return codec, data, out


any_stream = st.sampled_from([GZIP, SNAPPY, ZSTD]).flatmap(streams)


@settings(max_examples=200, **SETTINGS)
@given(any_stream)
def test_streams_decompress_like_the_reference_libraries(case):
    codec, data, stream = case
    assert _native(codec, stream, len(data)) == data
    assert _native(codec, stream, len(data) + 100) == data
    assert _python(codec, stream, len(data)) == data
    if data:  # one byte over the limit: refused on both paths
        assert _native(codec, stream, len(data) - 1) is None
        assert _python(codec, stream, len(data) - 1) is None


@settings(max_examples=400, **SETTINGS)
@given(any_stream, st.data())
def test_damaged_streams_fail_exactly_where_the_python_path_fails(case, draw):
    codec, data, stream = case
    damaged = bytearray(stream)
    how = draw.draw(st.sampled_from(["truncate", "flip", "both", "append"]))
    if how in ("truncate", "both") and damaged:
        del damaged[draw.draw(st.integers(0, len(damaged) - 1)):]
    if how in ("flip", "both") and damaged:
        for _ in range(draw.draw(st.integers(1, 3))):
            i = draw.draw(st.integers(0, len(damaged) - 1))
            damaged[i] ^= 1 << draw.draw(st.integers(0, 7))
    if how == "append":
        damaged += draw.draw(st.sampled_from([b"", b"\0" * 10, stream[:10], b"junk"]))
    damaged = bytes(damaged)
    limit = draw.draw(st.sampled_from([len(data) + 1000, max(len(data) // 2, 1), 1 << 20]))
    assert _native(codec, damaged, limit) == _python(codec, damaged, limit)


# --- raw snappy blocks written element by element ----------------------------

@st.composite
def snappy_blocks(draw):
    """A raw snappy block of literals and copies in every encoding the format
    allows (including ones no compressor writes), mostly valid."""
    out = bytearray()
    elements = bytearray()
    for _ in range(draw(st.integers(0, 12))):
        if not out or draw(st.booleans()):
            lit = draw(st.binary(min_size=1, max_size=80))
            extra = draw(st.sampled_from([0, 0, 1, 2, 3, 4]))
            if extra == 0 and len(lit) <= 60:
                elements.append((len(lit) - 1) << 2)
            else:
                extra = extra or 1
                elements.append((59 + extra) << 2)
                elements += (len(lit) - 1).to_bytes(4, "little")[:extra]
            elements += lit
            out += lit
            continue
        kind = draw(st.sampled_from([1, 2, 4]))
        bad = draw(st.integers(0, 20)) == 0
        offset = draw(st.integers(0, len(out) + 3)) if bad else draw(
            st.integers(1, min(len(out), 2047 if kind == 1 else len(out))))
        size = draw(st.integers(4, 11)) if kind == 1 else draw(st.integers(1, 64))
        if kind == 1:
            offset = min(offset, 2047)
            elements += bytes([1 | ((size - 4) << 2) | ((offset >> 8) << 5), offset & 0xFF])
        elif kind == 2:
            elements += bytes([2 | ((size - 1) << 2)]) + struct.pack("<H", offset & 0xFFFF)
        else:
            elements += bytes([3 | ((size - 1) << 2)]) + struct.pack("<I", offset)
        if 0 < offset <= len(out):
            for _ in range(size):
                out.append(out[-offset])
        else:
            out += bytes(size)  # invalid: both paths must refuse
    declared = len(out) + draw(st.sampled_from([0, 0, 0, -1, 1]))
    return bytes(out), compression_varint(max(declared, 0)) + bytes(elements)


def compression_varint(value):
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


@settings(max_examples=300, **SETTINGS)
@given(snappy_blocks(), st.integers(0, 4))
def test_raw_snappy_elements_agree_with_python_snappy(case, cut):
    _, block = case
    for data in (block, block[:len(block) - cut]):
        try:
            expected = snappy.uncompress(data)
        except Exception:  # python-snappy raises its own types
            expected = None
        assert _native(SNAPPY, data, 1 << 20) == expected
        assert _python(SNAPPY, data, 1 << 20) == expected


def test_snappy_length_byte_quirk_of_the_reference_decoder():
    # a literal with a length byte needs 4 bytes after its tag in the Rust
    # decoder behind python-snappy, even when fewer would do: refused alike
    for block in (b"\x01\xf0\x00a", b"\x02\xf0\x01ab", b"\x03\xf0\x02abc"):
        assert _native(SNAPPY, block, 100) == _python(SNAPPY, block, 100)
    assert _native(SNAPPY, b"\x03\xf0\x02abc", 100) == b"abc"
    assert _native(SNAPPY, b"\x01\xf0\x00a", 100) is None


def test_gzip_members_after_a_whole_one_keep_what_python_keeps():
    # a second member broken past the first 64 KiB of its input: the Python
    # path keeps the output of the steps before the one that failed
    rng = random.Random(7)
    first = gzip.compress(b"first" * 1000)
    second = bytearray(gzip.compress(rng.randbytes(200_000), compresslevel=1))
    second[150_000] ^= 0xFF
    for stream in (first + bytes(second), first + bytes(second[:100_000]),
                   first + b"\x1f\x8b", first + b"\0" * 100, b""):
        expected = _python(GZIP, stream, 1 << 20)
        assert expected is not None
        assert _native(GZIP, stream, 1 << 20) == expected
    assert len(_python(GZIP, first + bytes(second), 1 << 20)) > 5000 + 65536


# --- whole segments on both paths --------------------------------------------

def _set_native(monkeypatch, native):
    for flag in NATIVE_FLAGS.values():
        monkeypatch.setattr(decoder, flag, native)


def _read(buf, native, monkeypatch, **options):
    _set_native(monkeypatch, native)
    try:
        return kbatch.read_segment(buf, **options), None
    except kbatch.CorruptRecordError as exc:
        return None, (type(exc), str(exc), exc.position, exc.base_offset)


def _chunks(buf, native, monkeypatch, **options):
    _set_native(monkeypatch, native)
    got = []
    try:
        for chunk in kbatch.iter_segment(buf, chunk_records=3, **options):
            got.append(chunk)
    except kbatch.CorruptRecordError as exc:
        return got, (type(exc), str(exc))
    return got, None


OPTION_SETS = ({}, {"validate_crc": False}, {"on_corrupt": "stop"},
               {"include_control": True, "validate_crc": False},
               {"isolation": "read_committed", "validate_crc": False},
               {"max_decompressed_bytes": 200, "validate_crc": False})


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, ZSTD])
@pytest.mark.parametrize("seed", range(15))
def test_segments_decode_the_same_on_both_paths(codec, seed, monkeypatch):
    """Generated segments, mostly of one codec (all its variants), whole,
    truncated and bit-flipped, with every option that changes how a batch is
    decoded."""
    _segments_agree(codec, random.Random(seed * 10 + codec), monkeypatch)


@pytest.mark.parametrize("seed", range(6))
def test_gzip_segments_decode_the_same_with_zlib(seed, gzip_library, monkeypatch):
    _segments_agree(GZIP, random.Random(seed * 10 + 7), monkeypatch)


def _segments_agree(codec, rng, monkeypatch):
    buf, _ = generate_segment(RandomChoices(rng), max_batches=8, max_records=12,
                              codecs=(codec, codec, codec, 0, rng.choice([1, 2, 3, 4])))
    variants = [buf, buf[:rng.randrange(len(buf))], flip_bits(buf, rng)]
    for data in variants:
        for options in OPTION_SETS:
            same_outcome(_read(data, True, monkeypatch, **options),
                  _read(data, False, monkeypatch, **options))
        native, native_err = _chunks(data, True, monkeypatch, validate_crc=False)
        python, python_err = _chunks(data, False, monkeypatch, validate_crc=False)
        assert native_err == python_err and len(native) == len(python)
        for a, b in zip(native, python):
            assert_same_records(a, b)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, ZSTD])
def test_the_walk_decompresses_without_python(codec, gzip_library, monkeypatch):
    # the native path really runs in the walk: Python's decompress is only
    # reached with the switch off
    data = b"".join(build_batch([(1000 + i, b"k", b"v" * 300, [])], codec=codec,
                                base_offset=i, variant=variant)
                    for i, variant in enumerate(VARIANTS[codec]))
    calls = []

    def counting(*args, **kwargs):
        calls.append(args[0])
        return compression.decompress(*args, **kwargs)

    monkeypatch.setattr(segment, "decompress", counting)
    for native in (True, False):
        _set_native(monkeypatch, native)
        calls.clear()
        records = kbatch.read_segment(data)
        assert list(records.offset) == list(range(len(VARIANTS[codec])))
        assert calls == ([] if native else [codec] * len(VARIANTS[codec]))


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, ZSTD])
def test_a_bad_stream_raises_the_python_paths_error(codec, monkeypatch):
    batch = bytearray(build_batch([(1000, b"k", b"v" * 500, [])], codec=codec))
    batch[61 + 1] ^= 0x40      # inside the gzip magic / snappy length / zstd magic
    data = bytes(fix_crc(batch))
    native = _read(data, True, monkeypatch)
    assert native[0] is None and {1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}[codec] in native[1][1]
    assert native == _read(data, False, monkeypatch)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, ZSTD])
def test_bomb_over_the_limit_raises_the_limit_error(codec, monkeypatch):
    stream = compress_records(bytes(4 << 20), codec)
    data = raw_batch(stream, records_count=1, attributes=codec)
    for native in (True, False):
        _set_native(monkeypatch, native)
        with pytest.raises(kbatch.DecompressionLimitError):
            kbatch.read_segment(data, max_decompressed_bytes=1 << 20)


def test_environment_switches_turn_each_native_path_off():
    code = ("from kbatch.lib import decoder as s; "
            "print(s.NATIVE_GZIP, s.NATIVE_SNAPPY, s.NATIVE_LZ4, s.NATIVE_ZSTD)")
    env = dict(os.environ, KBATCH_NATIVE_GZIP="0", KBATCH_NATIVE_ZSTD="0")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True, cwd=os.path.dirname(os.path.dirname(__file__)))
    assert out.stdout.split() == ["False", "True", "True", "False"]


def test_gzip_error_found_after_the_limit_is_filled():
    # a second member whose one stored block is followed by a block header
    # error: zlib finds it after filling the limit, both paths keep member 1
    member = bytes.fromhex("1f8b08000000000000ff") + b"\x01\x01\x00\xfe\xff\x00" + \
        struct.pack("<II", zlib.crc32(b"\x00"), 1)
    broken = bytearray(member)
    broken[10] = 0x00  # BFINAL off: the trailer is read as a block header
    stream = member + bytes(broken)
    assert _python(GZIP, stream, 1) == b"\x00" == _native(GZIP, stream, 1)


def _records_area(value_size, base_offset):
    return build_batch([(1000, b"k", b"v" * value_size, [])], base_offset=base_offset)[61:]


def test_gzip_never_inflates_past_the_limit_into_room_left_by_snappy(monkeypatch):
    # the output buffer is shared: after a snappy batch it has room past the
    # limit, where zlib would reach an error the Python path never reaches
    limit = len(_records_area(3000, 0))
    first = raw_batch(compression.snappy_xerial_bytes(_records_area(3000, 0)),
                      records_count=1, attributes=SNAPPY)
    size = next(v for v in range(3000) if len(_records_area(v, 1)) == limit - 10)
    records = _records_area(size, 1)
    extra = gzip.compress(bytes(12), compresslevel=0)
    extra = extra[:-8] + struct.pack("<II", zlib.crc32(bytes(12)) ^ 1, 12)  # bad CRC
    second = raw_batch(gzip.compress(records) + extra, records_count=1, attributes=GZIP,
                       base_offset=1)
    native = _read(first + second, True, monkeypatch, max_decompressed_bytes=limit)
    assert native == _read(first + second, False, monkeypatch, max_decompressed_bytes=limit)
    assert native[0] is None and "max_decompressed_bytes" in native[1][1]
