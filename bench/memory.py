"""Memory of a streaming read: ``python bench/memory.py [--gib 1]``.

Builds (once) a segment of about ``--gib`` GiB under bench/.data with kbatch's
writer, then streams it with ``kbatch.iter_segment`` in a fresh process and
reports the largest growth of anonymous memory (RssAnon, sampled after every
chunk: what the process owns beyond the file's page cache), the chunk count
and the time. Prints a markdown line for the README.
"""

import argparse
import pathlib
import subprocess
import sys
import textwrap

DATA = pathlib.Path(__file__).resolve().parent / ".data"

CHILD = """
import time, kbatch
def anon():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
base = anon(); peak = 0; n = chunks = 0
start = time.perf_counter()
for chunk in kbatch.iter_segment({path!r}):
    n += len(chunk); chunks += 1
    peak = max(peak, anon() - base)
    del chunk
print(n, chunks, peak, time.perf_counter() - start)
"""


def build(gib: float) -> pathlib.Path:
    import numpy as np
    from kbatch.lib.writer import write_segment
    path = DATA / f"stream-{gib:g}g.log"
    if path.exists():
        return path
    DATA.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(11)
    pool = [bytes(rng.integers(32, 127, 100, dtype=np.uint8)) for _ in range(4096)]
    target = int(gib * (1 << 30))
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        base = 0
        while f.tell() < target:
            n = 500_000
            write_segment(f, {"key": [b"key-%07d" % ((base + i) % 100_000) for i in range(n)],
                              "value": [pool[(base + i) % 4096] for i in range(n)],
                              "headers": [[("trace", b"%08d" % i)] if i % 2 else []
                                          for i in range(n)]},
                          base_offset=base, codec="none")
            base += n
    tmp.rename(path)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    args = ap.parse_args()
    path = build(args.gib)
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD.format(path=str(path)))],
                         capture_output=True, text=True, check=True).stdout.split()
    n, chunks, peak, took = int(out[0]), int(out[1]), int(out[2]), float(out[3])
    size = path.stat().st_size
    print(f"| streaming read of a {size / (1 << 30):.2f} GiB segment | {n} records in "
          f"{chunks} chunks | peak anonymous memory +{peak / (1 << 20):.0f} MiB | "
          f"{took:.2f} s |")


if __name__ == "__main__":
    main()
