"""Programs for the compiled Avro decoder: one per (writer schema, reader
layout), by Avro's schema-resolution rules (specification 1.12, "Schema
Resolution"):

- records match by unqualified name or the reader's aliases; writer fields
  are read in the writer's order, those the reader lacks are skipped (read
  and checked, not stored), reader fields the writer lacks take their
  default (encoded once into ``consts`` and decoded as a value);
- promotions: int -> long, float, double; long -> float, double;
  float -> double; string <-> bytes;
- enums map writer symbols to reader indexes (unknown: the reader's default,
  else the row fails); fixed match by name and size;
- unions: each writer branch goes to the first reader branch that matches
  it exactly, else to the first it promotes to; a writer branch with no
  reader branch fails the row that takes it, not the whole column;
- logical types do not take part: the reader's type says what is stored.

Ops are emitted children first (``ProgramBuilder.op``), so each op's kids
sit contiguously in ``op_kids``.
"""

from __future__ import annotations

import numpy as np

from kbatch._core._avro import OpCode as Op, Status
from kbatch.errors import SchemaError
from kbatch.payloads.avro_default import encode_default
from kbatch.payloads.avro_layout import RNode, meaning
from kbatch.payloads.avro_schema import AvroType

PROMOTIONS = {"int": ("long", "float", "double"), "long": ("float", "double"),
              "float": ("double",), "string": ("bytes",), "bytes": ("string",)}
NUMERIC = {("int", "int"): Op.OP_INT, ("int", "long"): Op.OP_INT_LONG,
           ("int", "float"): Op.OP_INT_FLOAT, ("int", "double"): Op.OP_INT_DOUBLE,
           ("long", "long"): Op.OP_LONG, ("long", "float"): Op.OP_LONG_FLOAT,
           ("long", "double"): Op.OP_LONG_DOUBLE, ("float", "float"): Op.OP_FLOAT,
           ("float", "double"): Op.OP_FLOAT_DOUBLE, ("double", "double"): Op.OP_DOUBLE}


def least_bytes(t: AvroType, seen=None) -> int:
    """The fewest bytes a datum of ``t`` takes (a bound on hostile counts)."""
    seen = set() if seen is None else seen
    k = t.kind
    if k in ("null",):
        return 0
    if k in ("float",):
        return 4
    if k in ("double",):
        return 8
    if k == "fixed":
        return t.size
    if k == "record":
        if id(t) in seen:
            return 0
        seen = seen | {id(t)}
        return sum(least_bytes(f.type, seen) for f in t.fields)
    return 1    # boolean, int, long, bytes, string, enum, array, map, union


def _names(t: AvroType) -> set[str]:
    return {t.name, t.short_name, *t.aliases, *(a.rpartition(".")[2] for a in t.aliases)}


def _same_named(w: AvroType, r: AvroType) -> bool:
    return w.short_name == r.short_name or w.name in r.aliases or w.short_name in {
        a.rpartition(".")[2] for a in r.aliases}


def matches(w: AvroType, r: AvroType, exact: bool) -> bool:
    """Whether writer type ``w`` resolves to reader type ``r`` (never unions)."""
    if w.kind in ("record", "enum", "fixed") or r.kind in ("record", "enum", "fixed"):
        if w.kind != r.kind or not _same_named(w, r):
            return False
        return w.kind != "fixed" or w.size == r.size
    if w.kind == r.kind:
        return True
    return not exact and r.kind in PROMOTIONS.get(w.kind, ())


