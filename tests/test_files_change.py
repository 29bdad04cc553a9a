"""Segment files that change under the reader or are not what their size
says: truncated between ``fstat`` and ``mmap`` or while Python code reads
the mapping (index-guided seeks), and preallocated or sparse segments whose
cost must follow the data they hold, not their apparent size.

Crashes and memory are observed in child processes (a SIGBUS fails the test,
not pytest; peak RSS is the kernel's own count), never with timing.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kbatch
from kbatch.lib.writer import write_log, write_segment

ROOT = Path(__file__).resolve().parent.parent
STEM = "00000000000000000000"


def run_child(code: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


# --- the file shrinks between fstat and mmap ---------------------------------------

@pytest.mark.parametrize("real_size", [0, 100])
def test_file_shrinking_between_fstat_and_mmap_is_a_corrupt_record_error(tmp_path, monkeypatch,
                                                                         real_size):
    """fstat said 4096 bytes; by the time mmap runs the file holds fewer
    (Python's mmap raises ValueError: 'cannot mmap an empty file', 'mmap
    length is greater than file size'): a CorruptRecordError names the file."""
    path = tmp_path / (STEM + ".log")
    path.write_bytes(bytes(real_size))
    real_fstat = os.fstat

    def stale_fstat(fd):
        st = real_fstat(fd)
        fields = list(st)
        fields[6] = 4096    # st_size, as it was a moment ago
        return os.stat_result(fields)

    monkeypatch.setattr(os, "fstat", stale_fstat)
    for read in (lambda: kbatch.read_segment(path), lambda: list(kbatch.iter_segment(path))):
        with pytest.raises(kbatch.CorruptRecordError) as info:
            read()
        assert info.value.path == str(path)
        assert "changed size" in str(info.value)


# --- the file shrinks while Python code reads the mapping ------------------------

def test_truncated_during_an_index_guided_seek_raises_instead_of_sigbus(tmp_path):
    """use_index=True checks the .index entry by reading the batch at its
    position from the mapping; the file shrinks right after it was mapped."""
    part = tmp_path / "t-0"
    write_log(part, {"value": [b"v" * 200] * 20_000}, batch_records=10,
              index_interval_bytes=4096)
    child = run_child(f"""
        import os
        from contextlib import contextmanager
        import kbatch, kbatch.lib.sources
        real = kbatch.lib.sources.open_source

        @contextmanager
        def shrinking(source, **kw):
            with real(source, **kw) as (view, path):
                os.truncate(source, 100)       # the mapping is now past the file's end
                yield view, path

        kbatch.lib.sources.open_source = shrinking
        log = kbatch.open_log({str(part)!r}, use_index=True)
        try:
            log.read(start_offset=15_000, end_offset=15_010)
        except kbatch.CorruptRecordError as exc:
            print("refused:", type(exc).__name__, exc)
        else:
            print("read")
    """)
    assert child.returncode == 0, (child.returncode, child.stderr)
    assert "refused: FileChangedError" in child.stdout, child.stdout
    assert STEM + ".log" in child.stdout


def test_python_reads_of_a_mapping_go_through_the_guard(tmp_path):
    """read_mapped, the one way Python code reads bytes of a mapping: a page
    past the file's new end is an error, not a SIGBUS."""
    path = tmp_path / (STEM + ".log")
    write_segment(path, {"value": [b"x" * 1000] * 10_000})
    child = run_child(f"""
        import os, kbatch
        from kbatch._core import _mapguard
        from kbatch.lib.segment import open_source
        with open_source({str(path)!r}) as (view, p):
            assert _mapguard.read_mapped(view, 8, 4, p) == bytes(view[8:12])
            os.truncate({str(path)!r}, 4096)
            try:
                _mapguard.read_mapped(view, len(view) - 100, 4, p)
            except kbatch.CorruptRecordError as exc:
                print("refused:", exc)
    """)
    assert child.returncode == 0, (child.returncode, child.stderr)
    assert "refused:" in child.stdout and "truncated or replaced" in child.stdout


# --- preallocated and sparse segments ---------------------------------------------

def test_sparse_2gib_segment_costs_its_data_not_its_size(tmp_path):
    """One batch, then a 2 GiB hole (file.preallocate, or a sparse copy):
    nothing maps the whole file in or scans the zeros to the end."""
    part = tmp_path / "t-0"
    write_log(part, {"value": [b"v" * 100] * 50, "timestamp": list(range(1000, 1050))})
    log_file = part / (STEM + ".log")
    valid = log_file.stat().st_size
    os.truncate(log_file, 2 << 30)      # sparse: no disk used
    child = run_child(f"""
        import resource, kbatch

        def peak_rss():
            for line in open("/proc/self/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024

        base = peak_rss()
        whole = kbatch.read_segment({str(log_file)!r})
        chunks = list(kbatch.iter_segment({str(log_file)!r}, chunk_records=7))
        log = kbatch.open_log({str(part)!r})
        ranged = log.read(start_offset=20, end_offset=30)
        timed = log.read(start_timestamp=1040)
        report = kbatch.verify({str(part)!r})
        print(len(whole), whole.end.valid_bytes, whole.end.trailing_bytes, whole.end.reason,
              sum(len(c) for c in chunks), chunks[-1].end.reason, len(ranged), len(timed),
              report.ok, peak_rss() - base)
    """, timeout=600)
    assert child.returncode == 0, child.stderr
    n, valid_bytes, trailing, reason, streamed, stream_reason, ranged, timed, ok, growth = \
        child.stdout.split()
    assert int(growth) < 128 << 20, f"peak RSS grew by {int(growth) >> 20} MiB"
    assert (int(n), int(valid_bytes), int(trailing), reason) == \
        (50, valid, (2 << 30) - valid, "zero_padding")
    assert (int(streamed), stream_reason, int(ranged), int(timed), ok) == \
        (50, "zero_padding", 10, 10, "True")


def test_zeros_then_data_in_a_sparse_file_is_still_reported(tmp_path):
    """Knowing the trailing hole must not hide data after zeros that are not
    in it: a zero-length header with data further on is still corrupt."""
    path = tmp_path / (STEM + ".log")
    write_segment(path, {"value": [b"v"] * 5})
    valid = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(1 << 20)
        f.seek((1 << 20) - 10)
        f.write(b"not zeros!")
    with pytest.raises(kbatch.CorruptRecordError) as info:
        kbatch.read_segment(path)
    assert info.value.position == valid + 8
    stopped = kbatch.read_segment(path, on_corrupt="stop")
    assert len(stopped) == 5 and stopped.end.reason == "corrupt"


def test_preallocated_segment_with_its_hole_reads_like_the_plain_file(tmp_path):
    path = tmp_path / (STEM + ".log")
    write_segment(path, {"key": [b"k%d" % i for i in range(300)], "value": [b"v" * 30] * 300})
    plain = kbatch.read_segment(path)
    size = path.stat().st_size
    os.truncate(path, 64 << 20)
    padded = kbatch.read_segment(path)
    assert padded.value.to_pylist() == plain.value.to_pylist()
    assert padded.end == kbatch.SegmentEnd(size, (64 << 20) - size, "zero_padding", None)
    with pytest.raises(kbatch.CorruptRecordError):
        kbatch.read_segment(path, strict=True)


def test_compressed_batch_copied_for_python_after_the_file_shrank(tmp_path):
    """The copy of a gzip batch handed to Python (pending_bytes) is guarded
    too: the file shrinks between the walk and the copy."""
    path = tmp_path / (STEM + ".log")
    write_segment(path, {"value": [os.urandom(100) for _ in range(20_000)]}, codec="gzip",
                  batch_records=20_000)
    child = run_child(f"""
        import os, kbatch
        from kbatch._core import _batch
        from kbatch.lib.segment import open_source
        with open_source({str(path)!r}) as (view, p):
            dec = _batch.BatchDecoder(view, path=p, native_lz4=False, native_gzip=False)
            assert dec.run() == _batch.STATUS_COMPRESSED
            os.truncate({str(path)!r}, 4096)
            try:
                dec.pending_bytes()
            except kbatch.CorruptRecordError as exc:
                print("refused:", exc)
            dec.release()
    """)
    assert child.returncode == 0, (child.returncode, child.stderr)
    assert "refused:" in child.stdout and "truncated or replaced" in child.stdout


# --- how a segment is mapped ---------------------------------------------------

def _smaps_entry(address: int) -> dict:
    """This process's /proc/self/smaps entry for the mapping at ``address``."""
    entry, inside = {}, False
    for line in open("/proc/self/smaps"):
        head = line.split()
        if "-" in head[0] and not head[0].endswith(":"):
            start, end = (int(x, 16) for x in head[0].split("-"))
            inside = start <= address < end
            continue
        if inside:
            entry[head[0].rstrip(":")] = head[1:]
    return entry


@pytest.mark.skipif(not os.path.exists("/sys/kernel/mm/transparent_hugepage")
                    or not os.path.exists("/proc/self/smaps"),
                    reason="needs Linux with transparent huge pages")
def test_segment_mapping_asks_for_huge_pages_and_populates_only_its_data(tmp_path):
    """A segment is mapped with MADV_HUGEPAGE before any page is touched (a
    cold file then comes into the page cache in 2 MiB folios that later
    mappings take whole), and ``populate`` faults in its data, not its
    preallocated tail."""
    import numpy as np
    from kbatch.lib.segment import _map_file

    part = tmp_path / "t-0"
    write_log(part, {"value": [bytes([i % 251]) * 1000 for i in range(6000)]})
    log_file = part / (STEM + ".log")
    data = log_file.stat().st_size
    os.truncate(log_file, data + (64 << 20))      # a sparse, preallocated tail
    mm = _map_file(str(log_file), populate=True)
    try:
        view = np.frombuffer(mm, np.uint8)
        entry = _smaps_entry(view.ctypes.data)
        del view
    finally:
        mm.close()
    assert "hg" in entry["VmFlags"]
    rss = int(entry["Rss"][0]) << 10
    assert data - 4096 <= rss <= data + (2 << 20), (rss, data)
