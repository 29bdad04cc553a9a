"""Where many-thread reads stop scaling: one script for a many-core machine
(issue 30, "Every core"), run outside pytest so that one short call on a
lent machine measures everything.

    python bench/scaling_probe.py --root /tmp/sd [--build] [--threads 1,2,4,8,16]
        [--json out.json]

``--build`` writes the data first, as ``../shared/scaling/scale.py`` does: 16
partitions (8 of topic ``plain``, 8 of ``lz4``, the same records), 4
segments of ~24 MB (plain) each, one process per partition. Then, at each
thread count, the median of 5 timed rounds (after one warm-up) of:

- ``logdir``: ``open_log_dir(root).read([topic], threads=N)``;
- ``path``: ``read_segment(path)`` of every segment on a pool of N threads;
- ``bytes``: ``read_segment(bytes)``, the segments already in memory (the
  decoder alone, no file access);
- ``mapped_kept``: ``read_segment(mapping)``, every file mapped and
  populated once beforehand (the decoder over page-cache pages, without
  mapping work per read);
- ``path_pread``: each file read with ``os.preadv`` into the thread's
  buffer, then ``read_segment`` of that buffer;
- ``logdir_pread``/``logdir_lz4_pread``: the log-dir read with every
  segment read so (``MappedFile.window`` replaced); ``logdir_nopop``: the
  log-dir read without populating mappings (pages fault in as read);
- ``bytes_switch``: ``bytes`` with the interpreter's switch interval at
  0.2 ms (5 ms by default: how long a thread that wants the GIL waits);
  ``bytes_procs``: ``bytes`` on N forked processes instead of N threads;
- ``path_map``/``logdir_map``: those reads always mapping
  (``kbatch.lib.copyread`` off);
- ``logdir2``/``logdir2_nocut``: the log-dir read of two plain partitions
  (cut into runs and joined when threads outnumber them; never cut);
- floors: a numpy copy of the plain bytes in N pieces on N threads;
  ``pread``: every plain file read with ``os.preadv`` into a buffer the
  thread keeps (page cache to memory: what a read that copies its input
  cannot beat); ``map``: every plain file mapped, populated
  (MADV_POPULATE_READ) and unmapped (kbatch's mapping work alone).

At the highest thread count each row also records, per round, the minor
page faults, the voluntary context switches (threads sleeping on a lock
or waiting for I/O) and the TLB shootdown interrupts the machine took
(``/proc/interrupts``), the counters that tell page-table work from
decoding.
"""

from __future__ import annotations

import argparse
import glob
import json
import mmap
import os
import resource
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

import kbatch
from kbatch.lib import copyread, segment, sources
from kbatch.lib import log as logmod

SEGMENTS, PARTITIONS = 4, 16
PER_SEGMENT = int(os.environ.get("SN", 200_000))


def build_partition(args) -> int:
    root, p = args
    from kbatch.lib.writer import LogWriter
    rng = np.random.default_rng(p)
    pool = [bytes(rng.integers(32, 127, 100, dtype=np.uint8)) for _ in range(1024)]
    topic, codec = ("lz4", "lz4") if p % 2 else ("plain", "none")
    n = PER_SEGMENT
    with LogWriter(f"{root}/{topic}-{p // 2}", segment_bytes=24 << 20) as log:
        for s in range(SEGMENTS):
            log.append({"key": [b"k%06d" % ((s * n + i) % 50_000) for i in range(n)],
                        "value": [pool[i % 1024] for i in range(n)],
                        "timestamp": 1_700_000_000_000 + np.arange(n)}, codec=codec)
    return p


def tlb_shootdowns() -> int:
    """Sum over CPUs of the TLB shootdown interrupts (x86 ``TLB`` row); -1
    where the kernel does not count them."""
    try:
        with open("/proc/interrupts") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name.strip() == "TLB":
                    return sum(int(x) for x in rest.split() if x.isdigit())
    except OSError:
        pass
    return -1


def median_time(fn, rounds: int = 5) -> float:
    fn()
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def counted(fn, rounds: int = 3) -> dict:
    """Per round: minor faults, voluntary context switches, TLB shootdowns."""
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), tlb_shootdowns()
    for _ in range(rounds):
        fn()
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), tlb_shootdowns()
    return {"minflt": (r1.ru_minflt - r0.ru_minflt) / rounds,
            "nvcsw": (r1.ru_nvcsw - r0.ru_nvcsw) / rounds,
            "tlb": (t1 - t0) / rounds if t0 >= 0 else -1}


_local = threading.local()


def thread_buffer(n: int) -> np.ndarray:
    """A buffer this thread keeps between reads (grown when too small)."""
    buf = getattr(_local, "buf", None)
    if buf is None or len(buf) < n:
        buf = _local.buf = np.empty(max(n, 1 << 20), np.uint8)
    return buf[:n]


