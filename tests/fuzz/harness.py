"""Coverage-guided fuzzing of kbatch with atheris.

The promise under test: whatever the bytes, a call returns a result or
raises ``kbatch.CorruptRecordError`` (``LimitExceededError`` and
``DecompressionLimitError`` are subclasses) -- never another exception, a
crash, a hang or unbounded memory. Every execution calls kbatch; any other
exception escapes and libFuzzer saves the input as ``crash-*``. Hangs and
memory are bounded by libFuzzer's ``-timeout`` and ``-rss_limit_mb``.

Entry points (``TARGETS``):

    segment       read_segment on the raw bytes with CRC checks off, then on
                  the same bytes with every batch's CRC-32C (and legacy
                  CRC-32) recomputed, so mutations reach the record parser;
                  options (strict, on_corrupt, include_control, isolation,
                  max_decompressed_bytes) come from the last input byte
    chunked       iter_segment with chunk sizes (and options) drawn from the
                  last input bytes; the concatenated chunks must equal
                  read_segment exactly (both results, or the same error)
    legacy        magic 0/1 message sets: CRC-32 fixed for top-level
                  messages and, for compressed wrappers that decompress, for
                  the inner messages too (the value is recompressed)
    index         the bytes as .index/.timeindex/.txnindex (OffsetIndex,
                  TimeIndex, TxnIndex and their lookups), and as the index
                  files of a fixed partition log: log.read(start, end) must
                  equal the full read filtered to [start, end) ("exact
                  whatever the index holds", kbatch/log.py)
    control       kbatch.lib.control.parse_control_value(type, key, value)
    differential  kbatch against kafka-python (tests/kafka_ref.py) on the
                  inputs both accept: offsets, timestamps, timestamp types,
                  keys, values, headers, control records, batch count and
                  valid bytes must agree (int64 wrap-around normalised;
                  kafka-python's own leniencies classified, see
                  ``_known_reference_difference``)

Results are also checked for internal consistency (Arrow layouts, batch
indices, ``end``): an inconsistent result is a finding.

Command line (prints the number of executions, exec/s and coverage)::

    python -m tests.fuzz.harness TARGET [--seconds N] [--runs N]
        [--corpus-dir DIR] [--artifacts DIR] [--no-seeds] [--strict-known]
        [--keep-going] [libFuzzer args]

The fuzzer runs in a child process; ``--keep-going`` restarts it on the same
corpus after a crash until ``--seconds``/``--runs`` are used up. Findings
that are understood but not fixed yet (``KNOWN_FINDINGS``, empty today)
are counted and skipped unless
``--strict-known``. atheris 3.0 leaks the result of traced comparisons that
are not bools (numpy arrays): ``_guard_trace_cmp`` works around it.

With the normal gcc build only Python code is instrumented
(``atheris.instrument_imports``); an extension built with clang and
``-fsanitize=fuzzer-no-link`` adds C coverage (see README.md). Without
``--corpus-dir`` new inputs go to a fresh temporary directory. Seeds (every
segment of ../shared/corpus, batch-aligned windows of the large ones, and
segments generated with tests/kafka_ref.py) are built once into a cache
directory and passed as a read-only corpus. A file argument instead of a
corpus runs just that input (reproduce a crash). ``run_one(target, data)``
runs one input without atheris (regression tests).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import pathlib
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = pathlib.Path(os.environ.get("KBATCH_FUZZ_CORPUS", ROOT.parent / "shared" / "corpus"))
TARGET_NAMES = ("segment", "chunked", "legacy", "index", "control", "differential")
DEFAULT_MAX_LEN = {"control": 4096}
SEED_WINDOW = 32 << 10          # big corpus files become batch-aligned windows of this size
CHILD_ENV = "KBATCH_FUZZ_CHILD"

INT64 = 1 << 64


class FuzzFinding(AssertionError):
    """kbatch broke a property the harness checks (not just 'it raised')."""


# --- lazily loaded modules -----------------------------------------------------
#
# Nothing of kbatch is imported at module level: the fuzzing child imports it
# inside atheris.instrument_imports(), run_one() imports it plainly.

class _Modules:
    pass


_K = None


def _load(instrument: bool = False, reference: bool = False,
          trace_reference: bool = False) -> _Modules:
    global _K
    if _K is not None and (not reference or hasattr(_K, "kafka_ref")):
        return _K
    # third-party dependencies first, uninstrumented (only kbatch is traced)
    import crc32c  # noqa: F401
    import lz4.frame  # noqa: F401
    import numpy  # noqa: F401
    import snappy  # noqa: F401
    import zstandard  # noqa: F401
    ctx = contextlib.nullcontext()
    if instrument:
        import atheris
        include = ["kbatch"] + (["kafka"] if trace_reference else [])
        ctx = atheris.instrument_imports(include=include)
    with ctx:
        import kbatch
        import kbatch.lib.compression
        import kbatch.lib.control
        import kbatch.lib.decoder
        import kbatch.lib.index
        import kbatch.lib.log
        import kbatch.lib.records
        import kbatch.lib.segment
        import kbatch.lib.tree
        if reference:
            import kafka.codec  # noqa: F401
            import kafka.record.default_records  # noqa: F401
            import kafka.record.legacy_records  # noqa: F401
            import kafka.record.memory_records  # noqa: F401
    if instrument:
        _guard_trace_cmp()
    m = _K if _K is not None else _Modules()
    m.np = numpy
    m.kbatch = kbatch
    m.compression = kbatch.lib.compression
    m.control = kbatch.lib.control
    m.index = kbatch.lib.index
    m.log = kbatch.lib.log
    m.tree = kbatch.lib.tree
    m.decoder = kbatch.lib.decoder
    m.segment_mod = kbatch.lib.segment
    m.Records = kbatch.lib.records.Records
    m.SegmentEnd = kbatch.lib.records.SegmentEnd
    m.Corrupt = kbatch.CorruptRecordError
    m.DEFAULT_LIMIT = kbatch.lib.compression.DEFAULT_MAX_DECOMPRESSED_BYTES
    if reference:
        from tests import kafka_ref
        m.kafka_ref = kafka_ref
    _K = m
    return m


def _guard_trace_cmp() -> None:
    """Work around an atheris 3.0 leak: its native ``_trace_cmp`` leaks the
    result of every traced comparison that is not a bool (a numpy array from
    ``a < b``: ~1 KB per call in kbatch's numpy code, gigabytes per million
    executions, and then a false OOM). Comparisons of plain scalars, text and
    bytes still go to atheris (they feed libFuzzer's CMP dictionary); others
    are evaluated here. The instrumented bytecode looks ``_trace_cmp`` up on
    the module at every call, so replacing the attribute is enough; it must
    be done again once fuzzing runs (Setup and Fuzz install their own): the
    entry point checks at every execution. Python
    3.11's opcode layout (CMP_OP_SHIFT_AMOUNT 0) only: elsewhere left alone."""
    import dis
    import operator
    import atheris
    from atheris import version_dependent
    native = atheris._trace_cmp
    if getattr(native, "kbatch_guarded", False):
        return
    if getattr(version_dependent, "CMP_OP_SHIFT_AMOUNT", 0) != 0:
        return
    ops = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne,
           ">": operator.gt, ">=": operator.ge}
    table = [ops.get(name) for name in dis.cmp_op]
    plain = {int, float, str, bytes, bytearray, bool, type(None)}   # exact types:
    # numpy scalars subclass float/int and compare to numpy bools (leaked too)

    def trace_cmp(obj1, obj2, opid, counter, is_const):
        if type(obj1) in plain and type(obj2) in plain:
            return native(obj1, obj2, opid, counter, is_const)
        return table[opid](obj1, obj2)

    trace_cmp.kbatch_guarded = True
    atheris._trace_cmp = trace_cmp


