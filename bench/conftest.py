"""Benchmark fixtures: datasets loaded once per session, as bytes in memory.

Every decoder gets the same ``bytes`` object, so the numbers compare decoding
and not file access. ``benchmark.extra_info`` carries the records and bytes
each round handles; ``bench/report.py`` turns medians into rates and ratios.
"""

import pathlib
import struct
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from datasets import DATASETS, dataset_path  # noqa: E402

_cache: dict[str, bytes] = {}


def load(name: str) -> bytes:
    if name not in _cache:
        _cache.clear()  # keep one dataset (hundreds of MB) in memory at a time
        _cache[name] = dataset_path(name).read_bytes()
    return _cache[name]


def prefix(data: bytes, max_bytes: int) -> tuple[bytes, int]:
    """The leading whole batches of ``data`` up to ``max_bytes``, and their record count."""
    pos = records = 0
    while pos + 61 <= len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        if pos + size > max_bytes and pos:
            break
        records += struct.unpack_from(">i", data, pos + 57)[0]
        pos += size
    return data[:pos], records


def record_count(data: bytes) -> int:
    return prefix(data, len(data))[1]


@pytest.fixture(params=list(DATASETS), scope="module")
def dataset(request):
    data = load(request.param)
    return request.param, data, record_count(data)
