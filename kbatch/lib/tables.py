"""A data directory's read as one table: every partition's records with
``topic`` and ``partition`` beside them.

``open_log_dir(...).read()`` returns a ``PartitionRecords``: the dict
``{(topic, partition): Records}`` it always was, plus ``to_arrow()`` and
``to_pandas()``, which join the partitions into one table without a
per-row Python step (each partition's columns are Arrow arrays over
kbatch's buffers; ``topic`` is dictionary-encoded, one index per
partition; ``partition`` a constant int32 per partition). Keeps in memory
the partitions' records and the table built over them.
"""

from __future__ import annotations

import numpy as np

from kbatch.lib.records import Records, optional_module


def _order(keys) -> list:
    return sorted(keys, key=lambda k: (str(k[0]), -1 if k[1] is None else k[1]))


class PartitionRecords(dict):
    """``{(topic, partition): Records}`` of a read, in (topic, partition) order."""

    def to_arrow(self, *, decode: dict | None = None, on_error: str = "raise"):
        """One ``pyarrow.Table``: ``topic`` (dictionary<int32, string>),
        ``partition`` (int32), then the columns of ``Records.to_arrow()``
        (every partition read with the same options has the same ones).
        ``decode``/``on_error`` as ``Records.to_arrow`` (the decoded columns
        of every partition must have one type: read one topic, or give the
        registry a reader schema)."""
        pa = optional_module("pyarrow", "arrow", "PartitionRecords.to_arrow()")
        keys = _order(self)
        topics = sorted({str(t) for t, _ in keys if t is not None})
        dictionary = pa.array(topics, pa.string())
        index = {t: i for i, t in enumerate(topics)}
        tables = []
        for topic, partition in keys:
            table = self[(topic, partition)].to_arrow(decode=decode, on_error=on_error)
            n = table.num_rows
            # no topic (a directory whose name is not <topic>-<partition>):
            # null codes (from_arrays' mask= is not there for Arrow inputs)
            codes = pa.array(np.full(n, index[str(topic)], np.int32)) if topic is not None \
                else pa.nulls(n, pa.int32())
            topic_col = pa.DictionaryArray.from_arrays(codes, dictionary)
            part_col = pa.array(np.full(n, -1 if partition is None else partition, np.int32),
                                mask=None if partition is not None else np.ones(n, bool))
            tables.append(table.add_column(0, "topic", topic_col)
                          .add_column(1, "partition", part_col))
        if not tables:
            empty = Records.empty().to_arrow()
            return empty.add_column(0, "topic", pa.array([], pa.dictionary(pa.int32(),
                                                                            pa.string()))) \
                .add_column(1, "partition", pa.array([], pa.int32()))
        return pa.concat_tables(tables)

    def to_pandas(self, *, binary: str = "bytes", decode: dict | None = None, on_error: str = "raise"):
        """One ``pandas.DataFrame`` of ``to_arrow()`` (``topic`` categorical);
        ``binary``, ``decode`` and ``on_error`` as in ``Records.to_pandas``."""
        pd = optional_module("pandas", "pandas", "PartitionRecords.to_pandas()")
        table = self.to_arrow(decode=decode, on_error=on_error)
        if binary == "arrow":
            return table.to_pandas(types_mapper=pd.ArrowDtype)
        if binary != "bytes":
            raise ValueError(f"binary must be 'bytes' or 'arrow', not {binary!r}")
        df = table.to_pandas()
        if "headers" in df.columns:
            df["headers"] = [h for key in _order(self) for h in self[key].headers.to_pylist()]
        return df
