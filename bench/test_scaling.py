"""Thread scaling: threads 1, 2, 4, ... up to the core count, beside floors
at the same thread counts (issue 30, "Every core").

A log directory of its own (4 partitions of topic ``plain``, 4 of ``lz4``,
the same records, 2 segments each, ~16 MB a plain segment; read back from
disk once, so the page cache holds them as a copied log directory would).
Rows, each at every thread count:

- ``open_log_dir(...).read([topic], threads=N)``, plain and lz4;
- ``read_segment(path)`` of every segment of the topic on a pool of N
  threads, plain and lz4; ``read_segment(bytes)`` of the plain segments
  already in memory (the decoder without the mapping);
- floor ``numpy copy``: the plain topic's bytes, already in memory, copied
  in N pieces on N threads (memory bandwidth: no read can pass it);
- floor ``mapped CRC``: every plain file mapped and CRC-32C checked on N
  threads (what reading from the page cache costs: mapping, page faults,
  one pass over every byte);
- ``map, populate and unmap``: only the mapping work kbatch does for a
  read from a path (no byte read after), on N threads.

Besides the timed rounds, three runs per row at 1 thread (medians) record counters for
reasoning about machines with more cores than this one (``extra_info``):
minor page faults per MiB, and the share of the read during which a Python
thread that only ticks waited for the GIL (``counters``: CPU contention
taken out through the thread's schedstat), i.e. the share of a one-thread
read that holds the GIL. With GIL share ``g`` a read cannot pass ``1 / g`` times one thread's
speed however many cores it gets (Amdahl); ``bench/report.py`` prints that
bound beside the measured ratios.
"""

from __future__ import annotations

import mmap
import os
import resource
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from crc32c import crc32c          # releases the GIL on large buffers

import kbatch
from datasets import DATA_DIR, read_back_from_disk

ROOT = DATA_DIR / "scaling-v1"
PARTITIONS, SEGMENTS, PER_SEGMENT = 4, 2, 120_000
CORES = os.cpu_count() or 1
THREADS = sorted({1, CORES, *(2 ** k for k in range(1, 8) if 2 ** k <= CORES)})


def _build():
    if (ROOT / "done").exists():
        return
    from kbatch.lib.writer import LogWriter
    rng = np.random.default_rng(3)
    pool = [bytes(rng.integers(32, 127, 100, dtype=np.uint8)) for _ in range(1024)]
    n = PER_SEGMENT
    for p in range(PARTITIONS):
        for topic, codec in (("plain", "none"), ("lz4", "lz4")):
            with LogWriter(ROOT / f"{topic}-{p}", segment_bytes=14 << 20) as log:
                for s in range(SEGMENTS):
                    log.append({"key": [b"k%06d" % ((s * n + i) % 50_000) for i in range(n)],
                                "value": [pool[(s * n + i) % 1024] for i in range(n)],
                                "timestamp": 1_700_000_000_000 + s * n + np.arange(n)},
                               codec=codec)
    (ROOT / "done").write_text("ok")


@pytest.fixture(scope="module")
def logdir():
    _build()
    for segment in sorted(ROOT.glob("*/*.log")):
        read_back_from_disk(segment)
    d = kbatch.open_log_dir(ROOT)
    topics = {}
    for topic in ("plain", "lz4"):
        paths = [s.path for p in d.select([topic]) for s in p.segments]
        records = sum(len(r) for r in d.read([topic], threads=1).values())
        assert records == PARTITIONS * SEGMENTS * PER_SEGMENT, records
        topics[topic] = (paths, sum(os.path.getsize(p) for p in paths), records)
    return d, topics


def _on_threads(n: int, items, fn):
    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(fn, items))


def _mapped_crc(paths) -> int:
    total = 0
    for path in paths:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ) as mm:
            view = memoryview(mm)
            total ^= crc32c(view)
            view.release()
    return total


def _schedstat(tid: int) -> tuple[int, int]:
    """(ns on a CPU, ns runnable but waiting for one) of a thread."""
    with open(f"/proc/self/task/{tid}/schedstat") as f:
        on_cpu, waiting, _ = map(int, f.read().split())
    return on_cpu, waiting


def counters(fn) -> dict:
    """``fn`` run (on this thread) again and again for 0.3 s at least, with a
    thread beside it that only
    ticks (``os.sched_yield()`` in a loop: it lets the GIL go and asks for it
    again). Minor page faults of the run, and the share of the run the
    ticker waited for the GIL: its wall time less its time on a CPU and its
    time runnable but waiting for a CPU (``/proc/.../schedstat``), so a busy
    machine's CPU contention is not counted as GIL. Faults are per run."""
    done, started = threading.Event(), threading.Event()
    tid = []

    def tick():
        tid.append(threading.get_native_id())
        started.set()
        while not done.is_set():
            os.sched_yield()               # lets the GIL go, stays runnable

    ticker = threading.Thread(target=tick)
    ticker.start()
    started.wait()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    cpu0, wait0 = _schedstat(tid[0])
    start = time.perf_counter()
    runs = 0
    try:
        while not runs or time.perf_counter() - start < 0.3:   # long enough to average
            fn()
            runs += 1
    finally:
        wall = time.perf_counter() - start
        cpu1, wait1 = _schedstat(tid[0])
        done.set()
        ticker.join()
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / runs
    gil = max(0.0, wall - (cpu1 - cpu0) / 1e9 - (wait1 - wait0) / 1e9)
    return {"minor_faults": faults, "gil_share": gil / wall, "counter_wall_s": wall / runs}


