"""The one place the compiled decoder (``_core._batch.BatchDecoder``) is made.

Every other module decodes through these functions:

    decoder(view, path, opts, ...)   the full walk of a read (segment.py)
    batch_at(view, position, ...)    the header row of one whole, CRC-valid
                                     batch, or None (index checks, seeks,
                                     resynchronisation after damage)
    header_walk(view, path, ...)     header rows up to the first damage
                                     (seeks, split points; header_walk_ends:
                                     also where and why the walk ended)
    header_rows(view, path, ...)     header rows of a range, damage raises
                                     (counts from batch headers)
    chains_to_end(view, pos, stop)   valid batches follow each other exactly
                                     to ``stop`` (torn tail or damaged length?)
    empty_chunk()                    what a decoder gives for no bytes
    read_mapped(view, pos, n, path)  bytes of a mapping, read under the
                                     SIGBUS guard (never slice a mapping in
                                     Python: a file truncated meanwhile would
                                     kill the process)

``opts`` is a ``segment.DecodeOptions`` (any object with its attributes).
"""

from __future__ import annotations

import os

import numpy as np

from kbatch._core import _batch, _mapguard
from kbatch.errors import CorruptRecordError, FileChangedError, LimitExceededError
from kbatch.wire import LOG_OVERHEAD, Header

# compressed batches are decompressed in the compiled walk, without the GIL
# (when the codec's library is reachable, see _core/_codecs.pyx);
# KBATCH_NATIVE_LZ4=0 (_GZIP, _SNAPPY, _ZSTD) sends that codec's batches
# through compression.py
NATIVE_LZ4 = os.environ.get("KBATCH_NATIVE_LZ4", "1") != "0"
NATIVE_GZIP = os.environ.get("KBATCH_NATIVE_GZIP", "1") != "0"
NATIVE_SNAPPY = os.environ.get("KBATCH_NATIVE_SNAPPY", "1") != "0"
NATIVE_ZSTD = os.environ.get("KBATCH_NATIVE_ZSTD", "1") != "0"

MIN_MESSAGE = 14          # the smallest batch or message after LOG_OVERHEAD
read_mapped = _mapguard.read_mapped


def decoder(view, path, opts, start: int, stop: int | None, chunk_records: int,
            chunk_bytes: int, *, control_only: bool = False, drop_positions=None,
            zeros_from: int = -1, more_follows: bool = False,
            control_crc: bool = False, expect_bytes: int = 0,
            data_end: int = -1) -> _batch.BatchDecoder:
    """A decoder of ``view[start:stop]`` with every option of the read.
    ``more_follows``: the view is a range of a larger object (zeros up to
    its end are damage, not a padded tail; ``data_end``: where the data
    ends, past ``stop``). ``control_crc``: with the CRC
    off, control batches are still checked (a failure raises).
    ``expect_bytes``: the data the first chunk will span over this source
    and those ``continue_with`` adds (sizes its first reservation)."""
    return _batch.BatchDecoder(
        view, start=start, stop=-1 if stop is None else stop, path=path,
        control_only=control_only, drop_positions=drop_positions,
        validate_crc=opts.validate_crc, include_control=opts.include_control,
        strict=opts.strict, stop_on_corrupt=opts.on_corrupt in ("stop", "skip"),
        chunk_records=chunk_records, chunk_bytes=chunk_bytes,
        max_batch_bytes=opts.max_batch_bytes,
        max_records_per_batch=opts.max_records_per_batch,
        max_headers_per_record=opts.max_headers_per_record,
        max_decompressed_bytes=opts.max_decompressed_bytes, native_lz4=NATIVE_LZ4,
        zeros_from=zeros_from, max_read_bytes=opts.max_read_bytes,
        native_gzip=NATIVE_GZIP, native_snappy=NATIVE_SNAPPY, native_zstd=NATIVE_ZSTD,
        zero_copy=getattr(opts, "zero_copy", False) and not control_only
        and not skips_payload(opts),
        skip_key=skips(opts, "key"), skip_value=skips(opts, "value"),
        skip_headers=skips(opts, "headers"),
        more_follows=more_follows, validate_control_crc=control_crc,
        expect_bytes=expect_bytes, data_end=data_end)


def skips(opts, column: str) -> bool:
    """A projection (``columns=``) without ``column`` (key, value or
    headers): the record loop checks it but does not store it."""
    cols = getattr(opts, "columns", None)
    return cols is not None and column not in cols


