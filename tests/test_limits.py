"""Limits hold while data is decoded, not after, and say which limit fired.

``max_read_bytes`` counts what a chunk's columns hold, fixed per-record bytes
included (the fixed columns of kbatch/_core/coltable.py, offsets and validity:
ROW_FIXED_BYTES, 34 bytes a record today), and is
checked before a batch's rows are reserved: a small file of millions of null
records must not take hundreds of MB before the limit fires. Every limit's
message names the limit in force and its value, never a remaining budget.

Memory is the kernel's count of a child process's peak RSS, never timing.
"""

import io
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kbatch
from kbatch.lib.writer import write_segment

from .kafka_ref import build_batch as kp_build_batch

ROOT = Path(__file__).resolve().parent.parent
NULL_RECORDS = 3_000_000


def run_child(code: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def null_records(tmp_path_factory):
    """~24 MB of null-key, null-value records: about 100 MB once decoded."""
    path = tmp_path_factory.mktemp("nulls") / "00000000000000000000.log"
    write_segment(path, {"value": [None] * NULL_RECORDS}, batch_records=4096)
    return path


def test_read_bytes_limit_fires_before_the_memory_is_taken(null_records):
    limit = 16 << 20
    size = null_records.stat().st_size
    child = run_child(f"""
        import resource, kbatch

        def peak():
            for line in open("/proc/self/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024

        base = peak()
        try:
            kbatch.read_segment({str(null_records)!r}, max_read_bytes={limit})
        except kbatch.LimitExceededError as exc:
            print("refused:", exc)
        print("growth", peak() - base)
    """)
    assert child.returncode == 0, child.stderr
    assert "refused:" in child.stdout and f"max_read_bytes={limit} " in child.stdout
    growth = int(child.stdout.split("growth")[1])
    # the mapped file (populated), the limit, and the interpreter's slack;
    # the whole decode would take ~34 bytes x 3 M records = 100 MB more
    assert growth < size + limit + (24 << 20), \
        f"peak RSS grew by {growth >> 20} MiB for a {size >> 20} MiB file and a 16 MiB limit"


def test_chunks_are_cut_by_their_fixed_per_record_bytes(null_records):
    """No chunk_records bound: the bytes of the rows themselves cut chunks,
    so a stream of null records stays within max_read_bytes."""
    limit = 8 << 20
    total = 0
    for chunk in kbatch.iter_segment(null_records, chunk_records=1 << 40,
                                     max_read_bytes=limit):
        assert chunk.nbytes <= limit
        assert chunk.value.null_count == len(chunk)
        total += len(chunk)
    assert total == NULL_RECORDS


def test_one_batch_too_large_for_the_read_limit_is_refused_before_decoding():
    seg = kp_build_batch([(i, None, None, []) for i in range(50_000)])
    with pytest.raises(kbatch.LimitExceededError, match=r"max_read_bytes=1000000 "):
        kbatch.read_segment(seg, max_read_bytes=1_000_000)
    with pytest.raises(kbatch.LimitExceededError, match=r"max_read_bytes=1000000 "):
        list(kbatch.iter_segment(seg, max_read_bytes=1_000_000))
    assert len(kbatch.read_segment(seg, max_read_bytes=50_000 * 40)) == 50_000


def test_whole_read_names_the_limit_not_what_was_left(tmp_path):
    """The limit fires in a later chunk of a whole read: the message gives
    max_read_bytes as configured, not the budget left after earlier chunks."""
    path = tmp_path / "00000000000000000000.log"
    write_segment(path, {"value": [b"x" * 100] * 60_000}, batch_records=1000)
    limit = 3_000_000
    with pytest.raises(kbatch.LimitExceededError) as info:
        kbatch.read_segment(path, max_read_bytes=limit)
    assert f"max_read_bytes={limit} " in str(info.value)


def test_every_limit_message_names_the_limit_and_its_value():
    seg = kp_build_batch([(0, b"k", b"v" * 5000, [])])
    with pytest.raises(kbatch.LimitExceededError, match=r"max_batch_bytes=1000\b"):
        kbatch.read_segment(seg, max_batch_bytes=1000)
    seg = kp_build_batch([(i, None, b"", []) for i in range(100)])
    with pytest.raises(kbatch.LimitExceededError, match=r"max_records_per_batch=99\b"):
        kbatch.read_segment(seg, max_records_per_batch=99)
    seg = kp_build_batch([(0, None, b"v", [("h%d" % i, b"") for i in range(50)])])
    with pytest.raises(kbatch.LimitExceededError, match=r"max_headers_per_record=49\b"):
        kbatch.read_segment(seg, max_headers_per_record=49)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_decompression_limit_message_names_the_configured_value(codec):
    """Several xerial snappy blocks (32 KiB each), gzip/zstd/lz4 streams: the
    refusal names max_decompressed_bytes as given, whichever block hit it."""
    values = [bytes([i % 251]) * 50_000 for i in range(6)]
    buf = io.BytesIO()
    write_segment(buf, {"value": values}, codec=codec, batch_records=100, batch_bytes=1 << 30)
    limit = 100_000
    with pytest.raises(kbatch.DecompressionLimitError) as info:
        kbatch.read_segment(buf.getvalue(), max_decompressed_bytes=limit)
    assert re.search(rf"max_decompressed_bytes={limit}(?!\d)", str(info.value)), str(info.value)