# --- byte-level helpers ----------------------------------------------------------

def _be32s(buf, pos: int) -> int:
    return int.from_bytes(buf[pos:pos + 4], "big", signed=True)


def walk_entries(buf):
    """``(start, end, magic)`` of every whole top-level batch/message, walking
    the length fields as kbatch does; stops at the first that does not fit."""
    pos, n = 0, len(buf)
    while n - pos >= 17:
        length = _be32s(buf, pos + 8)
        if length < 14 or length > n - pos - 12:
            return
        yield pos, pos + 12 + length, buf[pos + 16]
        pos += 12 + length


def fix_crcs(data) -> bytes:
    """``data`` with the CRC-32C of every whole magic-2 batch and the CRC-32 of
    every whole legacy message recomputed (lengths and all else untouched)."""
    import crc32c
    buf = bytearray(data)
    for start, end, magic in walk_entries(buf):
        if magic == 2 and end - start >= 61:
            struct.pack_into(">I", buf, start + 17, crc32c.crc32c(bytes(buf[start + 21:end])))
        elif magic in (0, 1):
            struct.pack_into(">I", buf, start + 12, zlib.crc32(bytes(buf[start + 16:end])))
    return bytes(buf)


def _legacy_value(buf, start: int, end: int):
    """``(prefix_end, value_pos, value_len)`` of a legacy message, or None."""
    magic = buf[start + 16]
    pos = start + 18 + (8 if magic == 1 else 0)
    if pos + 4 > end:
        return None
    klen = _be32s(buf, pos)
    pos += 4 + max(klen, 0)
    if pos + 4 > end:
        return None
    vlen = _be32s(buf, pos)
    if vlen < 0 or pos + 4 + vlen != end:
        return None
    return pos, pos + 4, vlen


