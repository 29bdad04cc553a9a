# The wire vocabulary for compiled code: the same numbers as kbatch/wire.py
# (a test checks that the two agree). Byte offsets of the magic-2 batch
# header fields, attribute bits, codec ids and control-record types.

cdef enum:
    LOG_OVERHEAD = 12          # baseOffset + batchLength, every format

    # magic-2 batch header: byte offsets of its fields
    H_BASE_OFFSET = 0
    H_LENGTH = 8
    H_PARTITION_LEADER_EPOCH = 12
    H_MAGIC = 16
    H_CRC = 17
    H_ATTRIBUTES = 21
    H_LAST_OFFSET_DELTA = 23
    H_BASE_TIMESTAMP = 27
    H_MAX_TIMESTAMP = 35
    H_PRODUCER_ID = 43
    H_PRODUCER_EPOCH = 51
    H_BASE_SEQUENCE = 53
    H_RECORDS_COUNT = 57
    HEADER_V2 = 61             # where the records start
    CRC_START = 21             # CRC-32C covers [CRC_START, end of batch)

    # batch attributes (magic 2)
    ATTR_CODEC = 0x07
    ATTR_LOG_APPEND_TIME = 0x08
    ATTR_TRANSACTIONAL = 0x10
    ATTR_CONTROL = 0x20
    ATTR_DELETE_HORIZON = 0x40

    # legacy message attributes (magic 0/1)
    LEGACY_ATTR_CODEC = 0x07
    LEGACY_ATTR_LOG_APPEND_TIME = 0x08

    # codec ids
    CODEC_NONE = 0
    CODEC_GZIP = 1
    CODEC_SNAPPY = 2
    CODEC_LZ4 = 3
    CODEC_ZSTD = 4

    # control record types
    CONTROL_ABORT = 0
    CONTROL_COMMIT = 1
