"""kbatch's memory pool (``_core/_memory.h``): released column mappings are
kept up to the limit, the smallest block that fits is reused, larger blocks
evict smaller ones, and a block above the limit is never kept."""

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
    blocks = [pooled_empty(s, role) for s in sizes]
    del blocks


def test_released_blocks_are_kept_up_to_the_limit(pool):
    pool(8 * MIB)
    _release(2 * MIB, 2 * MIB, 2 * MIB)
    assert kbatch.memory_pool_bytes() == 6 * MIB
    _release(16 * MIB, role=8)               # above the limit: never kept
    assert kbatch.memory_pool_bytes() == 6 * MIB


def test_a_larger_block_evicts_smaller_ones(pool):
    pool(8 * MIB)
    _release(2 * MIB, 2 * MIB, 2 * MIB, 2 * MIB)
    assert kbatch.memory_pool_bytes() == 8 * MIB
    _release(6 * MIB)
    assert kbatch.memory_pool_bytes() == 8 * MIB   # 6 + one of the 2s
    kept = pooled_empty(5 * MIB, 7)          # the 6 MiB block: it fits
    assert kbatch.memory_pool_bytes() == 2 * MIB
    del kept


def test_the_smallest_block_that_fits_is_reused_and_writable(pool):
    pool(64 * MIB)
    _release(4 * MIB, 32 * MIB, role=3)
    small = pooled_empty(3 * MIB, 9)         # another role: the 4 MiB block
    assert kbatch.memory_pool_bytes() == 32 * MIB
    arr = np.frombuffer(small, np.uint8)
    arr[:] = 5
    assert int(arr.sum()) == 5 * 3 * MIB
    del arr, small
    assert kbatch.memory_pool_bytes() == 36 * MIB


def test_a_finished_columns_unused_tail_goes_back_to_the_pool(pool):
    """A decode into a pooled block far larger than its columns keeps only
    what they hold; the rest of the block stays in the pool."""
    pool(1 << 30)
    _release(256 * MIB, role=21)             # the value data role of the decoder
    from .kafka_ref import build_batch
    rec = kbatch.read_segment(build_batch([(1, b"k", b"v" * (3 * MIB), [])]))
    assert rec.value[0] == b"v" * (3 * MIB)
    assert kbatch.memory_pool_bytes() >= 256 * MIB - 8 * MIB


def test_the_default_limit():
    limit = default_memory_pool_bytes()
    assert 256 * MIB <= limit <= 2 << 30
