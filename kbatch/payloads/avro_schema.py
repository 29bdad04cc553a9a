"""Avro schemas (specification 1.12) parsed into a graph of ``AvroType``.

A schema is JSON: a primitive name (``"int"``), a name defined earlier, a
list (a union), or an object with ``type`` (and ``name``/``namespace``,
``fields``, ``symbols``, ``items``, ``values``, ``size``, ``logicalType``,
...). Named types (record, enum, fixed) are looked up by full name in the
enclosing namespace; a record may name itself (a recursive type: the graph
then has a cycle). Referenced schemas (a registry's ``references``) are
parsed first into the same ``Names`` so their named types resolve.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field as dc_field
from typing import Any

from kbatch.errors import SchemaError

PRIMITIVES = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")
NAMED = ("record", "error", "enum", "fixed")


@dataclass(eq=False)
class Field:
    name: str
    type: "AvroType"
    default: Any = None
    has_default: bool = False
    aliases: tuple[str, ...] = ()


@dataclass(eq=False)
class AvroType:
    """One node of a schema. ``kind``: a primitive name, ``record``,
    ``enum``, ``fixed``, ``array``, ``map`` or ``union``."""
    kind: str
    name: str | None = None                   # full name of a named type
    aliases: tuple[str, ...] = ()             # full names
    fields: list[Field] = dc_field(default_factory=list)
    symbols: tuple[str, ...] = ()
    enum_default: str | None = None
    items: "AvroType | None" = None           # array
    values: "AvroType | None" = None          # map
    branches: list["AvroType"] = dc_field(default_factory=list)
    size: int = 0                             # fixed
    logical: str | None = None
    props: dict = dc_field(default_factory=dict)   # precision, scale, connect.* ...

    @property
    def short_name(self) -> str:
        return (self.name or self.kind).rpartition(".")[2]

    def __repr__(self) -> str:
        return f"AvroType({self.name or self.kind})"


class Names:
    """Named types by full name, shared across a schema and its references."""

    def __init__(self):
        self.types: dict[str, AvroType] = {}

    def define(self, t: AvroType) -> None:
        if t.name in self.types:
            raise SchemaError(f"the Avro name {t.name!r} is defined twice")
        self.types[t.name] = t

    def lookup(self, name: str, namespace: str | None) -> AvroType | None:
        if "." not in name and namespace:
            found = self.types.get(f"{namespace}.{name}")
            if found is not None:
                return found
        return self.types.get(name)


def _fullname(name: str, namespace: str | None) -> str:
    if not isinstance(name, str) or not name:
        raise SchemaError(f"an Avro name must be a non-empty string, not {name!r}")
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def _namespace_of(fullname: str) -> str | None:
    ns = fullname.rpartition(".")[0]
    return ns or None


def parse(text: str | dict | list, names: Names | None = None) -> AvroType:
    """The ``AvroType`` of a schema (JSON text or already loaded JSON)."""
    if isinstance(text, (str, bytes)):
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError) as exc:
            bare = text.strip() if isinstance(text, str) else ""
            if not bare.replace(".", "").replace("_", "").isalnum():
                raise SchemaError(f"an Avro schema that is not JSON: {exc}") from None
            obj = bare          # a bare type name ("string"), as some tools register it
        if obj is None:         # the text null: the bare type name null, unquoted
            obj = "null"
    else:
        obj = text
    names = names if names is not None else Names()
    try:
        return _parse(obj, names, None)
    except RecursionError:
        raise SchemaError("an Avro schema nested too deeply") from None


def _parse(obj, names: Names, ns: str | None) -> AvroType:
    if isinstance(obj, str):
        if obj in PRIMITIVES:
            return AvroType(obj)
        found = names.lookup(obj, ns)
        if found is None:
            raise SchemaError(f"unknown Avro type {obj!r} (not defined before its use, nor in a reference)")
        return found
    if isinstance(obj, list):
        branches = [_parse(b, names, ns) for b in obj]
        seen = set()
        for b in branches:
            key = b.name if b.name else b.kind
            if b.kind == "union":
                raise SchemaError("an Avro union cannot hold a union directly")
            if key in seen:
                raise SchemaError(f"an Avro union holds {key!r} twice")
            seen.add(key)
        return AvroType("union", branches=branches)
    if not isinstance(obj, dict):
        raise SchemaError(f"not an Avro schema: {obj!r}")
    kind = obj.get("type")
    if isinstance(kind, (dict, list)):      # {"type": {...}} is that type (some writers emit it)
        inner = _parse(kind, names, ns)
        return _with_logical(inner, obj) if "logicalType" in obj else inner
    if kind in PRIMITIVES:
        return _with_logical(AvroType(kind), obj)
    if kind in NAMED:
        return _named(obj, kind, names, ns)
    if kind == "array":
        if "items" not in obj:
            raise SchemaError("an Avro array without items")
        return AvroType("array", items=_parse(obj["items"], names, ns))
    if kind == "map":
        if "values" not in obj:
            raise SchemaError("an Avro map without values")
        return AvroType("map", values=_parse(obj["values"], names, ns))
    if isinstance(kind, str):
        found = names.lookup(kind, ns)
        if found is not None:
            return found
    raise SchemaError(f"unknown Avro type {kind!r}")


def _named(obj: dict, kind: str, names: Names, ns: str | None) -> AvroType:
    own_ns = obj.get("namespace", ns)
    if own_ns == "":
        own_ns = None
    full = _fullname(obj.get("name"), own_ns)
    inner_ns = _namespace_of(full)
    aliases = tuple(_fullname(a, inner_ns) for a in obj.get("aliases", ()) or ())
    if kind == "fixed":
        size = obj.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= 1 << 20:
            raise SchemaError(f"Avro fixed {full!r}: size {size!r} is not an integer in 0..1 MiB")
        t = AvroType("fixed", name=full, aliases=aliases, size=size)
        names.define(t)
        return _with_logical(t, obj)
    if kind == "enum":
        symbols = obj.get("symbols")
        if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols) \
                or len(set(symbols)) != len(symbols):
            raise SchemaError(f"Avro enum {full!r}: symbols must be distinct strings")
        default = obj.get("default")
        if default is not None and default not in symbols:
            raise SchemaError(f"Avro enum {full!r}: default {default!r} is not a symbol")
        t = AvroType("enum", name=full, aliases=aliases, symbols=tuple(symbols), enum_default=default)
        names.define(t)
        return t
    fields = obj.get("fields")
    if not isinstance(fields, list):
        raise SchemaError(f"Avro record {full!r} without a list of fields")
    t = AvroType("record", name=full, aliases=aliases)
    names.define(t)                 # before the fields: they may name it
    seen = set()
    for f in fields:
        if not isinstance(f, dict) or not isinstance(f.get("name"), str) or "type" not in f:
            raise SchemaError(f"Avro record {full!r}: a field needs a name and a type: {f!r}")
        if f["name"] in seen:
            raise SchemaError(f"Avro record {full!r}: field {f['name']!r} twice")
        seen.add(f["name"])
        ftype = _parse(f["type"], names, inner_ns)
        t.fields.append(Field(f["name"], ftype, f.get("default"), "default" in f,
                              tuple(f.get("aliases", ()) or ())))
    return t


def _with_logical(t: AvroType, obj: dict) -> AvroType:
    """A primitive or fixed with its logical type and properties (an invalid
    logical type is ignored, as the specification says)."""
    logical = obj.get("logicalType")
    props = {k: v for k, v in obj.items() if k not in ("type", "name", "namespace", "aliases", "size",
                                                      "logicalType", "doc")}
    if not logical and not props:
        return t
    if t.kind == "fixed":
        t.logical, t.props = logical, props
        return t
    out = AvroType(t.kind, props=props)
    out.logical = logical
    return out


def walk(t: AvroType):
    """Every node once (cycles followed once)."""
    seen, todo = set(), [t]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        todo.extend(f.type for f in node.fields)
        todo.extend(node.branches)
        todo.extend(x for x in (node.items, node.values) if x is not None)
