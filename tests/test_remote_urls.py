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
