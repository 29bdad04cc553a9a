"""Reading one segment (or any buffer of concatenated batches) into Records.

    source --(mmap or buffer)--> BatchDecoder.run() --+--> chunk -> Records
                                    ^                 |
                                    +-- feed() <------+ compressed batch:
                                         decompress()   Python decompresses

The compiled decoder walks batches without the GIL; this module only opens the
source, decompresses the batches it hands back, and wraps finished chunks.
"""

from __future__ import annotations

import errno
import mmap
import os
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from typing import Iterator

import numpy as np

from kbatch._core import _batch
from kbatch._core._mapguard import populate, try_guard
from kbatch.lib import copyread
from kbatch.lib.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, CodecError, decompress
from kbatch.errors import (ArgumentError, CorruptRecordError, DamagedLengthError,
                           DecompressionLimitError, FileChangedError, LimitExceededError)
from kbatch.lib.files import data_end, open_regular
from kbatch.lib.records import (RECORD_COLUMNS, BatchTable, ControlRecords, Records, SegmentEnd,
                                SkippedRange)
from kbatch.lib.decoder import skips_payload
from kbatch.lib.decoder import (NATIVE_GZIP, NATIVE_LZ4, NATIVE_SNAPPY,  # noqa: F401
                                NATIVE_ZSTD, chains_to_end, decoder)
from kbatch.lib.resync import next_valid_batch
from kbatch.lib.views import SourceHold
from kbatch.lib.txn import TxnState, apply_isolation, check_isolation
from kbatch.wire import UNBOUNDED

DEFAULT_CHUNK_RECORDS = 1 << 18
DEFAULT_CHUNK_BYTES = 32 << 20
DEFAULT_MAX_BATCH_BYTES = 1 << 30
MAX_DECOMPRESSED_CAP = (1 << 30) - 1   # keeps a chunk addressable by int32 offsets
ON_CORRUPT = ("raise", "stop", "skip")


