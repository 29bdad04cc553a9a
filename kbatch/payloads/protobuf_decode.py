"""Protobuf messages of a reader's message type into one Arrow array: the
layout (the Arrow columns and the compiled decoder's tables) is built once
per (reader schema, message), the rows decoded by
``kbatch._core._protobuf.ProtoMachine`` without the GIL, the buffers
wrapped as Arrow arrays (no copy).

    double / float                  float64 / float32
    int32, sint32, sfixed32         int32        int64, sint64, sfixed64   int64
    uint32, fixed32                 uint32       uint64, fixed64           uint64
    bool / string / bytes           bool / string / binary
    enum                            dictionary<int32, string>: the value's name (the first,
                                    with allow_alias); a number the enum does not name: its
                                    decimal text (proto3 enums are open); a proto2 enum is
                                    closed: such a number is no value, as in protobuf, which
                                    keeps it in the unknown fields (a field keeps what it had,
                                    else it is absent; a list or a map leaves it out, a map its
                                    whole entry)
    message                         struct, fields in declaration order (nullable: an absent
                                    message is null), then one column per oneof
    oneof o { ... }                 its members are ordinary fields (null unless set), and a
                                    column ``o``: dictionary<int8, string>, the member set (null: none)
    repeated T                      list<T> (packed and unpacked both read)
    map<K, V>                       map<K, V> (entries in wire order; a key repeated in one map
                                    keeps its last entry, as protobuf does)
    google.protobuf.Timestamp       timestamp[ns, UTC]    Duration: duration[ns]
    google.protobuf.*Value          the wrapped scalar, nullable (absent: null)

Presence: a proto3 scalar without ``optional`` that is absent is its default
(0, false, "", the enum's 0); ``optional`` (proto2 or proto3), oneof
members and messages are null when absent (proto2 ``[default = ...]`` is
not filled in); a proto2 ``required`` field that is absent fails the row.

Evolution: fields are read by number with the reader's types, so values of
every version of a subject land in one column: a field the reader lacks is
skipped, one the writer lacked is its default or null. A recursive message
is unrolled ``max_depth`` times per type along a path; a value nested
deeper fails its row.
"""

from __future__ import annotations

from dataclasses import dataclass, field as dc_field

import numpy as np

from kbatch._core._avro import ColKind, Status
from kbatch._core._protobuf import Mode, Presence, ProtoMachine, PType
from kbatch.errors import SchemaError
from kbatch.payloads.maps import map_array
from kbatch.payloads.protobuf_schema import SCALARS, FieldDef, MessageDef, Pool

WIDTH = {"double": 8, "float": 4, "int64": 8, "uint64": 8, "int32": 4, "fixed64": 8, "fixed32": 4,
         "uint32": 4, "sfixed32": 4, "sfixed64": 8, "sint32": 4, "sint64": 8}
WRAPPERS = {f"google.protobuf.{n}Value": t for n, t in (
    ("Double", "double"), ("Float", "float"), ("Int64", "int64"), ("UInt64", "uint64"), ("Int32", "int32"),
    ("UInt32", "uint32"), ("Bool", "bool"), ("String", "string"), ("Bytes", "bytes"))}
TIMES = {"google.protobuf.Timestamp": Mode.M_TIMESTAMP, "google.protobuf.Duration": Mode.M_DURATION}
DENSE = 1024        # field numbers below this are found by a table, above by a search

# the compiled module's row statuses are _avro.Status's numbers
for _name in ("ST_WIRETYPE", "ST_TAG", "ST_REQUIRED", "ST_PACKED", "ST_INDEXES", "ST_RANGE", "ST_TOO_DEEP"):
    assert hasattr(Status, _name)


@dataclass(eq=False)
class PNode:
    """A node of the reader's type: ``kind`` (scalar, enum, struct, list,
    map, oneof, cut), its column, its Arrow type, children."""
    kind: str
    col: int
    arrow: object
    children: list = dc_field(default_factory=list)
    names: list = dc_field(default_factory=list)     # struct: child names
    symbols: list = dc_field(default_factory=list)   # enum: (name, number); oneof: member names


