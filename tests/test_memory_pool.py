"""kbatch's memory pool (``_core/_memory.h``): released column mappings are
kept up to the limit, the largest block of the same column ("role") or else
the smallest that fits is reused, a larger block evicts smaller ones (never
the reverse), and pooled memory handed out for joins is writable."""

import numpy as np
import pytest

import kbatch
from kbatch._core._columns import default_memory_pool_bytes, pooled_empty

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


def test_the_same_role_first_else_the_smallest_that_fits(pool):
    pool(64 * MIB)
    _release((4 * MIB, 3), (32 * MIB, 3), (8 * MIB, 5))
    assert kbatch.memory_pool_bytes() == 44 * MIB
    same = pooled_empty(2 * MIB, 5)          # its own role's block, though larger
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
    small = [pooled_empty(2 * MIB, 7) for _ in range(200)]    # more than the slots
    large = pooled_empty(100 * MIB, 8)
    del small
    full = kbatch.memory_pool_bytes()
    assert 0 < full < 200 * 2 * MIB            # the slots ran out
    del large
    assert kbatch.memory_pool_bytes() == full - 2 * MIB + 100 * MIB
