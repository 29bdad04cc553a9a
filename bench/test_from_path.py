"""From the path, as users read: every side starts from the segment file.

kbatch maps the file (``read_segment(path)``); aiokafka reads it into bytes
and decodes them; the floor is one CRC-32C pass over the file from its path
(read into memory, then crc32c; or mapped, then crc32c: the cheaper of the
two is the floor). CRC on, one core, warm page cache for every
side (each is run once before timing). Also: column projection
(``columns=[...]``) against the full decode, CRC on and off, beside the
floor of any projection that reads the records (CRC on: one CRC-32C pass
over the bytes; CRC off: one byte loaded from every 128, as a walk from
record to record over ~120-byte records must at least do).

The page cache is warm in one of two states, set up before each group,
because mapping a file costs what its cached pages make it cost:

- ``written in batches``: the file as a broker leaves it, appended batch by
  batch (16 KiB writes, so the kernel caches it in small folios: mapping
  600 MB costs about 20-40 ms of page-table work, and unmapping it more);
- ``read from disk``: the file dropped from the cache and read back once
  (a segment from a backup: Linux 6.x reads it into large folios, which a
  mapping takes 2 MiB at a time, so mapping costs almost nothing).

Every side is measured in both states; only mapping readers (kbatch, the
mapped CRC pass) can tell them apart.
"""

import mmap
import pathlib

import numpy as np
import pytest

import kbatch
from kbatch._core._checksums import crc32c_of
from kbatch.lib.records import RECORD_COLUMNS

from conftest import record_count, load
from datasets import dataset_path, read_back_from_disk
from peers import aiokafka_decode

ROUNDS = 5
ZERO_COPY_FLOOR = "floor: CRC-32C pass (mmap) + writing zero_copy's columns"


def _run(benchmark, group, label, fn, records, nbytes, rounds=ROUNDS):
    benchmark.group = group
    benchmark.extra_info.update(records=records, bytes=nbytes, dataset=group, label=label)
    return benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=1)


WRITE_BYTES = 16 * 1024
CACHE_STATES = ["written in batches", "read from disk"]


def _write_in_batches(src: pathlib.Path, dst: pathlib.Path) -> None:
    """``src`` copied to ``dst`` in WRITE_BYTES appends, as a broker writes."""
    with open(src, "rb", buffering=0) as f, open(dst, "wb", buffering=0) as out:
        while chunk := f.read(WRITE_BYTES):
            out.write(chunk)


@pytest.fixture(params=[(name, state) for name in ("small", "large")
                        for state in CACHE_STATES],
                ids=lambda p: f"{p[0]}, {p[1]}", scope="module")
def path_dataset(request):
    name, state = request.param
    path = dataset_path(name)
    records = record_count(load(name))
    columns = np.ones(_zero_copy_column_bytes(path), np.uint8)   # its pages mapped now
    if state == "written in batches":
        copy = path.with_name(f"{path.stem}.written.log")
        _write_in_batches(path, copy)
        yield f"{name}, {state}", str(copy), records, copy.stat().st_size, columns
        copy.unlink()
    else:
        read_back_from_disk(path)
        yield f"{name}, {state}", str(path), records, path.stat().st_size, columns


def _zero_copy_column_bytes(path) -> int:
    """Bytes a zero_copy read writes: the fixed columns, the 16-byte views
    and bitmaps of keys and values (not the bytes they point to), headers."""
    rec = kbatch.read_segment(path, zero_copy=True)
    total = sum(c.nbytes(getattr(rec, c.name)) for c in RECORD_COLUMNS
                if c.name not in ("key", "value"))
    for col in (rec.key, rec.value):
        total += col.views.nbytes + (col.validity.nbytes if col.validity is not None else 0)
    return total


SIDES = {
    "kbatch": lambda p, _: len(kbatch.read_segment(p)),
    "kbatch (zero_copy)": lambda p, _: len(kbatch.read_segment(p, zero_copy=True)),
    "aiokafka": lambda p, _: aiokafka_decode(open(p, "rb").read()),
    "one CRC-32C pass (read + crc32c)": lambda p, _: crc32c_of(open(p, "rb").read()),
    "one CRC-32C pass (mmap + crc32c)": lambda p, _: _mapped_crc(p),
    # what no zero-copy decode can go under: the file read once (CRC) and its
    # columns written once (memset over as many bytes, in pages already mapped)
    ZERO_COPY_FLOOR: lambda p, out: (_mapped_crc(p), out.fill(1)),
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
    name, path, records, nbytes, columns = path_dataset
    out = _run(benchmark, f"from path: {name}", side, lambda: SIDES[side](path, columns),
               records, nbytes, rounds=3 if side == "aiokafka" else ROUNDS)
    if side.startswith("kbatch") or side == "aiokafka":
        assert out == records


PROJECTIONS = {
    "every column": None,
    "offset, timestamp": ["offset", "timestamp"],
    "offset, timestamp, key": ["offset", "timestamp", "key"],
}


PROJECTION_FLOORS = {
    True: ("floor: one CRC-32C pass", lambda data: crc32c_of(data)),
    # records of this dataset are ~120 bytes: finding each one's framing
    # touches every pair of 64-byte lines (the CPU fetches lines in pairs)
    False: ("floor: one byte loaded from every 128",
            lambda data: int(np.frombuffer(data, np.uint8)[::128].max())),
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


@pytest.mark.parametrize("crc", [True, False], ids=["crc on", "crc off"])
def test_projection_floor(benchmark, crc):
    data = load("small")
    label, fn = PROJECTION_FLOORS[crc]
    _run(benchmark, f"projection ({'CRC on' if crc else 'CRC off'})", label,
         lambda: fn(data), record_count(data), len(data))
