"""kbatch: read Apache Kafka log segments at rest into columnar arrays.

    read_segment(source, ...)   one segment (path or bytes-like) -> Records
    iter_segment(source, ...)   the same, chunk by chunk (bounded memory)
    open_log(path)              a partition directory: offset/time range reads
    open_log_dir(path)          a broker data directory, read on several threads
    read_table(path, ...)       a data directory's records as one table (topic, partition)
    resolve(path)               what a path or URL names: segment / partition / data directory
    verify(path)                CRCs, offsets, indexes, where valid data ends
    recover(source, dest)       the valid prefix of every partition, indexes rebuilt
    retention(source, ...)      the segments retention.ms / retention.bytes would delete
    compact(source, dest)       what Kafka's log cleaner would leave
    transactions(path)          committed / aborted / open transactions, LSO
    consumer_lag(data_dir)      committed offsets vs log end offsets over time
    kbatch.internal             internal topics, producer snapshots, checkpoints as tables
    write_segment / write_log   real magic-2 segments and partition directories
    registry(source)            an offline Schema Registry (the _schemas topic, an export,
                                a folder): registry.decode(column) -> typed Arrow array
    JsonValues()                plain JSON keys/values (no framing): the type inferred or given
"""

from kbatch._core._columns import memory_pool_bytes, memory_stats, set_memory_pool
from kbatch._version import __version__
from kbatch.errors import (ArgumentError, ColumnNotReadError, CorruptRecordError,
                           DamagedLengthError, DecompressionLimitError, FileChangedError,
                           KbatchError, LimitExceededError, MappingInvalidatedError, PayloadError,
                           SchemaError, UnknownSchemaError)
from kbatch.internal.lag import consumer_lag
from kbatch.lib.compact import compact
from kbatch.lib.columns import BinaryColumn, HeadersColumn, MissingColumn
from kbatch.lib.log import LogDir, PartitionLog, open_log, open_log_dir, read_table
from kbatch.lib.objects import MissingObjectError, RemoteError
from kbatch.lib.open import resolve
from kbatch.lib.paths import PathError, PathKind
from kbatch.lib.storage import Storage
from kbatch.lib.retention import retention
from kbatch.lib.records import BatchTable, ControlRecords, Records, SegmentEnd, SkippedRange
from kbatch.lib.entry import iter_segment, read_segment   # paths, URLs, buffers
from kbatch.lib.views import ViewColumn
from kbatch.lib.writer import LogWriter, SegmentWriter, write_log, write_segment
from kbatch.payloads import JsonValues, Registry, registry
from kbatch.tools.transactions import transactions
from kbatch.tools.recover import recover
from kbatch.tools.verify import verify

__all__ = [
    "ArgumentError", "BatchTable", "BinaryColumn", "ColumnNotReadError", "ControlRecords",
    "CorruptRecordError", "DamagedLengthError", "DecompressionLimitError", "FileChangedError",
    "HeadersColumn", "JsonValues",
    "KbatchError", "LimitExceededError", "LogDir", "LogWriter", "MappingInvalidatedError",
    "MissingColumn", "MissingObjectError", "PartitionLog", "PathError", "PathKind", "PayloadError",
    "Records", "Registry", "SchemaError", "UnknownSchemaError", "registry",
    "RemoteError", "SegmentEnd", "SegmentWriter", "SkippedRange", "Storage", "ViewColumn",
    "__version__", "compact", "consumer_lag", "iter_segment",
    "memory_pool_bytes", "memory_stats", "open_log", "open_log_dir", "read_segment", "read_table",
    "recover", "resolve", "retention",
    "set_memory_pool", "transactions", "verify", "write_log", "write_segment",
]
