"""Records -> one ``pyarrow.RecordBatch`` in (a subset of) the schema of
Spark's Kafka source. Only the columns of the schema are built: the columns
a query does not ask for (``columns`` / ``includeHeaders``) are neither
converted nor shipped to the JVM. Key, value and header buffers are shared
with kbatch's, not copied.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from kbatch.lib.records import Records


ARROW_TYPES = {
    "key": pa.binary(), "value": pa.binary(), "topic": pa.string(), "partition": pa.int32(),
    "offset": pa.int64(), "timestamp": pa.timestamp("us", tz="UTC"), "timestampType": pa.int32(),
    "headers": pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
}


def arrow_schema(columns) -> pa.Schema:
    """The Arrow schema of ``columns`` of the Kafka source (as Spark maps it)."""
    return pa.schema([(c, ARROW_TYPES[c]) for c in columns])


def numeric_array(values: np.ndarray) -> pa.Array:
    """A numpy integer array as an Arrow array over the same buffer (no nulls).

    Not ``pa.array(values)``: that imports pandas (half a second in each new
    Python worker) to check whether ``values`` is a pandas object."""
    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values),
                                 [None, pa.py_buffer(values)])


def topic_array(topic: str | None, n: int) -> pa.Array:
    if topic is None:
        return pa.nulls(n, pa.string())
    raw = topic.encode()
    return pa.Array.from_buffers(
        pa.string(), n, [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * len(raw)),
                         pa.py_buffer(raw * n)])


def _timestamp(records: Records, type_: pa.DataType) -> pa.Array:
    ts = records.timestamp
    n = len(ts)
    has_ts = ts != -1
    micros = np.where(has_ts, ts, 0) * 1000
    return pa.Array.from_buffers(
        type_, n,
        [None if has_ts.all() else pa.py_buffer(np.packbits(has_ts, bitorder="little")),
         pa.py_buffer(micros)], null_count=int(n - has_ts.sum()))


def _headers(records: Records, list_type: pa.DataType) -> pa.Array:
    """null for a record without headers, as in Spark's Kafka source."""
    n = len(records)
    headers = records.headers
    lo, hi = int(headers.offsets[0]), int(headers.offsets[-1])
    keys, values = headers.keys, headers.values
    if lo != 0 or hi != len(keys):
        entries = np.arange(lo, hi, dtype=np.int64)
        keys, values = keys.take(entries), values.take(entries)
    entries_arr = pa.StructArray.from_arrays([keys.to_arrow(), values.to_arrow()],
                                             fields=list(list_type.value_type))
    has_headers = headers.counts() > 0
    return pa.Array.from_buffers(
        list_type, n,
        [None if has_headers.all() else pa.py_buffer(np.packbits(has_headers, bitorder="little")),
         pa.py_buffer((headers.offsets - headers.offsets[0]).astype(np.int32))],
        null_count=int(n - has_headers.sum()), children=[entries_arr])


def _binary(arr: pa.Array) -> pa.Array:
    """Spark has no binary_view: zero_copy columns are cast (a copy)."""
    return arr.cast(pa.binary()) if pa.types.is_binary_view(arr.type) else arr


def to_record_batch(records: Records, topic: str | None, partition: int | None,
                    schema: pa.Schema) -> pa.RecordBatch:
    """The columns of ``schema`` (any subset of the Kafka source's, in any
    order) for ``records`` of one topic-partition."""
    n = len(records)
    arrays = []
    for f in schema:
        name = f.name
        if name == "key":
            arrays.append(_binary(records.key.to_arrow()))
        elif name == "value":
            arrays.append(_binary(records.value.to_arrow()))
        elif name == "topic":
            arrays.append(topic_array(topic, n))
        elif name == "partition":
            arrays.append(pa.nulls(n, pa.int32()) if partition is None
                          else numeric_array(np.full(n, partition, np.int32)))
        elif name == "offset":
            arrays.append(numeric_array(records.offset))
        elif name == "timestamp":
            arrays.append(_timestamp(records, f.type))
        elif name == "timestampType":
            arrays.append(numeric_array(records.timestamp_type.astype(np.int32)))
        elif name == "headers":
            arrays.append(_headers(records, f.type))
        else:
            raise ValueError(f"kbatch: no column {name!r} in the Kafka source's schema")
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


__all__ = ["ARROW_TYPES", "arrow_schema", "numeric_array", "to_record_batch", "topic_array"]
