# cython: language_level=3
"""How much a chunk's columns should reserve before the walk (a hint only).

Reads only batch headers (big-endian), of the uncompressed magic 2 batches
at the start of the data:

    off  field           used for
     8   batchLength     the batch's end; its records region (length + 12 - 61)
    16   magic           2, else the sample stops
    21   attributes      codec bits 0-2: none, else the sample stops
    57   recordsCount    records, at most one per MIN_RECORD_SIZE bytes

Growing columns as the walk goes moves buffers and maps fresh pages each
time; sizing them once from a sample avoids that. Reading every header of
a large file first would cost a cache miss per batch, so only the first
PRESIZE_SAMPLE_BYTES are sampled and scaled to the rest. Every length is
checked against the bytes that remain (``n <= end - pos``), so a hostile
header can only shrink the estimate, never point past the data.
"""

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t

from kbatch._core._columns cimport ROW_FIXED_BYTES
from kbatch._core._cursor cimport load_be16, load_be32
from kbatch._core._records cimport MIN_RECORD_SIZE
from kbatch._core._wire cimport (ATTR_CODEC, CODEC_NONE, H_ATTRIBUTES, H_LENGTH, H_MAGIC,
                                 H_RECORDS_COUNT, HEADER_V2, LOG_OVERHEAD)


cdef enum:
    PRESIZE_MIN_ROWS = 4096    # below this, growing as the walk goes costs nothing
    PRESIZE_SAMPLE_BYTES = 4 << 20


cdef inline Py_ssize_t presize_estimate(const uint8_t *buf, Py_ssize_t start,
                                        Py_ssize_t stop, Py_ssize_t expect_bytes,
                                        Py_ssize_t chunk_records, Py_ssize_t chunk_bytes,
                                        Py_ssize_t budget, Py_ssize_t *data_out) noexcept nogil:
    """Records to reserve for the chunk that starts at ``start`` (0: none
    worth it), and in ``data_out`` the value bytes. The sample's records
    and bytes per byte of data are scaled to ``stop - start`` or
    ``expect_bytes`` (the data of every source the chunk will span), then
    bounded by ``chunk_records``, ``chunk_bytes`` and the read ``budget``
    (bytes the chunk may still hold, ROW_FIXED_BYTES a record included)."""
    cdef Py_ssize_t pos = start, rows = 0, region, data = 0, walked, held, limit, span
    cdef int64_t length
    cdef int32_t count
    cdef bint sampled = False
    cdef double scale
    data_out[0] = 0
    while stop - pos >= HEADER_V2:
        if pos - start >= PRESIZE_SAMPLE_BYTES:
            sampled = True
            break
        length = <int32_t>load_be32(buf + pos + H_LENGTH)
        if (<int8_t>buf[pos + H_MAGIC] != 2 or length < HEADER_V2 - LOG_OVERHEAD
                or length > stop - pos - LOG_OVERHEAD
                or (load_be16(buf + pos + H_ATTRIBUTES) & ATTR_CODEC) != CODEC_NONE):
            break
        region = LOG_OVERHEAD + <Py_ssize_t>length - HEADER_V2
        count = <int32_t>load_be32(buf + pos + H_RECORDS_COUNT)
        if count < 0 or count > region // MIN_RECORD_SIZE:
            break
        rows += count
        data += region
        pos += LOG_OVERHEAD + <Py_ssize_t>length
        if rows >= chunk_records or data >= chunk_bytes:
            break    # a small chunk: the walk reached its end
    walked = pos - start
    if walked == 0:
        return 0
    if sampled:    # the rest of the data (and what follows), at the sample's density
        span = max(stop - start, expect_bytes)
        scale = <double>span / <double>walked
        rows = <Py_ssize_t>(rows * scale)
        data = <Py_ssize_t>(data * scale)
    if rows > chunk_records:    # the chunk holds only so many records
        data = <Py_ssize_t>(data * (<double>chunk_records / <double>rows))
        rows = chunk_records
    held = data + rows * <Py_ssize_t>ROW_FIXED_BYTES
    limit = min(chunk_bytes, budget)
    if held > limit:
        scale = <double>limit / <double>held
        rows = <Py_ssize_t>(rows * scale)
        data = <Py_ssize_t>(data * scale)
    if rows < PRESIZE_MIN_ROWS:
        return 0
    data_out[0] = data
    return rows
