"""The Arrow layout of a reader's Avro type: the columns the compiled
decoder fills (``kbatch._core._avro``) and the Arrow type of each.

    null                    null                 boolean       bool
    int                     int32                long          int64
    float / double          float32 / float64    string        string (utf8)
    bytes                   binary               fixed(n)      fixed_size_binary(n)
    enum                    dictionary<int32, string> (the reader's symbols)
    record                  struct (every field nullable)
    array / map             list / map<string, V>
    ["null", T] / [T, "null"]   T, nullable
    any other union         dense_union (one child per branch, type code = branch index)
    decimal(p, s)           decimal128(p, s) (p <= 38), decimal256 (p <= 76)
    uuid (string, fixed 16) uuid (extension, fixed_size_binary(16) storage)
    date / time-millis / time-micros      date32 / time32[ms] / time64[us]
    timestamp-millis|micros|nanos         timestamp[ms|us|ns, tz=UTC]
    local-timestamp-millis|micros|nanos   timestamp[ms|us|ns] (no time zone)
    duration (fixed 12)     month_day_nano_interval
    Kafka Connect's connect.name annotations without a logical type:
    ...data.Timestamp -> timestamp[ms, UTC], Date -> date32, Time -> time32[ms],
    Decimal (scale in connect.parameters) -> decimal

A recursive record is unrolled ``max_depth`` times along each path; past
that the type is ``null`` and a value that goes deeper fails its row
("nested deeper than max_depth"), so nothing is cut silently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field as dc_field

from kbatch._core._avro import ColKind
from kbatch.errors import SchemaError
from kbatch.payloads.avro_schema import AvroType

CONNECT = "org.apache.kafka.connect.data."
TIME_UNITS = {"millis": "ms", "micros": "us", "nanos": "ns"}


def meaning(t: AvroType) -> tuple | None:
    """What a leaf's encoded number means, as the reader's Arrow type takes
    it (``_leaf``): ``("decimal", precision, scale)``, ``("date",)``, a time
    or timestamp logical type with its unit, or None (a plain value). Schema
    resolution refuses a writer and a reader that both give a meaning and
    disagree (decimals of another scale, millis read as micros): the bytes
    would be read with the wrong one."""
    props = t.props if isinstance(t.props, dict) else {}
    connect, lg = props.get("connect.name"), t.logical
    if t.kind in ("bytes", "fixed") and (lg == "decimal" or (lg is None and connect == CONNECT + "Decimal")):
        params = _decimal_params(t)
        return None if params is None else ("decimal", *params)
    if t.kind == "int":
        if lg == "date" or (lg is None and connect == CONNECT + "Date"):
            return ("date",)
        if lg == "time-millis" or (lg is None and connect == CONNECT + "Time"):
            return ("time-millis",)
    if t.kind == "long":
        if lg == "time-micros":
            return ("time-micros",)
        if lg and lg.startswith(("timestamp-", "local-timestamp-")) and TIME_UNITS.get(lg.rpartition("-")[2]):
            return (lg,)
        if lg is None and connect == CONNECT + "Timestamp":
            return ("timestamp-millis",)
    return None


def _decimal_params(t: AvroType) -> tuple[int, int] | None:
    """``(precision, scale)`` of a decimal (Avro's or Connect's), or None where
    they are not valid (the logical type is then ignored, as the spec says)."""
    props = t.props or {}
    if t.logical == "decimal":
        precision, scale = props.get("precision"), props.get("scale", 0)
    else:                       # Connect's Decimal: scale in connect.parameters
        params = props.get("connect.parameters") or {}
        try:
            scale = int(params.get("scale", 0))
            precision = int(params.get("connect.decimal.precision", 38))
        except (TypeError, ValueError):
            return None
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (precision, scale)):
        return None
    if not (0 < precision <= 76 and 0 <= scale <= precision):
        return None
    if t.kind == "fixed" and t.size and precision > math.floor(math.log10(2) * (8 * t.size - 1)):
        return None
    return precision, scale


@dataclass(eq=False)
class RNode:
    """A node of the reader's type, unrolled: ``kind`` (an Avro kind, or
    ``nullable`` / ``cut``), its column, its children, what it stores as
    (``logical``: decimal, uuid, duration or None) and its Arrow type."""
    kind: str
    type: AvroType | None
    col: int
    arrow: object
    children: list["RNode"] = dc_field(default_factory=list)
    logical: str | None = None
    precision: int = 0
    width: int = 0
    key_col: int = -1                     # map: the key column
    symbols: tuple[str, ...] = ()         # enum: the dictionary


class Layout:
    """Columns as the compiled machine takes them: (kind, width, nkid, kid0) rows and kids."""

    def __init__(self, reader: AvroType, max_depth: int = 4, max_columns: int = 20000):
        import pyarrow as pa

        self.pa = pa
        self.cols: list[list[int]] = []
        self.col_kids: list[int] = []
        self.max_depth = max_depth
        self.max_columns = max_columns
        self.root = self._node(reader, {})

    def _col(self, kind: int, width: int = 0, kids=()) -> int:
        if len(self.cols) >= self.max_columns:
            raise SchemaError(f"the reader's type needs more than {self.max_columns} Arrow columns "
                              f"(a recursive type unrolled {self.max_depth} times): lower max_depth")
        self.cols.append([int(kind), width, len(kids), len(self.col_kids)])
        self.col_kids.extend(kids)
        return len(self.cols) - 1

    def _node(self, t: AvroType, depth: dict) -> RNode:
        pa = self.pa
        k = t.kind
        if k == "union":
            return self._union(t, depth)
        if k == "record":
            seen = depth.get(t.name, 0)
            if seen >= self.max_depth:
                return RNode("cut", t, self._col(ColKind.K_NULL), pa.null())
            inner = dict(depth)
            inner[t.name] = seen + 1
            kids = [self._node(f.type, inner) for f in t.fields]
            arrow = pa.struct([pa.field(f.name, n.arrow) for f, n in zip(t.fields, kids)])
            return RNode("record", t, self._col(ColKind.K_STRUCT, 0, [n.col for n in kids]), arrow, kids)
        if k == "array":
            item = self._node(t.items, depth)
            return RNode("array", t, self._col(ColKind.K_LIST, 0, [item.col]), pa.list_(item.arrow), [item])
        if k == "map":
            value = self._node(t.values, depth)
            key = self._col(ColKind.K_BINARY)
            entries = self._col(ColKind.K_STRUCT, 0, [key, value.col])
            node = RNode("map", t, self._col(ColKind.K_MAP, 0, [entries]),
                         pa.map_(pa.string(), value.arrow), [value])
            node.key_col = key
            return node
        if k == "enum":
            node = RNode("enum", t, self._col(ColKind.K_FIXED, 4), pa.dictionary(pa.int32(), pa.string()))
            node.symbols = t.symbols
            return node
        return self._leaf(t)

    def _union(self, t: AvroType, depth: dict) -> RNode:
        pa = self.pa
        kinds = [b.kind for b in t.branches]
        if len(kinds) == 2 and "null" in kinds and kinds[0] != kinds[1]:
            inner = self._node(t.branches[1 - kinds.index("null")], depth)
            if inner.kind == "cut":
                return inner
            return RNode("nullable", t, inner.col, inner.arrow, [inner])
        if not t.branches:
            raise SchemaError("an empty Avro union has no values")
        kids = [self._node(b, depth) for b in t.branches]
        names, fields = set(), []
        for b, n in zip(t.branches, kids):
            name = b.short_name
            while name in names:
                name += "_"
            names.add(name)
            fields.append(pa.field(name, n.arrow))
        arrow = pa.dense_union(fields, type_codes=list(range(len(kids))))
        return RNode("union", t, self._col(ColKind.K_UNION, 0, [n.col for n in kids]), arrow, kids)

    def _leaf(self, t: AvroType) -> RNode:
        pa = self.pa
        k, logical = t.kind, t.logical
        connect = t.props.get("connect.name") if isinstance(t.props, dict) else None
        if logical == "decimal" and k in ("bytes", "fixed") or (
                logical is None and connect == CONNECT + "Decimal" and k == "bytes"):
            dec = self._decimal(t)
            if dec is not None:
                return dec
        if k == "fixed":
            if logical == "uuid" and t.size == 16:
                return RNode("fixed", t, self._col(ColKind.K_FIXED, 16), pa.uuid(), logical="uuid", width=16)
            if logical == "duration" and t.size == 12:
                return RNode("fixed", t, self._col(ColKind.K_FIXED, 16), pa.month_day_nano_interval(),
                             logical="duration", width=16)
            if not 1 <= t.size <= 32 and t.size:
                # wider fixed values: the machine's fixed columns hold 32 bytes at most
                return RNode("fixed", t, self._col(ColKind.K_BINARY), pa.binary(), logical="wide")
            if t.size == 0:
                return RNode("fixed", t, self._col(ColKind.K_BINARY), pa.binary(), logical="wide")
            return RNode("fixed", t, self._col(ColKind.K_FIXED, t.size), pa.binary(t.size), width=t.size)
        if k == "null":
            return RNode(k, t, self._col(ColKind.K_NULL), pa.null())
        if k == "boolean":
            return RNode(k, t, self._col(ColKind.K_BOOL), pa.bool_())
        if k == "string":
            if logical == "uuid":
                return RNode(k, t, self._col(ColKind.K_FIXED, 16), pa.uuid(), logical="uuid", width=16)
            return RNode(k, t, self._col(ColKind.K_BINARY), pa.string())
        if k == "bytes":
            return RNode(k, t, self._col(ColKind.K_BINARY), pa.binary())
        if k == "float":
            return RNode(k, t, self._col(ColKind.K_FIXED, 4), pa.float32(), width=4)
        if k == "double":
            return RNode(k, t, self._col(ColKind.K_FIXED, 8), pa.float64(), width=8)
        if k == "int":
            arrow = pa.int32()
            if logical == "date" or (logical is None and connect == CONNECT + "Date"):
                arrow = pa.date32()
            elif logical == "time-millis" or (logical is None and connect == CONNECT + "Time"):
                arrow = pa.time32("ms")
            return RNode(k, t, self._col(ColKind.K_FIXED, 4), arrow, width=4)
        if k == "long":
            arrow = pa.int64()
            if logical == "time-micros":
                arrow = pa.time64("us")
            elif logical and logical.startswith(("timestamp-", "local-timestamp-")):
                unit = TIME_UNITS.get(logical.rpartition("-")[2])
                if unit:
                    arrow = pa.timestamp(unit, tz=None if logical.startswith("local") else "UTC")
            elif logical is None and connect == CONNECT + "Timestamp":
                arrow = pa.timestamp("ms", tz="UTC")
            return RNode(k, t, self._col(ColKind.K_FIXED, 8), arrow, width=8)
        raise SchemaError(f"no Arrow type for Avro {k!r}")

    def _decimal(self, t: AvroType) -> RNode | None:
        """decimal128/256, or None where the logical type is invalid (ignored, as the spec says)."""
        pa = self.pa
        params = _decimal_params(t)
        if params is None:
            return None
        precision, scale = params
        width = 16 if precision <= 38 else 32
        arrow = pa.decimal128(precision, scale) if width == 16 else pa.decimal256(precision, scale)
        return RNode(t.kind, t, self._col(ColKind.K_FIXED, width), arrow, logical="decimal",
                     precision=precision, width=width)
