"""kbatch's memory pool (``_core/_memory.h``): released column mappings are
kept up to the limit; the smallest block of the same column ("role") that
fits is reused, else a block of another role that is not much larger, else
the same role's largest, grown; to make room, a block that many takes have
passed over leaves first, then a larger block evicts smaller ones (never the
reverse); pooled memory handed out for joins is writable. Decoding
sizes its columns once from the batch headers, and a repeated read maps no
fresh memory and gives none back (``memory_stats``)."""

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import kbatch
from kbatch._core._columns import default_memory_pool_bytes, memory_stats, pooled_empty

MIB = 1 << 20


@pytest.fixture
def pool():
    kbatch.set_memory_pool(0)                # empty
    yield kbatch.set_memory_pool
    kbatch.set_memory_pool(0)
    kbatch.set_memory_pool(default_memory_pool_bytes())


def _release(*sizes, role=7):
    """Blocks of ``sizes`` (all alive at once, so none is taken from the
    pool for another), then released."""
    blocks = [pooled_empty(s, r) for s, r in (x if isinstance(x, tuple) else (x, role)
                                              for x in sizes)]
    del blocks


def test_released_blocks_are_kept_up_to_the_limit(pool):
    pool(8 * MIB)
    # all allocated while the pool is empty: none is taken from it
    small = [pooled_empty(2 * MIB, 7) for _ in range(3)]
    more, huge = pooled_empty(2 * MIB, 8), pooled_empty(16 * MIB, 9)
    del small
    assert kbatch.memory_pool_bytes() == 6 * MIB
    del more                                 # fits
    assert kbatch.memory_pool_bytes() == 8 * MIB
    del huge                                 # above the limit: never kept, evicts nothing
    assert kbatch.memory_pool_bytes() == 8 * MIB


def test_a_larger_block_evicts_smaller_ones_never_the_reverse(pool):
    pool(8 * MIB)
    small = [pooled_empty(2 * MIB, 7) for _ in range(4)]
    big, late = pooled_empty(6 * MIB, 8), pooled_empty(2 * MIB, 5)
    del small
    assert kbatch.memory_pool_bytes() == 8 * MIB
    del big                                  # three 2 MiB blocks make room for it
    assert kbatch.memory_pool_bytes() == 8 * MIB
    del late                                 # no larger than any kept: not kept
    assert kbatch.memory_pool_bytes() == 8 * MIB
    taken = pooled_empty(5 * MIB, 9)         # the 6 MiB block: the only one that fits
    assert kbatch.memory_pool_bytes() == 2 * MIB
    del taken


def test_a_block_no_read_takes_any_more_makes_room_even_for_a_smaller_one(pool):
    """A block that more takes than twice the pool's blocks have passed over
    is stale: it leaves to make room whatever its size."""
    pool(6 * MIB)
    _release((6 * MIB, 8))          # take 1 (every allocation asks the pool first)
    _release((2 * MIB, 4))          # take 2: one take since, and larger: stays
    assert kbatch.memory_pool_bytes() == 6 * MIB          # (the 2 MiB block was not kept)
    miss = pooled_empty(8 * MIB, 5)                       # take 3: nothing fits
    _release((2 * MIB, 4))          # take 4: three takes since, more than 2 x 1 block
    assert kbatch.memory_pool_bytes() == 2 * MIB
    del miss


def test_an_earlier_reads_blocks_give_way_to_the_current_ones(pool):
    """Larger blocks of another kind of read (a segment decoded in halves on
    two threads) must not turn the current read's smaller blocks away for
    good: a round of the same read soon maps nothing fresh (under the size
    rule alone the stale blocks stayed, and every round mapped 16 MiB)."""
    pool(64 * MIB)
    _release((24 * MIB, 1), (24 * MIB, 1))
    fresh = []
    for _ in range(4):
        before = memory_stats()["fresh_bytes"]
        _release(*[(4 * MIB, role) for role in range(2, 10)])
        fresh.append(memory_stats()["fresh_bytes"] - before)
    assert fresh[0] == 32 * MIB and fresh[-2:] == [0, 0], fresh
    assert kbatch.memory_pool_bytes() == 24 * MIB + 32 * MIB


def test_the_same_role_first_else_the_smallest_that_fits(pool):
    pool(64 * MIB)
    _release((4 * MIB, 3), (32 * MIB, 3), (8 * MIB, 5))
    assert kbatch.memory_pool_bytes() == 44 * MIB
    same = pooled_empty(2 * MIB, 5)          # its own role's block, though larger (8 MiB)
    assert kbatch.memory_pool_bytes() == 36 * MIB
    other = pooled_empty(3 * MIB, 9)         # no block of role 9: the 4 MiB one
    assert kbatch.memory_pool_bytes() == 32 * MIB
    arr = np.frombuffer(other, np.uint8)
    arr[:] = 5
    assert int(arr.sum()) == 5 * 3 * MIB
    del arr, other, same
    assert kbatch.memory_pool_bytes() == 44 * MIB


def test_a_zero_limit_empties_the_pool(pool):
    pool(64 * MIB)
    _release(4 * MIB, 4 * MIB)
    assert kbatch.set_memory_pool(0) == 0
    assert kbatch.memory_pool_bytes() == 0


