"""Parity: the same bytes give the same answer wherever they are.

Every layout of ``tests/parity_cases.py`` (healthy partitions in five codecs,
damage in the first, an inner and the last segment, lying and preallocated
index files, twin partition directories, odd names, empty partitions,
transactions, tiered buckets) is read from the local directory and from the
same bytes through ``memory://`` and through a local S3 server (moto), with
the same call. The local answer is the truth; a remote answer must equal
it: the records (offset, timestamp, timestamp type, key, value, headers),
the batch table (base_offset, last_offset, position, size, crc), the control
records, ``records.end``, ``records.skipped`` (the file compared by its last
path component), and for an error its type, its position/base_offset and its
message with the location replaced (``parity_cases.norm``). The command line
is compared by exit status and output with the location replaced.

Two things are compared in one test each, so that the other tests say what
differs in the data: how a read is cut into chunks (test_iter_chunks; the
other tests join the chunks) and the byte position in ``records.end`` of a
range read (test_range_read_ends; the other tests compare a range read's
``end`` by its reason).

Each test collects every difference it finds (``Parity``) and fails once,
listing them all: entry point, arguments, what the local read gave and what
the remote one gave.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytest.importorskip("fsspec")
pytest.importorskip("moto")
pytest.importorskip("s3fs")

from hypothesis import HealthCheck, Phase, given, settings, strategies as st  # noqa: E402

import kbatch  # noqa: E402

from . import parity_cases as pc  # noqa: E402
from .parity_cases import N, T0, norm  # noqa: E402
from .remote_s3 import BUCKET, S3  # noqa: E402

ROOT_DIR = Path(__file__).resolve().parent.parent
REMOTES = ("memory", "s3")
BATCH_COLUMNS = ("base_offset", "last_offset", "position", "size", "crc")
CONTROL_COLUMNS = ("offset", "timestamp", "producer_id", "producer_epoch", "type",
                   "coordinator_epoch")
MODES = ("raise", "stop", "skip")
DAMAGED = [f"{kind}.{where}-0" for kind in pc.DAMAGE_KINDS for where in pc.DAMAGE_WHERE]


# --- fixtures --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    """Every layout, written once for the module."""
    root = tmp_path_factory.mktemp("parity")
    pc.build_all(root)
    return root


@pytest.fixture(scope="module")
def s3():
    server = S3()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def s3_tree(s3, tree) -> pc.Site:
    """The tree under s3://BUCKET/parity (uploaded once)."""
    return pc.s3_site(s3, tree, "parity")


@pytest.fixture
def local(tree) -> pc.Site:
    return pc.local_site(tree)


@pytest.fixture(params=REMOTES)
def remote(request, tree):
    """The tree in memory:// (uploaded for this test, removed after it) or
    in the module's S3 bucket."""
    if request.param == "s3":
        yield request.getfixturevalue("s3_tree")
        return
    site = pc.memory_site(tree)
    try:
        yield site
    finally:
        pc.drop_memory(site)


# --- what is compared ----------------------------------------------------------------------

def seg_name(path) -> str | None:
    """A file's last path component (a tiered object's without its UUID)."""
    if path is None:
        return None
    name = str(path).rstrip("/").rsplit("/", 1)[-1]
    return pc._TIERED_OBJECT.sub(r"\1", name)


def error_summary(exc: BaseException, site: pc.Site) -> dict:
    out = {"exception": type(exc).__name__, "message": norm(str(exc), site)}
    if isinstance(exc, kbatch.CorruptRecordError):
        out.update(path=norm(exc.path, site), position=exc.position,
                   batch_position=exc.batch_position, base_offset=exc.base_offset)
    return out


def records_summary(rec, site: pc.Site, *, ranged: bool = False) -> dict:
    """What a read returned. ``ranged``: a read of an offset or timestamp
    range, whose ``end`` is compared by its reason only (where a range read
    stops decoding is compared apart: test_range_read_ends)."""
    end = rec.end
    if ranged:
        end = None if end is None else end.reason
    elif end is not None:
        end = (end.valid_bytes, end.trailing_bytes, end.reason)
    return {
        "records": len(rec),
        "offset": rec.offset.tolist(),
        "timestamp": rec.timestamp.tolist(),
        "timestamp_type": rec.timestamp_type.tolist(),
        "key": rec.key.to_pylist(),
        "value": rec.value.to_pylist(),
        "headers": rec.headers.to_pylist(),
        **{f"batches.{c}": rec.batches[c].tolist() for c in BATCH_COLUMNS},
        **{f"control.{c}": getattr(rec.control, c).tolist() for c in CONTROL_COLUMNS},
        "end": end,
        "skipped": [(seg_name(g.path), g.start, g.stop, g.reason, g.offset_before,
                     g.offset_after) for g in rec.skipped],
    }


def ranged(rec, site: pc.Site) -> dict:
    return records_summary(rec, site, ranged=True)


def _has_content(chunk) -> bool:
    return bool(len(chunk) or len(chunk.control.offset) or chunk.skipped)


def chunks_summary(chunks, site: pc.Site, *, exact: bool = False,
                   is_range: bool = False) -> dict:
    """Chunks joined; ``exact``: and the size of every chunk (how a read is
    cut into chunks is compared in test_iter_chunks only, so that the other
    tests say what differs in the data)."""
    whole = kbatch.Records.concat(chunks) if chunks else kbatch.Records.empty()
    sizes = [len(c) for c in chunks] if exact else None
    return {"chunks": sizes, **records_summary(whole, site, ranged=is_range)}


def iter_outcome(make_iter, site: pc.Site, *, exact: bool = False,
                 is_range: bool = False) -> dict:
    """What an iterator yields, and the error that ended it (if any). When
    it raised, what it yielded before depends on how the read is cut into
    chunks: only ``exact`` (test_iter_chunks) compares those chunks then."""
    chunks, error = [], None
    try:
        for chunk in make_iter():
            chunks.append(chunk)
    except Exception as exc:   # noqa: BLE001 - compared, not hidden
        error = error_summary(exc, site)
        if not exact:
            return {"raised": error}
    return {**chunks_summary(chunks, site, exact=exact, is_range=is_range), "raised": error}


def exact_iter(make_iter, site):
    return iter_outcome(make_iter, site, exact=True)


def exact_ranged_iter(make_iter, site):
    return iter_outcome(make_iter, site, exact=True, is_range=True)


def dir_summary(result: dict, site: pc.Site, *, is_range: bool = False) -> dict:
    return {f"{t}-{p}": records_summary(r, site, ranged=is_range)
            for (t, p), r in sorted(result.items())}


def dir_ranged(result: dict, site: pc.Site) -> dict:
    return dir_summary(result, site, is_range=True)


def dir_iter_summary(pairs, site: pc.Site) -> dict:
    by_key: dict = {}
    for key, chunk in pairs:
        by_key.setdefault(f"{key[0]}-{key[1]}", []).append(chunk)
    order = []
    for k, c in pairs:       # the partitions in the order they come
        name = f"{k[0]}-{k[1]}"
        if _has_content(c) and (not order or order[-1] != name):
            order.append(name)
    return {"order": order, **{k: chunks_summary(v, site) for k, v in sorted(by_key.items())}}


def verify_summary(report, site: pc.Site) -> dict:
    return {
        "ok": report.ok,
        "segments": [(norm(s.path, site), s.base_offset, s.size, s.ok, s.batches, s.records,
                      s.control_records, s.first_offset, s.last_offset, s.valid_bytes,
                      s.trailing_bytes, s.end_reason, [tuple(c) for c in s.crc_failures],
                      s.last_segment, norm(s.problems(), site)) for s in report.segments],
        "partition_problems": norm(list(report.partition_problems), site),
    }


