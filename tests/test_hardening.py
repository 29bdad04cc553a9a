"""Hostile conditions: files changing under the reader, many threads,
decompression bombs, configured limits, and memory of streaming reads.

Memory is measured in child processes (the kernel's own accounting of
anonymous memory), never with timing assertions.
"""

import os
import struct
import subprocess
import sys
import textwrap
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor

import lz4.frame
import numpy as np
import pytest
import snappy
import zstandard

import kbatch
from kbatch.lib.writer import build_batch, write_segment

from .kafka_ref import build_batch as kp_build_batch
from .kafka_ref import read_with_kafka_python

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_child(code: str, timeout: int = 120) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (a crash fails the test, not pytest)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


# --- a file truncated while it is mapped --------------------------------------------

@pytest.mark.parametrize("codec", ["none", "lz4", "gzip"])
def test_truncated_while_mapped_raises_instead_of_sigbus(codec):
    child = run_child(f"""
        import os, tempfile, kbatch
        from kbatch.lib.writer import write_segment
        path = os.path.join(tempfile.mkdtemp(), "00000000000000000000.log")
        write_segment(path, {{"value": [b"v" * 300] * 200_000}}, codec="{codec}")
        it = kbatch.iter_segment(path, chunk_records=2_000)
        next(it)
        os.truncate(path, os.path.getsize(path) // 3)
        try:
            for chunk in it:
                pass
        except kbatch.CorruptRecordError as exc:
            print("refused:", exc)
        else:
            print("read to the end")
    """)
    assert child.returncode == 0, child.stderr
    assert "refused:" in child.stdout
    assert "00000000000000000000.log" in child.stdout


def test_file_rewritten_while_mapped_is_an_error_or_valid_data(tmp_path):
    """Another writer replaces the bytes under the mapping: never a crash."""
    path = tmp_path / "00000000000000000000.log"
    write_segment(path, {"value": [b"a" * 100] * 50_000})
    it = kbatch.iter_segment(path, chunk_records=1_000)
    next(it)
    with open(path, "r+b") as f:
        f.seek(200_000)
        f.write(os.urandom(500_000))
    try:
        for _ in it:
            pass
    except kbatch.CorruptRecordError:
        pass


# --- threads -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def segments(tmp_path_factory):
    root = tmp_path_factory.mktemp("threads")
    rng = np.random.default_rng(1)
    paths = []
    for i, codec in enumerate(["none", "zstd", "lz4", "snappy", "gzip", "none"]):
        n = 30_000
        recs = {"key": [b"k%d" % k for k in rng.integers(0, 500, n)],
                "value": [bytes(rng.integers(0, 255, int(s), dtype=np.uint8))
                          for s in rng.integers(0, 200, n)],
                "timestamp": 1_000 + np.arange(n),
                "headers": [[("h", b"x")] if j % 4 == 0 else [] for j in range(n)]}
        p = root / f"{i:020d}.log"
        write_segment(p, recs, codec=codec, producer_id=7)
        paths.append(p)
    return paths


def _fingerprint(records):
    return (records.offset.tobytes(), records.timestamp.tobytes(), records.key.data.tobytes(),
            records.key.offsets.tobytes(), records.value.data.tobytes(),
            records.value.offsets.tobytes(), repr(records.headers.to_pylist()[:50]))


def test_threads_decoding_different_and_same_segments_agree_with_serial(segments):
    serial = {p: _fingerprint(kbatch.read_segment(p)) for p in segments}
    jobs = [p for p in segments for _ in range(4)]   # each segment four times at once
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda p: (p, _fingerprint(kbatch.read_segment(p))), jobs))
    for p, fp in results:
        assert fp == serial[p]


