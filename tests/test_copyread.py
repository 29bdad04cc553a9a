"""Whole-file reads that copy the file (pread into pooled memory) instead of
mapping it while many reads run at once (``kbatch.lib.copyread``): the same
records, errors and bounds as a mapped read."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import kbatch
from kbatch.errors import FileChangedError
from kbatch.lib import copyread
from tests.test_against_kafka_python import assert_same_records


def _rows(n, seed=0):
    rng = np.random.default_rng(seed)
    return [(b"k%d" % (i % 97), None if i % 11 == 0 else bytes(rng.integers(0, 256, i % 300,
                                                                          dtype=np.uint8)),
             1_700_000_000_000 + i, [("h", b"%d" % i)] if i % 5 == 0 else [])
            for i in range(n)]


@pytest.fixture
def logdir(tmp_path):
    for p, codec in enumerate(("none", "lz4", "zstd")):
        kbatch.write_log(tmp_path / f"t-{p}", _rows(3000, p), segment_bytes=60_000,
                         codec=codec)
    return tmp_path


@pytest.fixture
def spy(monkeypatch):
    """Counts the reads that copied (the copy's view was handed out)."""
    taken = []
    real = copyread.copied

    def copied(fd, size, path):
        cm = real(fd, size, path)

        class Wrap:
            def __enter__(self):
                view = cm.__enter__()
                if view is not None:
                    taken.append(path)
                return view

            def __exit__(self, *exc):
                return cm.__exit__(*exc)
        return Wrap()
    monkeypatch.setattr(copyread, "copied", copied)
    return taken


_same = assert_same_records


def test_copied_reads_equal_mapped_reads(logdir, monkeypatch, spy):
    segments = sorted(logdir.glob("*/*.log"))
    mapped = [kbatch.read_segment(s) for s in segments]
    assert spy == []                          # one read in flight: mapped
    monkeypatch.setattr(copyread, "COPY_FROM_READERS", 1)
    copied = [kbatch.read_segment(s) for s in segments]
    assert sorted(spy) == sorted(map(str, segments))
    for a, b in zip(mapped, copied):
        _same(a, b)
    assert copyread.readers() == 0


def test_log_dir_read_on_threads_copies_and_equals(logdir, monkeypatch, spy):
    one = kbatch.open_log_dir(logdir).read(threads=1)
    monkeypatch.setattr(copyread, "COPY_FROM_READERS", 2)
    gate = threading.Barrier(3)
    real = copyread.reading

    def reading():      # three reads in flight at once, whatever the timing
        cm = real()

        class Wrap:
            def __enter__(self):
                cm.__enter__()
                try:
                    gate.wait(timeout=5)
                except threading.BrokenBarrierError:
                    pass

            def __exit__(self, *exc):
                return cm.__exit__(*exc)
        return Wrap()
    monkeypatch.setattr(copyread, "reading", reading)
    three = kbatch.open_log_dir(logdir).read(threads=3)
    assert spy, "no read copied with three in flight"
    assert sorted(one) == sorted(three)
    for key in one:
        _same(one[key], three[key])
    assert copyread.readers() == 0


def test_zero_copy_reads_map(logdir, monkeypatch, spy):
    monkeypatch.setattr(copyread, "COPY_FROM_READERS", 1)
    seg = sorted(logdir.glob("t-0/*.log"))[0]
    rec = kbatch.read_segment(seg, zero_copy=True)
    assert spy == []
    _same(rec, kbatch.read_segment(seg))
    kbatch.open_log_dir(logdir).read(threads=2, zero_copy=True)
    assert len(spy) == 1          # only the copy-mode read_segment above


def test_trailing_hole_and_budget_map(tmp_path, monkeypatch, spy):
    kbatch.write_log(tmp_path / "t-0", _rows(500), segment_bytes=1 << 20)
    seg = next((tmp_path / "t-0").glob("*.log"))
    want = kbatch.read_segment(seg)
    monkeypatch.setattr(copyread, "COPY_FROM_READERS", 1)
    monkeypatch.setattr(copyread, "COPY_BUDGET", os.path.getsize(seg) - 1)
    _same(kbatch.read_segment(seg), want)
    assert spy == []                          # over the budget: mapped
    monkeypatch.setattr(copyread, "COPY_BUDGET", 1 << 30)
    with open(seg, "r+b") as f:               # a preallocated tail: a hole
        f.truncate(os.path.getsize(seg) + (4 << 20))
    padded = kbatch.read_segment(seg)
    assert padded.end.reason == "zero_padding" and spy == []
    assert padded.offset.tolist() == want.offset.tolist()
    assert padded.value.to_pylist() == want.value.to_pylist()
    with open(seg, "r+b") as f:
        f.truncate(os.path.getsize(seg) - (4 << 20))
    _same(kbatch.read_segment(seg), want)
    assert spy == [str(seg)]


def test_file_ending_early_is_named(tmp_path, monkeypatch):
    kbatch.write_log(tmp_path / "t-0", _rows(2000), segment_bytes=1 << 20)
    seg = next((tmp_path / "t-0").glob("*.log"))
    monkeypatch.setattr(copyread, "COPY_FROM_READERS", 1)
    real = os.preadv

    def short(fd, buffers, offset):       # the file shrank after fstat
        if offset >= 4096:
            return 0
        return real(fd, [buffers[0][:4096 - offset]], offset)
    monkeypatch.setattr(copyread.os, "preadv", short)
    with pytest.raises(FileChangedError) as err:
        kbatch.read_segment(seg)
    assert str(seg) in str(err.value) and err.value.position == 4096
    assert copyread.readers() == 0 and copyread._held == 0


def test_many_threads_stay_within_the_budget(logdir, monkeypatch):
    monkeypatch.setattr(copyread, "COPY_FROM_READERS", 1)
    segments = sorted(logdir.glob("*/*.log"))
    monkeypatch.setattr(copyread, "COPY_BUDGET", 2 * max(map(os.path.getsize, segments)))
    most = []
    real = copyread._reserve

    def reserve(n):
        ok = real(n)
        most.append(copyread._held)
        return ok
    monkeypatch.setattr(copyread, "_reserve", reserve)
    want = [kbatch.read_segment(s) for s in segments]
    with ThreadPoolExecutor(8) as pool:
        for _ in range(3):
            got = list(pool.map(kbatch.read_segment, segments))
            for a, b in zip(want, got):
                _same(a, b)
    assert max(most) <= copyread.COPY_BUDGET
    assert copyread.readers() == 0 and copyread._held == 0