def txn_summary(reports, site: pc.Site) -> list:
    return [(norm(r.source, site), [norm(dict(t.__dict__), site) for t in r.transactions],
             r.last_stable_offset, r.log_end_offset) for r in reports]


class Parity:
    """Runs one call against the local tree and against a remote copy,
    collecting every difference; ``check()`` fails with all of them."""

    def __init__(self, local: pc.Site, remote: pc.Site, note: str = ""):
        self.local, self.remote, self.note = local, remote, note
        self.diffs: list[str] = []
        self.compared = 0

    def outcome(self, fn, site, summarize):
        try:
            value = fn(site)
            return summarize(value, site) if summarize else norm(value, site)
        except Exception as exc:   # noqa: BLE001 - compared, not hidden
            return error_summary(exc, site)

    def same(self, label: str, fn, summarize=records_summary):
        """``fn(site)`` at both places; the local outcome is returned (for
        the test's own checks that the layout is what it claims)."""
        want = self.outcome(fn, self.local, summarize)
        got = self.outcome(fn, self.remote, summarize)
        self.compared += 1
        if want != got:
            self.diffs.append(f"{label}: {explain(want, got)}")
        return want

    def check(self):
        assert self.compared, "nothing compared"
        if self.diffs:
            pytest.fail(f"{len(self.diffs)} of {self.compared} calls differ "
                        f"({self.remote.name} vs local){self.note}:\n  "
                        + "\n  ".join(self.diffs), pytrace=False)