class Layout:
    """The columns and tables of one reader message (``tables()`` for the machine)."""

    def __init__(self, pool: Pool, message: str, max_depth: int = 4, max_columns: int = 20000):
        import pyarrow as pa

        self.pa = pa
        self.pool = pool
        self.max_depth = max_depth
        self.max_columns = max_columns
        self.cols: list = []
        self.col_kids: list = []
        self.msgs: list = []
        self.fields: list = []
        self.which: list = []
        self.dense: list = []
        self.enums: list = []
        self.enum_at: dict = {}
        if message not in pool.messages:
            raise SchemaError(f"the reader's schema has no message {message}")
        self.top, self.root = self._message(pool.messages[message], {})

    def _col(self, kind, width: int = 0, kids=()) -> int:
        if len(self.cols) >= self.max_columns:
            raise SchemaError(f"the reader's message needs more than {self.max_columns} Arrow columns "
                              f"(a recursive message unrolled {self.max_depth} times): lower max_depth")
        self.cols.append([int(kind), width, len(kids), len(self.col_kids)])
        self.col_kids.extend(kids)
        return len(self.cols) - 1

    def tables(self):
        return (np.array(self.cols, np.int64).reshape(-1, 4), np.array(self.col_kids, np.int32),
                np.array(self.msgs, np.int64).reshape(-1, 8), np.array(self.fields, np.int64).reshape(-1, 8),
                np.array(self.which, np.int32), np.array(self.dense, np.int32), np.array(self.enums, np.int32),
                self.top)

    def machine(self) -> ProtoMachine:
        return ProtoMachine(*self.tables())

    # --- nodes -----------------------------------------------------------------------

    def _scalar(self, name: str) -> PNode:
        pa = self.pa
        if name == "bool":
            return PNode("scalar", self._col(ColKind.K_BOOL), pa.bool_())
        if name in ("string", "bytes"):
            return PNode("scalar", self._col(ColKind.K_BINARY), pa.string() if name == "string" else pa.binary())
        arrow = {"double": pa.float64(), "float": pa.float32(), "int64": pa.int64(), "sint64": pa.int64(),
                 "sfixed64": pa.int64(), "uint64": pa.uint64(), "fixed64": pa.uint64(), "int32": pa.int32(),
                 "sint32": pa.int32(), "sfixed32": pa.int32(), "uint32": pa.uint32(),
                 "fixed32": pa.uint32()}[name]
        return PNode("scalar", self._col(ColKind.K_FIXED, WIDTH[name]), arrow)

    def _value(self, fd: FieldDef, depth: dict, syntax: str) -> tuple[PNode, int, int]:
        """The node of one value of a field of a ``syntax`` message: (node,
        type code, sub message, or a closed enum's number set, or -1)."""
        if fd.kind == "enum":
            e = self.pool.enums[fd.type_name]
            node = PNode("enum", self._col(ColKind.K_FIXED, 4), self.pa.dictionary(self.pa.int32(), self.pa.string()))
            node.symbols = list(e.values)
            # protoc allows a closed enum in proto2 messages only
            return node, PType.T_ENUM, self._number_set(e) if e.closed and syntax == "proto2" else -1
        if fd.kind == "message":
            m = self.pool.messages[fd.type_name]
            if depth.get(m.full_name, 0) >= self.max_depth:
                return PNode("cut", self._col(ColKind.K_NULL), self.pa.null()), PType.T_CUT, -1
            sub, node = self._message(m, depth)
            return node, PType.T_MESSAGE, sub
        return self._scalar(fd.type_name), SCALARS[fd.type_name], -1

    def _number_set(self, e) -> int:
        """Where the machine's table holds a closed enum's numbers (count, then sorted)."""
        if e.full_name not in self.enum_at:
            numbers = sorted({number for _name, number in e.values})
            self.enum_at[e.full_name] = len(self.enums)
            self.enums += [len(numbers), *numbers]
        return self.enum_at[e.full_name]

    def _message(self, m: MessageDef, depth: dict) -> tuple[int, PNode]:
        """A message node: (its index in the message table, its PNode)."""
        pa = self.pa
        inner = dict(depth)
        inner[m.full_name] = inner.get(m.full_name, 0) + 1
        name = m.full_name
        if name in WRAPPERS:
            node = self._scalar(WRAPPERS[name])
            return self._msg_row(node.col, Mode.M_WRAPPER, [(1, SCALARS[WRAPPERS[name]], Presence.P_IMPLICIT,
                                                            node.col, node.col, -1, -1, 0)], []), node
        if name in TIMES:
            col = self._col(ColKind.K_FIXED, 8)
            arrow = pa.timestamp("ns", "UTC") if name.endswith("Timestamp") else pa.duration("ns")
            rows = [(1, PType.T_INT64, Presence.P_IMPLICIT, -1, -1, -1, -1, 0),
                    (2, PType.T_INT32, Presence.P_IMPLICIT, -1, -1, -1, -1, 0)]
            return self._msg_row(col, TIMES[name], rows, []), PNode("scalar", col, arrow)
        rows, kids, names, arrows, children = [], [], [], [], []
        oneof_members: dict[str, list[str]] = {o: [] for o in m.oneofs}
        for fd in m.fields:
            presence = self._presence(m, fd)
            oneof = m.oneofs.index(fd.oneof) if fd.oneof is not None else -1
            pos = 0
            if fd.oneof is not None:
                pos = len(oneof_members[fd.oneof])
                oneof_members[fd.oneof].append(fd.name)
            if fd.kind == "map":
                node, row = self._map(fd, inner, m.syntax)
            else:
                value, code, sub = self._value(fd, inner, m.syntax)
                if presence == Presence.P_REPEATED:
                    node = PNode("list", self._col(ColKind.K_LIST, 0, [value.col]), pa.list_(value.arrow), [value])
                    row = (fd.number, code, presence, node.col, value.col, sub, oneof, pos)
                else:
                    node = value
                    row = (fd.number, code, presence, value.col, value.col, sub, oneof, pos)
            rows.append(row)
            kids.append(node.col)
            names.append(fd.name)
            arrows.append(node.arrow)
            children.append(node)
        which = []
        for o in m.oneofs:
            if len(oneof_members[o]) > 128:     # its column: int8 dictionary indices
                raise SchemaError(f"message {m.full_name}: oneof {o} has "
                                  f"{len(oneof_members[o])} members; kbatch reads at most 128")
            col = self._col(ColKind.K_FIXED, 1)
            which.append(col)
            node = PNode("oneof", col, pa.dictionary(pa.int8(), pa.string()))
            node.symbols = oneof_members[o]
            kids.append(col)
            names.append(o)
            arrows.append(node.arrow)
            children.append(node)
        col = self._col(ColKind.K_STRUCT, 0, kids)
        node = PNode("struct", col, pa.struct([pa.field(n, a) for n, a in zip(names, arrows)]), children, names)
        return self._msg_row(col, Mode.M_STRUCT, rows, which), node

    def _map(self, fd: FieldDef, depth: dict, syntax: str):
        pa = self.pa
        key = self._scalar(fd.key)
        value, code, sub = self._value(fd.value, depth, syntax)
        vpres = Presence.P_IMPLICIT
        if code == PType.T_MESSAGE:
            vpres = Presence.P_DEFAULT_MSG
        elif code == PType.T_CUT:
            vpres = Presence.P_EXPLICIT
        entries = self._col(ColKind.K_STRUCT, 0, [key.col, value.col])
        rows = [(1, SCALARS[fd.key], Presence.P_IMPLICIT, key.col, key.col, -1, -1, 0),
                (2, code, vpres, value.col, value.col, sub, -1, 0)]
        entry = self._msg_row(entries, Mode.M_STRUCT, rows, [])
        node = PNode("map", self._col(ColKind.K_MAP, 0, [entries]), pa.map_(key.arrow, value.arrow), [key, value])
        return node, (fd.number, PType.T_MESSAGE, Presence.P_REPEATED, node.col, entries, entry, -1, 0)

    @staticmethod
    def _presence(m: MessageDef, fd: FieldDef) -> int:
        if fd.label == "repeated":
            return Presence.P_REPEATED
        if fd.label == "required":
            return Presence.P_REQUIRED
        if fd.label == "optional" or fd.oneof is not None or fd.kind == "message":
            return Presence.P_EXPLICIT
        return Presence.P_IMPLICIT if m.syntax == "proto3" else Presence.P_EXPLICIT

    def _msg_row(self, col: int, mode: int, rows: list, which: list) -> int:
        rows = sorted(rows)
        field0, which0, dense0 = len(self.fields), len(self.which), len(self.dense)
        self.fields.extend([int(v) for v in r] for r in rows)
        self.which.extend(which)
        top = rows[-1][0] if rows else 0
        ndense = min(top + 1, DENSE)
        table = [-1] * ndense
        for k, r in enumerate(rows):
            if r[0] < ndense:
                table[r[0]] = k
        self.dense.extend(table)
        noneof = len(which)
        self.msgs.append([col, len(rows), field0, int(mode), noneof, which0, ndense, dense0])
        return len(self.msgs) - 1


