"""Compressed batches: kbatch against its codec's decompressor alone.

For each codec dataset (the ``small`` records, compressed per batch by
aiokafka), on the same bytes in memory:

- ``native``: ``read_segment``, batches decompressed inside the GIL-free walk;
- ``python path``: the same with the codec's ``segment.NATIVE_*`` switch off
  (``compression.py`` decompresses each batch while holding the GIL);
- ``native, 2 threads``: the buffer cut in two at a batch boundary, one
  ``read_segment`` per thread;
- ``decompressor alone``: the library kbatch decompresses with, called once
  per batch from Python on the batch's compressed records (zlib-ng's or
  zlib's Python module, whichever ``_gzip`` uses; python-snappy's cramjam;
  lz4.frame; zstandard), nothing else;
- ``uncompressed decode``: ``read_segment`` over the same batches rewritten
  uncompressed (records, CRCs and all).

``bench/report.py`` prints kbatch's time over (decompressor alone +
uncompressed decode), and 2 threads over 1. The machine is shared and noisy
(separate benchmarks drift apart by more than these ratios), so
``test_codec_paired`` times the three back to back in every round and reports
the medians of the per-round ratios (``test_codec_paired_threads`` the same
for 1 thread against 2).
"""

import struct
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import cramjam
import lz4.frame
import numpy as np
import pytest
import zstandard

import kbatch
from kbatch._core import _gzip
from kbatch.lib import compression
from kbatch.lib import segment
from kbatch._core._checksums import crc32c_of

from conftest import load, record_count

CODECS = {"gzip": ("NATIVE_GZIP", 1), "snappy": ("NATIVE_SNAPPY", 2),
          "lz4": ("NATIVE_LZ4", 3), "zstd": ("NATIVE_ZSTD", 4)}
ROUNDS = 5


def _batches(data: bytes):
    """``(header, records_area)`` of every batch, in order."""
    pos, out = 0, []
    view = memoryview(data)
    while pos + 61 <= len(data):
        end = pos + 12 + struct.unpack_from(">i", data, pos + 8)[0]
        out.append((view[pos:pos + 61], view[pos + 61:end]))
        pos = end
    return out


def _uncompressed(batches, codec: int) -> bytes:
    """The same batches with their records stored uncompressed."""
    parts = []
    for header, records in batches:
        plain = compression.decompress(codec, records)
        batch = bytearray(header) + plain
        struct.pack_into(">i", batch, 8, len(batch) - 12)
        attributes = struct.unpack_from(">h", batch, 21)[0]
        struct.pack_into(">h", batch, 21, attributes & ~0x07)
        struct.pack_into(">I", batch, 17, crc32c_of(bytes(batch[21:])))
        parts.append(bytes(batch))
    return b"".join(parts)


def _xerial_blocks(records):
    pos, out = 16, []
    while pos < len(records):
        size = struct.unpack_from(">i", records, pos)[0]
        out.append(records[pos + 4:pos + 4 + size])
        pos += 4 + size
    return out


def _decompressor(name: str):
    """The reference library's fastest per-batch call for ``name``."""
    if name == "gzip":
        if (_gzip.native_gzip() or "").startswith("zlib-ng "):
            from zlib_ng import zlib_ng
            return lambda r: zlib_ng.decompress(r, 31)
        return lambda r: zlib.decompress(r, 31)
    if name == "snappy":
        raw = cramjam.snappy.decompress_raw
        return lambda r: [raw(b) for b in _xerial_blocks(r)]
    if name == "lz4":
        return lz4.frame.decompress
    ctx = zstandard.ZstdDecompressor()
    return lambda r: ctx.decompressobj().decompress(r)


@pytest.fixture(params=list(CODECS), scope="module")
def codec_set(request):
    name = request.param
    data = load(name)
    batches = _batches(data)
    return name, data, record_count(data), batches, _uncompressed(batches, CODECS[name][1])


def _run(benchmark, name, what, fn, arg, records, size):
    benchmark.group = f"codec {name}"
    benchmark.extra_info.update(records=records, bytes=size, dataset=name, codec_test=what)
    return benchmark.pedantic(fn, args=(arg,), rounds=ROUNDS, iterations=1, warmup_rounds=1)