def short(value, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


# record columns that follow the offsets: when the offsets differ they are only named
_FOLLOWERS = ("timestamp", "timestamp_type", "key", "value", "headers")


def brief(value) -> str:
    """A summary in one short line (records: count, offsets, end, skipped)."""
    if isinstance(value, dict) and "records" in value and "offset" in value:
        off = value["offset"]
        span = f"{off[0]}..{off[-1]}" if off else "-"
        extra = "".join(f", {k}={short(value[k], 100)}" for k in ("chunks", "raised")
                        if value.get(k))
        return (f"<{value['records']} records, offsets {span}, end={value['end']!r}, "
                f"skipped={short(value['skipped'], 120)}{extra}>")
    if isinstance(value, dict) and "exception" in value:
        return short(value, 400)
    if isinstance(value, dict) and "table" in value:
        return f"<table of {value['rows']} rows>"
    if isinstance(value, dict) and "segments" in value and "ok" in value:
        return (f"<verify ok={value['ok']}, {len(value['segments'])} segments, "
                f"partition_problems={short(value['partition_problems'], 200)}>")
    return short(value, 300)


def explain(want, got) -> str:
    """The fields that differ: local value, then remote value."""
    if isinstance(want, dict) and isinstance(got, dict):
        if "exception" in want or "exception" in got:
            if "exception" in want and "exception" in got:
                keys = [k for k in want if want.get(k) != got.get(k)]
                return "; ".join(f"{k}: local={short(want.get(k), 300)} "
                                 f"remote={short(got.get(k), 300)}" for k in keys)
            return f"local={brief(want)} remote={brief(got)}"
        parts = []
        offsets_differ = want.get("offset") != got.get("offset")
        named = []
        for key in list(want) + [k for k in got if k not in want]:
            a, b = want.get(key, "<absent>"), got.get(key, "<absent>")
            if a == b:
                continue
            if offsets_differ and (key in _FOLLOWERS or key.startswith(("batches.",
                                                                          "control."))):
                named.append(key)
                continue
            if isinstance(a, dict) and "records" in a and not isinstance(b, dict):
                parts.append(f"{key}: local={brief(a)} remote={brief(b)}")
                continue
            if isinstance(a, list) and isinstance(b, list):
                i = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                parts.append(f"{key}: len local={len(a)} remote={len(b)}, first difference "
                             f"at [{i}]: local={short(a[i] if i < len(a) else '<none>', 120)} "
                             f"remote={short(b[i] if i < len(b) else '<none>', 120)}")
            elif isinstance(a, dict) and isinstance(b, dict):
                parts.append(f"{key}: {{{explain(a, b)}}}")
            else:
                parts.append(f"{key}: local={brief(a)} remote={brief(b)}")
        if named:
            parts.append("also differ: " + ", ".join(named))
        return "; ".join(parts)
    return f"local={brief(want)} remote={brief(got)}"


def log_of(site, rel, **kw):
    return kbatch.open_log(site.loc(rel), **site.kw, **kw)


# --- healthy partitions ------------------------------------------------------------------

RANGES = [(0, 1), (37, 180), (35, 36), (N - 3, N + 10), (N + 5, N + 9)]
TIMES = [(T0 + 37_500, T0 + 150_000), (T0 - 5, T0 + 1), (T0 + 230_000, None)]
STAMPS = (T0 - 1, T0 + 99_500, T0 + N * 1000)
INDEX = (None, True, False)      # None: each place's default


@pytest.mark.parametrize("part", sorted(pc.CODECS))
def test_healthy_partition_reads(local, remote, part):
    """open_log(x).read(): whole, offset ranges, timestamp ranges (Kafka's
    offsets-for-times and timestamp_mode="exact"), offset_for_timestamp and
    a projection, with the index files used, not used, or as each place
    defaults, give the same records and batches wherever the partition is,
    for every codec."""
    rel = f"healthy/{part}"
    p = Parity(local, remote)
    whole = p.same("read()", lambda s: log_of(s, rel).read())
    assert whole["records"] == N and len(set(whole["batches.base_offset"])) > 10
    full = part in ("orders-0", "pay.v1-events-2")     # the others: a smaller grid
    for use_index in INDEX if full else (None,):
        opt = {} if use_index is None else {"use_index": use_index}
        for lo, hi in RANGES if full else RANGES[1:2]:
            p.same(f"open_log(use_index={use_index}).read({lo}, {hi})",
                   lambda s: log_of(s, rel, **opt).read(lo, hi), ranged)
        for a, b in TIMES if full else TIMES[:1]:
            p.same(f"open_log(use_index={use_index}).read(start_timestamp={a}, "
                   f"end_timestamp={b})",
                   lambda s: log_of(s, rel, **opt).read(start_timestamp=a, end_timestamp=b),
                   ranged)
        for ts in STAMPS if full else STAMPS[1:2]:
            p.same(f"open_log(use_index={use_index}).offset_for_timestamp({ts})",
                   lambda s: log_of(s, rel, **opt).offset_for_timestamp(ts), None)
    p.same("read(start_timestamp=, end_timestamp=, timestamp_mode='exact')",
           lambda s: log_of(s, rel).read(start_timestamp=T0 + 20_000,
                                         end_timestamp=T0 + 90_000, timestamp_mode="exact"),
           ranged)
    p.same("read(columns=['offset', 'value'], zero_copy=True).value",
           lambda s: log_of(s, rel).read(columns=["offset", "value"], zero_copy=True)
           .value.to_pylist(), None)
    p.check()


def test_iter_chunks(local, remote):
    """open_log(x).iter(chunk_records=...) and iter_segment yield the same
    chunks, one for one (sizes, contents, the empty last one carrying the
    end), wherever the partition is."""
    p = Parity(local, remote)
    for part in ("orders-0", "pay.v1-events-2"):
        rel = f"healthy/{part}"
        got = p.same(f"{part}: iter(chunk_records=50)",
                     lambda s: (lambda: log_of(s, rel).iter(chunk_records=50)), exact_iter)
        assert got.get("records") == N and got["raised"] is None, got
        p.same(f"{part}: iter(20, 200, chunk_records=33)",
               lambda s: (lambda: log_of(s, rel).iter(20, 200, chunk_records=33)),
               exact_ranged_iter)
        name = pc.segments(Path(local.loc(rel)))[1].name
        p.same(f"{part}: iter_segment({name}, chunk_records=6)",
               lambda s: (lambda: kbatch.iter_segment(s.loc(f"{rel}/{name}"), chunk_records=6,
                                                      **s.kw)), exact_iter)
    p.same("txn/tx-0: iter(chunk_records=3, read_committed)",
           lambda s: (lambda: log_of(s, "txn/tx-0").iter(chunk_records=3,
                                                         isolation="read_committed")),
           exact_iter)
    p.check()


def test_range_read_ends(local, remote):
    """records.end of a range read (where its decode stopped: valid bytes,
    trailing bytes, reason) is the same wherever the partition is."""
    def full_end(rec, s):
        return {"end": None if rec.end is None else (rec.end.valid_bytes,
                                                     rec.end.trailing_bytes, rec.end.reason)}
    p = Parity(local, remote)
    for use_index in (True, False):
        for lo, hi in [(0, 1), (37, 180), (N - 3, N + 10)]:
            p.same(f"healthy/orders-0: open_log(use_index={use_index}).read({lo}, {hi}).end",
                   lambda s: log_of(s, "healthy/orders-0", use_index=use_index).read(lo, hi),
                   full_end)
            p.same(f"damaged/flip.inner-0: open_log(use_index={use_index}).read({lo}, {hi}, "
                   "on_corrupt='stop').end",
                   lambda s: log_of(s, "damaged/flip.inner-0", use_index=use_index).read(
                       lo, hi, on_corrupt="stop"), full_end)
    p.check()


def test_max_read_bytes_is_per_read(local, remote, tree):
    """max_read_bytes bounds a whole read, not each segment or range piece:
    a limit below the partition's decoded size (above any one segment's)
    raises LimitExceededError wherever the partition is; a larger one reads
    the same records."""
    rel = "healthy/orders-0"
    whole = kbatch.open_log(tree / rel).read()
    per_segment = max(kbatch.read_segment(s).nbytes for s in pc.segments(tree / rel))
    limit = whole.nbytes - 1
    assert limit > 2 * per_segment
    p = Parity(local, remote)
    for label, fn in [
            ("read(max_read_bytes=limit)", lambda s: log_of(s, rel).read(max_read_bytes=limit)),
            ("read(0, N, max_read_bytes=limit)",
             lambda s: log_of(s, rel).read(0, N, max_read_bytes=limit)),
            ("open_log(use_index=True).read(1, N, max_read_bytes=limit)",
             lambda s: log_of(s, rel, use_index=True).read(1, N, max_read_bytes=limit)),
            ("read(start_timestamp=T0+1, max_read_bytes=limit)",
             lambda s: log_of(s, rel).read(start_timestamp=T0 + 1, max_read_bytes=limit)),
            ("read(isolation='read_committed', max_read_bytes=limit)",
             lambda s: log_of(s, rel).read(isolation="read_committed", max_read_bytes=limit))]:
        want = p.same(label, fn, ranged)
        assert want.get("exception") == "LimitExceededError", (label, want)
    small = min(kbatch.open_log(tree / "healthy" / n).read().nbytes for n in pc.CODECS) - 1
    for threads in (1, 2):
        want = p.same(f"open_log_dir(healthy).read(threads={threads}, max_read_bytes=small)",
                      lambda s: kbatch.open_log_dir(s.loc("healthy"), **s.kw).read(
                          threads=threads, max_read_bytes=small), dir_summary)
        assert want.get("exception") == "LimitExceededError", want
    p.same("read(max_read_bytes=2 * size)",
           lambda s: log_of(s, rel).read(max_read_bytes=2 * whole.nbytes))
    p.check()


# --- damage ------------------------------------------------------------------------------

@pytest.mark.parametrize("part", DAMAGED)
def test_damaged_partition_reads(local, remote, part):
    """A partition damaged in its first, an inner or its last segment (a
    flipped bit, a cut, zero padding, a damaged length): read, range reads
    (index or walk), timestamp reads and iter in every on_corrupt mode raise
    the same error or return the same records, end and skipped ranges;
    verify and transactions report the same; read_segment and iter_segment
    of the damaged file read the same."""
    rel = f"damaged/{part}"
    p = Parity(local, remote)
    kind, where = part[:-2].split(".")
    for mode in MODES:
        want = p.same(f"read(on_corrupt={mode!r})",
                      lambda s: log_of(s, rel).read(on_corrupt=mode))
        if mode == "raise" and (kind, where) not in (("cut", "last"), ("zeros", "last")):
            assert "exception" in want, want              # the layout is damaged
        for use_index in (True, False):
            p.same(f"open_log(use_index={use_index}).read(20, 130, on_corrupt={mode!r})",
                   lambda s: log_of(s, rel, use_index=use_index).read(20, 130, on_corrupt=mode),
                   ranged)
        p.same(f"read(start_timestamp=T0+25s, end_timestamp=T0+120s, on_corrupt={mode!r})",
               lambda s: log_of(s, rel).read(start_timestamp=T0 + 25_000,
                                             end_timestamp=T0 + 120_000, on_corrupt=mode),
               ranged)
        p.same(f"iter(chunk_records=40, on_corrupt={mode!r})",
               lambda s: (lambda: log_of(s, rel).iter(chunk_records=40, on_corrupt=mode)),
               iter_outcome)
    segs = pc.segments(Path(local.loc(rel)))
    name = segs[{"first": 0, "inner": len(segs) // 2, "last": -1}[where]].name
    for mode in MODES:
        p.same(f"read_segment({name}, on_corrupt={mode!r})",
               lambda s: kbatch.read_segment(s.loc(f"{rel}/{name}"), on_corrupt=mode, **s.kw))
    p.same(f"iter_segment({name}, chunk_records=7, on_corrupt='skip')",
           lambda s: (lambda: kbatch.iter_segment(s.loc(f"{rel}/{name}"), chunk_records=7,
                                                  on_corrupt="skip", **s.kw)), iter_outcome)
    p.same("verify(partition)", lambda s: kbatch.verify(s.loc(rel), **s.kw), verify_summary)
    p.same(f"verify({name})", lambda s: kbatch.verify(s.loc(f"{rel}/{name}"), **s.kw),
           verify_summary)
    p.same("transactions(partition)", lambda s: kbatch.transactions(s.loc(rel), **s.kw),
           txn_summary)
    p.check()


@pytest.fixture(scope="module")
def base_partition(tmp_path_factory) -> dict[str, bytes]:
    """The files of one undamaged partition (5 segments), for Hypothesis to damage."""
    root = tmp_path_factory.mktemp("hyp-base")
    pc.write_partition(root / "h-0", pc.DAMAGED_N, seed=9)
    return {p.name: p.read_bytes() for p in sorted((root / "h-0").iterdir())}


def apply_damage(files: dict[str, bytes], damages) -> dict[str, bytes]:
    """``files`` with the drawn damage done to their segments."""
    files = dict(files)
    logs = sorted(n for n in files if n.endswith(".log"))
    for seg, kind, at, bit in damages:
        name = logs[seg]
        data = bytearray(files[name])
        if not data:
            continue
        pos = int(at * len(data))
        if kind == "flip":
            data[pos] ^= 1 << bit
        elif kind == "cut":
            del data[pos:]
        elif kind == "zeros":
            data += bytes(64 + 40 * bit)
        elif kind == "length":
            starts = pc.batch_starts(bytes(data))
            start = starts[min(bit, len(starts) - 1)]
            if start + 12 <= len(data):
                data[start + 8:start + 12] = (len(data) + 100 * bit).to_bytes(4, "big")
        else:
            data[pos:pos + 40] = bytes((pos * 7 + i * 13) & 0xFF for i in range(40))
        files[name] = bytes(data)
    return files


_HYP_DAMAGE = st.lists(st.tuples(st.integers(0, 4), st.sampled_from(["flip", "cut", "zeros",
                                                                      "length", "garbage"]),
                                 st.floats(0, 0.999), st.integers(0, 7)),
                       min_size=1, max_size=3)


def check_damage(where: str, files: dict[str, bytes], request, note: str) -> None:
    """Local vs ``where`` (memory or s3) on one damaged partition ``h-0``."""
    with tempfile.TemporaryDirectory() as tmp:
        part = Path(tmp) / "h-0"
        part.mkdir()
        for name, data in files.items():
            (part / name).write_bytes(data)
        local = pc.local_site(Path(tmp))
        if where == "memory":
            site = pc.memory_site(Path(tmp))
        else:
            s3 = request.getfixturevalue("s3")
            prefix = f"hyp-{uuid.uuid4().hex[:12]}"
            pc.put_s3(s3, {f"h-0/{n}": d for n, d in files.items()}, prefix)
            site = pc.Site("s3", f"s3://{BUCKET}/{prefix}",
                           {"storage_options": pc.s3_options(s3)},
                           (f"s3://{BUCKET}/{prefix}", f"{BUCKET}/{prefix}"))
        try:
            p = Parity(local, site, note)
            for mode in MODES:
                p.same(f"read(on_corrupt={mode!r})",
                       lambda s: log_of(s, "h-0").read(on_corrupt=mode))
            p.same("iter(chunk_records=25, on_corrupt='skip')",
                   lambda s: (lambda: log_of(s, "h-0").iter(chunk_records=25,
                                                            on_corrupt="skip")),
                   iter_outcome)
            p.same("verify", lambda s: kbatch.verify(s.loc("h-0"), **s.kw), verify_summary)
            p.check()
        finally:
            if where == "memory":
                pc.drop_memory(site)


_NO_SHRINK = dict(deadline=None, phases=[Phase.explicit, Phase.generate],
                  suppress_health_check=[HealthCheck.function_scoped_fixture,
                                         HealthCheck.too_slow])


@settings(max_examples=15, **_NO_SHRINK)
@given(damages=_HYP_DAMAGE)
def test_hypothesis_damage_memory(base_partition, request, damages):
    """Damage drawn by Hypothesis (bits flipped, segments cut, zeros
    appended, length fields and garbage written, in any segment): read in
    every on_corrupt mode, iter and verify give the same answer from a local
    directory and from memory://. (No shrinking: the first differing
    example is reported as drawn.)"""
    check_damage("memory", apply_damage(base_partition, damages), request,
                 f" with damages={damages}")


@settings(max_examples=5, **_NO_SHRINK)
@given(damages=_HYP_DAMAGE)
def test_hypothesis_damage_s3(base_partition, request, damages):
    """The same as test_hypothesis_damage_memory through s3:// (fewer
    examples: each uploads the partition)."""
    check_damage("s3", apply_damage(base_partition, damages), request,
                 f" with damages={damages}")


# --- lying index files -----------------------------------------------------------------

@pytest.mark.parametrize("part", [f"{name}-0" for name in pc.LYING])
def test_lying_index_files(local, remote, part):
    """Offset index entries at wrong positions, inside records, out of order
    or past the end; time index entries with wrong timestamps or offsets; a
    preallocated (zero-filled) active .index/.timeindex: ranged and
    timestamp reads (with and without the indexes), offset_for_timestamp
    and verify give the same answer wherever the partition is."""
    rel = f"lying/{part}"
    p = Parity(local, remote)
    whole = p.same("read()", lambda s: log_of(s, rel).read())
    assert whole.get("records") == N, whole
    for use_index in (True, False):
        opt = {"use_index": use_index}
        for lo, hi in [(1, 2), (37, 180), (N - 20, N + 3)]:
            p.same(f"open_log(use_index={use_index}).read({lo}, {hi})",
                   lambda s: log_of(s, rel, **opt).read(lo, hi), ranged)
        p.same(f"open_log(use_index={use_index}).read(start_timestamp=T0+37.5s, "
               "end_timestamp=T0+150s)",
               lambda s: log_of(s, rel, **opt).read(start_timestamp=T0 + 37_500,
                                                     end_timestamp=T0 + 150_000), ranged)
        for ts in (T0 + 37_500, T0 + 99_500, T0 + 150_500, T0 + 10_000_000):
            p.same(f"open_log(use_index={use_index}).offset_for_timestamp({ts})",
                   lambda s: log_of(s, rel, **opt).offset_for_timestamp(ts), None)
    report = p.same("verify(partition)", lambda s: kbatch.verify(s.loc(rel), **s.kw),
                    verify_summary)
    assert report.get("ok") is (part == "prealloc-0"), report   # the lies are found
    p.check()


# --- data directories ------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["healthy", "damaged", "lying", "odd", "empty", "txn"])
def test_log_dir_reads(local, remote, layout):
    """open_log_dir(x).read() on one and two threads, a range over every
    partition, and .iter() give the same partitions and records wherever the
    data directory is (damaged: in the stop and skip modes, and in the
    raise mode over a selection with one damaged partition)."""
    p = Parity(local, remote)
    modes = ("stop", "skip") if layout == "damaged" else ("raise",)
    for mode in modes:
        for threads in (2,) if mode == "stop" else (1, 2):
            want = p.same(f"open_log_dir({layout}).read(threads={threads}, on_corrupt={mode!r})",
                          lambda s: kbatch.open_log_dir(s.loc(layout), **s.kw).read(
                              threads=threads, on_corrupt=mode), dir_summary)
            assert "exception" not in want, want
        p.same(f"open_log_dir({layout}).read(None, 20, 130, on_corrupt={mode!r})",
               lambda s: kbatch.open_log_dir(s.loc(layout), **s.kw).read(
                   None, 20, 130, on_corrupt=mode), dir_ranged)
        p.same(f"open_log_dir({layout}).iter(chunk_records=64, on_corrupt={mode!r})",
               lambda s: list(kbatch.open_log_dir(s.loc(layout), **s.kw).iter(
                   chunk_records=64, on_corrupt=mode)), dir_iter_summary)
    if layout == "damaged":
        topics = ["cut.last", "flip.inner", "zeros.last"]
        for threads in (1, 2):
            want = p.same(f"open_log_dir(damaged).read({topics}, threads={threads})",
                          lambda s: kbatch.open_log_dir(s.loc(layout), **s.kw).read(
                              topics, threads=threads), dir_summary)
            assert want.get("exception") == "CorruptRecordError", want
    if layout == "odd":
        want = p.same("open_log_dir(odd).read() partitions",
                      lambda s: sorted(kbatch.open_log_dir(s.loc(layout), **s.kw).read()),
                      None)
        assert want == [("big", 0), ("my.topic-with-dashes", 3)], want
    p.same(f"open_log_dir({layout}).read('nope')",
           lambda s: kbatch.open_log_dir(s.loc(layout), **s.kw).read("nope"), dir_summary)
    p.check()


def test_twin_partition_directories_are_refused(local, remote):
    """t-1 and t-01 in one data directory name one partition twice: a read,
    verify and transactions of that directory refuse it with a PathError
    wherever it is, with the same message (location replaced), already when
    it is opened."""
    p = Parity(local, remote)
    for label, fn in [
            ("open_log_dir(twins).read()",
             lambda s: kbatch.open_log_dir(s.loc("twins"), **s.kw).read()),
            ("open_log_dir(twins)",
             lambda s: kbatch.open_log_dir(s.loc("twins"), **s.kw) and "opened"),
            ("list(open_log_dir(twins).iter())",
             lambda s: len(list(kbatch.open_log_dir(s.loc("twins"), **s.kw).iter()))),
            ("verify(twins)", lambda s: verify_summary(kbatch.verify(s.loc("twins"), **s.kw),
                                                       s)),
            ("transactions(twins)",
             lambda s: txn_summary(kbatch.transactions(s.loc("twins"), **s.kw), s))]:
        want = p.same(label, fn, None)
        assert isinstance(want, dict) and want.get("exception") == "PathError", (label, want)
    # each twin alone is a partition (partition 1 of t)
    for name in ("t-1", "t-01"):
        p.same(f"open_log(twins/{name}).read()", lambda s: log_of(s, f"twins/{name}").read())
        p.same(f"open_log(twins/{name}) topic/partition",
               lambda s: (log_of(s, f"twins/{name}").topic,
                          log_of(s, f"twins/{name}").partition), None)
    p.check()


def test_odd_names(local, remote):
    """A topic with dots and dashes, a directory named with a non-ASCII
    digit (t-١: not a partition directory) and a file named like a segment
    above int64 (not a segment): the same partitions, topic/partition
    numbers, records and verify reports wherever they are."""
    p = Parity(local, remote)
    for rel in ("odd/my.topic-with-dashes-3", f"odd/{pc.NON_ASCII_DIR}", "odd/big-0"):
        p.same(f"open_log({rel}) topic/partition",
               lambda s: (log_of(s, rel).topic, log_of(s, rel).partition), None)
        p.same(f"open_log({rel}).read()", lambda s: log_of(s, rel).read())
        p.same(f"open_log({rel}).read(5, 25)", lambda s: log_of(s, rel).read(5, 25), ranged)
        p.same(f"verify({rel})", lambda s: kbatch.verify(s.loc(rel), **s.kw), verify_summary)
    report = p.same("verify(odd)", lambda s: kbatch.verify(s.loc("odd"), **s.kw), verify_summary)
    assert any("not a segment name" in x for x in report.get("partition_problems", [])), report
    p.same(f"read_segment(odd/big-0/{pc.BIG_NAME})",
           lambda s: kbatch.read_segment(s.loc(f"odd/big-0/{pc.BIG_NAME}"), **s.kw))
    p.same("transactions(odd)", lambda s: kbatch.transactions(s.loc("odd"), **s.kw),
           txn_summary)
    p.check()


def test_empty_partition(local, remote):
    """A partition directory holding only an empty segment at base offset
    100: reads (whole, from 100, iter), verify, transactions and the data
    directory read give the same (empty) answer wherever it is."""
    p = Parity(local, remote)
    rel = "empty/e-0"
    want = p.same("open_log(e-0).read()", lambda s: log_of(s, rel).read())
    assert want.get("records") == 0, want
    p.same("open_log(e-0).read(100, 200)", lambda s: log_of(s, rel).read(100, 200), ranged)
    p.same("open_log(e-0).read(start_timestamp=T0)",
           lambda s: log_of(s, rel).read(start_timestamp=T0), ranged)
    p.same("open_log(e-0).iter()", lambda s: (lambda: log_of(s, rel).iter()), iter_outcome)
    p.same("open_log(e-0).read(isolation='read_committed')",
           lambda s: log_of(s, rel).read(isolation="read_committed"))
    p.same("open_log(e-0) topic/partition",
           lambda s: (log_of(s, rel).topic, log_of(s, rel).partition), None)
    p.same("read_segment(e-0/00000000000000000100.log)",
           lambda s: kbatch.read_segment(s.loc(f"{rel}/{pc.EMPTY_BASE:020d}.log"), **s.kw))
    p.same("verify(e-0)", lambda s: kbatch.verify(s.loc(rel), **s.kw), verify_summary)
    p.same("transactions(e-0)", lambda s: kbatch.transactions(s.loc(rel), **s.kw), txn_summary)
    p.check()


# --- transactions ----------------------------------------------------------------------

def test_read_committed(local, remote):
    """isolation="read_committed" (committed, aborted and open
    transactions across segments): read, ranges, iter, read_segment, the
    data directory read, the last stable offset and transactions() give
    the same answer wherever the partition is."""
    rel = "txn/tx-0"
    p = Parity(local, remote)
    rc = {"isolation": "read_committed"}

    def with_lso(rec, s, is_range=False):
        return {**records_summary(rec, s, ranged=is_range), "lso": rec.last_stable_offset}
    want = p.same("read(read_committed)", lambda s: log_of(s, rel).read(**rc), with_lso)
    assert b"txn1-0" not in want["value"] and b"txn0-0" in want["value"], want
    p.same("read(read_uncommitted, include_control=True)",
           lambda s: log_of(s, rel).read(include_control=True))
    for lo, hi in [(0, 10), (7, 40), (30, 1000)]:
        p.same(f"read({lo}, {hi}, read_committed)", lambda s: log_of(s, rel).read(lo, hi, **rc),
               lambda r, s: with_lso(r, s, True))
    p.same("iter(chunk_records=3, read_committed)",
           lambda s: (lambda: log_of(s, rel).iter(chunk_records=3, **rc)), iter_outcome)
    for name in [x.name for x in pc.segments(Path(local.loc(rel)))]:
        p.same(f"read_segment({name}, read_committed)",
               lambda s: kbatch.read_segment(s.loc(f"{rel}/{name}"), **rc, **s.kw), with_lso)
    p.same("open_log_dir(txn).read(read_committed)",
           lambda s: kbatch.open_log_dir(s.loc("txn"), **s.kw).read(**rc), dir_summary)
    reports = p.same("transactions(tx-0)", lambda s: kbatch.transactions(s.loc(rel), **s.kw),
                     txn_summary)
    assert any(t["status"] == "OPEN" for t in reports[0][1]), reports
    p.same("transactions(txn)", lambda s: kbatch.transactions(s.loc("txn"), **s.kw),
           txn_summary)
    first = pc.segments(Path(local.loc(rel)))[0].name
    p.same(f"transactions({first})",
           lambda s: kbatch.transactions(s.loc(f"{rel}/{first}"), **s.kw), txn_summary)
    p.check()


# --- single segments, verify and transactions of whole trees ------------------------------

def test_read_segment_and_iter_segment(local, remote):
    """kbatch.read_segment / iter_segment of one segment (every segment of a
    partition, in every codec; an index file that is not a segment) read
    the same wherever the file is."""
    p = Parity(local, remote)
    for part in sorted(pc.CODECS):
        rel = f"healthy/{part}"
        names = [x.name for x in pc.segments(Path(local.loc(rel)))]
        for name in (names[0], names[3], names[-1]):
            p.same(f"read_segment({part}/{name})",
                   lambda s: kbatch.read_segment(s.loc(f"{rel}/{name}"), **s.kw))
        p.same(f"iter_segment({part}/{names[1]}, chunk_records=6)",
               lambda s: (lambda: kbatch.iter_segment(s.loc(f"{rel}/{names[1]}"),
                                                      chunk_records=6, **s.kw)), iter_outcome)
    p.same("read_segment(orders-0/...0.index)",
           lambda s: kbatch.read_segment(s.loc("healthy/orders-0/00000000000000000000.index"),
                                         **s.kw))
    p.same("read_segment(missing.log)",
           lambda s: kbatch.read_segment(s.loc("healthy/orders-0/00000000000000099999.log"),
                                         **s.kw))
    p.check()


@pytest.mark.parametrize("layout", ["healthy", "damaged", "lying", "odd", "empty", "txn"])
def test_verify_and_transactions_of_trees(local, remote, layout):
    """kbatch.verify and kbatch.transactions of a data directory report the
    same segments, problems and transactions wherever it is."""
    p = Parity(local, remote)
    p.same(f"verify({layout})", lambda s: kbatch.verify(s.loc(layout), **s.kw), verify_summary)
    p.same(f"transactions({layout})", lambda s: kbatch.transactions(s.loc(layout), **s.kw),
           txn_summary)
    p.same(f"transactions({layout}, validate_crc=False)",
           lambda s: kbatch.transactions(s.loc(layout), validate_crc=False, **s.kw),
           txn_summary)
    p.check()


# --- the command line ------------------------------------------------------------------

def run_cli(*args) -> tuple[int, str, str]:
    env = dict(os.environ, COLUMNS="200")
    out = subprocess.run([sys.executable, "-m", "kbatch", *args], capture_output=True,
                         text=True, timeout=300, cwd=ROOT_DIR, env=env)
    return out.returncode, out.stdout, out.stderr


CLI_CASES = [
    ("verify", "healthy"), ("verify", "damaged/cut.inner-0"),
    ("verify", "lying/idx.inside-0", "--format", "json"),
    ("verify", "twins"), ("verify", "odd/big-0"),
    ("stats", "healthy", "--format", "json"),
    ("stats", "damaged/length.inner-0", "--on-corrupt", "skip"),
    ("txn", "txn/tx-0"),
    ("dump", "healthy/orders-1/00000000000000000000.timeindex"),
    ("dump", "damaged/flip.first-0/00000000000000000000.log"),
]


def test_command_line(local, s3_tree):
    """kbatch verify|stats|txn|dump of a path and of the same bytes in
    s3:// (--storage-option): the same exit status and the same output,
    the location replaced. (memory:// lives in one process only: a command
    cannot see it.)"""
    site = s3_tree
    p = Parity(local, site)

    def call(case, s):
        cmd, rel, *rest = case
        return run_cli(cmd, s.loc(rel), *rest, *s.cli)

    jobs = [(case, s) for case in CLI_CASES for s in (local, site)]
    with ThreadPoolExecutor(2) as pool:
        results = dict(zip([(c, s.name) for c, s in jobs],
                           pool.map(lambda job: call(*job), jobs)))
    for case in CLI_CASES:
        want = p.same("kbatch " + " ".join(case), lambda s: results[(case, s.name)],
                      lambda r, s: {"status": r[0], "stdout": norm(r[1], s),
                                    "stderr": norm(r[2], s)})
        assert "Traceback" not in want["stderr"], want
    p.check()


# --- tiered buckets ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def keys():
    from .tiered_encoder import rsa_pem_pair
    return rsa_pem_pair()


@pytest.fixture(scope="module")
def tiered(tree, keys) -> dict:
    """{variant: (objects, mapping)}: tiersrc/ encoded once per variant."""
    return {v: pc.tiered_bucket(tree / "tiersrc", v, keys[1] if v == "encrypted" else None)
            for v in pc.TIERED_VARIANTS}


@pytest.fixture(scope="module")
def s3_tiered(s3, tiered) -> dict:
    for variant, (objects, _) in tiered.items():
        # a prefix of its own: the S3 server (and its bucket) is the session's
        pc.put_s3(s3, objects, f"parity-tiered-{variant}")
    return tiered


def tiered_site(kind: str, variant: str, objects, mapping, keys, request) -> pc.Site:
    kw = {"layout": "tiered"}
    if variant == "encrypted":
        kw["private_key"] = keys[0]
    if kind == "s3":
        request.getfixturevalue("s3_tiered")
        base = f"s3://{BUCKET}/parity-tiered-{variant}"
        kw["storage_options"] = pc.s3_options(request.getfixturevalue("s3"))
        return pc.Site(f"s3-tiered-{variant}", base, kw, (base, base[5:]), mapping=mapping)
    import fsspec
    fs = fsspec.filesystem("memory")
    prefix = f"parity-{uuid.uuid4().hex[:10]}"
    for key, data in objects.items():
        fs.pipe_file(f"/{prefix}/{key}", data)
    base = f"memory://{prefix}"
    return pc.Site(f"memory-tiered-{variant}", base, kw,
                   (f"memory:///{prefix}", base, f"/{prefix}"), mapping=mapping)


@pytest.mark.parametrize("variant", pc.TIERED_VARIANTS)
@pytest.mark.parametrize("kind", REMOTES)
def test_tiered_bucket_reads_like_the_local_partition(local, tiered, keys, request, kind,
                                                      variant):
    """open_log(url, layout="tiered") of a partition uploaded by the
    tiered-storage plugin (plain, compressed, encrypted) reads as the local
    partition it was uploaded from: whole, ranges, timestamps, iter,
    read_committed, damaged segments in every on_corrupt mode, verify,
    transactions and the data directory read."""
    objects, mapping = tiered[variant]
    site = tiered_site(kind, variant, objects, mapping, keys, request)
    try:
        p = Parity(local, site)
        rel = "tiersrc/orders-1"
        want = p.same("orders-1: read()", lambda s: log_of(s, rel).read())
        assert want.get("records") == N, want
        for use_index in (True, False):
            for lo, hi in [(37, 180), (N - 3, N + 10)]:
                p.same(f"orders-1: open_log(use_index={use_index}).read({lo}, {hi})",
                       lambda s: log_of(s, rel, use_index=use_index).read(lo, hi), ranged)
        p.same("orders-1: read(start_timestamp=, end_timestamp=)",
               lambda s: log_of(s, rel).read(start_timestamp=T0 + 37_500,
                                             end_timestamp=T0 + 150_000), ranged)
        p.same("orders-1: iter(chunk_records=50)",
               lambda s: (lambda: log_of(s, rel).iter(chunk_records=50)), iter_outcome)
        p.same("orders-1: verify", lambda s: kbatch.verify(s.loc(rel), **s.kw), verify_summary)
        tx = "tiersrc/tx-0"
        p.same("tx-0: read(read_committed)",
               lambda s: log_of(s, tx).read(isolation="read_committed"))
        p.same("tx-0: transactions", lambda s: kbatch.transactions(s.loc(tx), **s.kw),
               txn_summary)
        for part, modes in (("flip.inner-0", MODES), ("cut.last-0", ("raise",))):
            for mode in modes:
                p.same(f"{part}: read(on_corrupt={mode!r})",
                       lambda s: log_of(s, f"tiersrc/{part}").read(on_corrupt=mode))
            p.same(f"{part}: verify", lambda s: kbatch.verify(s.loc(f"tiersrc/{part}"), **s.kw),
                   verify_summary)
        p.same("open_log_dir(tiersrc).read(on_corrupt='skip')",
               lambda s: kbatch.open_log_dir(s.loc("tiersrc"), **s.kw).read(on_corrupt="skip"),
               dir_summary)
        p.check()
    finally:
        if kind == "memory":
            pc.drop_memory(site)


# --- internal topics -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def internal_dir(tmp_path_factory) -> Path:
    """A small sample data directory (python -m kbatch sample) reduced to its
    __consumer_offsets partitions and one data partition, index files cut to
    their live entries (a copy, as uploaded)."""
    from .tiered_encoder import live_index
    root = tmp_path_factory.mktemp("internal") / "sample"
    code, out, err = run_cli("sample", str(root), "--records", "3000", "--segment-bytes", "16384")
    assert code == 0, err
    for child in list(root.iterdir()):
        if child.is_dir() and not (child.name.startswith("__consumer_offsets-")
                                   or child.name == "orders-0"):
            shutil.rmtree(child)
        elif child.is_file():
            child.unlink()
    for f in root.rglob("*"):
        if f.suffix in (".index", ".timeindex"):
            f.write_bytes(live_index(f.read_bytes(), 8 if f.suffix == ".index" else 12))
    assert any(root.glob("__consumer_offsets-*"))
    return root


@pytest.mark.parametrize("kind", REMOTES)
def test_offset_commits(internal_dir, request, kind):
    """kbatch.internal.offset_commits of a data directory holding
    __consumer_offsets (and of one of its partitions) gives the same table
    from a URL (storage_options=...) as from the path."""
    import kbatch.internal as ki
    local = pc.local_site(internal_dir)
    if kind == "memory":
        site = pc.memory_site(internal_dir)
    else:
        site = pc.s3_site(request.getfixturevalue("s3"), internal_dir, "internal")
    try:
        def table(t, s):
            data = t.to_pydict()
            if "file" in data:
                data["file"] = [seg_name(f) for f in data["file"]]
            return {"rows": t.num_rows, "table": norm(data, s)}
        p = Parity(local, site)
        want = p.same("offset_commits(data dir)",
                      lambda s: ki.offset_commits(s.loc(), **s.kw), table)
        assert want.get("rows", 0) > 10, want
        part = sorted(x.name for x in internal_dir.glob("__consumer_offsets-*"))[0]
        p.same(f"offset_commits({part})", lambda s: ki.offset_commits(s.loc(part), **s.kw),
               table)
        p.check()
    finally:
        if kind == "memory":
            pc.drop_memory(site)


# --- the bucket changes between two reads ----------------------------------------------

@pytest.mark.parametrize("kind", REMOTES)
def test_new_segments_and_partitions_are_seen(tmp_path, request, kind):
    """A partition grows by a segment and a new partition appears between
    two opens in one process: the second open_log / open_log_dir /
    read_segment / verify sees them (not the listing of the first), as a
    local directory does."""
    full = tmp_path / "full"
    pc.write_partition(full / "a-0", 120, seed=21)
    pc.write_partition(full / "b-0", 40, seed=22)
    segs = [x.name for x in pc.segments(full / "a-0")]
    later = {f"a-0/{segs[-1][:-4]}{ext}" for ext in (".log", ".index", ".timeindex")}
    files = pc.tree_files(full)
    first = {k: v for k, v in files.items() if k not in later and not k.startswith("b-0/")}
    second = {k: v for k, v in files.items() if k not in first}

    stage = tmp_path / "stage"
    for rel, data in first.items():
        (stage / rel).parent.mkdir(parents=True, exist_ok=True)
        (stage / rel).write_bytes(data)
    local = pc.local_site(stage)
    if kind == "memory":
        import fsspec
        fs = fsspec.filesystem("memory")
        site = pc.memory_site(stage)
        prefix = site.base[len("memory://"):]

        def add(rel, data):
            fs.pipe_file(f"/{prefix}/{rel}", data)
    else:
        s3 = request.getfixturevalue("s3")
        prefix = f"grow-{uuid.uuid4().hex[:10]}"
        pc.put_s3(s3, first, prefix)
        site = pc.Site("s3", f"s3://{BUCKET}/{prefix}", {"storage_options": pc.s3_options(s3)},
                       (f"s3://{BUCKET}/{prefix}", f"{BUCKET}/{prefix}"))

        def add(rel, data):
            # another writer (its own client) uploads: the reader's cache is not told
            s3.fs.pipe_file(f"{BUCKET}/{prefix}/{rel}", data)
    try:
        p = Parity(local, site)
        calls = [
            ("open_log_dir().read()",
             lambda s: kbatch.open_log_dir(s.loc(), **s.kw).read(), dir_summary),
            ("open_log(a-0).read()", lambda s: log_of(s, "a-0").read(), records_summary),
            ("open_log(a-0).read(100, 120)", lambda s: log_of(s, "a-0").read(100, 120),
             ranged),
            ("verify()", lambda s: kbatch.verify(s.loc(), **s.kw), verify_summary),
        ]
        before = {label: p.same(f"before: {label}", fn, summ) for label, fn, summ in calls}
        for rel, data in second.items():
            (stage / rel).parent.mkdir(parents=True, exist_ok=True)
            (stage / rel).write_bytes(data)
            add(rel, data)
        after = {label: p.same(f"after: {label}", fn, summ) for label, fn, summ in calls}
        assert after["open_log_dir().read()"] != before["open_log_dir().read()"]
        assert "b-0" in after["open_log_dir().read()"]
        assert after["open_log(a-0).read()"]["records"] == 120
        p.same(f"after: read_segment(a-0/{segs[-1]})",
               lambda s: kbatch.read_segment(s.loc(f"a-0/{segs[-1]}"), **s.kw))
        p.check()
    finally:
        if kind == "memory":
            pc.drop_memory(site)


# --- file:// -------------------------------------------------------------------------------

def test_file_url_reads_like_the_path(tree, local):
    """file:///abs/path names the same files as /abs/path: every entry point
    (open_log, open_log_dir, read_segment, iter_segment, verify,
    transactions, the command line) gives the same answer, damage and
    errors included."""
    site = pc.Site("file", f"file://{tree}", {}, (f"file://{tree}", str(tree)))
    p = Parity(local, site)
    p.same("open_log(healthy/orders-1).read()", lambda s: log_of(s, "healthy/orders-1").read())
    p.same("open_log(healthy/orders-1).read(37, 180)",
           lambda s: log_of(s, "healthy/orders-1").read(37, 180), ranged)
    p.same("open_log(healthy/orders-1).read(start_timestamp=)",
           lambda s: log_of(s, "healthy/orders-1").read(start_timestamp=T0 + 37_500), ranged)
    for part in ("flip.inner-0", "cut.first-0", "length.last-0", "zeros.inner-0"):
        for mode in MODES:
            p.same(f"open_log(damaged/{part}).read(on_corrupt={mode!r})",
                   lambda s: log_of(s, f"damaged/{part}").read(on_corrupt=mode))
    p.same("open_log_dir(healthy).read()",
           lambda s: kbatch.open_log_dir(s.loc("healthy"), **s.kw).read(), dir_summary)
    p.same("open_log_dir(twins).read()",
           lambda s: kbatch.open_log_dir(s.loc("twins"), **s.kw).read(), dir_summary)
    seg = "healthy/orders-1/00000000000000000000.log"
    p.same("read_segment", lambda s: kbatch.read_segment(s.loc(seg), **s.kw))
    p.same("iter_segment(chunk_records=9)",
           lambda s: (lambda: kbatch.iter_segment(s.loc(seg), chunk_records=9, **s.kw)),
           iter_outcome)
    p.same("verify(damaged)", lambda s: kbatch.verify(s.loc("damaged"), **s.kw), verify_summary)
    p.same("transactions(txn)", lambda s: kbatch.transactions(s.loc("txn"), **s.kw),
           txn_summary)
    p.same("open_log(txn/tx-0).read(read_committed)",
           lambda s: log_of(s, "txn/tx-0").read(isolation="read_committed"))
    for case in [("verify", "damaged/flip.inner-0"), ("stats", "healthy", "--format", "json"),
                 ("txn", "txn/tx-0")]:
        p.same("kbatch " + " ".join(case),
               lambda s: run_cli(case[0], s.loc(case[1]), *case[2:]),
               lambda r, s: {"status": r[0], "stdout": norm(r[1], s), "stderr": norm(r[2], s)})
    p.check()


# --- what a location names (the one-door API) -----------------------------------------------

RESOLVE_CASES = [
    ("segment", "healthy/orders-0/00000000000000000000.log"),
    ("partition", "healthy/orders-0"),
    ("partition with dots and dashes", "odd/my.topic-with-dashes-3"),
    ("directory named with a non-ASCII digit", f"odd/{pc.NON_ASCII_DIR}"),
    ("segment-like name above int64", f"odd/big-0/{pc.BIG_NAME}"),
    ("empty partition", "empty/e-0"),
    ("data dir", "healthy"),
    ("missing", "nothing/here"),
    ("empty directory", "emptydir"),
    ("twins", "twins"),
]


def test_resolve_classifies_a_url_as_the_path(local, remote):
    """kbatch.lib.open.resolve(target, storage=...) (the one door) says the
    same of a URL as of the path: kind, topic and partition, or the same
    PathError message (location replaced). An S3 prefix cannot be an empty
    directory: that case is left out there."""
    from kbatch.lib.open import resolve
    from kbatch.lib.paths import PathKind

    def classify(rel):
        def fn(s):
            found = resolve(s.loc(rel), **s.kw)
            return (found.kind, found.topic, found.partition)
        return fn

    p = Parity(local, remote)
    expected = {"segment": (PathKind.SEGMENT, "orders", 0),
                "partition": (PathKind.PARTITION, "orders", 0),
                "data dir": (PathKind.DATA_DIR, None, None)}
    for label, rel in RESOLVE_CASES:
        if label == "empty directory" and remote.name == "s3":
            continue
        want = p.same(f"resolve({rel})", classify(rel), None)
        if label in expected:
            assert want == expected[label], (label, want)
        if label in ("missing", "twins", "empty directory"):
            assert isinstance(want, dict) and want.get("exception") == "PathError", (label, want)
    p.check()


# --- Spark --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def spark():
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Java is not installed")
    from kbatch.spark import local_session
    session = local_session("kbatch-parity", cores="2", tests=True,
                            extra_conf={"spark.ui.showConsoleProgress": "false",
                                        "spark.python.authenticate.socketTimeout": "120s"})
    yield session
    session.stop()


def spark_storage(s3) -> dict:
    opts = pc.s3_options(s3)
    return {"storage.key": opts["key"], "storage.secret": opts["secret"],
            "storage.client_kwargs": json.dumps(opts["client_kwargs"])}


def spark_rows(df) -> list:
    rows = df.select("topic", "partition", "offset", "key", "value", "timestamp",
                     "timestampType", "headers").collect()
    return sorted((r["topic"], r["partition"], r["offset"],
                   None if r["key"] is None else bytes(r["key"]),
                   None if r["value"] is None else bytes(r["value"]), str(r["timestamp"]),
                   r["timestampType"],
                   [(h["key"], None if h["value"] is None else bytes(h["value"]))
                    for h in (r["headers"] or [])]) for r in rows)


def spark_error(exc: BaseException) -> dict:
    """A failed query in one line: the kbatch error it carries (the last
    ``kbatch.<...>Error: ...`` line of the Python traceback inside the JVM
    error), else the first line of the message."""
    text = str(exc).replace("\\n", "\n")      # JVM messages may carry escaped newlines
    lines = [ln.strip() for ln in text.splitlines()]
    python = [ln for ln in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception): ", ln)
              and not ln.startswith(("org.", "java.", "scala."))]
    ours = [ln for ln in python if ln.startswith("kbatch.")]
    line = (ours or python or lines or [type(exc).__name__])[-1 if ours or python else 0]
    name = line.split(":", 1)[0] if ours or python else type(exc).__name__
    return {"exception": name.rsplit(".", 1)[-1], "message": line[:400]}


def spark_outcome(load) -> dict:
    try:
        return {"rows": spark_rows(load())}
    except Exception as exc:   # noqa: BLE001 - a failed query is an answer too
        return spark_error(exc)


@pytest.mark.spark
def test_spark_batch(spark, s3_tree, local, s3):
    """spark.read.format("kbatch") of a path and of the same bytes in s3://:
    the same rows on a healthy data directory, and on a damaged one with
    onCorrupt=skip (failOnDataLoss true and false) the same rows or the
    same failure."""
    p = Parity(local, s3_tree)

    def reader(s, **options):
        r = spark.read.format("kbatch").option("includeHeaders", "true")
        if s.name == "s3":
            r = r.options(**spark_storage(s3))
        for k, v in options.items():
            r = r.option(k, v)
        return r

    def summ(outcome, s):
        return norm(outcome, s)
    want = p.same("load(healthy)",
                  lambda s: spark_outcome(lambda: reader(s).load(s.loc("healthy"))), summ)
    assert len(want.get("rows", [])) == N * len(pc.CODECS), want.get("exception")
    p.same("load(healthy) startingOffsets=37 endingOffsets",
           lambda s: spark_outcome(lambda: reader(
               s, startingOffsets="37",
               endingOffsets=json.dumps({"orders": {"0": 180, "1": 200}})).option(
               "subscribe", "orders").load(s.loc("healthy"))), summ)
    for fail in ("true", "false"):
        want = p.same(f"load(damaged) onCorrupt=skip failOnDataLoss={fail}",
                      lambda s: spark_outcome(lambda: reader(
                          s, onCorrupt="skip", failOnDataLoss=fail).load(s.loc("damaged"))),
                      summ)
        assert want.get("rows") or want.get("exception"), want
    p.check()


@pytest.mark.spark
def test_spark_stream_available_now(spark, s3_tree, local, s3, tmp_path):
    """spark.readStream.format("kbatch") with Trigger.AvailableNow on a path
    and on the same bytes in s3://: the same rows reach the sink."""
    p = Parity(local, s3_tree)

    def stream(s):
        r = (spark.readStream.format("kbatch").option("startingOffsets", "earliest")
             .option("includeHeaders", "true").option("maxOffsetsPerTrigger", "500"))
        if s.name == "s3":
            r = r.options(**spark_storage(s3))
        name = f"parity_{s.name}_{uuid.uuid4().hex[:6]}"
        q = (r.load(s.loc("healthy")).writeStream.format("memory").queryName(name)
             .option("checkpointLocation", str(tmp_path / name))
             .trigger(availableNow=True).start())
        try:
            q.awaitTermination(240)
        except Exception as exc:   # noqa: BLE001 - a failed query is an answer too
            return spark_error(exc)
        assert not q.isActive, "the AvailableNow query did not finish"
        if q.exception() is not None:
            return spark_error(q.exception())
        return {"rows": spark_rows(spark.table(name))}

    want = p.same("readStream(healthy) AvailableNow", stream, lambda v, s: norm(v, s))
    assert len(want.get("rows", [])) == N * len(pc.CODECS), want
    p.check()