def test_threads_sharing_one_buffer(segments):
    data = segments[1].read_bytes()
    want = _fingerprint(kbatch.read_segment(data))
    errors = []

    def work():
        try:
            for _ in range(3):
                chunks = list(kbatch.iter_segment(data, chunk_records=777))
                assert _fingerprint(kbatch.Records.concat(chunks)) == want
        except BaseException as exc:  # reported to the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_log_dir_threads_equal_serial(tmp_path, segments):
    for i, p in enumerate(segments[:4]):
        part = tmp_path / f"t-{i}"
        part.mkdir()
        (part / "00000000000000000000.log").write_bytes(p.read_bytes())
    d = kbatch.open_log_dir(tmp_path)
    one = d.read(threads=1)
    many = d.read(threads=4)
    assert one.keys() == many.keys()
    for key in one:
        assert _fingerprint(one[key]) == _fingerprint(many[key])


# --- decompression bombs ---------------------------------------------------------------

ZEROS_MB = 256


def _stream_compress(codec: str) -> bytes:
    """``ZEROS_MB`` MiB of zero-valued records area, compressed as a stream
    (the test never holds the whole plaintext)."""
    block = bytes(1 << 20)
    if codec == "gzip":
        c = zlib.compressobj(9, zlib.DEFLATED, 31)
        return b"".join(c.compress(block) for _ in range(ZEROS_MB)) + c.flush()
    if codec == "zstd":
        c = zstandard.ZstdCompressor(level=19, write_content_size=False).compressobj()
        return b"".join(c.compress(block) for _ in range(ZEROS_MB)) + c.flush()
    if codec == "lz4":
        c = lz4.frame.LZ4FrameCompressor(block_size=lz4.frame.BLOCKSIZE_MAX4MB)
        return c.begin() + b"".join(c.compress(block) for _ in range(ZEROS_MB)) + c.flush()
    if codec == "snappy-raw":   # a raw block that claims 4 GiB: refused from its header
        return bytes([0x80, 0x80, 0x80, 0x80, 0x10]) + b"\x00" * 64
    if codec == "snappy":       # xerial framing, many 32 KiB blocks of zeros
        one = snappy.compress(bytes(32 * 1024))
        blocks = struct.pack(">i", len(one)) + one
        return b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + blocks * (ZEROS_MB * 32)
    raise ValueError(codec)


CODEC_IDS = {"gzip": 1, "snappy": 2, "snappy-raw": 2, "lz4": 3, "zstd": 4}


@pytest.mark.parametrize("codec", list(CODEC_IDS))
def test_bomb_is_refused_within_the_limit(codec, tmp_path):
    area = _stream_compress(codec)
    batch = build_batch(area, count=1000, base_offset=0, last_offset_delta=999,
                        base_timestamp=0, max_timestamp=0, attributes=CODEC_IDS[codec])
    path = tmp_path / "bomb.log"
    path.write_bytes(batch)
    limit = 16 << 20
    child = run_child(f"""
        import resource, kbatch
        def anon():
            for line in open("/proc/self/status"):
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        try:
            kbatch.read_segment({str(path)!r}, max_decompressed_bytes={limit})
            print("ACCEPTED")
        except kbatch.DecompressionLimitError as exc:
            print("refused:", exc)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        print("growth", peak - before)
    """)
    assert child.returncode == 0, child.stderr
    assert "refused:" in child.stdout, child.stdout
    growth = int(child.stdout.split("growth")[1])
    # the limit, plus the compressed batch itself and the codec's buffers
    assert growth < limit + len(batch) + (24 << 20), (growth, len(batch))


# --- configured limits -------------------------------------------------------------

def test_limit_on_batch_bytes():
    seg = kp_build_batch([(0, b"k", b"v" * 5000, [])])
    with pytest.raises(kbatch.LimitExceededError, match="max_batch_bytes"):
        kbatch.read_segment(seg, max_batch_bytes=1000)
    assert len(kbatch.read_segment(seg, max_batch_bytes=len(seg))) == 1


def test_limit_on_records_per_batch():
    seg = kp_build_batch([(i, None, b"", []) for i in range(100)])
    with pytest.raises(kbatch.LimitExceededError, match="max_records_per_batch"):
        kbatch.read_segment(seg, max_records_per_batch=99)
    assert len(kbatch.read_segment(seg, max_records_per_batch=100)) == 100


