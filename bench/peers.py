"""The peers, driven the way an application reads every field of every record."""

from aiokafka.record._crecords import MemoryRecords as AioMemoryRecords
from kafka.record.memory_records import MemoryRecords as KafkaPythonMemoryRecords


def _drive(memory_records_cls, data: bytes) -> int:
    """Iterate every batch (CRC checked) and touch every field of every record."""
    n = 0
    records = memory_records_cls(data)
    while records.has_next():
        batch = records.next_batch()
        if not batch.validate_crc():
            raise ValueError("crc")
        for rec in batch:
            _ = (rec.offset, rec.timestamp, rec.key, rec.value, rec.headers)
            n += 1
    return n


def aiokafka_decode(data: bytes) -> int:
    """aiokafka's compiled (Cython) decoder."""
    return _drive(AioMemoryRecords, data)


def kafka_python_decode(data: bytes) -> int:
    """kafka-python's pure-Python decoder."""
    return _drive(KafkaPythonMemoryRecords, data)
