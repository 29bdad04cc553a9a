"""kbatch's memory pool (``_core/_memory.h``): released column mappings are
kept up to the limit, the largest block of the same column ("role") or else
the smallest that fits is reused, a block that does not fit is not kept,
and pooled memory handed out for joins is writable."""

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
    _release(2 * MIB, 2 * MIB, 2 * MIB)
    assert kbatch.memory_pool_bytes() == 6 * MIB
    _release(4 * MIB, role=8)                # does not fit beside them: not kept
    assert kbatch.memory_pool_bytes() == 6 * MIB


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