def pread_into(path: str) -> np.ndarray:
    fd = os.open(path, os.O_RDONLY)
    try:
        n = os.fstat(fd).st_size
        buf = thread_buffer(n)
        got = 0
        while got < n:
            k = os.preadv(fd, [memoryview(buf)[got:]], got)
            if k <= 0:
                break
            got += k
        return buf[:got]
    finally:
        os.close(fd)


@contextmanager
def pread_window(self, start: int = 0, stop=None, *, populate: bool = False):
    """``MappedFile.window`` read with pread into the thread's buffer."""
    yield memoryview(pread_into(self.path))


_BLOBS: list = []


def _decode_share(indices) -> int:
    return sum(len(kbatch.read_segment(_BLOBS[i])) for i in indices)


class _Switch:
    """``sys.setswitchinterval`` as an attribute (a patch the probe applies)."""

    def __setattr__(self, name, value):
        import sys
        sys.setswitchinterval(value)

    def __getattr__(self, name):
        import sys
        return sys.getswitchinterval()


_Switch = _Switch()


def map_populate(mm) -> None:
    from kbatch._core._mapguard import populate
    view = memoryview(mm)
    populate(view, len(mm), getattr(mmap, "MADV_POPULATE_READ", 22))
    view.release()


def map_populate_unmap(path: str) -> int:
    with open(path, "rb") as f:
        mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    map_populate(mm)
    mm.close()
    return 1


