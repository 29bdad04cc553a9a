"""A log's life from object storage: ``recover``, ``retention`` and
``compact`` take a URL through the one door (``kbatch.lib.open``) as they
take a path. The sources are written by tests/kafka_ref.py's encoders and
uploaded to ``memory://`` and to a local S3 server (moto); each result is
checked against the models of tests/lifecycle_ref.py (through the checks of
the local tests), not against a local run of kbatch."""

from __future__ import annotations

import pytest

import kbatch
from kbatch.lib.compact import compact
from kbatch.lib.retention import retention
from tests.lifecycle_ref import retention_model, write_partition
from tests.test_compact import HOUR, check as check_compaction, latest_rows, make
from tests.test_recover import check_against_model, damage, make_segments, write_raw
from tests.test_retention import T0, write as write_retention

pytest.importorskip("fsspec")


def _upload(put, local_root, prefix):
    """Every file under ``local_root`` to ``prefix`` with ``put(key, bytes)``."""
    for f in sorted(local_root.rglob("*")):
        if f.is_file():
            put(f"{prefix}/{f.relative_to(local_root).as_posix()}", f.read_bytes())


@pytest.fixture(scope="module")
def stores():
    """(URL root, storage keywords) of memory:// and, when moto and s3fs are
    installed, of a local S3 server."""
    import fsspec
    mem = fsspec.filesystem("memory")
    out = [("memory://life", {}, lambda key, data: mem.pipe(f"/life/{key}", data))]
    server = None
    try:
        import moto  # noqa: F401
        import s3fs  # noqa: F401
    except ImportError:
        pass
    else:
        from tests.remote_s3 import BUCKET, S3
        server = S3()
        out.append((f"s3://{BUCKET}/life", {"storage_options": server.options()},
                    lambda key, data: server.fs.pipe_file(f"{BUCKET}/life/{key}", data)))
    yield out
    if server is not None:
        server.stop()


def test_recover_from_urls(stores, tmp_path, capfd):
    """A data directory (a healthy partition, one with a flipped bit in its
    middle segment) and one partition (a torn last segment) recovered from
    URLs: the model's bytes, indexes and report, a clean verify, the
    checkpoint files of the data directory."""
    src = tmp_path / "src"
    cases = {}
    for name, seed, kind in (("a-0", 3, "healthy"), ("b-1", 4, "flip"), ("c-2", 5, "torn")):
        segments = make_segments(seed)
        raw = damage(segments, kind, 1 if kind == "flip" else 2, 6, 777)
        cases[name] = (segments, raw, write_raw(src / name, segments, raw))
    (src / "replication-offset-checkpoint").write_text("0\n1\na 0 5\n")
    for n, (root, storage, put) in enumerate(stores):
        _upload(put, src, f"v{n}")
        out = tmp_path / f"out{n}"
        report = kbatch.recover(f"{root}/v{n}", out, **storage)
        assert sorted(p.name for p in report.partitions) == ["a-0", "b-1", "c-2"]
        for part in report.partitions:
            segments, raw, bases = cases[part.name]
            one = type(report)(report.dest, [part], [])
            check_against_model(src / part.name, out / part.name, bases, raw, 4096, one)
        assert not report.ok                                   # b-1 and c-2 lost data
        assert (out / "replication-offset-checkpoint").read_text().splitlines()[2] == "a 0 5"
        # one partition of the prefix
        segments, raw, bases = cases["c-2"]
        alone = kbatch.recover(f"{root}/v{n}/c-2", tmp_path / f"alone{n}", **storage)
        check_against_model(src / "c-2", tmp_path / f"alone{n}", bases, raw, 4096, alone)

    # the command line takes the URL too (memory:// lives in this process)
    import json
    from kbatch.tools.cli import main
    assert main(["recover", "memory://life/v0/c-2", str(tmp_path / "cli"), "--format",
                 "json"]) == 1                                   # something was dropped
    (row, *_) = [json.loads(x) for x in capfd.readouterr().out.splitlines()]
    assert row["partition"] == "c-2" and row["dropped"][0]["file"].endswith(".log")
    want = sorted(p.read_bytes() for p in (tmp_path / "alone0").iterdir())
    assert sorted(p.read_bytes() for p in (tmp_path / "cli").iterdir()) == want


