"""Decode throughput: kbatch against aiokafka and kafka-python, same bytes.

Groups are datasets; ``bench/report.py`` prints records/s, MB/s and the ratio
to aiokafka. kafka-python runs on the first ~16 MB of each dataset (a full
5 M-record pass takes it minutes); rates are per record, so they compare.
"""

import os
import struct
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import kbatch
from kbatch._core._checksums import crc32c_of

from conftest import prefix
from peers import aiokafka_decode, kafka_python_decode

CORES = os.cpu_count() or 1


def _ranges(data: bytes, parts: int) -> list[tuple[int, int]]:
    """``parts`` byte ranges of ``data`` cut at batch boundaries."""
    bounds, pos, target = [0], 0, len(data) // parts
    while pos + 12 <= len(data) and len(bounds) < parts:
        pos += struct.unpack_from(">i", data, pos + 8)[0] + 12
        if pos >= target * len(bounds):
            bounds.append(pos)
    bounds.append(len(data))
    return list(zip(bounds, bounds[1:]))

ROUNDS = 5


def _run(benchmark, name, fn, data, records, rounds=ROUNDS):
    benchmark.group = name
    benchmark.extra_info.update(records=records, bytes=len(data), dataset=name)
    return benchmark.pedantic(fn, args=(data,), rounds=rounds, iterations=1, warmup_rounds=1)


def test_kbatch(benchmark, dataset):
    name, data, records = dataset
    out = _run(benchmark, name, lambda d: len(kbatch.read_segment(d)), data, records)
    assert out == records


def test_kbatch_no_crc(benchmark, dataset):
    name, data, records = dataset
    out = _run(benchmark, name, lambda d: len(kbatch.read_segment(d, validate_crc=False)),
               data, records)
    assert out == records


def test_kbatch_zero_copy(benchmark, dataset):
    """Keys and values as binary views over the buffer (no value copied)."""
    name, data, records = dataset
    out = _run(benchmark, name, lambda d: len(kbatch.read_segment(d, zero_copy=True)),
               data, records)
    assert out == records


def test_kbatch_all_cores(benchmark, dataset):
    """One buffer cut at batch boundaries, decoded on every core at once."""
    name, data, records = dataset
    ranges = _ranges(data, CORES)
    pool = ThreadPoolExecutor(max_workers=CORES)

    def decode(d):
        parts = pool.map(lambda r: len(kbatch.read_segment(d, start=r[0], stop=r[1])), ranges)
        return sum(parts)

    try:
        assert _run(benchmark, name, decode, data, records) == records
    finally:
        pool.shutdown()


def test_aiokafka(benchmark, dataset):
    name, data, records = dataset
    assert _run(benchmark, name, aiokafka_decode, data, records, rounds=3) == records


def test_kafka_python(benchmark, dataset):
    name, data, _ = dataset
    part, records = prefix(data, 16 << 20)
    assert _run(benchmark, name, kafka_python_decode, part, records, rounds=1) == records


def test_floor_memcpy_crc32c(benchmark, dataset):
    """The physical floor: copy the file once and CRC-32C it once."""
    name, data, records = dataset
    src = np.frombuffer(data, np.uint8)
    dst = np.empty_like(src)

    def floor(d):
        np.copyto(dst, src)
        return crc32c_of(dst)

    _run(benchmark, name, floor, data, records)
