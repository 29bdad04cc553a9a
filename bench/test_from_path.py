"""From the path, as users read: every side starts from the segment file.

kbatch maps the file (``read_segment(path)``); aiokafka reads it into bytes
and decodes them; the floor is one CRC-32C pass over the file from its path
(read into memory, then crc32c; or mapped, then crc32c: the cheaper of the
two is the floor). CRC on, one core, warm page cache for every
side (each is run once before timing). Also: column projection
(``columns=[...]``) against the full decode, CRC on and off.
"""

import mmap

import pytest

import kbatch
from kbatch._core._checksums import crc32c_of

from conftest import record_count, load
from datasets import dataset_path
from peers import aiokafka_decode

ROUNDS = 5


def _run(benchmark, group, label, fn, records, nbytes, rounds=ROUNDS):
    benchmark.group = group
    benchmark.extra_info.update(records=records, bytes=nbytes, dataset=group, label=label)
    return benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=1)


@pytest.fixture(params=["small", "large"], scope="module")
def path_dataset(request):
    path = dataset_path(request.param)
    return request.param, str(path), record_count(load(request.param)), path.stat().st_size


SIDES = {
    "kbatch": lambda p: len(kbatch.read_segment(p)),
    "kbatch (zero_copy)": lambda p: len(kbatch.read_segment(p, zero_copy=True)),
    "aiokafka": lambda p: aiokafka_decode(open(p, "rb").read()),
    "one CRC-32C pass (read + crc32c)": lambda p: crc32c_of(open(p, "rb").read()),
    "one CRC-32C pass (mmap + crc32c)": lambda p: _mapped_crc(p),
}


def _mapped_crc(path: str) -> int:
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
        view = memoryview(mm)
        try:
            return crc32c_of(view)
        finally:
            view.release()


@pytest.mark.parametrize("side", list(SIDES))
def test_from_path(benchmark, path_dataset, side):
    name, path, records, nbytes = path_dataset
    out = _run(benchmark, f"from path: {name}", side, lambda: SIDES[side](path), records,
               nbytes, rounds=3 if side == "aiokafka" else ROUNDS)
    if side.startswith("kbatch") or side == "aiokafka":
        assert out == records


PROJECTIONS = {
    "every column": None,
    "offset, timestamp": ["offset", "timestamp"],
    "offset, timestamp, key": ["offset", "timestamp", "key"],
}


@pytest.mark.parametrize("crc", [True, False], ids=["crc on", "crc off"])
@pytest.mark.parametrize("projection", list(PROJECTIONS))
def test_projection(benchmark, projection, crc):
    data = load("small")
    records = record_count(data)
    cols = PROJECTIONS[projection]
    out = _run(benchmark, f"projection ({'CRC on' if crc else 'CRC off'})", projection,
               lambda: len(kbatch.read_segment(data, columns=cols, validate_crc=crc)),
               records, len(data))
    assert out == records