def latest_probe(root: str, keys: int, threads: list[int]) -> None:
    """``read(view="latest")`` against a plain read of one changelog
    partition (2 M records of ``keys`` keys, values of 100 bytes, one in 20
    a tombstone, written by kbatch's writer): the view's kernel and take on
    N threads, and the paired speed ratio (plain read / table view)."""
    from kbatch.lib.latest import latest
    from kbatch.lib.writer import LogWriter
    path = f"{root}/changelog-{keys}/changelog-0"
    if not os.path.exists(path):
        rng = np.random.default_rng(5)
        with LogWriter(path, segment_bytes=64 << 20) as log:
            for part in range(4):
                n, base = 500_000, part * 500_000
                picks = rng.integers(0, keys, n)
                log.append({"key": [b"key-%08d" % k for k in picks.tolist()],
                            "value": [None if (base + i) % 20 == 0 else b"v" * 100 for i in range(n)],
                            "timestamp": 1_700_000_000_000 + base + np.arange(n)})
    log = kbatch.open_log(path)
    for th in threads:
        reads, views = [], []
        for _ in range(7):
            t0 = time.perf_counter()
            records = log.read()
            t1 = time.perf_counter()
            latest(records, warn=False, threads=th)
            t2 = time.perf_counter()
            reads.append(t1 - t0)
            views.append(t2 - t1)
            del records
        r, v = statistics.median(reads), statistics.median(views)
        print(f"latest {keys} keys threads={th:2d}: read {r * 1e3:6.1f} ms, view {v * 1e3:6.1f} ms, "
              f"ratio {r / (r + v):.2f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default="/tmp/scaledir")
    ap.add_argument("--build", action="store_true")
    ap.add_argument("--threads", default="")
    ap.add_argument("--rows", default="")
    ap.add_argument("--json", default="")
    ap.add_argument("--latest", default="", help="keys of the changelog (view='latest' probe)")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    threads = ([int(t) for t in args.threads.split(",")] if args.threads else
               sorted({1, cores, *(2 ** k for k in range(1, 8) if 2 ** k <= cores)}))
    if args.latest:
        for keys in args.latest.split(","):
            latest_probe(args.root, int(keys), threads)
        return
    if args.build and not glob.glob(f"{args.root}/plain-*/*.log"):
        from multiprocessing import Pool
        t = time.time()
        with Pool(min(PARTITIONS, cores)) as pool:
            pool.map(build_partition, [(args.root, p) for p in range(PARTITIONS)])
        print(f"built in {time.time() - t:.1f} s", flush=True)
    d = kbatch.open_log_dir(args.root)
    paths = {t: sorted(glob.glob(f"{args.root}/{t}-*/*.log")) for t in ("plain", "lz4")}
    nbytes = {t: sum(os.path.getsize(p) for p in ps) for t, ps in paths.items()}
    blobs = [open(p, "rb").read() for p in paths["plain"]]
    src = np.frombuffer(b"".join(blobs), np.uint8)
    dst = np.empty_like(src)
    records = sum(len(r) for r in d.read(["plain"], threads=1).values())
    print(f"plain {nbytes['plain'] / 1e6:.0f} MB in {len(paths['plain'])} segments, "
          f"lz4 {nbytes['lz4'] / 1e6:.0f} MB, {records} records each; cores {cores}",
          flush=True)

    def copy(th):
        step = -(-len(src) // th)
        def piece(i):
            np.copyto(dst[i * step:(i + 1) * step], src[i * step:(i + 1) * step])
        with ThreadPoolExecutor(th) as ex:
            list(ex.map(piece, range(th)))

    maps = []
    for p in paths["plain"]:
        with open(p, "rb") as f:
            maps.append(mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ))
        map_populate(maps[-1])
    rows = {
        "copy": ("plain", lambda th, ex: copy(th)),
        "pread": ("plain", lambda th, ex: list(ex.map(pread_into, paths["plain"]))),
        "map": ("plain", lambda th, ex: list(ex.map(map_populate_unmap, paths["plain"]))),
        "bytes": ("plain", lambda th, ex: list(ex.map(kbatch.read_segment, blobs))),
        "mapped_kept": ("plain", lambda th, ex: list(ex.map(kbatch.read_segment, maps))),
        "path": ("plain", lambda th, ex: list(ex.map(kbatch.read_segment, paths["plain"]))),
        "path_pread": ("plain", lambda th, ex: list(ex.map(
            lambda p: len(kbatch.read_segment(pread_into(p))), paths["plain"]))),
        "logdir": ("plain", lambda th, ex: d.read(["plain"], threads=th)),
        "logdir_lz4": ("lz4", lambda th, ex: d.read(["lz4"], threads=th)),
        "path_lz4": ("lz4", lambda th, ex: list(ex.map(kbatch.read_segment, paths["lz4"]))),
    }
    two = args.root.rstrip("/") + "-two"      # two plain partitions: cut into runs
    os.makedirs(two, exist_ok=True)
    for p in ("plain-0", "plain-1"):
        if not os.path.exists(f"{two}/{p}"):
            os.symlink(os.path.abspath(f"{args.root}/{p}"), f"{two}/{p}")
    d2 = kbatch.open_log_dir(two)
    nbytes["two"] = sum(os.path.getsize(p) for p in glob.glob(f"{two}/*/*.log"))
    rows["logdir2"] = rows["logdir2_nocut"] = ("two", lambda th, ex: d2.read(threads=th))
    rows["path_map"], rows["logdir_map"] = rows["path"], rows["logdir"]
    never = 1 << 40
    patches = {"logdir_pread": (sources.MappedFile, "window", pread_window),
               "bytes_switch": (_Switch, "interval", 0.0002),
               "path_map": (copyread, "COPY_FROM_READERS", never),
               "logdir_map": (copyread, "COPY_FROM_READERS", never),
               "logdir2_nocut": (logmod, "ENOUGH_RUNS", 1),
               "logdir_lz4_pread": (sources.MappedFile, "window", pread_window),
               "logdir_nopop": (segment, "_populate", lambda mm, n: None)}
    rows["logdir_pread"] = rows["logdir_nopop"] = rows["logdir"]
    rows["bytes_switch"] = rows["bytes"]
    procs = {}

    def in_processes(th, ex):
        """The decoder from memory on ``th`` forked processes (blobs shared
        by the fork): what threads would reach without sharing a process."""
        if th not in procs:
            import multiprocessing
            procs[th] = multiprocessing.get_context("fork").Pool(th)
        shares = [list(range(i, len(blobs), th)) for i in range(th)]
        return procs[th].map(_decode_share, shares)
    rows["bytes_procs"] = ("plain", in_processes)
    global _BLOBS
    _BLOBS = blobs
    rows["logdir_lz4_pread"] = rows["logdir_lz4"]
    wanted = args.rows.split(",") if args.rows else list(rows)
    results = {}
    for name in wanted:
        topic, fn = rows[name]
        if name in patches:
            owner, attr, value = patches[name]
            saved = getattr(owner, attr)
            setattr(owner, attr, value)
        try:
            measure(name, topic, fn, threads, nbytes, results)
        finally:
            if name in patches:
                setattr(owner, attr, saved)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": threads, "bytes": nbytes, "rows": results}, f, indent=1)


def measure(name, topic, fn, threads, nbytes, results) -> None:
    line = []
    for th in threads:
        with ThreadPoolExecutor(th) as ex:
            tm = median_time(lambda: fn(th, ex))
            entry = {"ms": tm * 1e3, "GBps": nbytes[topic] / tm / 1e9}
            if th == threads[-1]:
                entry.update(counted(lambda: fn(th, ex)))
        results.setdefault(name, {})[th] = entry
        base = results[name][threads[0]]["ms"]
        line.append(f"{th}:{tm * 1e3:.0f}ms/{base / (tm * 1e3):.2f}x/{entry['GBps']:.1f}GB/s")
    last = results[name][threads[-1]]
    print(f"{name:11s} " + " ".join(line) + f" | at {threads[-1]}: minflt {last['minflt']:.0f}"
          f" nvcsw {last['nvcsw']:.0f} tlb {last['tlb']:.0f}", flush=True)


if __name__ == "__main__":
    main()