def _legacy_compress(codec: int, data: bytes) -> bytes:
    import lz4.frame
    import snappy
    if codec == 1:
        c = zlib.compressobj(6, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == 2:
        out = [b"\x82SNAPPY\x00", struct.pack(">ii", 1, 1)]
        for i in range(0, len(data), 32 << 10):
            block = snappy.compress(data[i:i + (32 << 10)])
            out += [struct.pack(">i", len(block)), block]
        return b"".join(out)
    return lz4.frame.compress(data, block_linked=False, store_size=False)


def fix_legacy_crcs(data) -> bytes:
    """``fix_crcs``, and inside every compressed legacy wrapper that
    decompresses: the inner messages' CRC-32 fixed and the value recompressed
    (wrapper size and CRC updated)."""
    K = _load()
    buf = bytes(data)
    out, last = [], 0
    for start, end, magic in walk_entries(buf):
        codec = buf[start + 17] & 0x07 if magic in (0, 1) else 0
        if magic not in (0, 1) or codec not in (1, 2, 3):
            continue
        where = _legacy_value(buf, start, end)
        if where is None:
            continue
        prefix_end, vpos, vlen = where
        try:
            inner = K.compression.decompress(codec, buf[vpos:vpos + vlen], 1 << 20, magic=magic)
        except Exception:  # CodecError and friends: leave the wrapper as it is
            continue
        fixed = fix_crcs(inner)
        if fixed == inner:
            continue
        value = _legacy_compress(codec, fixed)
        body = buf[start + 16:prefix_end] + struct.pack(">i", len(value)) + value
        entry = buf[start:start + 8] + struct.pack(">iI", 4 + len(body), 0) + body
        out += [buf[last:start], entry]
        last = end
    out.append(buf[last:])
    return fix_crcs(b"".join(out))


def _wrap64(v: int) -> int:
    return (v + (1 << 63)) % INT64 - (1 << 63)


def _tail(data, n: int) -> list[int]:
    """The last ``n`` bytes as ints (zero-padded): option knobs."""
    t = list(data[-n:]) if data else []
    return [0] * (n - len(t)) + t


def _options(sel: int) -> dict:
    K = _K
    return dict(strict=bool(sel & 1), on_corrupt="stop" if sel & 2 else "raise",
                include_control=bool(sel & 4),
                isolation="read_committed" if sel & 8 else "read_uncommitted",
                max_decompressed_bytes=(1 << 20, 64 << 10, K.DEFAULT_LIMIT, 4096)[(sel >> 4) & 3])


def _outcome(fn):
    """``("ok", result)`` or ``("error", CorruptRecordError)``; anything else escapes."""
    try:
        return "ok", fn()
    except _K.Corrupt as exc:
        return "error", exc


# --- consistency of a result ------------------------------------------------------

def _check_binary(name: str, col, n: int) -> None:
    np = _K.np
    offs = col.offsets
    if len(offs) != n + 1:
        raise FuzzFinding(f"{name}: {len(offs)} offsets for {n} values")
    if n and (int(offs[0]) < 0 or np.any(np.diff(offs) < 0) or int(offs[-1]) > len(col.data)):
        raise FuzzFinding(f"{name}: offsets not monotonic within the data")
    if col.validity is not None:
        if len(col.validity) < (n + 7) // 8:
            raise FuzzFinding(f"{name}: validity bitmap too short")
        if int(n - col.is_valid().sum()) != col.null_count:
            raise FuzzFinding(f"{name}: null_count disagrees with the bitmap")
    elif col.null_count:
        raise FuzzFinding(f"{name}: nulls without a bitmap")


def check_records(rec, size: int | None, opts: dict | None = None) -> None:
    """Structural invariants of a ``Records`` (raise FuzzFinding)."""
    K = _K
    np = K.np
    n = len(rec.offset)
    for name in ("timestamp", "timestamp_type", "batch"):
        if len(getattr(rec, name)) != n:
            raise FuzzFinding(f"column {name} has {len(getattr(rec, name))} rows, offset {n}")
    _check_binary("key", rec.key, n)
    _check_binary("value", rec.value, n)
    h = rec.headers
    if len(h.offsets) != n + 1 or (n and (np.any(np.diff(h.offsets) < 0)
                                          or int(h.offsets[-1]) > len(h.keys))):
        raise FuzzFinding("headers: offsets inconsistent")
    if len(h.keys) != len(h.values):
        raise FuzzFinding("headers: keys and values differ in length")
    _check_binary("header keys", h.keys, len(h.keys))
    _check_binary("header values", h.values, len(h.values))
    if h.keys.null_count:
        raise FuzzFinding("headers: a null header key")
    nb = len(rec.batches)
    for name in rec.batches.columns:
        if len(rec.batches[name]) != nb:
            raise FuzzFinding(f"batch column {name} has the wrong length")
    if n and (int(rec.batch.min()) < 0 or int(rec.batch.max()) >= nb):
        raise FuzzFinding("record batch index out of range")
    c = rec.control
    for name in c._ARRAYS:
        if len(getattr(c, name)) != len(c):
            raise FuzzFinding(f"control column {name} has the wrong length")
    _check_binary("control key", c.key, len(c))
    _check_binary("control value", c.value, len(c))
    if len(c) and (int(c.batch.min()) < 0 or int(c.batch.max()) >= nb):
        raise FuzzFinding("control batch index out of range")
    h.keys.to_pylist()       # header keys decode as UTF-8 (kbatch checked them in C)
    if n:                    # the accessors work at both ends
        rec[0], rec[n - 1]
    if len(c):
        c[0], c[len(c) - 1]
    end = rec.end
    if end is None and size is None:
        return      # log reads of an empty range carry no end
    if not isinstance(end, K.SegmentEnd):
        raise FuzzFinding(f"end is {end!r}")
    if end.reason not in (None, "truncated", "zero_padding", "corrupt"):
        raise FuzzFinding(f"unknown end reason {end.reason!r}")
    if (end.reason == "corrupt") != isinstance(end.error, K.Corrupt):
        raise FuzzFinding(f"end reason {end.reason!r} with error {end.error!r}")
    if size is not None and (end.valid_bytes < 0 or end.trailing_bytes < 0
                             or end.valid_bytes + end.trailing_bytes != size):
        raise FuzzFinding(f"end {end} does not add up to {size} bytes")
    if opts:
        if opts.get("strict") and end.reason in ("truncated", "zero_padding"):
            raise FuzzFinding(f"strict read returned end reason {end.reason}")
        if opts.get("on_corrupt", "raise") == "raise" and end.reason == "corrupt":
            raise FuzzFinding("on_corrupt='raise' returned a corrupt end")
        if not opts.get("include_control") and n and bool(rec.is_control.any()):
            raise FuzzFinding("control records among the data without include_control")
        committed = opts.get("isolation") == "read_committed"
        if committed != (rec.last_stable_offset is not None):
            raise FuzzFinding(f"last_stable_offset {rec.last_stable_offset!r} "
                              f"with isolation {opts.get('isolation')}")


def records_diff(a, b) -> list[str]:
    """Names of the fields where two ``Records`` differ (values and dtypes)."""
    np = _K.np
    diffs = []

    def arr(name, x, y):
        x, y = np.asarray(x), np.asarray(y)
        if x.dtype != y.dtype or x.shape != y.shape or not np.array_equal(x, y):
            diffs.append(name)

    def binary(name, x, y):
        if (x.offsets.dtype != y.offsets.dtype or len(x) != len(y)
                or x.null_count != y.null_count
                or not np.array_equal(x.lengths(), y.lengths())
                or not np.array_equal(x.is_valid(), y.is_valid())
                or x._values_bytes().tobytes() != y._values_bytes().tobytes()):
            diffs.append(name)

    for name in ("offset", "timestamp", "timestamp_type", "batch"):
        arr(name, getattr(a, name), getattr(b, name))
    binary("key", a.key, b.key)
    binary("value", a.value, b.value)
    if a.headers.offsets.dtype != b.headers.offsets.dtype or a.headers != b.headers:
        diffs.append("headers")
    if a.batches.columns != b.batches.columns:
        diffs.append("batches.columns")
    else:
        for name in a.batches.columns:
            arr(f"batches.{name}", a.batches[name], b.batches[name])
    for name in a.control._ARRAYS:
        arr(f"control.{name}", getattr(a.control, name), getattr(b.control, name))
    binary("control.key", a.control.key, b.control.key)
    binary("control.value", a.control.value, b.control.value)

    def end(e):
        if e is None:
            return None
        return (e.valid_bytes, e.trailing_bytes, e.reason, type(e.error).__name__, str(e.error))

    if end(a.end) != end(b.end):
        diffs.append("end")
    if a.last_stable_offset != b.last_stable_offset:
        diffs.append("last_stable_offset")
    if list(a.sources) != list(b.sources):
        diffs.append("sources")
    return diffs


def _error_key(exc):
    return type(exc).__name__, str(exc), getattr(exc, "position", None)


# --- known findings ------------------------------------------------------------------
#
# A finding that is understood but not fixed yet is listed here so that fuzzing can go on past
# it (libFuzzer stops at the first crash). --strict-known turns this off. The
# predicates look at the exception and the input only.

KNOWN_FINDINGS: list[tuple[str, object]] = [
    # (name, predicate(target, exc, data) -> bool); empty: every finding so
    # far is fixed, with its reproducer in tests/test_fuzz_regressions.py
]


def _is_known(target: str, exc: BaseException, data: bytes) -> str | None:
    for name, pred in KNOWN_FINDINGS:
        try:
            if pred(target, exc, data):
                return name
        except Exception:
            continue
    return None


KNOWN_COUNTS: dict[str, int] = {}
SKIP_KNOWN = True        # set by the command line (--strict-known turns it off)
REFERENCE_DIFFERENCES: dict[str, int] = {}


# --- targets -------------------------------------------------------------------------

def t_segment(data: bytes) -> None:
    K = _K
    opts = _options(_tail(data, 1)[0])
    st, rec = _outcome(lambda: K.kbatch.read_segment(data, validate_crc=False, **opts))
    if st == "ok":
        check_records(rec, len(data), opts)
    fixed = fix_crcs(data)
    st, rec = _outcome(lambda: K.kbatch.read_segment(fixed, validate_crc=True, **opts))
    if st == "ok":
        check_records(rec, len(fixed), opts)
        if len(rec.batches) and int(rec.batches.crc_valid.min()) != 1:
            raise FuzzFinding("validate_crc=True returned a batch not marked crc_valid=1")


def t_legacy(data: bytes) -> None:
    K = _K
    opts = _options(_tail(data, 1)[0])
    st, rec = _outcome(lambda: K.kbatch.read_segment(data, validate_crc=False, **opts))
    if st == "ok":
        check_records(rec, len(data), opts)
    fixed = fix_legacy_crcs(data)
    st, rec = _outcome(lambda: K.kbatch.read_segment(fixed, validate_crc=True, **opts))
    if st == "ok":
        check_records(rec, len(fixed), opts)


def chunk_params(data: bytes) -> tuple[int, int, bool, dict]:
    a, b, sel = _tail(data, 3)
    chunk_records = 1 + a % 8 if a < 224 else 1 << 18
    chunk_bytes = 1 + b * b * 8 if b < 250 else 32 << 20
    opts = _options(sel)
    # three copies of the result are held here: a smaller cap than the default
    opts["max_decompressed_bytes"] = min(opts["max_decompressed_bytes"], 32 << 20)
    return chunk_records, chunk_bytes, bool(sel & 0x40), opts


def _compare_chunked(buf, crc, opts, chunk_records, chunk_bytes) -> None:
    K = _K
    whole = _outcome(lambda: K.kbatch.read_segment(buf, validate_crc=crc, **opts))
    parts = _outcome(lambda: list(K.kbatch.iter_segment(
        buf, chunk_records=chunk_records, chunk_bytes=chunk_bytes, validate_crc=crc, **opts)))
    if whole[0] != parts[0]:
        raise FuzzFinding(f"read_segment gave {whole[0]} {whole[1]!r}, iter_segment "
                          f"(chunk_records={chunk_records}, chunk_bytes={chunk_bytes}) "
                          f"gave {parts[0]} {parts[1]!r}")
    if whole[0] == "error":
        if _error_key(whole[1]) != _error_key(parts[1]):
            raise FuzzFinding(f"different errors: {whole[1]!r} vs {parts[1]!r}")
        return
    rec, chunks = whole[1], parts[1]
    check_records(rec, len(buf), opts)
    if not chunks:
        raise FuzzFinding("iter_segment yielded nothing")
    for i, ch in enumerate(chunks):
        if (ch.end is None) != (i < len(chunks) - 1):
            raise FuzzFinding(f"chunk {i} of {len(chunks)} has end {ch.end!r}")
    cat = K.Records.concat(chunks)
    check_records(cat, len(buf), opts)
    diffs = records_diff(rec, cat)
    if diffs:
        raise FuzzFinding(f"concat(iter_segment(chunk_records={chunk_records}, "
                          f"chunk_bytes={chunk_bytes})) != read_segment in {diffs} "
                          f"(options {opts}, validate_crc={crc})")


def t_chunked(data: bytes) -> None:
    chunk_records, chunk_bytes, crc, opts = chunk_params(data)
    buf = fix_crcs(data) if crc else data
    try:
        _compare_chunked(buf, crc, opts, chunk_records, chunk_bytes)
    except FuzzFinding as exc:
        name = _is_known("chunked", exc, data) if SKIP_KNOWN else None
        if name is None:
            raise
        KNOWN_COUNTS[name] = KNOWN_COUNTS.get(name, 0) + 1


def t_control(data: bytes) -> None:
    K = _K
    ctype, key, value = split_control_input(data)
    st, out = _outcome(lambda: K.control.parse_control_value(ctype, key, value))
    if st == "ok" and not (isinstance(out, dict) and "type" in out):
        raise FuzzFinding(f"parse_control_value returned {out!r}")


def split_control_input(data: bytes):
    """``(type, key, value)`` from an input: type int16 | flags | [klen key] | value.

    flags bit 0: key None; bit 1: an explicit key follows (length byte +
    bytes), otherwise the key is version 0 + the type; bit 2: value None.
    """
    if len(data) < 3:
        data = bytes(data) + bytes(3 - len(data))
    ctype = int.from_bytes(data[0:2], "big", signed=True)
    flags = data[2]
    rest = data[3:]
    if flags & 1:
        key = None
    elif flags & 2 and rest:
        klen = rest[0]
        key, rest = bytes(rest[1:1 + klen]), rest[1 + klen:]
    else:
        key = struct.pack(">hh", 0, ctype & 0xFFFF if ctype >= 0 else ctype)
    value = None if flags & 4 else bytes(rest)
    return ctype, key, value


def encode_control_input(ctype: int, key, value) -> bytes:
    flags, kpart = 0, b""
    if key is None:
        flags |= 1
    elif len(key) != 4 or key != struct.pack(">hh", 0, ctype):
        flags |= 2
        kpart = bytes([min(len(key), 255)]) + bytes(key[:255])
    if value is None:
        flags |= 4
    return struct.pack(">hB", ctype, flags) + kpart + (value or b"")


# --- index target: a fixed partition log, index files from the input ------------------

INDEX_BASE = 1000


class _IndexLog:
    """A partition directory made once per process: one segment (fixed
    content) whose .index/.timeindex/.txnindex are rewritten per input."""

    def __init__(self):
        K = _load()
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="kbatch-fuzz-index-")) / "topic-0"
        self.dir.mkdir()
        stem = self.dir / f"{INDEX_BASE:020d}"
        self.segment = stem.with_suffix(".log")
        self.paths = [stem.with_suffix(s) for s in (".index", ".timeindex", ".txnindex")]
        self.segment.write_bytes(index_segment())
        self.full = K.kbatch.read_segment(self.segment, include_control=False)
        offs = set()
        bt = self.full.batches
        for lo, hi in zip(bt.base_offset.tolist(), bt.last_offset.tolist(), strict=True):
            offs |= {lo - 1, lo, lo + 1, hi, hi + 1}
        offs |= set(self.full.offset.tolist()) | {0, INDEX_BASE, 1 << 62}
        self.probes = sorted(offs)
        ts = sorted(set(self.full.timestamp.tolist()) | {-1, 0, 1 << 62})
        self.timestamps = ts
        self.expected = {}
        # byte positions inside batches where a whole CRC-valid batch parses
        # (the batch stored in a record value): an index entry naming one
        # may steer a use_index=True read (documented in kbatch/log.py)
        seg = self.segment.read_bytes()
        boundaries = set(bt.position.tolist())
        with K.segment_mod.open_source(seg) as (view, _):
            self.inner_batches = {p for p in range(len(seg) - 61)
                                  if p not in boundaries and seg[p + 16] == 2
                                  and K.decoder.batch_at(view, p) is not None}
        import atexit
        atexit.register(shutil.rmtree, self.dir.parent, True)

    def expect(self, lo: int, hi: int):
        if (lo, hi) not in self.expected:
            if len(self.expected) > 2048:     # bounded: RSS is watched by libFuzzer
                self.expected.clear()
            self.expected[(lo, hi)] = self.full.select_offsets(lo, hi)
        return self.expected[(lo, hi)]