def skips_payload(opts) -> bool:
    """A projection without key and value (nothing for zero_copy to view)."""
    return skips(opts, "key") and skips(opts, "value")


def batch_at(view, position: int, path=None, *, stop: int | None = None):
    """Header row of a whole, CRC-valid batch starting at ``position`` and
    ending by ``stop`` (default: the end of ``view``), or None.

    The length field is read under the SIGBUS guard and the batch by the
    compiled decoder; a file truncated meanwhile raises ``FileChangedError``
    (a ``CorruptRecordError``) instead of passing for "no batch here"."""
    end = len(view) if stop is None else min(stop, len(view))
    if position < 0 or end - position < LOG_OVERHEAD:
        return None
    length = int.from_bytes(read_mapped(view, position + Header.LENGTH, 4, path),
                            "big", signed=True)
    if length < MIN_MESSAGE or length > end - position - LOG_OVERHEAD:
        return None
    dec = _batch.BatchDecoder(view, start=position, stop=position + LOG_OVERHEAD + length,
                              path=path, validate_crc=True, headers_only=True,
                              chunk_records=1)
    try:
        dec.run()
        rows = dec.take()["batches"]
    except FileChangedError:
        raise
    except (LimitExceededError, CorruptRecordError):
        return None
    finally:
        dec.release()
    return rows[0] if len(rows) else None


def header_walk(view, path, start: int = 0, *, zeros_from: int = -1) -> np.ndarray:
    """Header rows of the batches from ``start`` on (records are not
    decoded, CRCs not checked), ending at the first corrupt header: seeks
    use it only to find where to start decoding, and the decode then meets
    the damage and raises, stops or skips as the read's ``on_corrupt`` says."""
    return header_walk_ends(view, path, start, None, zeros_from=zeros_from)[0]


def header_walk_ends(view, path, start: int = 0, stop: int | None = None, *,
                     zeros_from: int = -1, crc: bool = False, more_follows: bool = False
                     ) -> tuple[np.ndarray, int, str | None]:
    """``header_walk`` of ``view[start:stop]``, with where and why it
    ended: ``(rows, valid_end, end_reason)`` (None: at ``stop``;
    "truncated": a batch runs past ``stop``, which a walk in windows reads
    on from ``valid_end``). ``crc``: a batch whose CRC fails ends it too
    (``chains_to_end``'s walk). ``more_follows``: ``stop`` is not the end
    of the data (a window of an object): zeros there are not its end."""
    dec = _batch.BatchDecoder(view, start=start, stop=-1 if stop is None else stop,
                              validate_crc=crc, headers_only=True, path=path,
                              stop_on_corrupt=True, zeros_from=zeros_from,
                              more_follows=more_follows)
    try:
        dec.run()
        return dec.take()["batches"], dec.valid_end, dec.end_reason
    finally:
        dec.release()


def header_rows(view, path, opts, start: int = 0,
                stop: int | None = None) -> tuple[np.ndarray, int]:
    """``(rows, valid_end)``: header rows of the batches in ``view[start:stop]``
    (records are not decoded) and where the whole batches end; damage raises
    ``CorruptRecordError`` as a full read with ``opts`` (its CRC check and
    limits) would. A caller compares ``valid_end`` with ``stop``: a torn or
    padded tail is not an error here, and whether it is one depends on where
    the segment sits in its partition."""
    dec = _batch.BatchDecoder(view, start=start, stop=-1 if stop is None else stop,
                              validate_crc=opts.validate_crc, headers_only=True, path=path,
                              max_batch_bytes=opts.max_batch_bytes,
                              max_records_per_batch=opts.max_records_per_batch)
    try:
        dec.run()
        return dec.take()["batches"], dec.valid_end
    finally:
        dec.release()


def chains_to_end(view, position: int, stop: int, path=None) -> bool:
    """True when CRC-valid batches follow one another from ``position``
    exactly to ``stop`` (a header walk, records not decoded)."""
    dec = _batch.BatchDecoder(view, start=position, stop=stop, validate_crc=True,
                              headers_only=True, stop_on_corrupt=True, path=path)
    try:
        dec.run()
        return dec.end_reason is None and dec.valid_end == stop
    except FileChangedError:
        raise
    except ValueError:
        return False
    finally:
        dec.release()


def empty_chunk() -> dict:
    """The columns of no records (what ``take()`` gives for no bytes)."""
    dec = _batch.BatchDecoder(b"")
    try:
        dec.run()
        return dec.take()
    finally:
        dec.release()