def test_retention_from_urls(stores, tmp_path):
    """Plans of a data directory read from URLs equal the model's (time,
    size, both; the log start offset from the checkpoint file); the
    retained copy and what would be lost read from there."""
    src = tmp_path / "data"
    spec = [[(3, T0 + 100 * (k + 1) - 5), (3, T0 + 100 * (k + 1))] for k in range(4)]
    segs = write_retention(src / "t-0", spec)
    (src / "log-start-offset-checkpoint").write_text("0\n1\nt 0 2\n")
    size = len(segs[0][1])
    for n, (root, storage, put) in enumerate(stores):
        _upload(put, src, f"r{n}")
        url = f"{root}/r{n}"
        for ms, limit in ((150, None), (None, 2 * size + 1), (150, 3 * size), (0, None)):
            plan = retention(url, retention_ms=ms, retention_bytes=limit, now=T0 + 400,
                             **storage)
            (p,) = plan.partitions
            deleted, new_start, rolled = retention_model(
                segs, log_start=2, hw=None, retention_ms=ms, retention_bytes=limit,
                now=T0 + 400)
            assert [(d.base_offset, d.reason) for d in p.deleted] == deleted
            assert (p.new_log_start_offset, p.rolled) == (new_start, rolled)
        plan = retention(url, retention_ms=150, now=T0 + 400, **storage)
        assert plan.log_start_offsets == {("t", 0): 12}
        assert plan.lost()[("t", 0)].offset.tolist() == list(range(12))
        out = plan.apply(tmp_path / f"kept{n}")
        assert kbatch.verify(out).ok
        assert kbatch.open_log(out / "t-0").read().offset.tolist() == list(range(12, 24))
        assert (out / "log-start-offset-checkpoint").read_text().splitlines()[2] == "t 0 12"


def test_retention_of_segments_without_timestamps_from_urls(stores, tmp_path):
    """A segment without timestamps is as old as the store says
    (LogSegment.largestTimestamp falls back on the file's time; an object
    store's LastModified, memory://'s creation time): just uploaded, it
    stays under a 10-minute retention; an hour later it goes."""
    import time
    src = tmp_path / "data"
    write_retention(src / "t-0", [[(2, -1)], [(2, -1)]])
    for n, (root, storage, put) in enumerate(stores):
        _upload(put, src, f"nt{n}")
        url, now = f"{root}/nt{n}/t-0", int(time.time() * 1000)
        (p,) = retention(url, retention_ms=600_000, now=now, **storage).partitions
        assert all(s.from_mtime and abs(s.largest_timestamp - now) < 120_000 for s in p.segments)
        assert p.deleted == []
        (p,) = retention(url, retention_ms=600_000, now=now + 3_600_000, **storage).partitions
        assert [(d.base_offset, d.reason) for d in p.deleted] == [(0, "time"), (2, "time")]


def test_compact_from_urls(stores, tmp_path):
    """One cleaning of a partition read from a URL: what the model of the
    cleaner leaves, a clean verify, the source's table."""
    src = write_partition(tmp_path / "src" / "t-0", make(11))
    now = T0 + HOUR
    for n, (root, storage, put) in enumerate(stores):
        _upload(put, tmp_path / "src", f"c{n}")
        out = tmp_path / f"out{n}"
        compact(f"{root}/c{n}/t-0", out, now=now, delete_retention_ms=HOUR, **storage)
        check_compaction(src, out, now, HOUR)
        assert kbatch.verify(out).ok
        assert latest_rows(out) == latest_rows(src)