class ProgramBuilder:
    """Ops, their kids and the constants of one machine, grown writer by writer."""

    def __init__(self, max_depth: int = 4):
        self.ops: list[tuple[int, int, int, int, int, int]] = []
        self.op_kids: list[int] = []
        self.consts = bytearray()
        self._const_at: dict[bytes, int] = {}
        self.max_depth = max_depth

    def op(self, code: int, col: int = -1, kids=(), arg: int = 0, arg2: int = 0) -> int:
        self.ops.append((int(code), col, len(kids), len(self.op_kids), arg, arg2))
        self.op_kids.extend(kids)
        return len(self.ops) - 1

    def const(self, raw: bytes) -> int:
        at = self._const_at.get(raw)
        if at is None:
            at = self._const_at[raw] = len(self.consts)
            self.consts += raw
        return at

    def tables(self):
        ops = np.array(self.ops, dtype=np.int64).reshape(-1, 6)
        return ops, np.array(self.op_kids, dtype=np.int32), bytes(self.consts)

    # --- skipping: the writer's type read and checked, nothing stored -----------

    def skip(self, w: AvroType, depth: dict | None = None) -> int:
        depth = {} if depth is None else depth
        k = w.kind
        if k == "record":
            seen = depth.get(w.name, 0)
            if seen >= self.max_depth:
                return self.op(Op.OP_FAIL, arg=Status.ST_TOO_DEEP)
            inner = dict(depth)
            inner[w.name] = seen + 1
            return self.op(Op.OP_RECORD, kids=[self.skip(f.type, inner) for f in w.fields])
        if k == "union":
            return self.op(Op.OP_UNION, kids=[self.skip(b, depth) for b in w.branches])
        if k == "array":
            return self.op(Op.OP_ARRAY, kids=[self.skip(w.items, depth)], arg2=least_bytes(w.items))
        if k == "map":
            return self.op(Op.OP_MAP, kids=[self.skip(w.values, depth)], arg2=least_bytes(w.values))
        if k == "enum":
            return self.op(Op.OP_ENUM, arg=self.const(np.arange(len(w.symbols), dtype="<i4").tobytes()),
                           arg2=len(w.symbols))
        if k == "fixed":
            return self.op(Op.OP_FIXED, arg=w.size)
        return self.op(self._primitive_op(w.kind, w.kind if w.kind != "bytes" else "bytes"))

    @staticmethod
    def _primitive_op(wk: str, rk: str) -> int:
        if (wk, rk) in NUMERIC:
            return NUMERIC[(wk, rk)]
        if wk in ("string", "bytes") and rk in ("string", "bytes"):
            return Op.OP_STRING if rk == "string" else Op.OP_BYTES
        if wk == rk == "null":
            return Op.OP_NULL
        if wk == rk == "boolean":
            return Op.OP_BOOL
        raise SchemaError(f"the writer's {wk} cannot be read as {rk}")

    # --- resolution -----------------------------------------------------------------

    def resolve(self, w: AvroType, r: RNode) -> int:
        if r.kind == "cut":
            if w.kind == "null":
                return self.op(Op.OP_NULL, r.col)
            if w.kind == "union":
                return self.op(Op.OP_UNION, kids=[
                    self.op(Op.OP_NULL, r.col) if b.kind == "null" else self.op(Op.OP_FAIL, arg=Status.ST_TOO_DEEP)
                    for b in w.branches])
            return self.op(Op.OP_FAIL, arg=Status.ST_TOO_DEEP)
        if w.kind == "union":
            return self.op(Op.OP_UNION, kids=[self._branch(b, r) for b in w.branches])
        if r.kind == "nullable":
            if w.kind == "null":
                return self.op(Op.OP_NULLOUT, r.col)
            inner = r.children[0]
            if not (matches(w, _plain(inner), True) or matches(w, _plain(inner), False)):
                raise SchemaError(f"the writer's {w!r} is not in the reader's union {r.type.branches}")
            return self.resolve(w, inner)
        if r.kind == "union":
            k = self._pick(w, r)
            if k is None:
                raise SchemaError(f"the writer's {w!r} is not in the reader's union {r.type.branches}")
            return self.op(Op.OP_UBRANCH, r.col, [self.resolve(w, r.children[k])], arg=k)
        return self._same(w, r)

    def _branch(self, w: AvroType, r: RNode) -> int:
        """One writer union branch: resolved, or an op that fails the rows taking it."""
        try:
            if r.kind not in ("nullable", "union", "cut") and not matches(w, _plain(r), False):
                raise SchemaError("no match")
            return self.resolve(w, r)
        except SchemaError:
            return self.op(Op.OP_FAIL, arg=Status.ST_NO_BRANCH)

    @staticmethod
    def _pick(w: AvroType, r: RNode) -> int | None:
        """The reader branch a writer type resolves to, as Avro's Java
        resolver picks it: a named type of the same full name first (a.X
        and b.X are two branches), then one that matches by short name or
        alias, then one reached by promotion."""
        if w.kind in ("record", "enum", "fixed"):
            for i, b in enumerate(r.type.branches):
                if b.kind == w.kind and b.name == w.name and matches(w, b, True):
                    return i
        for exact in (True, False):
            for i, b in enumerate(r.type.branches):
                if matches(w, b, exact):
                    return i
        return None

    def _same(self, w: AvroType, r: RNode) -> int:
        rt = _plain(r)
        if not matches(w, rt, False):
            raise SchemaError(f"the writer's {w!r} cannot be read as the reader's {rt!r}")
        k = w.kind
        wm, rm = meaning(w), meaning(rt)
        if wm is not None and rm is not None and wm != rm:
            raise SchemaError(f"the writer's {_said(wm)} cannot be read as the reader's "
                              f"{_said(rm)} (the same bytes mean another value)")
        if k == "record":
            return self._record(w, r)
        if k == "array":
            return self.op(Op.OP_ARRAY, r.col, [self.resolve(w.items, r.children[0])], arg2=least_bytes(w.items))
        if k == "map":
            return self.op(Op.OP_MAP, r.col, [self.resolve(w.values, r.children[0])],
                           arg=r.key_col, arg2=least_bytes(w.values))
        if k == "enum":
            where = {s: i for i, s in enumerate(rt.symbols)}
            fallback = where.get(rt.enum_default, -1) if rt.enum_default is not None else -1
            table = np.array([where.get(s, fallback) for s in w.symbols], dtype="<i4")
            return self.op(Op.OP_ENUM, r.col, arg=self.const(table.tobytes()), arg2=len(w.symbols))
        if r.logical == "decimal":
            limit = self.const((10 ** r.precision).to_bytes(r.width, "little"))
            if k == "fixed":
                return self.op(Op.OP_DEC_FIXED, r.col, arg=limit, arg2=w.size)
            if k != "bytes":
                raise SchemaError(f"a decimal is bytes or fixed, not {k}")
            return self.op(Op.OP_DEC_BYTES, r.col, arg=limit)
        if r.logical == "uuid" and rt.kind == "string":
            if k != "string":
                raise SchemaError(f"a uuid string cannot be read from {k}")
            return self.op(Op.OP_UUID, r.col)
        if r.logical == "duration":
            return self.op(Op.OP_DURATION, r.col)
        if k == "fixed":
            return self.op(Op.OP_FIXED, r.col, arg=w.size)
        return self.op(self._primitive_op(k, rt.kind), r.col)

    def _record(self, w: AvroType, r: RNode) -> int:
        rt = r.type
        # each reader field takes the writer field of its name, else the first of its
        # aliases (in the reader's order) the writer has, as Java's resolution does
        writer_at = {wf.name: j for j, wf in enumerate(w.fields)}
        source = {}                       # writer field -> reader field
        for i, f in enumerate(rt.fields):
            for name in (f.name, *f.aliases):
                j = writer_at.get(name)
                if j is not None and j not in source:
                    source[j] = i
                    break
        kids, taken = [], set()
        for j, wf in enumerate(w.fields):
            i = source.get(j)
            if i is None:
                kids.append(self.skip(wf.type))
                continue
            taken.add(i)
            try:
                kids.append(self.resolve(wf.type, r.children[i]))
            except SchemaError as exc:
                raise SchemaError(f"field {rt.name}.{rt.fields[i].name}: {exc}") from None
        for i, rf in enumerate(rt.fields):
            if i in taken:
                continue
            if not rf.has_default:
                raise SchemaError(f"the reader's field {rt.name}.{rf.name} has no default "
                                  f"and the writer's {w.name} has no such field")
            raw = encode_default(rf.type, rf.default, f"field {rt.name}.{rf.name}")
            kid = self.resolve(rf.type, r.children[i])
            kids.append(self.op(Op.OP_DEFAULT, kids=[kid], arg=self.const(raw), arg2=len(raw)))
        return self.op(Op.OP_RECORD, r.col, kids)


def _said(m: tuple) -> str:
    return f"decimal({m[1]}, {m[2]})" if m[0] == "decimal" else m[0]


def _plain(r: RNode) -> AvroType:
    """The Avro type a reader node stands for (never a union)."""
    return r.type