_INDEX_LOG = None


def index_segment() -> bytes:
    """The fixed segment of the index target (base offset INDEX_BASE): small
    batches with offset gaps, a gzip batch, an empty batch, a transaction with
    its COMMIT and one with its ABORT marker, and a record whose value is
    itself a whole valid batch."""
    K = _load(reference=True)
    ref = K.kafka_ref
    rng = random.Random(20240611)
    parts, off = [], INDEX_BASE
    for i in range(12):
        n = rng.randint(1, 4)
        recs = [(1_700_000_000_000 + 1000 * (off + j) + rng.randint(-500, 500),
                 b"k%d" % (off + j), bytes(rng.randbytes(rng.randint(0, 40))),
                 [("h", b"%d" % j)] if j % 2 else []) for j in range(n)]
        txn = i in (3, 4, 7)
        parts.append(ref.build_batch(recs, codec=1 if i == 5 else 0, base_offset=off,
                                     producer_id=7 if txn else -1,
                                     producer_epoch=0 if txn else -1,
                                     base_sequence=0 if txn else -1, transactional=txn))
        off += n + (3 if i % 5 == 2 else 0)
        if i == 4:
            parts.append(ref.control_batch(base_offset=off, producer_id=7, producer_epoch=0,
                                           control_type=ref.COMMIT, timestamp=recs[-1][0]))
            off += 1
        if i == 6:
            parts.append(ref.empty_batch(base_offset=off, last_offset_delta=2))
            off += 3
        if i == 7:
            parts.append(ref.control_batch(base_offset=off, producer_id=7, producer_epoch=0,
                                           control_type=ref.ABORT, timestamp=recs[-1][0]))
            off += 1
        if i == 8:
            inner = ref.build_batch([(1_700_000_000_000, b"inner", b"v" * 8, [])],
                                    base_offset=INDEX_BASE)
            parts.append(ref.build_batch([(1_700_000_000_000 + 1000 * off, b"outer", inner, [])],
                                         base_offset=off))
            off += 1
    return b"".join(parts)


