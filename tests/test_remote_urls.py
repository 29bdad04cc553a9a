"""URLs beyond reads: verify and transactions check object storage as they
check files; read_committed over a URL streams chunk by chunk like the local
read; RemoteLogDir reads a prefix like open_log_dir. (The command line over
a local S3 server: tests/test_remote_plain.py.)"""

import subprocess
import sys

import pytest

import kbatch
from kbatch.lib.logfiles import Segment


def _upload(fs, local_root, prefix):
    for part in sorted(p for p in local_root.iterdir() if p.is_dir()):
        for f in part.iterdir():
            fs.pipe(f"/{prefix}/{part.name}/{f.name}", f.read_bytes())


def _damaged_dir(tmp_path):
    """Two partitions: one clean with transactions, one with a flipped byte
    in a middle segment, a torn tail, and an index entry that lies."""
    root = tmp_path / "data"
    w = kbatch.LogWriter(root / "t-0", segment_bytes=500)
    for i, commit in enumerate([True, False, None]):
        w.append([(b"k", b"v%d" % i, 10 + i, [])] * 3, producer_id=5, transactional=True)
        w.append([(None, b"p%d" % i, 10 + i, [])])
        if commit is not None:
            w.end_transaction(5, commit=commit)
    w.close()
    kbatch.write_log(root / "u-0", [(b"k%d" % i, b"x%d" % i * 20, 100 + i, [])
                                    for i in range(60)], segment_bytes=700, batch_records=3)
    segs = sorted((root / "u-0").glob("*.log"))
    mid = bytearray(segs[1].read_bytes())
    mid[-5] ^= 0x40                        # inside the last batch's records: a CRC failure
    segs[1].write_bytes(bytes(mid))
    segs[-1].write_bytes(segs[-1].read_bytes()[:-9])
    # an offset index entry that points inside a batch
    (root / "u-0" / segs[0].name.replace(".log", ".index")).write_bytes(
        (3).to_bytes(4, "big") + (5).to_bytes(4, "big"))
    return root


def _report(r, root):
    def name(p):
        return str(p).replace(str(root), "<root>").replace("memory:///v", "<root>").replace("memory://v", "<root>")
    return ([(name(s.path), s.base_offset, s.size, s.batches, s.records, s.control_records,
              s.first_offset, s.last_offset, s.valid_bytes, s.trailing_bytes, s.end_reason,
              s.crc_failures, s.ok, [name(p) for p in s.problems()], s.last_segment)
             for s in r.segments], [name(p) for p in r.partition_problems])


def test_verify_and_transactions_of_urls_equal_the_local_checks(tmp_path):
    """kbatch.verify / kbatch.transactions of memory:// URLs (a prefix of
    partitions, one partition, one segment object) report what the same
    files report locally: CRC failures, torn tails, lying index entries,
    transactions and the LSO."""
    import fsspec

    root = _damaged_dir(tmp_path)
    fs = fsspec.filesystem("memory")
    _upload(fs, root, "v")
    local, remote = kbatch.verify(root), kbatch.verify("memory://v")
    assert not local.ok and _report(remote, root) == _report(local, root)
    problems = [p for s in local.segments for p in s.problems()]
    assert any("CRC mismatch" in p for p in problems)
    assert any(".index: entry 0 (offset 3) points to byte 5" in p for p in problems)
    assert any("last batch truncated" in p for p in problems)
    part = kbatch.verify("memory://v/u-0")
    assert _report(part, root) == _report(kbatch.verify(root / "u-0"), root)
    seg = sorted((root / "u-0").glob("*.log"))[1]
    one = kbatch.verify(f"memory://v/u-0/{seg.name}")
    assert _report(one, root) == _report(kbatch.verify(seg), root)
    seen = []
    kbatch.verify("memory://v/t-0", on_segment=seen.append)
    assert len(seen) == len(list((root / "t-0").glob("*.log")))

    for fn in (lambda: kbatch.transactions(root), lambda: kbatch.transactions("memory://v")):
        with pytest.raises(kbatch.CorruptRecordError, match="CRC mismatch.*base offset 12"):
            fn()                           # the damaged partition, as a read raises
    for where, url in ((root / "t-0", "memory://v/t-0"), (root, "memory://v")):
        want = kbatch.transactions(where, validate_crc=False)
        got = kbatch.transactions(url, validate_crc=False)
        assert [(t.transactions, t.last_stable_offset, t.log_end_offset) for t in got] == \
            [(t.transactions, t.last_stable_offset, t.log_end_offset) for t in want]
    assert any(t.status == "OPEN" for t in kbatch.transactions("memory://v/t-0")[0].transactions)
    with pytest.raises(kbatch.PathError, match="no such file or directory"):
        kbatch.verify("memory://v/nothing-here")


def test_local_paths_still_read(tmp_path):
    kbatch.write_log(tmp_path / "t-0", [(None, b"v", 1, [])] * 3)
    assert kbatch.verify(str(tmp_path / "t-0")).ok


