"""The peers, driven the way an application reads every field of every record."""

from aiokafka.record._crecords import MemoryRecords as AioMemoryRecords
from kafka.record.memory_records import MemoryRecords as KafkaPythonMemoryRecords


def aiokafka_decode(data: bytes) -> int:
    """aiokafka's compiled (Cython) decoder, CRC checked per batch."""
    n = 0
    records = AioMemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        if not batch.validate_crc():
            raise ValueError("crc")
        for rec in batch:
            rec.offset, rec.timestamp, rec.key, rec.value, rec.headers
            n += 1
    return n


def kafka_python_decode(data: bytes) -> int:
    """kafka-python's pure-Python decoder, CRC checked per batch."""
    n = 0
    records = KafkaPythonMemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        if not batch.validate_crc():
            raise ValueError("crc")
        for rec in batch:
            rec.offset, rec.timestamp, rec.key, rec.value, rec.headers
            n += 1
    return n