def test_limit_on_headers_per_record():
    seg = kp_build_batch([(0, None, b"v", [("h%d" % i, b"") for i in range(50)])])
    with pytest.raises(kbatch.LimitExceededError, match="max_headers_per_record"):
        kbatch.read_segment(seg, max_headers_per_record=49)
    r = kbatch.read_segment(seg, max_headers_per_record=50)
    assert r.headers[0] == read_with_kafka_python(seg).records[0]["headers"]


def test_limit_on_read_bytes(tmp_path):
    p = tmp_path / "00000000000000000000.log"
    write_segment(p, {"value": [b"x" * 1000] * 20_000})
    with pytest.raises(kbatch.LimitExceededError, match="max_read_bytes"):
        kbatch.read_segment(p, max_read_bytes=5 << 20)
    with pytest.raises(kbatch.LimitExceededError):
        kbatch.open_log(tmp_path).read(max_read_bytes=5 << 20)
    # streaming stays within it: each chunk is bounded
    total = sum(len(c) for c in kbatch.iter_segment(p, max_read_bytes=5 << 20))
    assert total == 20_000


def test_limits_are_errors_of_the_corrupt_family():
    assert issubclass(kbatch.LimitExceededError, kbatch.CorruptRecordError)
    assert issubclass(kbatch.DecompressionLimitError, kbatch.LimitExceededError)
    with pytest.raises(ValueError):
        kbatch.read_segment(b"", max_read_bytes=-1)


# --- memory of a streaming read --------------------------------------------------------

def test_streaming_read_holds_one_chunk(tmp_path):
    """A 300 MB segment streamed: anonymous memory stays far below the file."""
    path = tmp_path / "00000000000000000000.log"
    rng = np.random.default_rng(5)
    pool = [bytes(rng.integers(0, 255, 100, dtype=np.uint8)) for _ in range(1000)]
    with open(path, "wb") as f:
        for part in range(12):
            write_segment(f, {"key": [b"key-%d" % (i % 977) for i in range(200_000)],
                              "value": [pool[i % 1000] for i in range(200_000)]},
                          base_offset=part * 200_000)
    size = path.stat().st_size
    child = run_child(f"""
        import kbatch
        def anon():
            for line in open("/proc/self/status"):
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
        base = anon()
        peak = 0
        n = 0
        for chunk in kbatch.iter_segment({str(path)!r}):
            n += len(chunk)
            peak = max(peak, anon() - base)
            del chunk
        print(n, peak)
    """, timeout=300)
    assert child.returncode == 0, child.stderr
    n, peak = map(int, child.stdout.split())
    assert n == 12 * 200_000
    assert size > 250 << 20
    assert peak < 100 << 20, f"anonymous memory grew by {peak >> 20} MiB for a {size >> 20} MiB file"


# --- header keys must be UTF-8 ---------------------------------------------------

@pytest.mark.parametrize("key", [
    b"plain-ascii-key-longer-than-8", b"cl\xc3\xa9-\xc3\xbcn\xc3\xafcode-\xe2\x82\xac-\xf0\x9d\x84\x9e",
    b"abcdefgh\xff", b"abcdefghijklmnop\xc3", b"\xc3\x28", b"\xc0\xaf", b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80", b"\xe2\x82", b"abcdefgh\xf0\x9d\x84\x9e", b""])
def test_header_keys_are_strict_utf8(key):
    """Valid keys decode as Python decodes them; anything Python's strict
    decoder refuses is a CorruptRecordError."""
    from .kafka_ref import raw_batch, varint
    # one record: attributes, deltas, null key, value b"v", one header (key, null value)
    body = (b"\x00" + varint(0) + varint(0) + varint(-1) + varint(1) + b"v" + varint(1)
            + varint(len(key)) + key + varint(-1))
    record = varint(len(body)) + body
    seg = raw_batch(record, records_count=1)
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        with pytest.raises(kbatch.CorruptRecordError, match="UTF-8"):
            kbatch.read_segment(seg)
    else:
        assert kbatch.read_segment(seg).headers[0] == [(text, None)]