class ProtoReader:
    """Decodes rows of one message type into the reader's Arrow type."""

    def __init__(self, pool: Pool, message: str, *, max_depth: int = 4):
        self.message = message
        self.layout = Layout(pool, message, max_depth=max_depth)

    @property
    def arrow_type(self):
        return self.layout.root.arrow

    def run(self, data, start, end, prog, status, errpos, stop_at_error: bool):
        """(the Arrow array, rows done); ``prog[i]``: ``self.layout.top`` or -1."""
        machine = self.layout.machine()
        done = machine.run(data, start, end, prog, status, errpos, stop_at_error)
        return to_arrow(self.layout.root, machine.take(), self.layout.pa), done


def to_arrow(node: PNode, parts: list, pa):
    length, nulls, valid, values, offs = parts[node.col]
    validity = pa.py_buffer(valid) if nulls else None
    kind = node.kind
    if kind == "cut":
        return pa.nulls(length)
    if kind == "struct":
        kids = [to_arrow(k, parts, pa) for k in node.children]
        typ = pa.struct([pa.field(n, k.type) for n, k in zip(node.names, kids)])
        return pa.Array.from_buffers(typ, length, [validity], null_count=nulls, children=kids)
    if kind == "list":
        item = to_arrow(node.children[0], parts, pa)
        return pa.Array.from_buffers(pa.list_(item.type), length, [validity, pa.py_buffer(offs)],
                                     null_count=nulls, children=[item])
    if kind == "map":
        key, value = (to_arrow(k, parts, pa) for k in node.children)
        return map_array(key, value, offs, length, validity, nulls, pa)
    if kind == "oneof":
        indices = pa.Array.from_buffers(pa.int8(), length, [validity, pa.py_buffer(values)], null_count=nulls)
        return pa.DictionaryArray.from_arrays(indices, pa.array(node.symbols, pa.string()))
    if kind == "enum":
        return _enum_array(node, length, nulls, valid, values, pa)
    if offs is not None:
        return pa.Array.from_buffers(node.arrow, length, [validity, pa.py_buffer(offs), pa.py_buffer(values)],
                                     null_count=nulls)
    return pa.Array.from_buffers(node.arrow, length, [validity, pa.py_buffer(values)], null_count=nulls)


