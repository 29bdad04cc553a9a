"""Index files that are not what they seem: directories, FIFOs, sockets and
devices in place of a ``.index``/``.timeindex``/``.txnindex``; preallocated
(all-zero) and sparse indexes, whose reading must cost their live entries.

Expected entries come from parsing the raw bytes with ``struct`` here, never
from kbatch.
"""

import os
import shutil
import socket
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import kbatch
from kbatch.lib.files import NotRegularFileError
from kbatch.lib.log import Segment
from kbatch.lib.writer import write_log

ROOT = Path(__file__).resolve().parent.parent
STEM = "00000000000000000000"


def run_child(code: str, timeout: int = 60) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter: a hang fails the test (timeout), a
    crash fails it too, pytest survives both."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def _partition(tmp_path, n=3000, name="t-0"):
    part = tmp_path / name
    write_log(part, {"key": [b"k%d" % i for i in range(n)], "value": [b"v" * 50] * n,
                     "timestamp": [1_000 + i for i in range(n)]},
              batch_records=20, index_interval_bytes=512)
    return part


def _raw_entries(path, fmt):
    """Entries parsed with struct up to the first all-zero one."""
    data = Path(path).read_bytes()
    size = struct.calcsize(fmt)
    out = []
    for k in range(len(data) // size):
        chunk = data[k * size:(k + 1) * size]
        if not any(chunk):
            break
        out.append(struct.unpack(fmt, chunk))
    return out


def _rchar() -> int:
    """Bytes this process has read through read(2)/pread(2) so far."""
    for line in open("/proc/self/io"):
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


# --- not a regular file -----------------------------------------------------------

def _make(kind: str, path: Path):
    if path.exists() or path.is_symlink():
        path.unlink()
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(path))
        s.close()
    elif kind == "device":
        os.symlink("/dev/zero", path)   # endless zeros if read: must not be


@pytest.mark.parametrize("kind", ["directory", "fifo", "socket", "device"])
@pytest.mark.parametrize("suffix", [".index", ".timeindex", ".txnindex"])
def test_side_file_that_is_not_a_regular_file_is_a_clear_error(tmp_path, kind, suffix):
    if kind == "socket" and len(str(tmp_path)) > 90:
        pytest.skip("path too long for a unix socket")
    part = _partition(tmp_path)
    _make(kind, part / (STEM + suffix))
    attribute = {".index": "offset_index", ".timeindex": "time_index",
                 ".txnindex": "txn_index"}[suffix]
    child = run_child(f"""
        import kbatch
        from kbatch.lib.files import NotRegularFileError
        from kbatch.lib.log import Segment
        seg = Segment({str(part / (STEM + '.log'))!r})
        try:
            getattr(seg, {attribute!r})
        except NotRegularFileError as exc:
            assert isinstance(exc, kbatch.KbatchError)
            print("refused:", exc)
        log = kbatch.open_log({str(part)!r}, use_index=True)
        try:
            log.read(start_offset=1500, start_timestamp=2_000, isolation="read_committed")
        except kbatch.KbatchError as exc:
            print("read refused:", type(exc).__name__)
        else:
            print("read ok")
        report = kbatch.verify({str(part)!r})
        print("verify ok" if report.ok else "verify problems:",
              [p for s in report.segments for p in s.problems()])
    """)
    assert child.returncode == 0, child.stderr
    out = child.stdout
    assert "refused:" in out and f"{STEM}{suffix}: is a" in out and "not a regular file" in out
    assert "read refused: NotRegularFileError" in out
    if suffix != ".txnindex":     # verify checks .index and .timeindex entries
        assert "verify problems:" in out and "not a regular file" in out, out


def test_segment_that_is_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / (STEM + ".log")
    os.mkfifo(fifo)
    child = run_child(timeout=20, code=f"""
        import kbatch
        try:
            kbatch.read_segment({str(fifo)!r})
        except kbatch.KbatchError as exc:
            print("refused:", exc)
    """)
    assert child.returncode == 0, child.stderr
    assert "refused:" in child.stdout and "FIFO" in child.stdout, child.stdout


def test_missing_side_files_are_empty_indexes(tmp_path):
    part = _partition(tmp_path)
    for suffix in (".index", ".timeindex", ".txnindex"):
        (part / (STEM + suffix)).unlink(missing_ok=True)
    seg = Segment(part / (STEM + ".log"))
    assert len(seg.offset_index) == len(seg.time_index) == len(seg.txn_index) == 0
    assert kbatch.verify(part).ok


