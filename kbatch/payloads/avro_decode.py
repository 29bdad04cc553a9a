"""Avro datums of many writer schemas into one Arrow array of the reader's
type: the layout and programs are compiled once (per reader, then once per
writer schema), the rows decoded by ``kbatch._core._avro.AvroMachine``
without the GIL, and the buffers it fills wrapped as Arrow arrays (no copy).
"""

from __future__ import annotations

import numpy as np

from kbatch._core._avro import AvroMachine, ColKind, Status
from kbatch.errors import SchemaError
from kbatch.payloads.avro_layout import Layout, RNode
from kbatch.payloads.maps import map_array
from kbatch.payloads.avro_program import ProgramBuilder
from kbatch.payloads.avro_schema import AvroType


class AvroReader:
    """Decodes rows written with any registered writer schema into the
    reader's Arrow type. ``program(key, writer)`` compiles a writer once
    (None and the reason when it cannot be read with the reader's type)."""

    def __init__(self, reader: AvroType, *, max_depth: int = 4):
        self.reader = reader
        self.layout = Layout(reader, max_depth=max_depth)
        self.builder = ProgramBuilder(max_depth=max_depth)
        self._programs: dict[object, int | SchemaError] = {}

    @property
    def arrow_type(self):
        return self.layout.root.arrow

    def program(self, key, writer: AvroType) -> int | SchemaError:
        """The top op for a writer schema, or the SchemaError that stops it."""
        found = self._programs.get(key)
        if found is None:
            mark = (len(self.builder.ops), len(self.builder.op_kids))
            try:
                try:
                    found = self.builder.resolve(writer, self.layout.root)
                except RecursionError:
                    raise SchemaError("a schema nested too deeply to resolve") from None
            except SchemaError as exc:
                del self.builder.ops[mark[0]:]
                del self.builder.op_kids[mark[1]:]
                found = exc
            self._programs[key] = found
        return found

    def run(self, data: np.ndarray, start: np.ndarray, end: np.ndarray, prog: np.ndarray,
            status: np.ndarray, errpos: np.ndarray, stop_at_error: bool):
        """Decode the rows; returns (the Arrow array, rows done)."""
        ops, op_kids, consts = self.builder.tables()
        cols = np.array(self.layout.cols, dtype=np.int64).reshape(-1, 4)
        machine = AvroMachine(cols, np.array(self.layout.col_kids, dtype=np.int32), ops, op_kids,
                              consts, self.layout.root.col)
        done = machine.run(data, start, end, prog, status, errpos, stop_at_error)
        parts = machine.take()
        return to_arrow(self.layout.root, parts, self.layout.pa), done


def to_arrow(node: RNode, parts: list, pa):
    """The Arrow array of a reader node from the machine's buffers."""
    length, nulls, valid, values, offs = parts[node.col]
    validity = pa.py_buffer(valid) if nulls else None
    kind = node.kind
    if kind == "nullable":
        return to_arrow(node.children[0], parts, pa)
    if kind in ("null", "cut"):
        return pa.nulls(length)
    if kind == "record":
        kids = [to_arrow(k, parts, pa) for k in node.children]
        typ = pa.struct([pa.field(f.name, k.type) for f, k in zip(node.arrow, kids)])
        return pa.Array.from_buffers(typ, length, [validity], null_count=nulls, children=kids)
    if kind == "array":
        item = to_arrow(node.children[0], parts, pa)
        return pa.Array.from_buffers(pa.list_(item.type), length, [validity, pa.py_buffer(offs)],
                                     null_count=nulls, children=[item])
    if kind == "map":
        value = to_arrow(node.children[0], parts, pa)
        key_len, _, _, key_data, key_offs = parts[node.key_col]
        keys = pa.Array.from_buffers(pa.string(), key_len, [None, pa.py_buffer(key_offs),
                                                            pa.py_buffer(key_data)])
        return map_array(keys, value, offs, length, validity, nulls, pa)
    if kind == "union":
        kids = [to_arrow(k, parts, pa) for k in node.children]
        typ = pa.dense_union([pa.field(f.name, k.type) for f, k in zip(node.arrow, kids)],
                             type_codes=list(range(len(kids))))
        return pa.Array.from_buffers(typ, length, [None, pa.py_buffer(values), pa.py_buffer(offs)],
                                     children=kids)
    if kind == "enum":
        indices = pa.Array.from_buffers(pa.int32(), length, [validity, pa.py_buffer(values)], null_count=nulls)
        return pa.DictionaryArray.from_arrays(indices, pa.array(list(node.symbols), pa.string()))
    typ = node.arrow
    if node.logical == "uuid":
        storage = pa.Array.from_buffers(pa.binary(16), length, [validity, pa.py_buffer(values)], null_count=nulls)
        return pa.ExtensionArray.from_storage(typ, storage)
    if parts[node.col][4] is not None:          # binary layout: strings, bytes, wide fixed
        return pa.Array.from_buffers(typ, length, [validity, pa.py_buffer(offs), pa.py_buffer(values)],
                                     null_count=nulls)
    return pa.Array.from_buffers(typ, length, [validity, pa.py_buffer(values)], null_count=nulls)


__all__ = ["AvroReader", "ColKind", "Status", "to_arrow"]
