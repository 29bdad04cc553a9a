"""URLs: where they are not read yet, kbatch says so (instead of "no such
file" for an object that exists): verify, transactions and the command line;
and read_committed over a URL streams chunk by chunk like the local read."""

import subprocess
import sys

import pytest

import kbatch


@pytest.mark.parametrize("fn", [kbatch.verify, kbatch.transactions])
def test_library_tools_refuse_urls_clearly(fn):
    with pytest.raises(kbatch.ArgumentError, match="is a URL; .* local paths only"):
        fn("s3://bucket/orders-0")


@pytest.mark.parametrize("command", ["verify", "stats", "txn", "dump"])
def test_command_line_refuses_urls_with_a_usage_error(command):
    out = subprocess.run([sys.executable, "-m", "kbatch", command, "s3://bucket/orders-0"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "a URL; the command line reads local paths only" in out.stderr


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
