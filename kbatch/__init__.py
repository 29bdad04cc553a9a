"""kbatch: read Apache Kafka log segments at rest into columnar arrays.

    read_segment(source, ...)   one segment (path or bytes-like) -> Records
    iter_segment(source, ...)   the same, chunk by chunk (bounded memory)
"""

from kbatch.columns import BinaryColumn, HeadersColumn
from kbatch.errors import CorruptRecordError, DecompressionLimitError, KbatchError
from kbatch.records import BatchTable, ControlRecords, Records, SegmentEnd
from kbatch.segment import iter_segment, read_segment

__all__ = [
    "BatchTable", "BinaryColumn", "ControlRecords", "CorruptRecordError",
    "DecompressionLimitError", "HeadersColumn", "KbatchError", "Records",
    "SegmentEnd", "iter_segment", "read_segment",
]
__version__ = "0.1.0"
