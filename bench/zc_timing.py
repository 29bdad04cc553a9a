"""Focused timing of zero_copy against the copy mode, from a segment's path.

    python bench/zc_timing.py DATASET [ROUNDS]

Prints the median seconds of: read_segment(path) (copy), read_segment(path,
zero_copy=True), one CRC-32C pass over the file mapped from its path (the
floor; also over ``read()``'s copy), and aiokafka over the same bytes (in memory). One core, CRC on.
"""

import statistics
import sys
import time

import kbatch
from kbatch._core._checksums import crc32c_of
from kbatch.lib.segment import open_source

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from datasets import build  # noqa: E402


def median_time(fn, rounds):
    fn()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def crc_pass(path):
    """The file mapped from its path (pages faulted in) and CRC-32C'd once."""
    with open_source(path, populate=True) as (view, _):
        return crc32c_of(view)


def crc_read(path):
    """The same from ``open(path).read()``: a copy into memory, then the CRC."""
    with open(path, "rb") as f:
        return crc32c_of(f.read())


def main():
    name = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    path = str(build(name))
    skip_aio = "--no-aiokafka" in sys.argv
    rows = {
        "copy": lambda: len(kbatch.read_segment(path)),
        "zero_copy": lambda: len(kbatch.read_segment(path, zero_copy=True)),
        "crc pass": lambda: crc_pass(path),
        "crc read()": lambda: crc_read(path),
    }
    out = {k: median_time(f, rounds) for k, f in rows.items()}
    if not skip_aio:
        from peers import aiokafka_decode
        data = open(path, "rb").read()
        out["aiokafka"] = median_time(lambda: aiokafka_decode(data), 3)
    for k, v in out.items():
        extra = ""
        if "aiokafka" in out and k != "aiokafka":
            extra += f"  {out['aiokafka'] / v:5.1f}x aiokafka"
        if not k.startswith("crc"):
            extra += f"  {v / out['crc pass']:4.2f}x crc pass"
        print(f"{name:8s} {k:10s} {v:.4f} s{extra}")


if __name__ == "__main__":
    main()