def index_files_for(segment: bytes, base: int = INDEX_BASE):
    """A correct ``(.index, .timeindex)`` for ``segment``: one entry per batch."""
    K = _load()
    rec = K.kbatch.read_segment(segment)
    bt = rec.batches
    idx, tix, running = [], [], -1
    for i in range(len(bt)):
        last = int(bt.last_offset[i])
        idx.append(struct.pack(">ii", last - base, int(bt.position[i])))
        mx = int(bt.max_timestamp[i])
        if mx > running:
            running = mx
            tix.append(struct.pack(">qi", mx, last - base))
    return b"".join(idx), b"".join(tix)


def t_index(data: bytes) -> None:
    global _INDEX_LOG
    K = _K
    if _INDEX_LOG is None:
        _INDEX_LOG = _IndexLog()
    L = _INDEX_LOG
    for p in L.paths:
        with open(p, "wb") as f:
            f.write(data)
    h = zlib.crc32(data)
    probe = L.probes[h % len(L.probes)]
    ts = L.timestamps[(h >> 8) % len(L.timestamps)]
    # the index classes on their own (base offsets a file name can give)
    index_path, time_path, txn_path = L.paths
    base = INDEX_BASE if h & (1 << 30) else (1 << 63) - 1 - (1 << 40)
    def entries(path, dtype, zero_ends=True):   # the one rule every index is read by
        return K.tree.LOCAL_TREE.read_entries(path, dtype, None, zero_ends)
    st, oi = _outcome(lambda: K.index.OffsetIndex.of(entries(index_path, K.index.OFFSET_ENTRY),
                                                     base))
    if st == "ok":
        oi.lookup(probe)
        oi.first_at_or_above(probe)
    st, ti = _outcome(lambda: K.index.TimeIndex.of(entries(time_path, K.index.TIME_ENTRY), base))
    if st == "ok":
        ti.last_below(ts)
        ti.max_timestamp()
    _outcome(lambda: len(K.index.TxnIndex.of(entries(txn_path, K.index.TXN_ENTRY, False))))
    # the partition log: offset ranges must be exact whatever the index holds
    lo = probe
    hi = L.probes[(h >> 16) % len(L.probes)]
    if hi < lo:
        lo, hi = hi, lo
    # (use_index=True: exact too unless an entry names a batch stored inside
    # a record value, the documented limit of trusting index positions)
    usable = len(data) - len(data) % 8
    positions = {int.from_bytes(data[i + 4:i + 8], "big", signed=True)
                 for i in range(0, usable, 8)}
    exact_with_index = not (positions & L.inner_batches)
    for use_index in (False, True):
        log = K.log.open_log(L.dir, use_index=use_index)
        st, got = _outcome(lambda: log.read(lo, hi))
        if st == "error" and (exact_with_index or not use_index):
            raise FuzzFinding(f"log.read({lo}, {hi}, use_index={use_index}) over a valid "
                              f"segment raised {got!r} (the index steered it)")
        if st == "error":
            continue
        check_records(got, None)
        if use_index and not exact_with_index:
            continue
        want = L.expect(lo, hi)
        if (not K.np.array_equal(got.offset, want.offset) or got.key != want.key
                or got.value != want.value or got.headers != want.headers
                or not K.np.array_equal(got.timestamp, want.timestamp)
                or not K.np.array_equal(got.control.offset, want.control.offset)):
            raise FuzzFinding(f"log.read({lo}, {hi}, use_index={use_index}) differs from the "
                              f"full read filtered to the range: {len(got)} vs {len(want)} records")
    # timestamp seeks (with the index: ``log`` is use_index=True here) and
    # read_committed with the .txnindex: outcome only
    # (one input in sixteen each: they cost more than the rest together)
    if (h >> 24) & 15 == 0:
        st, got = _outcome(lambda: log.read(start_timestamp=ts, end_offset=hi))
        if st == "ok":
            check_records(got, None)
    if (h >> 28) & 15 == 0:
        st, got = _outcome(lambda: log.read(lo, isolation="read_committed"))
        if st == "ok":
            check_records(got, None)


# --- differential ----------------------------------------------------------------------

def _kbatch_view(rec):
    data = [(_wrap64(r.offset), _wrap64(r.timestamp), r.timestamp_type, r.key, r.value,
             [tuple(h) for h in r.headers]) for r in rec]
    control = [(_wrap64(c.offset), _wrap64(c.timestamp), c.key, c.value) for c in rec.control]
    return {"records": data, "control": control, "batches": len(rec.batches),
            "valid_bytes": rec.end.valid_bytes}


def _reference_view(ref):
    data = [(_wrap64(r["offset"]), _wrap64(r["timestamp"]), r["timestamp_type"], r["key"],
             r["value"], [tuple(h) for h in r["headers"]]) for r in ref.records]
    control = [(_wrap64(r["offset"]), _wrap64(r["timestamp"]), r["key"], r["value"])
               for r in ref.control]
    return {"records": data, "control": control, "batches": len(ref.batches),
            "valid_bytes": ref.valid_bytes}


def _java_varint(buffer, pos, bits):
    """Kafka's ByteUtils.readVarint/readVarlong: at most 5/10 bytes, bits past
    the type's width dropped, zig-zag decoded."""
    value, shift = 0, 0
    limit = 28 if bits == 32 else 63
    while True:
        b = buffer[pos]
        pos += 1
        if not b & 0x80:
            value |= b << shift
            break
        value |= (b & 0x7F) << shift
        shift += 7
        if shift > limit:
            raise ValueError("varint too long")
    value &= (1 << bits) - 1
    out = (value >> 1) ^ -(value & 1)
    return out, pos


def _read_msg_java(self):
    """kafka-python's DefaultRecordBatch._read_msg with Java's field rules:
    the attributes are one byte (kafka-python reads a varint), varints are
    Java's (kafka-python accepts up to 64 bits), lengths are bounds-checked."""
    from kafka.errors import CorruptRecordError
    from kafka.record.default_records import ControlRecord, DefaultRecord
    buffer = self._buffer
    pos = self._pos
    length, pos = _java_varint(buffer, pos, 32)
    start_pos = pos
    pos += 1                                   # attributes: a plain byte
    ts_delta, pos = _java_varint(buffer, pos, 64)
    if self.timestamp_type == self.LOG_APPEND_TIME:
        timestamp = self.max_timestamp
    else:
        timestamp = self.first_timestamp + ts_delta
    offset_delta, pos = _java_varint(buffer, pos, 32)
    offset = self.base_offset + offset_delta

    def blob(pos):
        n, pos = _java_varint(buffer, pos, 32)
        if n < 0:
            return None, pos
        if n > len(buffer) - pos:
            raise ValueError("length past the buffer")
        return bytes(buffer[pos:pos + n]), pos + n

    key, pos = blob(pos)
    value, pos = blob(pos)
    count, pos = _java_varint(buffer, pos, 32)
    if count < 0:
        raise CorruptRecordError("negative header count")
    headers = []
    for _ in range(count):
        k, pos = blob(pos)
        if k is None:
            raise CorruptRecordError("null header key")
        v, pos = blob(pos)
        headers.append((k.decode("utf-8"), v))
    if pos - start_pos != length:
        raise CorruptRecordError("record size mismatch")
    self._pos = pos
    cls = ControlRecord if self.is_control_batch else DefaultRecord
    return cls(length, offset, timestamp, self.timestamp_type, key, value, headers)


