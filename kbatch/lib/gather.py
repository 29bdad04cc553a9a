"""Joining decoded pieces into one column, the copies spread over threads.

    part 0 | part 1 | part 2 ...  --> one output array, cut into PIECE-byte
                                      copies, run on the caller's thread pool

``Records.concat(parts, pool=...)`` uses it when a log directory's
segments are joined into partitions: the copy of several hundred MB is
otherwise one thread's work after the parallel decode (numpy's slice
assignment releases the GIL, and the first touch of the fresh output's
pages happens on the copying threads too). Without a pool the copies run
in order on the calling thread. Keeps in memory the output and the parts.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

PIECE = 4 << 20          # bytes per copy job


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


def concat_fixed(arrays, copies: Copies | None) -> np.ndarray:
    """``np.concatenate(arrays)``, the copies gathered in ``copies``."""
    if copies is None:
        return np.concatenate(arrays)
    out = np.empty(sum(len(a) for a in arrays), np.result_type(*arrays))
    at = 0
    for a in arrays:
        copies.copy(out, at, a)
        at += len(a)
    return out
