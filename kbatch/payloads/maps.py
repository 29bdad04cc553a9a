"""Map columns with each key once: Avro and Protobuf both say that a map
whose bytes repeat a key holds the key's last entry (Avro's Java decoder
and fastavro put each entry into a dict in turn; protobuf's runtime merges
a later map entry over an earlier one). The decoders emit every entry; the
repeated ones are taken out here, after the decode, in one vectorised pass.

    entries   a StructArray of (key, value), rows' entries one after another
    offsets   int32[length + 1]: row i holds entries [offs[i], offs[i + 1])
"""

from __future__ import annotations

import numpy as np


def rows_of(offs, length: int) -> np.ndarray:
    """The map row of each entry."""
    counts = np.diff(np.asarray(offs[:length + 1], np.int64))
    return np.repeat(np.arange(length, dtype=np.int64), counts)


def last_of_each_key(key, offs, length: int, pa):
    """The entries to keep so that a map holds each key once, its last
    occurrence, in wire order; None when no map repeats a key."""
    n = len(key)
    if n < 2 or offs is None:
        return None
    import pyarrow.compute as pc

    rows = rows_of(offs, length)
    if len(rows) != n:
        raise ValueError("map offsets and entries disagree")
    codes = (pc.dictionary_encode(key).indices if pa.types.is_string(key.type) or pa.types.is_binary(key.type)
             else key).to_numpy(zero_copy_only=False)
    order = np.lexsort((np.arange(n), codes, rows))
    r, c = rows[order], codes[order]
    last = np.ones(n, bool)
    last[:-1] = (r[:-1] != r[1:]) | (c[:-1] != c[1:])
    if last.all():
        return None
    return np.sort(order[last])


def map_array(key, value, offs, length: int, validity, nulls: int, pa):
    """The Arrow map of ``length`` rows over the entries ``key``/``value``
    (``offs``: int32 offsets), a repeated key's earlier entries left out."""
    entries = pa.StructArray.from_arrays([key, value], fields=[
        pa.field("key", key.type, nullable=False), pa.field("value", value.type)])
    keep = last_of_each_key(key, offs, length, pa)
    if keep is not None:
        rows = rows_of(offs, length)[keep]
        entries = entries.take(pa.array(keep))
        offs = np.zeros(length + 1, np.int32)
        np.cumsum(np.bincount(rows, minlength=length), out=offs[1:])
    return pa.Array.from_buffers(pa.map_(key.type, value.type), length,
                                 [validity, pa.py_buffer(offs)], null_count=nulls,
                                 children=[entries])