def _read_java_faithful(data):
    from kafka.record.default_records import DefaultRecordBatch
    saved = DefaultRecordBatch._read_msg
    DefaultRecordBatch._read_msg = _read_msg_java
    try:
        return _K.kafka_ref.read_with_kafka_python(data)
    finally:
        DefaultRecordBatch._read_msg = saved


def _legacy_messages(data, depth: int = 0):
    """``(magic, key_length, value_length)`` of every whole legacy message,
    the inner messages of decompressible wrappers included."""
    K = _K
    buf = bytes(data)
    for start, end, magic in walk_entries(buf):
        if magic not in (0, 1):
            continue
        pos = start + 18 + (8 if magic == 1 else 0)
        if pos + 4 > end:
            continue
        klen = _be32s(buf, pos)
        vpos = pos + 4 + max(klen, 0)
        if vpos + 4 > end:
            continue
        vlen = _be32s(buf, vpos)
        yield magic, klen, vlen
        codec = buf[start + 17] & 0x07
        if codec and depth == 0 and vlen >= 0 and vpos + 4 + vlen <= end:
            try:
                inner = K.compression.decompress(codec, buf[vpos + 4:vpos + 4 + vlen], 1 << 20,
                                                 magic=magic)
            except Exception:
                continue
            yield from _legacy_messages(inner, 1)


def _legacy_inner_magics(data) -> set:
    """(wrapper magic, inner magic) pairs that differ, over every wrapper."""
    K = _K
    out = set()
    buf = bytes(data)
    for start, end, magic in walk_entries(buf):
        codec = buf[start + 17] & 0x07
        if magic not in (0, 1) or not codec:
            continue
        where = _legacy_value(buf, start, end)
        if where is None:
            continue
        _, vpos, vlen = where
        try:
            inner = K.compression.decompress(codec, buf[vpos:vpos + vlen], 1 << 20, magic=magic)
        except Exception:
            continue
        for _s, _e, m in walk_entries(inner):
            if m != magic:
                out.add((magic, m))
    return out


def _known_reference_difference(data, mine) -> str | None:
    """Why kafka-python legitimately disagrees with kbatch on ``data``, or None.

    - kafka-python reads a record's attribute byte as a varint and accepts
      varints of up to 64 bits; Java (and kbatch) read one byte and drop the
      bits of a 5th/10th varint byte that do not fit. Checked by re-reading
      with kafka-python whose record reader follows Java's rules.
    - kafka-python parses a legacy wrapper's inner messages with the wrapper's
      magic; kbatch (and Java's LegacyRecord) reads each message's own.
    - kafka-python takes a legacy key/value length below -1 as a (negative)
      length and slices with it; Java's LegacyRecord (and kbatch) read any
      negative length as null.
    """
    try:
        java = _read_java_faithful(data)
    except Exception:
        java = None
    if java is not None and _reference_view(java) == mine:
        return "kafka-python varint/attribute leniency"
    if _legacy_inner_magics(data):
        return "kafka-python reads inner legacy messages with the wrapper's magic"
    if any(k < -1 or v < -1 for _m, k, v in _legacy_messages(data)):
        return "kafka-python reads a legacy length below -1 as a length (Java: null)"
    return None


def t_differential(data: bytes) -> None:
    K = _K
    try:
        rec = K.kbatch.read_segment(data, validate_crc=False, max_decompressed_bytes=1 << 20)
    except K.Corrupt:
        return
    check_records(rec, len(data))
    try:
        ref = K.kafka_ref.read_with_kafka_python(data)
    except Exception:    # kafka-python rejects it (or chokes): not an input both accept
        return
    mine, theirs = _kbatch_view(rec), _reference_view(ref)
    if mine == theirs:
        return
    why = _known_reference_difference(data, mine)
    if why is not None:
        REFERENCE_DIFFERENCES[why] = REFERENCE_DIFFERENCES.get(why, 0) + 1
        return
    fields = [k for k in mine if mine[k] != theirs[k]]
    detail = ""
    for k in fields:
        a, b = mine[k], theirs[k]
        if isinstance(a, list):
            for i, (x, y) in enumerate(zip(a, b, strict=False)):
                if x != y:
                    detail += f"\n  {k}[{i}]: kbatch {x!r}\n  {k}[{i}]: kafka  {y!r}"
                    break
            else:
                detail += f"\n  {k}: kbatch {len(a)} rows, kafka-python {len(b)}"
        else:
            detail += f"\n  {k}: kbatch {a!r}, kafka-python {b!r}"
    raise FuzzFinding(f"kbatch and kafka-python disagree on {fields}:{detail}")


TARGETS = {
    "segment": t_segment,
    "chunked": t_chunked,
    "legacy": t_legacy,
    "index": t_index,
    "control": t_control,
    "differential": t_differential,
}


def run_one(target: str, data: bytes) -> None:
    """One input through ``target`` without atheris (regression tests)."""
    _load(reference=target in ("differential", "index"))
    TARGETS[target](bytes(data))


# --- seeds -----------------------------------------------------------------------------