def test_remote_read_committed_streams_chunks_like_the_local_read(tmp_path):
    """read_committed over a URL: transactions across segments (aborts,
    commits, one left open), chunk by chunk, equal the local read."""
    import fsspec

    local = tmp_path / "t-0"
    w = kbatch.LogWriter(local, segment_bytes=400)
    for i, commit in enumerate([True, False, True, False, True, None]):
        w.append([(b"k%d" % i, b"v%d" % j, 10 + i, []) for j in range(3)], producer_id=7,
                 transactional=True)
        w.append([(None, b"plain%d" % i, 10 + i, [])])
        if commit is not None:
            w.end_transaction(7, commit=commit)
    w.close()
    fs = fsspec.filesystem("memory")
    for f in local.iterdir():
        fs.pipe(f"/rc/t-0/{f.name}", f.read_bytes())
    want = kbatch.open_log(local).read(isolation="read_committed")
    remote = kbatch.open_log("memory://rc/t-0")
    chunks = list(remote.iter(isolation="read_committed", chunk_records=1))
    got = kbatch.Records.concat(chunks)
    assert got.value.to_pylist() == want.value.to_pylist()
    assert got.offset.tolist() == want.offset.tolist()
    assert got.last_stable_offset == want.last_stable_offset
    assert b"v0" in got.value.to_pylist() and b"plain5" not in got.value.to_pylist()


def test_remote_log_dir_read_equals_the_local_read(tmp_path):
    """RemoteLogDir.read/iter over a prefix: every partition, as the local
    open_log_dir(...).read gives it; topics chosen, an unknown one refused."""
    import fsspec

    root = tmp_path / "data"
    kbatch.write_log(root / "a-0", [(b"k%d" % i, b"x%d" % i, 1 + i, []) for i in range(50)],
                     segment_bytes=600)
    kbatch.write_log(root / "a-1", [(None, b"y%d" % i, 5, []) for i in range(30)])
    kbatch.write_log(root / "b-0", [(b"z", b"w", 9, [])] * 7)
    fs = fsspec.filesystem("memory")
    for part in root.iterdir():
        for f in part.iterdir():
            fs.pipe(f"/dir/{part.name}/{f.name}", f.read_bytes())
    local = kbatch.open_log_dir(root).read()
    remote_dir = kbatch.open_log_dir("memory://dir")
    for threads in (1, 2):
        remote = remote_dir.read(threads=threads)
        assert sorted(remote) == sorted(local) == [("a", 0), ("a", 1), ("b", 0)]
        for key in local:
            assert remote[key].value.to_pylist() == local[key].value.to_pylist()
            assert remote[key].offset.tolist() == local[key].offset.tolist()
    some = remote_dir.read("a", 10, 20, columns=["offset"])
    assert sorted(some) == [("a", 0), ("a", 1)]
    assert some[("a", 0)].offset.tolist() == list(range(10, 20))
    chunks = list(remote_dir.iter(["b"], chunk_records=2))
    assert {k for k, _ in chunks} == {("b", 0)} and sum(len(c) for _, c in chunks) == 7
    with pytest.raises(kbatch.ArgumentError, match="no topic 'c'"):
        remote_dir.read("c")


def test_preallocated_index_objects_are_read_up_to_their_live_entries(tmp_path, monkeypatch):
    """A copied active segment's .index/.timeindex are preallocated (write_log
    makes them 10 MiB, as the broker does): a seek reads the first 1 MiB
    piece, which holds every live entry and then zeros, not the 10 MiB."""
    import fsspec

    d = tmp_path / "t-0"
    kbatch.write_log(d, [(b"k", b"v" * 3000, 5, [])] * 3000, batch_records=2)
    assert (d / "00000000000000000000.index").stat().st_size == 10 << 20
    fs = fsspec.filesystem("memory")
    for f in d.iterdir():
        fs.pipe(f"/pre/t-0/{f.name}", f.read_bytes())
    log = kbatch.open_log("memory://pre/t-0")
    seg = log.segments[0]
    reads = []
    real = type(fs).cat_file

    def counting(self, path, start=None, end=None, **kw):
        data = real(self, path, start=start, end=end, **kw)
        reads.append((path, len(data)))
        return data
    monkeypatch.setattr(type(fs), "cat_file", counting)
    local = Segment(d / "00000000000000000000.log")
    assert seg.offset_index.offsets.tolist() == local.offset_index.offsets.tolist()
    assert seg.time_index.offsets.tolist() == local.time_index.offsets.tolist()
    assert 0 < sum(n for p, n in reads if p.endswith(".index")) <= 1 << 20
    assert sum(n for p, n in reads if p.endswith(".timeindex")) <= 1 << 20
    assert log.read(1500, 1510).offset.tolist() == list(range(1500, 1510))
    assert log.offset_for_timestamp(5) == 0
