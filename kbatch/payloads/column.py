"""What ``Registry.decode`` accepts, as flat buffers (``framing.Rows``):
a kbatch ``BinaryColumn`` (its own buffers, no copy), a ``ViewColumn``,
a pyarrow binary/large_binary/binary_view array or chunked array, or a
sequence of ``bytes | None``."""

from __future__ import annotations

import numpy as np

from kbatch.lib.columns import BinaryColumn
from kbatch.payloads.framing import Rows


def rows_of(column) -> Rows:
    if isinstance(column, BinaryColumn):
        offsets = column.offsets.astype(np.int64, copy=False)
        n = len(column)
        valid = column.is_valid() if column.null_count else np.ones(n, bool)
        return _checked(Rows(column.data, offsets, np.asarray(valid, bool)))
    import pyarrow as pa

    if hasattr(column, "to_arrow") and not isinstance(column, (pa.Array, pa.ChunkedArray)):
        column = column.to_arrow()          # ViewColumn and the like
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if not isinstance(column, pa.Array):
        column = pa.array(list(column), pa.large_binary())
    if pa.types.is_binary_view(column.type) or pa.types.is_string_view(column.type):
        column = column.cast(pa.large_binary())
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.large_binary() if pa.types.is_large_string(column.type) else pa.binary())
    if not (pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)):
        raise TypeError(f"decode needs binary values, not {column.type}")
    n = len(column)
    bufs = column.buffers()
    otype = np.int64 if pa.types.is_large_binary(column.type) else np.int32
    offsets = np.frombuffer(bufs[1], otype, n + 1, column.offset * np.dtype(otype).itemsize) \
        if bufs[1] is not None else np.zeros(n + 1, otype)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None and bufs[2].size else np.zeros(0, np.uint8)
    valid = column.is_valid().to_numpy(zero_copy_only=False) if column.null_count else np.ones(n, bool)
    return _checked(Rows(data, offsets.astype(np.int64), np.asarray(valid, bool)))


def _checked(rows: Rows) -> Rows:
    """Offsets that never decrease and stay inside the data (the compiled
    decoder checks every row's window again)."""
    o = rows.offsets
    if len(o) and (o[0] < 0 or o[-1] > len(rows.data) or (len(o) > 1 and np.any(np.diff(o) < 0))):
        raise ValueError("binary column offsets outside its data")
    return rows


def error_column(n: int, reasons: dict):
    """The per-row error column of a decode with ``on_error="null"``: a
    ``pyarrow`` string array of ``n`` rows, ``reasons[row]`` where a row
    failed, null elsewhere."""
    import pyarrow as pa
    messages = [None] * n
    for i, why in reasons.items():
        messages[i] = str(why)
    return pa.array(messages, pa.string())
