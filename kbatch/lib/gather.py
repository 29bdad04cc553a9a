"""Joining decoded pieces into one column, the copies spread over threads.

    part 0 | part 1 | part 2 ...  --> one output array, cut into PIECE-byte
                                      copies, run on the caller's thread pool

``Records.concat(parts, pool=...)`` uses it when a log directory's
segments are joined into partitions: the copy of several hundred MB is
otherwise one thread's work after the parallel decode (numpy's slice
assignment releases the GIL, and the first touch of the fresh output's
pages happens on the copying threads too). Without a pool the copies run
in order on the calling thread. Outputs come from kbatch's memory pool
(``empty``): a log directory read joins into the pages its segments'
columns released, not into fresh ones the kernel must zero (zeroing fresh
huge pages was half of a one-thread read of the bench log directory in
``perf``). Keeps in memory the output and the parts.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from kbatch._core._columns import pooled_empty

PIECE = 4 << 20          # bytes per copy job
POOLED_FROM = 1 << 20    # smaller outputs come from numpy (malloc)
# memory pool roles of joined columns: one per purpose, so that a join takes
# the pages the same column of an earlier join released (the decoder's are < 100)
JOIN_ROLE = 100


def empty(n: int, dtype, role: int | None = None) -> np.ndarray:
    """``np.empty(n, dtype)``; with ``role`` (and 1 MiB or more), writable
    memory from kbatch's pool (``kbatch._core._columns.pooled_empty``),
    returned to it when the last view of the array goes away."""
    dtype = np.dtype(dtype)
    if role is None or n * dtype.itemsize < POOLED_FROM:
        return np.empty(n, dtype)
    return np.frombuffer(pooled_empty(n * dtype.itemsize, role), dtype, count=n)


class Copies:
    """Copy jobs gathered for one join, then run together."""

    def __init__(self, pool=None):
        self.pool = pool
        self.jobs: list[Callable[[], None]] = []

    def copy(self, dst: np.ndarray, at: int, src: np.ndarray) -> None:
        """``dst[at:at + len(src)] = src``, in pieces."""
        step = max(PIECE // max(src.itemsize, 1), 1)
        for a in range(0, len(src), step):
            b = min(a + step, len(src))
            self.jobs.append(lambda a=a, b=b: dst.__setitem__(slice(at + a, at + b), src[a:b]))

    def shifted(self, dst: np.ndarray, at: int, src: np.ndarray, shift: int) -> None:
        """``dst[at:at + len(src)] = src + shift`` (offsets moved to their
        place in the joined data), in pieces."""
        step = max(PIECE // max(dst.itemsize, 1), 1)
        # in the output's type: a Python int past int32 added to int32 offsets
        # raises in numpy 2 (joins of more than 2 GiB have int64 offsets)
        shift = dst.dtype.type(shift)
        for a in range(0, len(src), step):
            b = min(a + step, len(src))
            self.jobs.append(lambda a=a, b=b: np.add(src[a:b], shift, out=dst[at + a:at + b],
                                                     casting="unsafe"))

    def run(self) -> None:
        jobs, self.jobs = self.jobs, []
        if self.pool is None or len(jobs) < 2:
            for job in jobs:
                job()
            return
        for future in [self.pool.submit(job) for job in jobs]:
            future.result()


def concat_fixed(arrays, copies: Copies | None, role: int | None = None,
                 shifts=None) -> np.ndarray:
    """``np.concatenate(arrays)`` (``shifts``: ``arrays[i] + shifts[i]``),
    the copies gathered in ``copies``; ``role``: the output from the pool."""
    if copies is None:
        if shifts is not None:
            arrays = [a + a.dtype.type(s) for a, s in zip(arrays, shifts)]
        return np.concatenate(arrays)
    out = empty(sum(len(a) for a in arrays), np.result_type(*arrays), role)
    at = 0
    for i, a in enumerate(arrays):
        if shifts is None:
            copies.copy(out, at, a)
        else:
            copies.shifted(out, at, a, shifts[i])
        at += len(a)
    return out