def _bench(benchmark, row: str, threads: int, nbytes: int, fn, with_counters=True):
    benchmark.group = "scaling"
    benchmark.extra_info.update(label=row, threads=threads, bytes=nbytes, records=0)
    if with_counters and threads == 1:
        fn()                                   # warm, as the timed rounds are
        runs = [counters(fn) for _ in range(3)]
        c = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        c["faults_per_mib"] = c.pop("minor_faults") / (nbytes / 2 ** 20)
        benchmark.extra_info.update(c)
    benchmark.pedantic(fn, rounds=5, iterations=1, warmup_rounds=1)


@pytest.mark.parametrize("topic", ["plain", "lz4"])
@pytest.mark.parametrize("threads", THREADS, ids=lambda t: f"{t}-threads")
def test_scaling_log_dir(benchmark, logdir, threads, topic):
    d, topics = logdir
    _bench(benchmark, f"open_log_dir(...).read({topic}, threads=N)", threads,
           topics[topic][1], lambda: d.read([topic], threads=threads))


@pytest.mark.parametrize("topic", ["plain", "lz4"])
@pytest.mark.parametrize("threads", THREADS, ids=lambda t: f"{t}-threads")
def test_scaling_segment_paths(benchmark, logdir, threads, topic):
    _, topics = logdir
    paths = topics[topic][0]
    _bench(benchmark, f"read_segment(path) of each {topic} segment on N threads", threads,
           topics[topic][1], lambda: _on_threads(threads, paths, kbatch.read_segment))


@pytest.mark.parametrize("threads", THREADS, ids=lambda t: f"{t}-threads")
def test_scaling_segment_bytes(benchmark, logdir, threads):
    """The decoder alone: the plain segments' bytes already in memory."""
    _, topics = logdir
    paths, nbytes, records = topics["plain"]
    data = [open(p, "rb").read() for p in paths]
    _bench(benchmark, "read_segment(bytes) of each plain segment on N threads", threads,
           nbytes, lambda: _on_threads(threads, data, kbatch.read_segment))
    assert sum(map(len, _on_threads(threads, data, kbatch.read_segment))) == records


def _map_populate_unmap(paths) -> int:
    from kbatch._core._mapguard import populate
    advice = getattr(mmap, "MADV_POPULATE_READ", 22)
    done = 0
    for path in paths:
        with open(path, "rb") as f:
            mm = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
        view = memoryview(mm)
        done += populate(view, len(mm), advice)
        view.release()
        mm.close()
    return done


@pytest.mark.parametrize("threads", THREADS, ids=lambda t: f"{t}-threads")
def test_scaling_floor_mapping_only(benchmark, logdir, threads):
    """What reading from paths adds to the decoder: map, populate and unmap
    each plain file (kbatch's way, no byte read after), on N threads. Kernel
    page-table work under the process's one mmap lock (and a TLB flush on
    every CPU running one of its threads at each unmap): the row to watch on
    a many-core machine."""
    _, topics = logdir
    paths, nbytes, _ = topics["plain"]
    parts = [paths[i::threads] for i in range(threads)]
    _bench(benchmark, "floor: map, populate and unmap the plain files", threads, nbytes,
           lambda: _on_threads(threads, parts, _map_populate_unmap))
    assert sum(_on_threads(threads, parts, _map_populate_unmap)) == len(paths)


@pytest.mark.parametrize("threads", THREADS, ids=lambda t: f"{t}-threads")
def test_scaling_floor_mapped_crc(benchmark, logdir, threads):
    _, topics = logdir
    paths, nbytes, _ = topics["plain"]
    parts = [paths[i::threads] for i in range(threads)]
    want = _mapped_crc(paths)
    _bench(benchmark, "floor: mapped CRC-32C pass of the plain files", threads, nbytes,
           lambda: _on_threads(threads, parts, _mapped_crc))
    got = 0
    for x in _on_threads(threads, parts, _mapped_crc):
        got ^= x
    assert got == want


@pytest.mark.parametrize("threads", THREADS, ids=lambda t: f"{t}-threads")
def test_scaling_floor_copy(benchmark, logdir, threads):
    _, topics = logdir
    paths, nbytes, _ = topics["plain"]
    src = np.concatenate([np.fromfile(p, np.uint8) for p in paths])
    dst = np.zeros_like(src)
    step = -(-len(src) // threads)

    def piece(i):
        np.copyto(dst[i * step:(i + 1) * step], src[i * step:(i + 1) * step])

    _bench(benchmark, "floor: numpy copy of the plain bytes in memory", threads, nbytes,
           lambda: _on_threads(threads, range(threads), piece), with_counters=False)
    assert np.array_equal(src, dst)
