# cython: language_level=3
"""Status codes and row layouts shared by the decoders, and ``set_error``."""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint32_t


cdef enum RunStatus:
    ST_ERROR = -1
    ST_CHUNK_FULL = 1    # the chunk holds enough; call take() and run() again
    ST_END = 2           # no more batches: see end_reason
    ST_COMPRESSED = 3    # a compressed batch waits: pending() / feed()


cdef enum CrcMode:
    CRC_SKIP = 0         # validate_crc=False
    CRC_RAISE = 1        # a wrong CRC is an error
    CRC_REPORT = 2       # a wrong CRC is recorded (crc_valid = 0), records skipped


cdef enum EndReason:
    END_NONE = 0         # the data ends exactly at a batch boundary
    END_TRUNCATED = 1    # the last batch runs past the end of the data
    END_ZERO_PADDING = 2 # zeros from here on (preallocated segment)
    END_CORRUPT = 3      # a corrupt batch, with on_corrupt="stop"


cdef enum ErrorCode:
    E_NONE = 0
    E_NOMEM
    E_CRC
    E_MAGIC
    E_BATCH_LENGTH
    E_COUNT_NEGATIVE
    E_COUNT_TOO_LARGE
    E_FEW_RECORDS
    E_RECORD_LENGTH
    E_RECORD_TRUNCATED
    E_VARINT
    E_RECORD_SIZE
    E_HEADER_COUNT
    E_HEADER_KEY_NULL
    E_HEADER_KEY_UTF8
    E_TRAILING_BYTES
    E_LIMIT_BATCH_BYTES
    E_LIMIT_RECORDS
    E_LIMIT_HEADERS
    E_LEGACY_LENGTH
    E_LEGACY_NESTED
    E_LEGACY_ATTRIBUTES
    E_LEGACY_KEY_VALUE
    E_LEGACY_EMPTY
    E_LEGACY_OFFSETS
    E_LEGACY_NULL_WRAPPER
    E_LIMIT_READ_BYTES
    E_RECORD_OFFSET


cdef struct ErrorInfo:
    int code
    int64_t position        # byte in the source where the problem was found
    int64_t batch_position  # byte where the batch (or legacy message) starts
    int64_t base_offset     # of that batch, -1 when not known
    int64_t inner           # byte in the decompressed records, -1 if n/a
    int64_t a               # details for the message (expected, found, ...)
    int64_t b


# One row of the batch table (numpy structured dtype built from this layout).
cdef struct BatchRow:
    int64_t base_offset
    int64_t last_offset
    int64_t position
    int64_t producer_id
    int64_t base_timestamp
    int64_t max_timestamp
    int32_t size
    int32_t partition_leader_epoch
    int32_t base_sequence
    int32_t records_count
    uint32_t crc
    int16_t producer_epoch
    int16_t attributes
    int8_t magic
    int8_t codec
    int8_t timestamp_type
    uint8_t is_transactional
    uint8_t is_control
    uint8_t has_delete_horizon
    int8_t crc_valid        # 1 valid, 0 wrong (validate_crc="report"), -1 not checked
    uint8_t _pad


# Derived fields of one control record (row i of the control columns).
cdef struct ControlRow:
    int32_t coordinator_epoch   # ABORT/COMMIT value, -1 otherwise
    int16_t version             # key version, -1 when the key is too short
    int16_t type                # 0 ABORT, 1 COMMIT, 2.. KRaft, -1 unparseable
    int16_t value_version       # ABORT/COMMIT value version, -1 otherwise
    int16_t _pad


cdef struct Limits:
    Py_ssize_t max_batch_bytes
    Py_ssize_t max_records_per_batch
    Py_ssize_t max_headers_per_record
    Py_ssize_t max_read_bytes   # the limit in force (for messages)
    Py_ssize_t read_budget      # bytes the current chunk may still hold


cdef inline int set_error(ErrorInfo *err, int code, int64_t position,
                           int64_t inner, int64_t a, int64_t b) noexcept nogil:
    err.code = code
    err.position = position
    err.inner = inner
    err.a = a
    err.b = b
    return ST_ERROR
