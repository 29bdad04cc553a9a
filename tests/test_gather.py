"""Records.concat(parts, pool=...): the copies cut into pieces and run on a
thread pool give exactly what the plain join gives (nulls, empty parts,
projections, sliced parts whose offsets do not start at 0), and
open_log_dir(...).read(threads=2), which uses it to join the runs of a
partition cut for the threads, equals threads=1."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import kbatch
from kbatch._core._columns import default_memory_pool_bytes
from kbatch.lib import gather

from .kafka_ref import build_batch


def _part(rows, base, start, stop):
    buf = b"".join(build_batch(rows[i:i + 3], base_offset=base + i)
                   for i in range(0, len(rows), 3))
    return kbatch.read_segment(buf).slice(start, stop)


row = st.tuples(st.integers(0, 10**12), st.one_of(st.none(), st.binary(max_size=40)),
                st.one_of(st.none(), st.binary(max_size=300)),
                st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(),
                                                                  st.binary(max_size=8))),
                         max_size=2))


def _same(a, b):
    assert a.offset.tolist() == b.offset.tolist()
    assert a.timestamp.tolist() == b.timestamp.tolist()
    assert a.key.to_pylist() == b.key.to_pylist()
    assert a.value.to_pylist() == b.value.to_pylist()
    assert a.headers.to_pylist() == b.headers.to_pylist()
    assert a.batch.tolist() == b.batch.tolist()
    assert a.value.offsets.dtype == b.value.offsets.dtype


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(st.tuples(st.lists(row, max_size=12), st.integers(0, 3),
                                st.integers(0, 12)), min_size=1, max_size=6),
       piece=st.sampled_from([1, 7, 64, 4 << 20]), pooled_from=st.sampled_from([0, 1 << 20]))
def test_pooled_concat_equals_the_plain_join(parts, piece, pooled_from):
    records, base = [], 0
    for rows, start, stop in parts:
        rows = [(ts, k, v, [(hk, hv) for hk, hv in h]) for ts, k, v, h in rows]
        records.append(_part(rows, base, start, max(start, stop)))
        base += len(rows) + 1
    old, gather.PIECE = gather.PIECE, piece
    old_pooled, gather.POOLED_FROM = gather.POOLED_FROM, pooled_from
    try:
        with ThreadPoolExecutor(2) as pool:
            joined = kbatch.Records.concat(records, pool=pool)
        _same(joined, kbatch.Records.concat(records))
        plain = [np.concatenate([getattr(r, name) for r in records])
                 for name in ("offset", "timestamp")]
        assert [joined.offset.tolist(), joined.timestamp.tolist()] == [a.tolist() for a in plain]
    finally:
        gather.PIECE, gather.POOLED_FROM = old, old_pooled


def test_joins_reuse_the_memory_pool_and_overwrite_what_it_held():
    """Joined columns of 1 MiB or more live in kbatch's memory pool: released,
    they go back to it, and the next join writes over them (no stale bytes)."""
    kbatch.set_memory_pool(0)             # empty: what it holds next is this test's
    kbatch.set_memory_pool(1 << 30)
    try:
        def parts(fill):
            return [kbatch.read_segment(build_batch(
                [(i, b"k", fill * (700 << 10), [])], base_offset=i)) for i in range(3)]
        first = kbatch.Records.concat(parts(b"a"))
        assert first.value.data.flags.writeable and first.value.data.nbytes >= 2 << 20
        assert first.value.to_pylist() == [b"a" * (700 << 10)] * 3
        before = kbatch.memory_pool_bytes()
        del first
        released = kbatch.memory_pool_bytes()
        assert released > before
        second = kbatch.Records.concat(parts(b"b"))
        assert second.value.to_pylist() == [b"b" * (700 << 10)] * 3
        assert second.offset.tolist() == [0, 1, 2] and second.batch.tolist() == [0, 1, 2]
    finally:
        kbatch.set_memory_pool(default_memory_pool_bytes())


def test_projected_parts_join_on_a_pool():
    rows = [(1, b"k", b"v" * 50, [])] * 10
    parts = [kbatch.read_segment(build_batch(rows, base_offset=i * 10), columns=["offset",
                                                                                "value"])
             for i in range(3)]
    with ThreadPoolExecutor(2) as pool:
        got = kbatch.Records.concat(parts, pool=pool)
    assert got.value.to_pylist() == [b"v" * 50] * 30
    with pytest.raises(kbatch.ColumnNotReadError):
        got.key[0]


def test_log_dir_read_with_threads_equals_one_thread(tmp_path, monkeypatch):
    """t-0 holds most of the bytes: two threads cut it into runs joined on
    the pool (the other partitions are one run each, nothing joined)."""
    sizes = [30_000, 3000, 3000]
    for p, n in enumerate(sizes):
        kbatch.write_log(tmp_path / f"t-{p}", [(b"k%d" % i, None if i % 7 == 0 else
                                                b"v%d" % i * (i % 50), i, [])
                                               for i in range(n)],
                         segment_bytes=20_000 * (10 if p == 0 else 1),
                         codec="lz4" if p == 1 else "none")
    monkeypatch.setattr(gather, "PIECE", 1000)
    d = kbatch.open_log_dir(tmp_path)
    from kbatch.lib.log import _jobs
    assert [j[0].partition for j in _jobs(d.partitions, 2)] == [0, 0, 1, 2]
    one, two = d.read(threads=1), d.read(threads=2)
    assert sorted(one) == sorted(two)
    for key, n in zip(sorted(one), sizes):
        _same(two[key], one[key])
        assert len(np.unique(two[key].offset)) == n


def test_shifted_offsets_past_int32():
    """Offsets of a join past 2 GiB are int64 while each part's are int32:
    the shift is added in the output's type (numpy 2 refuses a Python int
    past int32 beside int32 values)."""
    src = np.array([0, 5, 9], np.int32)
    dst = np.zeros(4, np.int64)
    copies = gather.Copies()
    copies.shifted(dst, 1, src, 3_000_000_000)
    copies.run()
    assert dst.tolist() == [0, 3_000_000_000, 3_000_000_005, 3_000_000_009]


def test_headers_join_into_int32_offsets():
    rows = [(1, b"k", b"v", [("a", b"1"), ("b", None)]), (2, None, b"w", []),
            (3, b"k", None, [("c", b"")])]
    parts = [kbatch.read_segment(build_batch(rows, base_offset=i * 3)) for i in range(4)]
    for pool in (None, ThreadPoolExecutor(2)):
        got = kbatch.Records.concat(parts, pool=pool)
        assert got.headers.offsets.dtype == np.int32
        assert got.headers.to_pylist() == [h for p in parts for h in p.headers.to_pylist()]
        if pool is not None:
            pool.shutdown()