def _enum_array(node: PNode, length, nulls, valid, values, pa):
    """Enum numbers -> dictionary indices: the first name of each number,
    then the numbers no name has, as decimal text."""
    numbers = np.frombuffer(values, np.int32, length) if length else np.zeros(0, np.int32)
    names: dict[int, str] = {}
    for name, number in node.symbols:
        names.setdefault(number, name)
    known = np.array(sorted(names), np.int32)
    words = [names[k] for k in known.tolist()]
    at = np.searchsorted(known, numbers)
    at_c = np.minimum(at, max(len(known) - 1, 0))
    found = (known[at_c] == numbers) if len(known) else np.zeros(length, bool)
    indices = at_c.astype(np.int32)
    unknown = ~found
    if nulls:           # a null row holds 0, which is no value
        unknown &= np.unpackbits(valid, bitorder="little")[:length].astype(bool)
    if unknown.any():
        extra, inverse = np.unique(numbers[unknown], return_inverse=True)
        indices[unknown] = len(words) + inverse.astype(np.int32)
        words += [str(v) for v in extra.tolist()]
    validity = pa.py_buffer(valid) if nulls else None
    arr = pa.Array.from_buffers(pa.int32(), length, [validity, pa.py_buffer(indices)], null_count=nulls)
    return pa.DictionaryArray.from_arrays(arr, pa.array(words, pa.string()))


__all__ = ["Layout", "PNode", "ProtoReader", "to_arrow"]