# --- preallocated and sparse indexes ------------------------------------------------

def test_sparse_256mib_index_reads_only_its_live_entries(tmp_path):
    part = _partition(tmp_path, n=20_000)
    index, timeindex = part / (STEM + ".index"), part / (STEM + ".timeindex")
    expected_index = _raw_entries(index, ">ii")
    expected_time = _raw_entries(timeindex, ">qi")
    assert len(expected_index) > 50 and len(expected_time) > 50
    for path, entry in ((index, 8), (timeindex, 12)):
        os.truncate(path, (256 << 20) - (256 << 20) % entry)   # sparse: no disk used
    seg = Segment(part / (STEM + ".log"))
    before = _rchar()
    idx, ti = seg.offset_index, seg.time_index
    read = _rchar() - before
    assert [(o, p) for o, p in zip(idx.offsets.tolist(), idx.positions.tolist())] == \
        [(o, p) for o, p in expected_index]
    assert [(t, o) for t, o in zip(ti.timestamps.tolist(), ti.offsets.tolist())] == \
        [(t, o) for t, o in expected_time]
    assert idx.file_entries == (256 << 20) // 8
    assert read < 4 << 20, f"read {read >> 20} MiB of index files for a few KiB of entries"


def test_zero_filled_index_copy_stops_at_the_first_zero_entry(tmp_path):
    """A copy that wrote the preallocated zeros out (not sparse): the read
    stops at the first all-zero entry instead of going through 64 MiB."""
    part = _partition(tmp_path, n=20_000)
    index = part / (STEM + ".index")
    expected = _raw_entries(index, ">ii")
    with open(index, "ab") as f:
        block = bytes(1 << 20)
        for _ in range(64):
            f.write(block)
    seg = Segment(part / (STEM + ".log"))
    before = _rchar()
    idx = seg.offset_index
    read = _rchar() - before
    assert idx.offsets.tolist() == [o for o, _ in expected]
    assert read < 4 << 20, f"read {read >> 20} MiB"


def test_index_with_more_entries_than_the_log_can_hold_is_read_with_a_bound(tmp_path):
    """A hostile 64 MiB index of non-zero entries beside a 1 KiB log: at most
    one entry per possible batch is read."""
    part = tmp_path / "t-0"
    write_log(part, {"value": [b"x"] * 10})
    log_size = (part / (STEM + ".log")).stat().st_size
    with open(part / (STEM + ".index"), "wb") as f:
        f.write(struct.pack(">ii", 1, 1) * (8 << 20))
    seg = Segment(part / (STEM + ".log"))
    before = _rchar()
    idx = seg.offset_index
    assert _rchar() - before < 1 << 20
    assert len(idx) <= log_size // 26 + 1
    assert not kbatch.verify(part).ok     # the entries are wrong, and reported


@pytest.mark.parametrize("sparse", [True, False])
def test_verify_is_clean_on_an_active_segment_with_an_all_zero_index(tmp_path, sparse):
    """A broker's active segment before its first index entry: a preallocated,
    all-zero .index/.timeindex is no entry at offset 0 / timestamp 0."""
    part = tmp_path / "t-0"
    write_log(part, {"value": [b"v" * 10] * 5,
                     "timestamp": [1_700_000_000_000 + i for i in range(5)]})
    for suffix, entry in ((".index", 8), (".timeindex", 12)):
        path = part / (STEM + suffix)
        size = (10 << 20) - (10 << 20) % entry
        if sparse:
            os.truncate(path, size)
        else:
            path.write_bytes(bytes(size))
    seg = Segment(part / (STEM + ".log"))
    assert len(seg.offset_index) == 0 and len(seg.time_index) == 0
    report = kbatch.verify(part)
    assert report.ok, [p for s in report.segments for p in s.problems()]
    log = kbatch.open_log(part, use_index=True)
    assert log.read(start_timestamp=1_700_000_000_003).offset.tolist() == [3, 4]
    assert log.read(start_offset=2).offset.tolist() == [2, 3, 4]


def test_verify_is_clean_on_what_write_log_just_wrote(tmp_path):
    """write_log leaves the active segment's indexes preallocated, as a broker does."""
    part = tmp_path / "t-0"
    write_log(part, {"value": [b"v" * 100] * 3000}, segment_bytes=64 << 10,
              batch_records=10, index_interval_bytes=1024)
    write_log(tmp_path / "u-0", {"value": [b"v"]})    # one batch: no index entry yet
    for p in (part, tmp_path / "u-0"):
        report = kbatch.verify(p)
        assert report.ok, [q for s in report.segments for q in s.problems()]