def _default_read_limit() -> int:
    """Half the machine's memory, at most 16 GiB (4 GiB when unknown)."""
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 4 << 30
    return max(1 << 30, min(16 << 30, ram // 2))


DEFAULT_MAX_READ_BYTES = _default_read_limit()


@dataclass(frozen=True)
class DecodeOptions:
    """What every read accepts (keyword arguments of read_segment & co).

    validate_crc: check every batch's CRC (CRC-32C; CRC-32 for magic 0/1).
    strict: a truncated last batch or zero padding raises instead of being
        reported in ``Records.end``.
    include_control: also return control records as data rows.
    on_corrupt: "raise" (default), "stop": end the data before the first
        corrupt batch and report it in ``Records.end`` (a partition read
        returns nothing after it), or "skip": continue at the next valid
        batch (see ``kbatch.lib.resync`` for what that means and costs) and
        list every damaged range passed over in ``Records.skipped``.

    Limits against hostile input, each refused with ``LimitExceededError``
    (a ``CorruptRecordError``) before the memory is taken:

    max_decompressed_bytes: one batch's decompressed records (256 MiB).
    max_batch_bytes: one batch on disk (1 GiB).
    max_records_per_batch: records in one batch (16 Mi).
    max_headers_per_record: headers of one record (65536).
    max_read_bytes: decoded columns held by one read: the whole result of
        ``read_segment``/``log.read``, one chunk of the ``iter`` functions
        (half the machine's memory, at most 16 GiB).

    zero_copy: keys and values as Arrow binary views (``kbatch.lib.views``)
        over the source's own bytes (the mapped file) and the decompressed
        records, instead of copies; the result keeps them alive (a file
        stays mapped while a result points into it). Headers and control
        records are copied either way.
    columns: a projection, e.g. ``["offset", "timestamp"]`` (names from
        ``PROJECTABLE``): key, value and headers left out are checked as
        usual (a corrupt record still raises) but not stored, and read as
        ``MissingColumn`` (``ColumnNotReadError`` on access; absent from
        ``to_arrow()``). offset, timestamp, timestamp_type and the batch
        table cost nothing extra and are always there. None: every column.
    """

    validate_crc: bool = True
    strict: bool = False
    include_control: bool = False
    on_corrupt: str = "raise"
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES
    max_records_per_batch: int = 1 << 24
    max_headers_per_record: int = 1 << 16
    max_read_bytes: int = DEFAULT_MAX_READ_BYTES
    zero_copy: bool = False
    columns: tuple | None = None

    def __post_init__(self):
        if self.columns is not None:
            object.__setattr__(self, "columns", projection(self.columns))
        if self.on_corrupt not in ON_CORRUPT:
            raise ValueError(f"on_corrupt must be one of {', '.join(map(repr, ON_CORRUPT))}, "
                             f"not {self.on_corrupt!r}")
        if not 0 < self.max_decompressed_bytes <= MAX_DECOMPRESSED_CAP:
            raise ValueError(f"max_decompressed_bytes must be in (0, {MAX_DECOMPRESSED_CAP}]")
        for name in ("max_batch_bytes", "max_records_per_batch", "max_headers_per_record",
                     "max_read_bytes"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")


# what ``columns=`` may name: the per-record columns of ``Records`` that
# to_arrow() has (offset, timestamp, timestamp_type, key, value, headers)
PROJECTABLE = tuple(c.name for c in RECORD_COLUMNS if c.arrow is not None)


def projection(columns) -> tuple:
    """``columns`` checked and in ``PROJECTABLE`` order; a bare string, an
    unknown name or an empty list raise ``ArgumentError``."""
    if isinstance(columns, (str, bytes)):
        raise ArgumentError(f"columns must be a list of column names, not {columns!r}")
    try:
        asked = list(columns)
    except TypeError:
        raise ArgumentError(f"columns must be a list of column names, "
                            f"not {type(columns).__name__}") from None
    unknown = [c for c in asked if c not in PROJECTABLE]
    if unknown:
        raise ArgumentError(f"unknown column{'s' if len(unknown) > 1 else ''} "
                            f"{', '.join(map(repr, unknown))} in columns; valid: "
                            f"{', '.join(PROJECTABLE)}")
    if not asked:
        raise ArgumentError(f"columns is empty; name at least one of {', '.join(PROJECTABLE)}")
    return tuple(c for c in PROJECTABLE if c in asked)


class _Mapping(mmap.mmap):
    """A file's read-only mapping. ``zeros_from``: where the file's trailing
    hole starts (-1: none), so the decoder knows those bytes are zeros
    without touching their pages."""

    zeros_from = -1


# madvise(MADV_POPULATE_READ) (Linux 5.14): fault in a range of a mapping
_MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22)


def _populate(mm: mmap.mmap, length: int) -> None:
    """Fault in the first ``length`` bytes (the file's data, not its hole):
    best effort, a failure only costs page faults later. The GIL is
    released meanwhile (``_mapguard.populate``: threads reading other
    segments go on; ``mmap.madvise`` would hold it)."""
    if length <= 0:
        return
    view = memoryview(mm)
    try:
        populate(view, length, _MADV_POPULATE_READ)
    finally:
        view.release()


def _advise_huge(mm: mmap.mmap) -> None:
    """Ask for transparent huge pages on the mapping (best effort), before
    any page is faulted in. Linux places a large file mapping at a 2 MiB
    boundary; where the file system caches files in large folios (seen with
    ext4 on Linux 6.18), pages this mapping reads from disk come into the
    page cache as 2 MiB folios, and every later mapping of them (by anyone)
    costs one page-table entry per 2 MiB instead of 512: for a 600 MB
    segment, mapping and unmapping it fall from ~37 ms (pages cached as a
    writer's 16 KiB appends left them) to under 1 ms. Pages already cached
    stay as they are; nothing is copied. Populating uses MADV_POPULATE_READ
    (Linux 5.14); older kernels fault the pages in as they are read."""
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is None or not hasattr(mm, "madvise"):
        return
    try:
        mm.madvise(advice)
    except OSError:
        pass


def _map_file(path: str, populate: bool) -> "_Mapping | None":
    """The whole file mapped read-only (None when it is empty). Only regular
    files (``NotRegularFileError`` otherwise: a FIFO is never opened for
    reading, so it never blocks). ``populate`` faults in the pages that hold
    data, never a preallocated or sparse tail."""
    fd = open_regular(path)
    if fd is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return None
        data = data_end(fd, size)
        try:
            mm = _Mapping(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
        except ValueError as exc:
            # Python's mmap checks the size again: the file shrank meanwhile
            now = os.fstat(fd).st_size
            raise FileChangedError(f"the file changed size while being opened ({size} "
                                     f"bytes, then {now}: {exc})", path=path,
                                     position=now) from None
    finally:
        os.close(fd)
    mm.zeros_from = data if data < size else -1
    _advise_huge(mm)
    if populate:
        # only the data is faulted in, never a preallocated or sparse tail
        _populate(mm, data)
    elif hasattr(mm, "madvise"):
        mm.madvise(mmap.MADV_SEQUENTIAL)
    return mm


def map_guarded(path: str | os.PathLike, populate: bool = False):
    """For zero-copy reads: ``(mapping, guard)``, the whole file mapped
    read-only as ``open_source`` maps it, and its ``MappingGuard`` (None when
    kbatch's table of guarded mappings is full: read in copy mode then);
    None for an empty file.

    Truncating the file later no longer kills the process: a lost page reads
    as zeros and ``guard.check()`` raises ``MappingInvalidatedError``. Keep
    both alive as long as anything points into the mapping (the result owns
    them) and never close the mapping (the guard's buffer export forbids it
    while registered): dropping the last reference unregisters and unmaps.
    Keeps no memory beyond the mapping and one table slot.
    """
    path = os.fspath(path)
    mm = _map_file(path, populate)
    if mm is None:
        return None
    return mm, try_guard(mm, path=path)


def zeros_from(view) -> int:
    """Where the trailing hole of the file behind ``view`` (a whole mapping
    from ``open_source``) starts; -1 when unknown or none."""
    owner = getattr(view, "obj", None)
    if isinstance(owner, _Mapping) and view.nbytes == len(owner):
        return owner.zeros_from
    return -1


OPTION_NAMES = tuple(f.name for f in fields(DecodeOptions))


def check_options(where: str, options: dict, extra: tuple = ()) -> None:
    """``ArgumentError`` naming every key of ``options`` that is neither a
    ``DecodeOptions`` field nor in ``extra``, and listing the valid ones."""
    valid = OPTION_NAMES + tuple(extra)
    unknown = sorted(k for k in options if k not in valid)
    if unknown:
        raise ArgumentError(
            f"{where}: unknown option{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(map(repr, unknown))}; valid options: {', '.join(sorted(valid))}")


def decode_options(where: str, options: dict) -> DecodeOptions:
    """``DecodeOptions(**options)``, unknown names refused by ``check_options``."""
    check_options(where, options)
    return DecodeOptions(**options)


@contextmanager
def _copied_file(path: str):
    """The file at ``path`` copied into this thread's copy buffer
    (``kbatch.lib.copyread``), or None when it should be mapped (few reads
    in flight, a trailing hole, the copy budget spent)."""
    if copyread.readers() < copyread.COPY_FROM_READERS:
        yield None
        return
    fd = open_regular(path)
    if fd is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), path)
    try:
        size = os.fstat(fd).st_size
        if size == 0 or data_end(fd, size) < size:
            yield None
            return
        with copyread.copied(fd, size, path) as view:
            yield view
    finally:
        os.close(fd)


@contextmanager
def open_source(source, *, populate: bool = False, copy: bool = False):
    """``(buffer, path)`` for a path (memory-mapped, read-only) or a bytes-like.

    A path is never read into a bytes object: its pages are mapped and
    decoded in place. ``populate`` faults in every page that holds data up
    front (faster for a whole-file read; a streaming read leaves it off); a
    preallocated or sparse tail is never touched. ``copy``: the read copies
    what it decodes (not zero_copy) and reads the whole file; it is then
    counted among the reads in flight, and while many are, the file is
    copied (pread) into a buffer the thread keeps instead of mapped
    (``kbatch.lib.copyread``: mapping does not scale across many threads). A path that is not a
    regular file raises ``NotRegularFileError`` (a ``KbatchError``); a file
    that shrinks while it is opened or read raises ``CorruptRecordError``.
    The mapping is closed on exit unless a zero_copy result still points
    into it (``views.SourceHold``): then it is unmapped when the last such
    result goes.
    """
    if isinstance(source, (str, os.PathLike)) and copy:
        with copyread.reading(), _copied_file(os.fspath(source)) as view:
            if view is not None:
                yield view, os.fspath(source)
            else:
                with open_source(source, populate=populate) as opened:
                    yield opened
        return
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        mm = _map_file(path, populate)
        if mm is None:
            yield memoryview(b""), path
            return
        try:
            view = memoryview(mm)
            try:
                yield view, path
            finally:
                view.release()
        finally:
            try:
                mm.close()
            except BufferError:
                pass    # zero_copy windows of it are alive: they keep it mapped
        return
    try:
        view = memoryview(source)
    except TypeError:
        raise TypeError(f"source must be a path or a bytes-like object, "
                        f"not {type(source).__name__}") from None
    if not view.c_contiguous:
        raise ValueError("source buffer must be contiguous")
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    yield view, None


def decompress_pending(dec: _batch.BatchDecoder, path, limit: int) -> None:
    """Decompress the batch the decoder waits on (a guarded copy of its bytes)
    and feed it back; a codec failure becomes the decoder's error."""
    codec, start, stop, position, base_offset, magic = dec.pending()
    try:
        records = decompress(codec, dec.pending_bytes(), limit, magic=magic)
    except CodecError as exc:
        cls = DecompressionLimitError if exc.over_limit else CorruptRecordError
        dec.fail_pending(cls(exc.reason, path=path, position=position,
                             base_offset=base_offset, batch_position=position))
        return
    dec.feed(records)


def project_columns(data: dict, columns: tuple) -> None:
    """Leave out of a decoded chunk the columns a projection did not ask
    for (key and value, when only one of them was: the other was decoded
    alongside) and record the projection for the error messages."""
    data["projection"] = columns
    for name in ("key", "value"):
        if name not in columns:
            data[name] = None
    if "headers" not in columns:
        data["headers"] = data["header_key"] = data["header_value"] = None


class ViewFinders:
    """What the end of a decode looks past the decoder's bytes with, over
    one buffer: the next valid batch (``kbatch.lib.resync``), whether valid
    batches chain to an end, the base offset at a position."""

    def __init__(self, view, path, max_batch_bytes: int):
        self.view, self.path, self.max_batch_bytes = view, path, max_batch_bytes

    def next_valid(self, start: int, stop: int, after_offset: int) -> tuple[int, int] | None:
        found = next_valid_batch(self.view, start, stop, after_offset=after_offset,
                                 max_batch_bytes=self.max_batch_bytes, path=self.path)
        return None if found is None else (found[0], int(found[1]["base_offset"]))

    def chains(self, position: int, stop: int) -> bool:
        return chains_to_end(self.view, position, stop, self.path)

    def base_offset_at(self, position: int) -> int | None:
        return _base_offset_at(self.view, position)


class OneView:
    """The windows of ``decode_chunks`` over one buffer: the buffer itself.
    (A ranged source gives a window at a time: ``sources.RangeWindows``.)"""

    def __init__(self, view, stop: int | None, more_follows: bool, path, max_batch_bytes: int):
        self.view = view
        self.stop = len(view) if stop is None else min(stop, len(view))
        self._stop_arg = stop
        self._more = more_follows
        self._finders = ViewFinders(view, path, max_batch_bytes)

    def first(self, start: int):
        return self.view, self._stop_arg

    def more_follows(self, window_stop) -> bool:
        return self._more

    def needs(self, dec, window_stop) -> int | None:
        return None                  # one buffer: where the decoder stops, the data ends

    def holds(self, view, position: int) -> bool:
        return True

    def finders(self, view):
        return self._finders


def decode_chunks(view, path, opts: DecodeOptions, *, start: int = 0,
                  stop: int | None = None, chunk_records: int = UNBOUNDED,
                  chunk_bytes: int = 1 << 30, control_only: bool = False,
                  drop_positions=None, after_offset: int = -1,
                  more_follows: bool = False, control_crc: bool = False,
                  windows=None) -> Iterator[Records]:
    """Decode ``view[start:stop]`` into Records chunks of whole batches.

    ``after_offset``: the last offset read before ``start`` (a resync after
    damage only accepts batches above it; skipped ranges name it).
    ``more_follows``: the view is a range of a larger object: zeros
    reaching its end are damage, not a padded tail.
    ``control_crc``: with ``validate_crc=False``, control batches are still
    checked (a transaction pass trusts their markers).
    ``windows``: the bytes a window at a time instead of ``view`` (an
    object read in ranges, ``kbatch.lib.sources.RangeWindows``): one
    decoder goes on from window to window (``continue_with``), so chunks,
    ends, skipped ranges and errors are those of the same bytes in one
    buffer; ``stop`` is then the windows'.

    Keeps in memory: the columns of one chunk and one decompressed batch
    (and, with ``windows``, the window being decoded).
    The last chunk carries ``end``; earlier ones have ``end=None``.
    ``control_only``: data batches are listed but their records not decoded.
    ``drop_positions`` (sorted int64 batch positions): the records of those
    batches are walked and checked as in a full decode, and not stored.

    A batch whose length runs past the end is a torn tail (``end.reason ==
    "truncated"``) unless valid batches follow it one after another up to
    the end exactly: then its length field is damaged and it is treated as
    corrupt (raise, stop or skip). With ``on_corrupt="skip"`` the decode resumes at the next valid
    batch (``kbatch.lib.resync``) and the chunk after the gap lists it in
    ``skipped``.
    """
    if windows is None:
        windows = OneView(view, stop, more_follows, path, opts.max_batch_bytes)
    # a chunk never holds more than max_read_bytes (plus one batch)
    chunk_bytes = min(chunk_bytes, max(opts.max_read_bytes // 2, 1))
    # zero_copy: the columns point into the source (control_only reads have none)
    views = getattr(opts, "zero_copy", False) and not control_only and not skips_payload(opts)
    held = 0
    skipped: list[SkippedRange] = []
    last_offset = after_offset
    position = start
    view, wstop = windows.first(start)
    holds: list = []                 # zero_copy: the windows this chunk's views point into
    if views:
        hold = SourceHold(view, path)
        if not hold.guarded:
            # the SIGBUS guard's table is full: copy rather than leave an unguarded view
            opts, views = replace(opts, zero_copy=False), False
        else:
            holds.append(hold)
    while True:
        dec = decoder(view, path, opts, position, wstop, chunk_records, chunk_bytes,
                      control_only=control_only, drop_positions=drop_positions,
                      zeros_from=zeros_from(view), more_follows=windows.more_follows(wstop),
                      control_crc=control_crc, data_end=windows.stop)
        if chunk_records >= UNBOUNDED and held:
            dec.set_read_budget(opts.max_read_bytes - held)   # one budget per read
        resume = None
        try:
            while True:
                status = dec.run()
                if status == _batch.STATUS_COMPRESSED:
                    decompress_pending(dec, path, opts.max_decompressed_bytes)
                    continue
                if status != _batch.STATUS_CHUNK_FULL:
                    need = windows.needs(dec, wstop)
                    if need is not None:        # the window ended, not the data: the next one
                        at = dec.valid_end
                        if views:
                            found = dec.source_windows()
                            if found:
                                dec.replace_source_windows(SourceHold.windows(view, found))
                        view, wstop = windows.next(at, need)
                        if views:
                            holds.append(SourceHold(view, path))
                        dec.continue_with(view, start=at, stop=wstop, path=path,
                                          zeros_from=zeros_from(view),
                                          drop_positions=drop_positions,
                                          more_follows=windows.more_follows(wstop),
                                          data_end=windows.stop)
                        continue
                cols = dec.take()
                if opts.columns is not None:
                    project_columns(cols["data"], opts.columns)
                if views:      # zero_copy: what the views point into
                    data = cols["data"]
                    data["buffers"] = SourceHold.windows(view, data["buffers"])
                    data["holds"] = tuple(holds)
                    holds = holds[-1:]
                rows = cols["batches"]
                if len(rows):
                    last_offset = max(last_offset, int(rows["last_offset"].max()))
                end, gap = None, None
                if status != _batch.STATUS_CHUNK_FULL:
                    end, resume, gap = end_of_data(view, path, opts, dec, last_offset,
                                                   windows.finders(view), windows.stop)
                chunk = Records.from_chunk(cols, end, path, skipped)
                skipped = []
                held = chunk.nbytes if chunk_records < UNBOUNDED else held + chunk.nbytes
                if held > opts.max_read_bytes:
                    raise LimitExceededError(
                        f"decoded data exceeds max_read_bytes={opts.max_read_bytes} "
                        "(read in chunks with iter_segment / log.iter)",
                        path=path, position=dec.position, base_offset=None)
                # the decoder refuses a batch whose rows would pass what is left
                dec.set_read_budget(opts.max_read_bytes - held if chunk_records >= UNBOUNDED
                                    else opts.max_read_bytes)
                if gap is not None:
                    skipped.append(gap)   # rides on the chunk after the gap
                if resume is None and gap is not None:
                    # nothing valid after the gap: the final chunk carries it
                    chunk = chunk.replace(skipped=chunk.skipped + (gap,))
                    skipped = []
                if resume is None or len(chunk) or len(chunk.batches) or chunk.skipped:
                    yield chunk
                del chunk  # the consumer's copy is the only one while the next decodes
                if status != _batch.STATUS_CHUNK_FULL:
                    break
        finally:
            dec.release()
        if resume is None:
            return
        position = resume
        if not windows.holds(view, resume):      # resume beyond the window: a new one
            view, wstop = windows.next(resume, 0)
            if views:
                holds = [SourceHold(view, path)]


def end_of_data(view, path, opts: DecodeOptions, dec, last_offset: int, finders=None,
                stop: int | None = None) -> tuple:
    """``(end, resume, gap)`` when the decoder stopped: where the data ends
    (None when the decode resumes), and with ``on_corrupt="skip"`` the
    position to resume at (None: the data ends) and the damaged range.
    ``finders``: what looks past the decoder's bytes (default: ``view``'s
    ``ViewFinders``); ``stop``: where the data ends (default: the
    decoder's stop)."""
    stop = dec.stop if stop is None else stop
    finders = finders or ViewFinders(view, path, opts.max_batch_bytes)
    end = SegmentEnd(dec.valid_end, stop - dec.valid_end, dec.end_reason, dec.end_error)
    if end.reason not in ("corrupt", "truncated"):
        return end, None, None
    found = finders.next_valid(end.valid_bytes + 1, stop, last_offset)
    error = end.error
    if end.reason == "truncated":
        if found is None or not finders.chains(found[0], stop):
            return end, None, None    # a torn tail: no run of valid batches follows
        error = DamagedLengthError(
            f"batch length runs past the end of the data, but a valid batch starts "
            f"{found[0] - end.valid_bytes} bytes on: a damaged length field", path=path,
            position=end.valid_bytes + 8, base_offset=finders.base_offset_at(end.valid_bytes),
            batch_position=end.valid_bytes)
        if opts.on_corrupt == "raise":
            raise error
    if opts.on_corrupt != "skip":
        return SegmentEnd(end.valid_bytes, end.trailing_bytes, "corrupt", error), None, None
    gap = SkippedRange(path, end.valid_bytes, stop if found is None else found[0],
                       end.reason, last_offset if last_offset >= 0 else None,
                       None if found is None else found[1],
                       None if error is None else str(error))
    if found is None:
        return SegmentEnd(stop, 0, None, None), None, gap
    return None, found[0], gap


def _base_offset_at(view, position: int) -> int | None:
    if len(view) - position < 8:
        return None
    return int.from_bytes(view[position:position + 8], "big", signed=True)


def transaction_state(view, path, opts: DecodeOptions, *, start: int = 0,
                      stop: int | None = None, control_crc: bool = False) -> tuple:
    """``(batches, control)`` of ``view[start:stop]``: every batch header and
    every control record, without decoding data records (``control_crc``:
    see ``decode_chunks``)."""
    parts = list(decode_chunks(view, path, opts, start=start, stop=stop, control_only=True,
                               control_crc=control_crc))
    whole = Records.concat(parts)
    return whole.batches, whole.control


def read_segment(source, *, validate_crc: bool = True, strict: bool = False,
                 max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
                 include_control: bool = False, on_corrupt: str = "raise",
                 isolation: str = "read_uncommitted",
                 start: int = 0, stop: int | None = None,
                 **limits) -> Records:
    """Decode a whole segment file or buffer into one ``Records``.

    ``source``: a path (memory-mapped, decoded in place) or any bytes-like
    object (bytes, bytearray, memoryview, mmap, numpy uint8 array).
    ``start``/``stop``: byte range to read (``start`` must be a batch
    boundary, e.g. a position from an ``.index`` file).

    ``isolation``: "read_uncommitted" (everything but control records) or
    "read_committed" (transactions resolved from the markers in this
    source alone; see ``kbatch.lib.txn``; ``records.last_stable_offset`` says
    where the LSO is). For a whole partition use ``open_log(...).read``.

    Keeps in memory: the decoded columns (about the size of the keys,
    values and headers plus 22 bytes per record) and one decompressed batch.
    With ``zero_copy=True`` keys and values are binary views (32 bytes a
    record) into the source and the decompressed records, which the result
    keeps (a file stays mapped while it lives; see ``kbatch.lib.views``).
    Raises ``CorruptRecordError`` on corrupt data (see ``DecodeOptions``).
    """
    opts = read_options("read_segment", validate_crc=validate_crc, strict=strict,
                        include_control=include_control, on_corrupt=on_corrupt,
                        max_decompressed_bytes=max_decompressed_bytes, isolation=isolation,
                        **limits)
    with open_source(source, populate=True, copy=not opts.zero_copy) as (view, path):
        return read_view(view, path, opts, isolation, start, stop)


def read_options(where: str, *, isolation: str = "read_uncommitted", extra: tuple = (),
                 **options) -> DecodeOptions:
    """The ``DecodeOptions`` of a one-segment read (``isolation`` checked;
    ``extra``: other accepted names, not decode options)."""
    check_isolation(isolation)
    check_options(where, options, extra)
    return DecodeOptions(**{k: v for k, v in options.items() if k not in extra})


def read_view(view, path, opts: DecodeOptions, isolation: str, start: int = 0,
              stop: int | None = None) -> Records:
    """``read_segment`` of a buffer (``path``: what errors name): the one
    whole-segment decode, whether the bytes are a file's mapping or an
    object's fetched range."""
    if isolation == "read_committed":
        return _read_committed(view, path, opts, start, stop)
    return Records.concat(list(decode_chunks(view, path, opts, start=start, stop=stop)))


def _dropped_positions(state: TxnState, batches: BatchTable) -> np.ndarray:
    """Positions of the batches whose records a read_committed read leaves
    out: aborted and open transactions, and everything at or after the LSO."""
    return np.ascontiguousarray(batches.position[state.dropped(batches)], np.int64)


def _read_committed(view, path, opts: DecodeOptions, start: int, stop: int | None) -> Records:
    """read_segment's read_committed: transactions resolved first from the
    batch headers and control records (a cheap pass), then one decode that
    leaves out the records of aborted and open transactions as it goes (no
    copy of the kept rows afterwards). When that decode does not see the
    same batches and markers as the first pass (corrupt data ends it
    elsewhere), the result comes from a plain decode filtered afterwards,
    so it is always what filtering the read_uncommitted result gives."""
    try:
        # no CRC pass here (the decode checks every batch): a damaged batch
        # makes the two passes disagree, and then the plain path decides
        batches, control = transaction_state(view, path, replace(opts, validate_crc=False),
                                             start=start, stop=stop,
                                             control_crc=bool(opts.validate_crc))
    except CorruptRecordError:
        batches = None
    if batches is not None:
        state = TxnState.build(batches, control)
        records = Records.concat(list(decode_chunks(
            view, path, opts, start=start, stop=stop,
            drop_positions=_dropped_positions(state, batches))))
        if (np.array_equal(records.batches.position, batches.position)
                and np.array_equal(records.control.offset, control.offset)):
            return state.filter(records, verdicts_applied=True)
    records = Records.concat(list(decode_chunks(view, path, opts, start=start, stop=stop)))
    return apply_isolation(records, "read_committed")


def iter_segment(source, *, chunk_records: int = DEFAULT_CHUNK_RECORDS,
                 chunk_bytes: int = DEFAULT_CHUNK_BYTES, validate_crc: bool = True,
                 strict: bool = False,
                 max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
                 include_control: bool = False, on_corrupt: str = "raise",
                 isolation: str = "read_uncommitted",
                 start: int = 0, stop: int | None = None,
                 **limits) -> Iterator[Records]:
    """Decode a segment chunk by chunk: ``Records`` of whole batches each.

    A chunk ends after the batch that brings it to ``chunk_records`` records
    or ``chunk_bytes`` bytes (keys, values and headers, plus 34 bytes a
    record for its offset, timestamp, offsets and validity). Keeps in memory one
    chunk and one decompressed batch, whatever the file size; the file stays
    mapped until the iterator is exhausted or closed (with ``zero_copy=True``,
    until the last chunk pointing into it is gone, and a chunk holds the
    decompressed records its views point into). Concatenating the chunks
    gives exactly what ``read_segment`` returns; the last chunk (possibly
    empty) carries ``end``. With ``isolation="read_committed"`` a first pass
    over the batch headers and control records resolves the transactions
    (it keeps one row per batch and the control records), then the chunks
    leave out aborted and open transactions as they are decoded. With
    ``on_corrupt="stop"``/``"skip"`` that first pass is a whole decode
    (it costs a second decode), so the chunks stop or skip exactly where
    ``read_segment`` does.
    """
    opts = read_options("iter_segment", validate_crc=validate_crc, strict=strict,
                        include_control=include_control, on_corrupt=on_corrupt,
                        max_decompressed_bytes=max_decompressed_bytes, isolation=isolation,
                        **limits)
    if chunk_records < 1 or chunk_bytes < 1:
        raise ValueError("chunk_records and chunk_bytes must be positive")
    return _iter_chunks(source, opts, start, stop, chunk_records, chunk_bytes, isolation)


def _exact_transaction_state(decode, opts, start, stop, chunk_records, chunk_bytes):
    """The transactions of ``[start, stop)`` from a full decode that keeps
    only the batch and control tables: it stops (or raises) exactly where
    the chunks will, so they match ``read_segment`` even on corrupt data."""
    tables, controls, shift = [], [], 0
    for chunk in decode(opts, start=start, stop=stop, chunk_records=chunk_records,
                        chunk_bytes=chunk_bytes):
        tables.append(chunk.batches)
        controls.append(chunk.control.shifted(shift))
        shift += len(chunk.batches)
        del chunk
    batches = BatchTable.concat(tables)
    return TxnState.build(batches, ControlRecords.concat(controls)), batches


def _committed_chunks(decode, path, opts, start, stop, chunk_records, chunk_bytes):
    """iter_segment's read_committed with ``on_corrupt="raise"``: the
    transactions resolved from the batch headers and control records (a
    pass that reads 61 bytes a batch and decodes only control batches,
    whose CRCs it checks: a damaged marker must not decide what earlier
    chunks show), then one decode that leaves the records of aborted and open
    transactions out as it goes. Each chunk's batches are checked against
    the first pass; None when that pass itself fails (the caller then
    takes the exact path). A decode that meets damage raises there, as
    read_segment does (chunks before it may already have been yielded, as
    with every iter read)."""
    try:
        whole = Records.concat(list(decode(replace(opts, validate_crc=False), start=start,
                                           stop=stop, control_only=True,
                                           control_crc=bool(opts.validate_crc))))
    except CorruptRecordError:
        return None
    batches, control = whole.batches, whole.control
    state = TxnState.build(batches, control)
    return _checked_committed(decode, path, opts, start, stop, chunk_records, chunk_bytes,
                              state, batches)


def _checked_committed(decode, path, opts, start, stop, chunk_records, chunk_bytes, state,
                       batches):
    expected = batches.position
    seen = 0
    for chunk in decode(opts, start=start, stop=stop, chunk_records=chunk_records,
                        chunk_bytes=chunk_bytes,
                        drop_positions=_dropped_positions(state, batches)):
        got = chunk.batches.position
        if not np.array_equal(got, expected[seen:seen + len(got)]):
            raise FileChangedError("the segment changed between the transaction pass and "
                                   "the decode", path=path,
                                   position=int(got[0]) if len(got) else None)
        seen += len(got)
        yield state.filter(chunk, verdicts_applied=True)
        del chunk
    if seen != len(expected):
        raise FileChangedError("the segment changed between the transaction pass and the "
                               "decode", path=path)


def _iter_chunks(source, opts, start, stop, chunk_records, chunk_bytes, isolation):
    with open_source(source) as (view, path):
        def decode(o, **kw):
            return decode_chunks(view, path, o, **kw)
        yield from iter_decoded(decode, path, opts, start, stop, chunk_records, chunk_bytes,
                                isolation)


def iter_decoded(decode, path, opts, start, stop, chunk_records, chunk_bytes, isolation):
    """``iter_segment``'s chunks from ``decode(opts, start=, stop=, ...)``,
    a streaming decode of one segment with ``decode_chunks``' keywords (a
    file's mapping, or an object read in ranges): the one chunked read,
    whichever source feeds it."""
    state = drop = None
    if isolation == "read_committed" and opts.on_corrupt == "raise":
        chunks = _committed_chunks(decode, path, opts, start, stop, chunk_records,
                                   chunk_bytes)
        if chunks is not None:
            yield from chunks
            return
    if isolation == "read_committed":
        # the second decode walks the same batches as the first, so the
        # records of aborted/open batches are left out as it goes
        state, batches = _exact_transaction_state(decode, opts, start, stop,
                                                   chunk_records, chunk_bytes)
        drop = _dropped_positions(state, batches)
    for chunk in decode(opts, start=start, stop=stop, chunk_records=chunk_records,
                        chunk_bytes=chunk_bytes, drop_positions=drop):
        yield chunk if state is None else state.filter(chunk, verdicts_applied=True)
        del chunk