def _windows(buf: bytes, size: int = SEED_WINDOW) -> list[bytes]:
    """Batch-aligned pieces of ``buf`` of at most ``size`` bytes (a single
    batch larger than that is cut at 4x): from the start, the middle and the
    end, and the lone first batch of each."""
    if len(buf) <= size:
        return [buf]
    bounds = [(s, e) for s, e, _ in walk_entries(buf)]
    if not bounds:
        return [buf[:size]]
    out = []
    for k in sorted({0, len(bounds) // 2, len(bounds) - 1}):
        start, end = bounds[k]
        out.append(buf[start:end][:4 * size])
        for _s, e in bounds[k + 1:]:
            if e - start > size:
                break
            end = e
        out.append(buf[start:end][:4 * size])
    return out


def _expected_entries() -> list[dict]:
    path = CORPUS / "EXPECTED.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _generated_segments() -> list[bytes]:
    K = _load(reference=True)
    ref = K.kafka_ref
    out = []
    for i in range(160):
        seg, _ = ref.generate_segment(ref.RandomChoices(random.Random(i)), max_batches=4,
                                      max_records=5, big=False)
        out.append(seg)
    rec = [(1_700_000_000_000, b"key", b"value" * 3, [("h1", b"v"), ("h2", None)]),
           (1_700_000_000_005, None, b"", []), (1_699_999_999_000, b"", None, [("", b"")])]
    for codec, variants in ref.VARIANTS.items():
        for v in variants:
            out.append(ref.build_batch(rec, codec=codec, variant=v, base_offset=5))
            out.append(ref.build_batch(rec, codec=codec, variant=v, base_offset=1 << 40,
                                       log_append_time=1_700_000_000_123,
                                       producer_id=9, producer_epoch=1, base_sequence=3,
                                       transactional=True))
            out.append(ref.control_batch(base_offset=3, producer_id=9, producer_epoch=1,
                                         control_type=ref.ABORT, codec=codec, variant=v))
    out.append(ref.build_batch(rec, delete_horizon=True, offset_deltas=[0, 4, 9],
                               last_offset_delta=12))
    for ctype, value in _control_values():
        out.append(ref.control_batch(base_offset=1, control_type=ctype, value=value,
                                     transactional=ctype in (0, 1)))
    out.append(ref.empty_batch(base_offset=7, last_offset_delta=3, attributes=4))
    out.append(ref.build_batch(rec) + bytes(100))          # preallocated tail
    out.append(ref.build_batch(rec) + ref.build_batch(rec)[:40])   # torn tail
    return out


def _generated_legacy() -> list[bytes]:
    K = _load(reference=True)
    ref = K.kafka_ref
    out = []
    recs = [(1_500_000_000_000 + i, b"k%d" % i if i % 3 else None, b"value-%d" % i * (i + 1))
            for i in range(5)]
    for magic in (0, 1):
        for codec in ((0, 1, 2) if magic == 0 else (0, 1, 2, 3)):   # magic 0 lz4: below
            out.append(ref.legacy_message_set(recs, magic=magic, codec=codec, base_offset=10))
            if magic == 1:
                out.append(ref.legacy_message_set(recs, magic=1, codec=codec, base_offset=50,
                                                  log_append_time=1_600_000_000_000))
    inner = b"".join(ref.legacy_message(offset=i, magic=0, key=b"k", value=b"v%d" % i)
                     for i in range(3))
    out.append(ref.legacy_message(offset=2, magic=0, attributes=3, value=ref.lz4_old_kafka(inner)))
    inner1 = b"".join(ref.legacy_message(offset=i, magic=1, timestamp=1000 + i, value=b"x" * i)
                      for i in range(3))
    out.append(ref.legacy_message(offset=0, magic=1, attributes=1, timestamp=5,
                                  value=_legacy_compress(1, inner1)))
    # a mixed log: legacy then magic 2
    out.append(ref.legacy_message_set(recs, magic=1, codec=0) +
               ref.build_batch([(1, b"a", b"b", [])], base_offset=5))
    return out


def _control_values() -> list[tuple[int, bytes]]:
    """One value of every known control type, laid out as kbatch/control.py says."""
    from tests.kafka_ref import uvarint as uv

    def cstr(s):
        return uv(len(s) + 1) + s
    voters = (struct.pack(">h", 0) + uv(2) + struct.pack(">i", 1) + bytes(range(16)) + uv(2)
              + cstr(b"CONTROLLER") + cstr(b"localhost") + struct.pack(">H", 9093) + uv(0)
              + struct.pack(">hh", 0, 1) + uv(0) + uv(0) + uv(0))
    return [
        (0, struct.pack(">hi", 0, 5)),
        (1, struct.pack(">hi", 0, 7)),
        (2, struct.pack(">hi", 0, 1) + uv(3) + struct.pack(">i", 1) + uv(0)
         + struct.pack(">i", 2) + uv(0) + uv(2) + struct.pack(">i", 1) + uv(0) + uv(0)),
        (3, struct.pack(">hq", 0, 1_700_000_000_000) + uv(0)),
        (4, struct.pack(">h", 0) + uv(1) + uv(3) + uv(2) + b"ab"),
        (5, struct.pack(">hh", 0, 1) + uv(0)),
        (6, voters),
        (17, b"unknown"),
    ]


def build_seeds(target: str, dest: pathlib.Path) -> int:
    """Write ``target``'s seed inputs into ``dest``; returns their number."""
    dest.mkdir(parents=True, exist_ok=True)
    seeds: list[bytes] = []
    entries = _expected_entries()
    if target in ("segment", "chunked", "differential", "legacy"):
        for e in entries:
            if target == "legacy" and not set(e.get("magics", [])) & {0, 1}:
                continue
            seeds += _windows((CORPUS / e["path"]).read_bytes())
        if target != "legacy":
            seeds += _generated_segments()
        if target in ("legacy", "differential", "segment"):
            seeds += _generated_legacy()
    elif target == "index":
        for ext in ("*.index", "*.timeindex", "*.txnindex"):
            for p in sorted(CORPUS.rglob(ext)):
                b = p.read_bytes()
                if b.strip(b"\x00"):
                    seeds.append(b[:SEED_WINDOW])
        seg = index_segment()
        idx, tix = index_files_for(seg)
        seeds += [idx, tix, idx + bytes(80), tix + bytes(120), idx[:8] * 3,
                  struct.pack(">hqqqq", 0, 7, INDEX_BASE + 20, INDEX_BASE + 40, INDEX_BASE + 20)]
    elif target == "control":
        K = _load()
        for e in entries:
            if not e.get("control"):
                continue
            try:
                rec = K.kbatch.read_segment(CORPUS / e["path"], validate_crc=False)
            except K.Corrupt:
                continue
            for c in rec.control:
                seeds.append(encode_control_input(c.type, c.key, c.value))
        for ctype, value in _control_values():
            seeds.append(encode_control_input(ctype, struct.pack(">hh", 0, ctype), value))
            seeds.append(encode_control_input(ctype, struct.pack(">hh", 1, ctype), value + b"xx"))
            seeds.append(encode_control_input(ctype, None, value))
    seen = set()
    for s in seeds:
        h = hashlib.sha1(s).hexdigest()
        if s and h not in seen:
            seen.add(h)
            (dest / h).write_bytes(s)
    return len(seen)


def seed_dir(target: str) -> pathlib.Path:
    """The cached seed directory of ``target`` (rebuilt when this file changes)."""
    tag = hashlib.sha1(pathlib.Path(__file__).read_bytes()).hexdigest()[:12]
    base = pathlib.Path(tempfile.gettempdir()) / f"kbatch-fuzz-seeds-{tag}"
    d = base / target
    if not d.is_dir():
        tmp = base / f".{target}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        build_seeds(target, tmp)
        try:
            tmp.rename(d)
        except OSError:   # another process won the race
            shutil.rmtree(tmp, ignore_errors=True)
    return d


# --- running ----------------------------------------------------------------------------

def _harness_report(counter) -> None:
    known = ", ".join(f"{k}: {v}" for k, v in KNOWN_COUNTS.items()) or "none"
    ref = ", ".join(f"{k}: {v}" for k, v in REFERENCE_DIFFERENCES.items()) or "none"
    print(f"kbatch-fuzz: {counter[0]} executions; known findings skipped: {known}; "
          f"kafka-python differences classified: {ref}", file=sys.stderr, flush=True)


def _entry(target: str, strict_known: bool):
    """The TestOneInput of ``target``: known findings skipped unless
    ``strict_known``; a harness report every 60 s and at each new kind."""
    import time
    global SKIP_KNOWN
    SKIP_KNOWN = not strict_known
    fn = TARGETS[target]
    counter = [0]
    next_report = [time.monotonic() + 60]

    import atheris

    def test_one_input(data: bytes) -> None:
        counter[0] += 1
        if not getattr(atheris._trace_cmp, "kbatch_guarded", False):
            _guard_trace_cmp()
        if not counter[0] & 255 and time.monotonic() > next_report[0]:
            next_report[0] = time.monotonic() + 60
            _harness_report(counter)
        kinds = len(REFERENCE_DIFFERENCES)
        try:
            fn(data)
        except Exception as exc:
            if not strict_known:
                name = _is_known(target, exc, data)
                if name is not None:
                    KNOWN_COUNTS[name] = KNOWN_COUNTS.get(name, 0) + 1
                    if KNOWN_COUNTS[name] == 1:
                        _harness_report(counter)
                    return
            raise
        if len(REFERENCE_DIFFERENCES) != kinds:
            _harness_report(counter)
    return test_one_input, counter


def _child(args, passthrough: list[str]) -> None:
    import atheris
    target = args.target
    _load(instrument=True, reference=target in ("differential", "index"),
          trace_reference=target == "differential")
    K = _K
    print(f"kbatch-fuzz: target {target}; kbatch from {os.path.dirname(K.kbatch.__file__)} "
          f"(compiled core {sys.modules['kbatch._core._batch'].__file__})",
          file=sys.stderr, flush=True)
    files = [a for a in passthrough if not a.startswith("-")]
    flags = [a for a in passthrough if a.startswith("-")]
    argv = [sys.argv[0]]
    if not files:
        corpus = args.corpus_dir or tempfile.mkdtemp(prefix=f"kbatch-fuzz-{target}-")
        os.makedirs(corpus, exist_ok=True)
        argv.append(corpus)
        if not args.no_seeds:
            argv.append(str(seed_dir(target)))
        print(f"kbatch-fuzz: corpus {corpus}", file=sys.stderr, flush=True)
    given = {f.split("=")[0] for f in flags}
    artifacts = (pathlib.Path(args.artifacts or tempfile.gettempdir())
                 / f"kbatch-fuzz-artifacts-{target}")
    artifacts.mkdir(parents=True, exist_ok=True)
    defaults = {"-timeout": "10", "-rss_limit_mb": "2048",
                "-artifact_prefix": f"{artifacts}/",
                "-max_len": str(DEFAULT_MAX_LEN.get(target, 65536)),
                "-print_final_stats": "1"}
    if args.seconds:
        defaults["-max_total_time"] = str(args.seconds)
    if args.runs:
        defaults["-runs"] = str(args.runs)
    argv += [f"{k}={v}" for k, v in defaults.items() if k not in given] + flags + files
    fn, _counter = _entry(target, args.strict_known)
    atheris.Setup(argv, fn)
    atheris.Fuzz()


_STAT = re.compile(r"stat::(\w+):\s+(\d+)")
_PROGRESS = re.compile(r"#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+)(?: corp: (\d+)/\S+)?.*exec/s: (\d+)")


_ARTIFACT = re.compile(r"Test unit written to (\S+)")


def _run_child(cmd, env):
    """Run one fuzzing child; echo its stderr; ``(rc, stats, last progress, artifacts)``."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True,
                            errors="replace")
    stats, last, found = {}, None, []
    try:
        for line in proc.stderr:
            sys.stderr.write(line)
            sys.stderr.flush()
            m = _STAT.search(line)
            if m:
                stats[m.group(1)] = int(m.group(2))
            m = _PROGRESS.search(line)
            if m:
                last = m
            m = _ARTIFACT.search(line)
            if m:
                found.append(m.group(1))
    except KeyboardInterrupt:
        proc.terminate()
    return proc.wait(), stats, last, found


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz.harness",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("target", choices=TARGET_NAMES)
    p.add_argument("--seconds", type=int, default=0, help="-max_total_time for libFuzzer")
    p.add_argument("--runs", type=int, default=0, help="-runs for libFuzzer")
    p.add_argument("--corpus-dir", help="where new inputs go (default: a temp dir)")
    p.add_argument("--no-seeds", action="store_true", help="do not add the seed corpus")
    p.add_argument("--artifacts", help="directory for crash-*/timeout-*/oom-* files "
                   "(default: $TMPDIR/kbatch-fuzz-artifacts-TARGET)")
    p.add_argument("--strict-known", action="store_true",
                   help="crash on the known findings too (KNOWN_FINDINGS)")
    p.add_argument("--keep-going", action="store_true",
                   help="after a crash/timeout/oom, restart on the same corpus until "
                   "--seconds/--runs are used up (executions are summed)")
    args, passthrough = p.parse_known_args(argv)
    if os.environ.get(CHILD_ENV) == "1":
        _child(args, passthrough)
        return 0
    # parent: run the fuzzer in a child (a crash ends the child, not this
    # process), echo its output, sum up at the end
    import time
    files = [a for a in passthrough if not a.startswith("-")]
    corpus = args.corpus_dir
    if corpus is None and not files:
        corpus = tempfile.mkdtemp(prefix=f"kbatch-fuzz-{args.target}-")
    env = dict(os.environ, **{CHILD_ENV: "1"})
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    started = time.monotonic()
    total, rounds, artifacts, last, stats, rc = 0, 0, [], None, {}, 0
    while True:
        cmd = [sys.executable, "-m", "tests.fuzz.harness", args.target]
        if corpus:
            cmd += ["--corpus-dir", corpus]
        if args.seconds:
            left = int(args.seconds - (time.monotonic() - started))
            if left <= 0:
                break
            cmd += ["--seconds", str(left)]
        if args.runs:
            if args.runs - total <= 0:
                break
            cmd += ["--runs", str(args.runs - total)]
        cmd += [f for f, on in (("--no-seeds", args.no_seeds),
                                ("--strict-known", args.strict_known)) if on]
        if args.artifacts:
            cmd += ["--artifacts", args.artifacts]
        cmd += passthrough
        rc, stats, progress, found = _run_child(cmd, env)
        rounds += 1
        last = progress or last
        done = stats.get("number_of_executed_units", int(progress.group(1)) if progress else 0)
        total += done
        artifacts += found
        if rc == 0 or not args.keep_going or files or done == 0:
            break
    elapsed = max(time.monotonic() - started, 1e-3)
    cov = f"cov {last.group(2)} ft {last.group(3)} corpus {last.group(4)}" if last else "n/a"
    print(f"kbatch-fuzz {args.target}: {total} executions in {elapsed:.0f} s "
          f"({int(total / elapsed)} exec/s), {cov}, peak rss "
          f"{stats.get('peak_rss_mb', '?')} MB, {rounds} run(s), exit code {rc}", flush=True)
    for path in artifacts:
        print(f"kbatch-fuzz {args.target}: finding saved to {path}", flush=True)
    if args.keep_going and not files:
        return 1 if artifacts else 0
    return rc


if __name__ == "__main__":
    sys.exit(main())