@pytest.mark.parametrize("sparse", [True, False])
def test_real_partitions_with_preallocated_active_indexes_verify_clean(corpus, tmp_path, sparse):
    """Broker-written partitions from the corpus, their active segment's index
    files padded as a running broker keeps them: still healthy, same entries,
    same reads."""
    source = corpus / "dipendrasaini__kafka-learnning-series" / "tmp" / "kafka-logs"
    parts = sorted(p for p in source.iterdir() if p.is_dir() and p.name.startswith("invoice-"))
    assert parts
    for src in parts[:2]:
        part = tmp_path / src.name
        shutil.copytree(src, part)
        last = sorted(part.glob("*.log"))[-1].with_suffix("")
        for suffix in (".index", ".timeindex"):
            Path(str(last) + suffix).touch()     # a copy may lack them
        expected = {s: _raw_entries(Path(str(last) + s), f)
                    for s, f in ((".index", ">ii"), (".timeindex", ">qi"))}
        before = kbatch.verify(part)
        for suffix, entry in ((".index", 8), (".timeindex", 12)):
            path = Path(str(last) + suffix)
            size = (10 << 20) - (10 << 20) % entry
            if sparse:
                os.truncate(path, size)
            else:
                with open(path, "ab") as f:
                    f.write(bytes(size - path.stat().st_size))
        seg = Segment(Path(str(last) + ".log"))
        assert list(zip(seg.offset_index.offsets - seg.base_offset,
                        seg.offset_index.positions)) == expected[".index"]
        assert list(zip(seg.time_index.timestamps,
                        seg.time_index.offsets - seg.base_offset)) == expected[".timeindex"]
        after = kbatch.verify(part)
        assert after.ok == before.ok and after.ok, \
            [q for s in after.segments for q in s.problems()]
        plain, indexed = kbatch.open_log(part), kbatch.open_log(part, use_index=True)
        mid = int(plain.read().offset[len(plain.read()) // 2])
        assert indexed.read(start_offset=mid).offset.tolist() == \
            plain.read(start_offset=mid).offset.tolist()


def test_direct_read_of_a_directory_index_raises_the_library_error(tmp_path):
    d = tmp_path / (STEM + ".index")
    d.mkdir()
    (tmp_path / (STEM + ".timeindex")).mkdir()
    seg = tmp_path / (STEM + ".log")
    seg.write_bytes(b"")
    with pytest.raises(NotRegularFileError, match="directory"):
        Segment(seg).offset_index
    with pytest.raises(kbatch.KbatchError):
        Segment(seg).time_index


def test_verify_checks_the_index_files_a_broker_sanity_checks(tmp_path):
    """TransactionIndex.sanityCheck and the iterator refuse an entry whose
    last offset is below its first or whose version is not 0, and
    OffsetIndex/TimeIndex.sanityCheck a size that is not a whole number of
    entries; an entry saying a transaction was aborted where the log holds
    its producer's COMMIT contradicts the log (read_committed would drop
    committed records). verify said "ok" to all of them."""
    import struct

    from tests.kafka_ref import COMMIT, build_batch, control_batch
    part = tmp_path / "t-0"
    part.mkdir()
    log = build_batch([(1000 + i, b"k", b"v%d" % i, []) for i in range(5)], base_offset=0,
                      producer_id=1, producer_epoch=0, base_sequence=0, transactional=True)
    log += control_batch(base_offset=5, producer_id=1, producer_epoch=0, control_type=COMMIT,
                         timestamp=2000)
    (part / "00000000000000000000.log").write_bytes(log)
    assert kbatch.verify(part).ok
    entry = lambda version, pid, first, last: struct.pack(">hqqqq", version, pid, first, last, 0)
    cases = {"COMMIT, not an ABORT": entry(0, 1, 0, 5),
             "not an aborted transaction's range": entry(0, 1, 5, 0),
             "version 7": entry(7, 1, 0, 5),
             "whole number of 34-byte entries": entry(0, 2, 0, 5)[:20]}
    for says, data in cases.items():
        (part / "00000000000000000000.txnindex").write_bytes(data)
        report = kbatch.verify(part)
        assert not report.ok and any(says in p for s in report.segments for p in s.problems()), \
            (says, [s.problems() for s in report.segments])
    (part / "00000000000000000000.txnindex").unlink()
    (part / "00000000000000000000.index").write_bytes(b"\x00" * 7)
    report = kbatch.verify(part)
    assert any("whole number of 8-byte" in p for s in report.segments for p in s.problems())
