"""LZ4 batches decompressed in the compiled walk (liblz4's C API, no GIL)
against the Python path (``lz4.frame`` from ``compression.py``) and against
the ``lz4`` package itself: the same bytes, the same records, the same errors.
"""

import random

import lz4.frame
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kbatch
from kbatch._core import _lz4
from kbatch.lib import decoder, segment
from kbatch.lib.compression import CodecError, unlz4

from .kafka_ref import RandomChoices, build_batch, fix_crc, generate_segment, raw_batch
from .native_paths import flip_bits, same_outcome
from .test_against_kafka_python import assert_same_records

BLOCK_SIZES = [lz4.frame.BLOCKSIZE_MAX64KB, lz4.frame.BLOCKSIZE_MAX256KB,
               lz4.frame.BLOCKSIZE_MAX1MB, lz4.frame.BLOCKSIZE_MAX4MB]


def test_native_path_is_in_use():
    # the wheels CI installs export liblz4's frame API: lz4 must not silently
    # fall back to the GIL-holding path
    assert _lz4.native_lz4()


def _payload(draw):
    kind = draw(st.sampled_from(["random", "repetitive", "empty", "big"]))
    if kind == "random":
        return draw(st.binary(max_size=3000))
    if kind == "repetitive":
        return draw(st.binary(min_size=1, max_size=40)) * draw(st.integers(1, 5000))
    if kind == "big":  # several blocks, some stored raw
        seed = draw(st.integers(0, 1 << 30))
        rng = random.Random(seed)
        return b"".join(rng.randbytes(rng.randint(0, 300)) + bytes(rng.randint(0, 3000))
                        for _ in range(200))
    return b""


@st.composite
def frames(draw):
    data = _payload(draw)
    frame = lz4.frame.compress(
        data, block_size=draw(st.sampled_from(BLOCK_SIZES)),
        block_linked=draw(st.booleans()), content_checksum=draw(st.booleans()),
        block_checksum=draw(st.booleans()), store_size=draw(st.booleans()),
        compression_level=draw(st.sampled_from([0, 3, 9])))
    return data, frame


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames(), st.binary(max_size=8))
def test_frames_decompress_like_the_lz4_package(data_frame, trailing):
    data, frame = data_frame
    assert _lz4.decompress_frame(frame + trailing, len(data)) == data
    assert _lz4.decompress_frame(frame, len(data) + 100) == data
    if data:  # one byte over the limit: refused
        assert _lz4.decompress_frame(frame, len(data) - 1) is None


def _python_path(frame, limit):
    try:
        return unlz4(frame, limit)
    except CodecError:
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames(), st.data())
def test_damaged_frames_fail_exactly_where_the_python_path_fails(data_frame, draw):
    data, frame = data_frame
    damaged = bytearray(frame)
    how = draw.draw(st.sampled_from(["truncate", "flip", "both"]))
    if how in ("truncate", "both"):
        del damaged[draw.draw(st.integers(0, len(damaged) - 1)):]
    if how in ("flip", "both") and damaged:
        i = draw.draw(st.integers(0, len(damaged) - 1))
        damaged[i] ^= 1 << draw.draw(st.integers(0, 7))
    limit = draw.draw(st.sampled_from([len(data) + 1000, max(len(data) // 2, 1), 1 << 20]))
    assert _lz4.decompress_frame(bytes(damaged), limit) == _python_path(bytes(damaged), limit)


def _read(buf, native, monkeypatch, **options):
    monkeypatch.setattr(decoder, "NATIVE_LZ4", native)
    try:
        return kbatch.read_segment(buf, **options), None
    except kbatch.CorruptRecordError as exc:
        return None, (type(exc), str(exc), exc.position, exc.base_offset)


def _chunks(buf, native, monkeypatch, **options):
    monkeypatch.setattr(decoder, "NATIVE_LZ4", native)
    got = []
    try:
        for chunk in kbatch.iter_segment(buf, chunk_records=3, **options):
            got.append(chunk)
    except kbatch.CorruptRecordError as exc:
        return got, (type(exc), str(exc))
    return got, None


@pytest.mark.parametrize("seed", range(40))
def test_segments_decode_the_same_on_both_paths(seed, monkeypatch):
    """Generated segments, mostly lz4 (all frame variants), whole and
    damaged, with every option that changes how a batch is decoded."""
    rng = random.Random(seed)
    buf, _ = generate_segment(RandomChoices(rng), max_batches=8, max_records=12,
                              codecs=(3, 3, 3, 0))
    variants = [buf, buf[:rng.randrange(len(buf))], flip_bits(buf, rng)]
    for data in variants:
        for options in ({}, {"validate_crc": False}, {"on_corrupt": "stop"},
                        {"include_control": True, "validate_crc": False},
                        {"isolation": "read_committed", "validate_crc": False},
                        {"max_decompressed_bytes": 200, "validate_crc": False}):
            same_outcome(_read(data, True, monkeypatch, **options),
                  _read(data, False, monkeypatch, **options))
        native, native_err = _chunks(data, True, monkeypatch, validate_crc=False)
        python, python_err = _chunks(data, False, monkeypatch, validate_crc=False)
        assert native_err == python_err and len(native) == len(python)
        for a, b in zip(native, python):
            assert_same_records(a, b)


def test_a_bad_frame_raises_the_python_paths_error(monkeypatch):
    batch = bytearray(build_batch([(1000, b"k", b"v" * 500, [])], codec=3))
    batch[61 + 4] ^= 0x40      # the frame descriptor's FLG byte: version bits
    data = bytes(fix_crc(batch))
    native = _read(data, True, monkeypatch)
    assert native[0] is None and "lz4" in native[1][1]
    assert native == _read(data, False, monkeypatch)


def test_bomb_over_the_limit_raises_the_limit_error(monkeypatch):
    frame = lz4.frame.compress(bytes(4 << 20), block_size=lz4.frame.BLOCKSIZE_MAX4MB)
    data = raw_batch(frame, records_count=1, attributes=3)
    for native in (True, False):
        monkeypatch.setattr(decoder, "NATIVE_LZ4", native)
        with pytest.raises(kbatch.DecompressionLimitError):
            kbatch.read_segment(data, max_decompressed_bytes=1 << 20)
