"""Reads from object storage through a request-counting proxy in front of
a local S3 server (moto, tests/remote_s3.py): the same code as local reads
(the door, kbatch.lib.open), with the objects as byte sources.

    seek:  an offset read from the middle of a 1 GiB remote segment:
           GET requests and bytes (goal: <= 3 GETs, <= 16 MiB)
    scan:  a whole partition (4 x 64 MiB segments): bytes transferred over
           the objects' size (goal <= 1.02), and the scan's rate over the
           rate at which the same process merely downloads those objects
           with the same ranges and concurrency (goal >= 0.8); the same for a
           whole read(), which fetches each segment and decodes it as a mapping
    tiered: a bounded read [x, x + 1000) of a tiered segment (zstd chunks of
           64 KiB): the chunks fetched beside the chunks the planned byte
           range holds (goal: at most one more)

The 1 GiB segment is one ~16 KiB batch repeated with rising base offsets
(the CRC does not cover the base offset, so every copy is a valid batch)
and an offset index with one entry per batch, as a broker writes with its
4 KiB index interval. Figures go to bench/REMOTE.md.
"""

from __future__ import annotations

import os
import pathlib
import sys
import tempfile
import time

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

pytest.importorskip("moto")
pytest.importorskip("s3fs")

import kbatch  # noqa: E402
from kbatch.lib.objects import RangeSource  # noqa: E402
from tests.remote_s3 import BUCKET, S3  # noqa: E402
from tests.tiered_encoder import Encoder  # noqa: E402

RESULTS: dict[str, str] = {}


def one_batch(records: int = 100) -> bytes:
    rng = np.random.default_rng(3)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "b.log")
        kbatch.write_segment(path, [{"key": b"k%d" % i, "value": rng.bytes(160)}
                                    for i in range(records)], batch_records=records,
                             batch_bytes=1 << 20)
        return open(path, "rb").read()


def big_segment(directory: pathlib.Path, total: int, records: int = 100) -> int:
    """``total`` bytes of copies of one batch, and its offset index."""
    batch = bytearray(one_batch(records))
    size = len(batch)
    count = total // size
    directory.mkdir(parents=True, exist_ok=True)
    index = bytearray()
    with open(directory / f"{0:020d}.log", "wb") as fh:
        for i in range(count):
            batch[0:8] = (i * records).to_bytes(8, "big")
            fh.write(batch)
            index += ((i + 1) * records - 1).to_bytes(4, "big") + (i * size).to_bytes(4, "big")
    (directory / f"{0:020d}.index").write_bytes(bytes(index))
    return count * records