def test_a_pool_full_of_small_blocks_still_keeps_a_large_one(pool):
    """Every slot taken by small blocks (a log directory's segment buffers):
    the next large column released evicts one of them instead of being
    unmapped, so the read after it does not zero its pages again."""
    pool(1 << 30)
    small = [pooled_empty(2 * MIB, 7) for _ in range(300)]    # more than the slots
    large = pooled_empty(100 * MIB, 8)
    del small
    full = kbatch.memory_pool_bytes()
    assert 0 < full < 300 * 2 * MIB            # the slots ran out
    del large
    assert kbatch.memory_pool_bytes() == full - 2 * MIB + 100 * MIB


def test_the_smallest_block_of_the_same_role_that_fits(pool):
    pool(64 * MIB)
    _release((8 * MIB, 3), (32 * MIB, 3), (16 * MIB, 3))
    taken = pooled_empty(10 * MIB, 3)        # the 16 MiB block, not the 32 MiB one
    assert kbatch.memory_pool_bytes() == 40 * MIB
    grown = pooled_empty(40 * MIB, 3)        # none fits: the largest (32 MiB), grown
    assert kbatch.memory_pool_bytes() == 8 * MIB
    del taken, grown


def test_a_small_column_never_takes_a_much_larger_block_of_another_role(pool):
    """A 2 MiB buffer taking a 64 MiB block would cut it down when it is
    finished, and the column that left it would map 62 MiB afresh."""
    pool(128 * MIB)
    _release((64 * MIB, 3))
    before = memory_stats()["fresh_bytes"]
    small = pooled_empty(2 * MIB, 9)
    assert kbatch.memory_pool_bytes() == 64 * MIB
    assert memory_stats()["fresh_bytes"] - before == 2 * MIB
    del small


def _log_dir(root, partitions=2, records=200_000):
    values = [b"v%07d" % i + b"x" * 60 for i in range(records)]
    keys = [b"k%d" % i for i in range(records)]
    for p in range(partitions):
        kbatch.write_log(root / f"t-{p}", {"key": keys, "value": values}, segment_bytes=6 << 20)
    return root


def test_a_segment_is_decoded_into_columns_sized_once(tmp_path, pool):
    """The columns are reserved from the batch headers before the walk, not
    doubled as it goes (which maps up to twice the bytes, and moves them)."""
    pool(default_memory_pool_bytes())
    seg = sorted((_log_dir(tmp_path, 1) / "t-0").glob("*.log"))[0]
    before = memory_stats()["fresh_bytes"]
    rec = kbatch.read_segment(seg)
    fresh = memory_stats()["fresh_bytes"] - before
    assert len(rec) > 50_000
    assert 0 < fresh <= 1.2 * rec.nbytes, (fresh, rec.nbytes)   # the pool was empty


@pytest.mark.parametrize("threads", [1, 2])
def test_a_repeated_log_dir_read_maps_no_fresh_memory(tmp_path, pool, threads):
    """The second read of the same data finds every block it needs in the
    pool, sized as before: nothing is mapped afresh (pages the kernel would
    zero again) and nothing is cut down or given back."""
    pool(default_memory_pool_bytes())
    log = kbatch.open_log_dir(_log_dir(tmp_path))
    start = memory_stats()
    first = log.read(threads=threads)
    del first
    before = memory_stats()
    assert before["fresh_bytes"] > start["fresh_bytes"]     # the first read mapped its own
    again = log.read(threads=threads)
    after = memory_stats()
    assert sum(len(r) for r in again.values()) == 400_000
    assert after["fresh_bytes"] == before["fresh_bytes"]
    assert after["unmapped_bytes"] == before["unmapped_bytes"]
    assert after["reused_blocks"] > before["reused_blocks"]


def test_reads_after_a_segment_read_in_halves_on_two_threads_map_nothing_fresh(tmp_path, pool):
    """What make bench ran into: a segment decoded in two halves on two
    threads leaves the pool full of half-sized blocks; the whole reads that
    follow (copy and zero_copy in turn) must soon find every block they need
    there. Under the size rule alone, the larger stale blocks stayed and each
    read mapped MBs afresh, for good."""
    records = 300_000
    kbatch.write_log(tmp_path / "t-0", {"key": [b"k%d" % i for i in range(records)],
                                        "value": [b"v%07d" % i + b"x" * 90
                                                  for i in range(records)]},
                     segment_bytes=1 << 30)
    seg = sorted((tmp_path / "t-0").glob("*.log"))[0]
    data = seg.read_bytes()
    whole = kbatch.read_segment(seg)
    positions = whole.batches.position
    cut = int(positions[len(positions) // 2])
    pool(int(whole.nbytes * 1.8))            # both kinds of whole read fit, not more
    del whole
    halves = [(0, cut), (cut, len(data))]
    with ThreadPoolExecutor(2) as threads:
        for _ in range(4):
            parts = list(threads.map(lambda r: kbatch.read_segment(data, start=r[0], stop=r[1]),
                                     halves))
            assert sum(len(p) for p in parts) == records
            del parts
    fresh = []
    for i in range(6):
        before = memory_stats()["fresh_bytes"]
        assert len(kbatch.read_segment(seg, zero_copy=i % 2 == 1)) == records
        fresh.append(memory_stats()["fresh_bytes"] - before)
    assert fresh[-2:] == [0, 0], fresh
