"""kbatch: read Apache Kafka log segments at rest into columnar arrays.

    read_segment(source, ...)   one segment (path or bytes-like) -> Records
    iter_segment(source, ...)   the same, chunk by chunk (bounded memory)
    open_log(path)              a partition directory: offset/time range reads
    open_log_dir(path)          a broker data directory, read on several threads
    verify(path)                CRCs, offsets, indexes, where valid data ends
    transactions(path)          committed / aborted / open transactions, LSO
    consumer_lag(data_dir)      committed offsets vs log end offsets over time
    kbatch.internal             internal topics, producer snapshots, checkpoints as tables
    write_segment / write_log   real magic-2 segments and partition directories
"""

from kbatch._core._columns import memory_pool_bytes, set_memory_pool
from kbatch.lib.columns import BinaryColumn, HeadersColumn
from kbatch.errors import (ArgumentError, CorruptRecordError, DecompressionLimitError,
                           KbatchError, LimitExceededError)
from kbatch.lib.log import LogDir, PartitionLog, open_log, open_log_dir
from kbatch.lib.paths import PathError
from kbatch.lib.records import BatchTable, ControlRecords, Records, SegmentEnd, SkippedRange
from kbatch.lib.segment import iter_segment, read_segment
from kbatch.tools.transactions import transactions
from kbatch.tools.verify import verify
from kbatch.lib.writer import LogWriter, SegmentWriter, write_log, write_segment
from kbatch.internal.lag import consumer_lag

__all__ = [
    "ArgumentError", "PathError", "SkippedRange",
    "BatchTable", "BinaryColumn", "ControlRecords", "CorruptRecordError",
    "DecompressionLimitError", "HeadersColumn", "KbatchError", "LimitExceededError", "LogDir",
    "LogWriter", "PartitionLog", "Records", "SegmentEnd", "SegmentWriter", "consumer_lag",
    "iter_segment",
    "memory_pool_bytes", "open_log", "open_log_dir", "read_segment", "set_memory_pool",
    "transactions", "verify", "write_log", "write_segment",
]
from kbatch._version import __version__  # noqa: E402