def test_codec_native(benchmark, codec_set):
    name, data, records, _, _ = codec_set
    got = _run(benchmark, name, "native", lambda d: len(kbatch.read_segment(d)), data,
               records, len(data))
    assert got == records


def test_codec_python_path(benchmark, codec_set, monkeypatch):
    name, data, records, _, _ = codec_set
    monkeypatch.setattr(segment, CODECS[name][0], False)
    got = _run(benchmark, name, "python path", lambda d: len(kbatch.read_segment(d)), data,
               records, len(data))
    assert got == records


def _two_threads(data, batches, pool):
    """A decode of ``data`` cut in two at a batch boundary, on ``pool``."""
    half = sum(len(h) + len(r) for h, r in batches[:len(batches) // 2])
    ranges = [(0, half), (half, len(data))]

    def decode(d):
        return sum(pool.map(lambda r: len(kbatch.read_segment(d, start=r[0], stop=r[1])),
                            ranges))
    return decode


def test_codec_native_two_threads(benchmark, codec_set):
    name, data, records, batches, _ = codec_set
    pool = ThreadPoolExecutor(max_workers=2)
    decode = _two_threads(data, batches, pool)

    try:
        assert _run(benchmark, name, "native, 2 threads", decode, data, records,
                    len(data)) == records
    finally:
        pool.shutdown()


def test_codec_decompressor_alone(benchmark, codec_set):
    name, data, records, batches, _ = codec_set
    fn = _decompressor(name)
    payloads = [bytes(r) for _, r in batches]

    def run(ps):
        for p in ps:
            fn(p)
        return len(ps)

    assert _run(benchmark, name, "decompressor alone", run, payloads, records,
                len(data)) == len(batches)


def test_codec_uncompressed_decode(benchmark, codec_set):
    name, data, records, _, plain = codec_set
    got = _run(benchmark, name, "uncompressed decode", lambda d: len(kbatch.read_segment(d)),
               plain, records, len(data))
    assert got == records


def _paired(benchmark, name, one_round, rounds=9):
    """``one_round`` returns (result, ratio); the medians of the ratios."""
    ratios = []

    def timed():
        result, ratio = one_round()
        ratios.append(ratio)
        return result

    got = benchmark.pedantic(timed, rounds=rounds, iterations=1, warmup_rounds=1)
    ratios = ratios[1:]  # the warm-up round
    return got, float(np.median(ratios)), [float(q) for q in np.percentile(ratios, [25, 75])]


def test_codec_paired(benchmark, codec_set):
    """One round: kbatch, the decompressor alone, the uncompressed decode,
    each timed; the per-round ratio cancels the machine's drift."""
    name, data, records, batches, plain = codec_set
    fn = _decompressor(name)
    payloads = [bytes(r) for _, r in batches]

    def one_round():
        t0 = time.perf_counter()
        n = len(kbatch.read_segment(data))
        t1 = time.perf_counter()
        for p in payloads:
            fn(p)
        t2 = time.perf_counter()
        m = len(kbatch.read_segment(plain))
        t3 = time.perf_counter()
        return (n, m), (t1 - t0) / (t3 - t1)

    benchmark.group = f"codec {name} (paired)"
    got, median, quartiles = _paired(benchmark, name, one_round)
    assert got == (records, records)
    benchmark.extra_info.update(records=2 * records, bytes=2 * len(data), dataset=name,
                                codec_test="paired", ratio_median=median,
                                ratio_quartiles=quartiles)


def test_codec_paired_threads(benchmark, codec_set):
    """One round: kbatch on 1 thread, then on 2; the per-round speed-up."""
    name, data, records, batches, _ = codec_set
    pool = ThreadPoolExecutor(max_workers=2)
    two = _two_threads(data, batches, pool)

    def one_round():
        t0 = time.perf_counter()
        n = len(kbatch.read_segment(data))
        t1 = time.perf_counter()
        k = two(data)
        t2 = time.perf_counter()
        return (n, k), (t1 - t0) / (t2 - t1)

    benchmark.group = f"codec {name} (paired threads)"
    try:
        got, median, quartiles = _paired(benchmark, name, one_round)
    finally:
        pool.shutdown()
    assert got == (records, records)
    benchmark.extra_info.update(records=2 * records, bytes=2 * len(data), dataset=name,
                                codec_test="paired threads", scaling_median=median,
                                scaling_quartiles=quartiles)