@pytest.fixture(scope="module")
def s3():
    server = S3()
    yield server
    server.stop()
    lines = ["# Reads from object storage (the one door: kbatch.lib.sources, kbatch.lib.tiered), through a request-counting proxy",
             "", "Local S3 server (moto) behind the proxy in tests/remote_s3.py; "
             "`make bench` (bench/test_remote.py).", "", "| figure | value |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in RESULTS.items()]
    (ROOT / "bench" / "REMOTE.md").write_text("\n".join(lines) + "\n")


@pytest.mark.benchmark(group="remote")
def test_remote_seek_1gib(s3, benchmark, tmp_path):
    n = big_segment(tmp_path / "big-0", 1 << 30)
    s3.fs.put(str(tmp_path / "big-0"), f"{BUCKET}/big/", recursive=True)
    s3.fs.invalidate_cache()
    obj = s3.fs.size(f"{BUCKET}/big/big-0/{0:020d}.log")
    remote = kbatch.open_log(f"s3://{BUCKET}/big/big-0", storage_options=s3.options())
    remote.segments
    target = n // 2 + 37
    s3.proxy.reset()

    def seek():
        return remote.read(target, target + 1000)
    got = benchmark.pedantic(seek, rounds=1, iterations=1)
    assert list(got.offset[:3]) == [target, target + 1, target + 2] and len(got) == 1000
    gets, moved = s3.proxy.gets, s3.proxy.get_bytes
    RESULTS["seek: object size"] = f"{obj / 2**20:.0f} MiB"
    RESULTS["seek: GET requests (goal <= 3)"] = str(gets)
    RESULTS["seek: bytes transferred (goal <= 16 MiB)"] = f"{moved / 2**20:.2f} MiB"
    benchmark.extra_info.update(records=1000, bytes=moved, gets=gets)
    assert gets <= 3 and moved <= 16 << 20


@pytest.mark.benchmark(group="remote")
def test_remote_scan_vs_download(s3, benchmark, tmp_path):
    part = tmp_path / "scan-0"
    records = 0
    for k in range(4):
        d = tmp_path / f"tmp{k}"
        records += big_segment(d, 64 << 20)
        base = k * (records // (k + 1))
        log = (d / f"{0:020d}.log").read_bytes()
        # rebase the copies: each segment continues the offsets
        data = bytearray(log)
        size = len(one_batch())
        for i in range(len(data) // size):
            off = int.from_bytes(data[i * size:i * size + 8], "big") + base
            data[i * size:i * size + 8] = off.to_bytes(8, "big")
        part.mkdir(exist_ok=True)
        (part / f"{base:020d}.log").write_bytes(bytes(data))
    s3.fs.put(str(part), f"{BUCKET}/scan/", recursive=True)
    s3.fs.invalidate_cache()
    remote = kbatch.open_log(f"s3://{BUCKET}/scan/scan-0", storage_options=s3.options())
    objects = sum(s.source.size for s in remote.segments)

    def download():
        for seg in remote.segments:
            src = seg.source.raw
            for _, data in src.blocks(0, src.size):
                del data
    t = time.perf_counter()
    download()
    t_download = time.perf_counter() - t
    s3.proxy.reset()
    t = time.perf_counter()
    got = benchmark.pedantic(lambda: sum(len(c) for c in remote.iter()), rounds=1,
                             iterations=1)
    t_scan = time.perf_counter() - t
    moved = s3.proxy.get_bytes
    assert got == records
    RESULTS["scan: objects"] = f"4 segments, {objects / 2**20:.0f} MiB, {records} records"
    RESULTS["scan: bytes transferred / object bytes (goal <= 1.02)"] = f"{moved / objects:.4f}"
    RESULTS["scan: download only"] = f"{objects / 2**20 / t_download:.0f} MiB/s"
    RESULTS["scan: decode scan"] = f"{objects / 2**20 / t_scan:.0f} MiB/s"
    RESULTS["scan: scan rate / download rate (goal >= 0.8)"] = f"{t_download / t_scan:.2f}"
    t = time.perf_counter()
    whole = len(remote.read())
    t_read = time.perf_counter() - t
    assert whole == records
    RESULTS["read(): whole partition"] = f"{objects / 2**20 / t_read:.0f} MiB/s"
    RESULTS["read(): rate / download rate"] = f"{t_download / t_read:.2f}"
    benchmark.extra_info.update(records=records, bytes=moved)
    assert moved <= 1.02 * objects


def _chunks_in(ranges, transformed) -> set:
    """The stored chunks the ranged GETs ``ranges`` ("bytes=a-b") touched."""
    touched = set()
    for rng in ranges:
        a, b = (int(x) for x in rng.split("=")[1].split("-"))
        first = int(np.searchsorted(transformed, a, side="right")) - 1
        last = int(np.searchsorted(transformed, b, side="right")) - 1
        touched.update(range(first, last + 1))
    return touched


@pytest.mark.benchmark(group="remote")
def test_remote_tiered_bounded_read_chunks(s3, benchmark, tmp_path):
    n = big_segment(tmp_path / "tier-0", 64 << 20)
    log = (tmp_path / "tier-0" / f"{0:020d}.log").read_bytes()
    index = (tmp_path / "tier-0" / f"{0:020d}.index").read_bytes()
    objects = Encoder("compressed", chunk_size=64 << 10).encode_segment(
        log, index, b"", None, topic="tier", topic_id="AAAAAAAAAAAAAAAAAAAAAA", partition=0,
        start_offset=0, end_offset=n - 1)
    for key, data in objects.items():
        s3.fs.pipe(f"{BUCKET}/tiered/{key}", data)
    s3.fs.invalidate_cache()
    url = f"s3://{BUCKET}/tiered/tier-AAAAAAAAAAAAAAAAAAAAAA/0"
    planned = kbatch.open_log(url, layout="tiered", storage_options=s3.options())
    seg = planned.segments[0]
    transformed = seg.manifest.chunks.transformed
    target = n // 2 + 37
    [plan] = planned.plan(target, target + 1000)
    needed = seg.manifest.chunks.chunks_for(plan.start, plan.stop)
    # the read on its own (a fresh open: nothing fetched by the planning above is reused)
    remote = kbatch.open_log(url, layout="tiered", storage_options=s3.options())
    s3.proxy.reset()
    got = benchmark.pedantic(lambda: remote.read(target, target + 1000), rounds=1,
                             iterations=1)
    assert got.offset.tolist() == list(range(target, target + 1000))
    ranges = [r for m, path, r in s3.proxy.log
              if m == "GET" and path.split("?")[0].endswith(".log")]
    fetched = _chunks_in(ranges, transformed)
    RESULTS["tiered: chunks of the segment"] = str(len(transformed) - 1)
    RESULTS["tiered bounded read: chunks the planned range holds"] = str(len(needed))
    RESULTS["tiered bounded read: chunks fetched (goal: needed + at most 1)"] = \
        f"{len(fetched)} in {len(ranges)} GETs"
    benchmark.extra_info.update(chunks_needed=len(needed), chunks_fetched=len(fetched))
    assert len(fetched) <= len(needed) + 1
