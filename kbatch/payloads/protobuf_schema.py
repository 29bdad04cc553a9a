"""``.proto`` files (proto2 and proto3) parsed offline into message and enum
definitions, their type names resolved as protoc resolves them.

What a registry holds for a Protobuf schema is the ``.proto`` text; its
imports are the ``references`` (import path -> subject/version), except
the well-known types (``google/protobuf/*.proto``), which are built in
here. Read:

    syntax = "proto2" | "proto3";  package a.b;  import [public|weak] "path";
    message M { fields, nested message / enum, oneof, map<K, V>, reserved,
                extensions, option, extend (skipped) }
    field:  [optional | required | repeated] type name = N [options];
            options kept: packed, default (the rest are read and dropped)
    enum E { NAME = N [options]; option allow_alias = true; reserved }
            (a proto2 file's enums are closed, a proto3 file's open)
    service, extend, option statements: read and dropped

Not read: proto2 groups, editions (``edition = "2023"``): a SchemaError.

Names resolve as in protoc: ``.a.B`` is absolute; otherwise the first part
of the name is looked up from the innermost scope outwards (``pkg.Outer.X``,
``pkg.X``, ``X``), then the rest inside what it found. The message indexes
of Confluent's framing count the messages a file or message declares
(never map entries or enums), in declaration order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field as dc_field

from kbatch.errors import SchemaError

SCALARS = {"double": 1, "float": 2, "int64": 3, "uint64": 4, "int32": 5, "fixed64": 6, "fixed32": 7,
           "bool": 8, "string": 9, "bytes": 12, "uint32": 13, "sfixed32": 15, "sfixed64": 16,
           "sint32": 17, "sint64": 18}
MAP_KEYS = {"int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
            "sfixed32", "sfixed64", "bool", "string"}
MAX_FIELD = (1 << 29) - 1

_TOKEN = re.compile(r"""
    (?P<ws>\s+|//[^\n]*|/\*.*?\*/)
  | (?P<str>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*')
  | (?P<num>[-+]?(?:0[xX][0-9a-fA-F]+|\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?))
  | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<sym>[{}\[\]()<>;=,.:/-])
""", re.VERBOSE | re.DOTALL)


@dataclass
class FieldDef:
    name: str
    number: int
    label: str | None            # optional, required, repeated, or None (proto3 implicit)
    type_name: str               # as written; a scalar name, or the resolved full name
    kind: str = "scalar"         # scalar, message, enum, map (resolved)
    oneof: str | None = None
    key: str | None = None       # map<key, ...>
    value: "FieldDef | None" = None  # map<..., value> as a field
    packed: bool | None = None
    default: str | None = None
    scope: str = ""              # the full name of the message it is declared in


@dataclass
class EnumDef:
    name: str
    full_name: str
    values: list = dc_field(default_factory=list)      # (name, number)
    closed: bool = False         # a proto2 file's enum: a number it does not name is no value


@dataclass
class MessageDef:
    name: str
    full_name: str
    syntax: str
    fields: list = dc_field(default_factory=list)      # FieldDef, declaration order
    oneofs: list = dc_field(default_factory=list)      # names, declaration order
    messages: list = dc_field(default_factory=list)    # nested MessageDef
    enums: list = dc_field(default_factory=list)


@dataclass
class ProtoFile:
    name: str
    syntax: str = "proto2"
    package: str = ""
    imports: list = dc_field(default_factory=list)     # paths
    messages: list = dc_field(default_factory=list)
    enums: list = dc_field(default_factory=list)

    def message_at(self, path) -> MessageDef:
        """The message a Confluent message-index path names."""
        types, found = self.messages, None
        for i in path:
            if not 0 <= i < len(types):
                raise SchemaError(f"message indexes {list(path)} name no message of {self.name}")
            found = types[i]
            types = found.messages
        if found is None:
            raise SchemaError("an empty message-index path")
        return found

    def message_path(self, full_name: str) -> list[int]:
        """The message-index path of a message (the inverse of ``message_at``)."""
        rest = full_name[len(self.package) + 1:] if self.package else full_name
        types, path = self.messages, []
        for part in rest.split("."):
            for i, m in enumerate(types):
                if m.name == part:
                    path.append(i)
                    types = m.messages
                    break
            else:
                raise SchemaError(f"{full_name} is not declared in {self.name}")
        return path


class _Tokens:
    def __init__(self, text: str, where: str):
        self.where = where
        self.toks: list[tuple[str, str, int]] = []
        pos, line = 0, 1
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:
                raise SchemaError(f"{where}:{line}: cannot read {text[pos:pos + 20]!r}")
            kind = m.lastgroup
            if kind != "ws":
                self.toks.append((kind, m.group(), line))
            line += m.group().count("\n")
            pos = m.end()
        self.i = 0

    def peek(self, k: int = 0) -> str:
        return self.toks[self.i + k][1] if self.i + k < len(self.toks) else ""

    def kind(self) -> str:
        return self.toks[self.i][0] if self.i < len(self.toks) else "eof"

    def next(self) -> str:
        if self.i >= len(self.toks):
            raise self.error("the schema ends early")
        self.i += 1
        return self.toks[self.i - 1][1]

    def expect(self, want: str) -> None:
        got = self.next()
        if got != want:
            self.i -= 1
            raise self.error(f"expected {want!r}, found {got!r}")

    def accept(self, want: str) -> bool:
        if self.peek() == want and self.kind() != "str":
            self.i += 1
            return True
        return False

    def ident(self) -> str:
        if self.kind() != "id":
            raise self.error(f"expected a name, found {self.peek()!r}")
        return self.next()

    def full_ident(self) -> str:
        parts = ["." if self.accept(".") else ""]
        parts.append(self.ident())
        while self.accept("."):
            parts.append("." + self.ident())
        return "".join(parts)

    def string(self) -> str:
        if self.kind() != "str":
            raise self.error(f"expected a string, found {self.peek()!r}")
        out = ""
        while self.kind() == "str":
            out += _unquote(self.next())
        return out

    def integer(self) -> int:
        text = self.next()
        if text == "-" and self.kind() == "num":     # a sign apart: "- 1"
            text += self.next()
        try:
            return int(text, 0) if not re.fullmatch(r"[-+]?0\d+", text) else int(text, 8)
        except ValueError:
            self.i -= 1
            raise self.error(f"expected an integer, found {text!r}") from None

    def error(self, why: str) -> SchemaError:
        line = self.toks[min(self.i, len(self.toks) - 1)][2] if self.toks else 1
        return SchemaError(f"{self.where}:{line}: {why}")


def _unquote(tok: str) -> str:
    body = tok[1:-1]
    if "\\" not in body:
        return body
    try:
        return body.encode("latin-1", "backslashreplace").decode("unicode_escape")
    except UnicodeDecodeError:
        return body


def parse(text: str, name: str = "schema.proto") -> ProtoFile:
    """One .proto file; type names are resolved later (``Pool``)."""
    t = _Tokens(text, name)
    f = ProtoFile(name)
    f.package = _file_package(t)
    first = True
    while t.i < len(t.toks):
        word = t.next()
        if word == ";":
            continue
        if word == "syntax" and first:
            t.expect("=")
            f.syntax = t.string()
            t.expect(";")
            if f.syntax not in ("proto2", "proto3"):
                raise SchemaError(f"{name}: syntax {f.syntax!r} is neither proto2 nor proto3")
        elif word == "edition":
            raise SchemaError(f"{name}: Protobuf editions are not read (proto2 and proto3 are)")
        elif word == "package":         # (read first: _file_package)
            t.full_ident()
            t.expect(";")
        elif word == "import":
            if t.peek() in ("public", "weak") and t.kind() == "id":
                t.next()
            f.imports.append(t.string())
            t.expect(";")
        elif word == "option":
            _skip_statement(t)
        elif word == "message":
            f.messages.append(_message(t, f.package, f.syntax))
        elif word == "enum":
            f.enums.append(_enum(t, f.package, f.syntax))
        elif word in ("service", "extend"):
            _skip_block(t)
        else:
            raise t.error(f"unexpected {word!r}")
        first = False
    return f


def _file_package(t: _Tokens) -> str:
    """The file's package: protoc puts every definition of the file in it,
    wherever the ``package`` statement stands (one at most)."""
    found, depth, start = [], 0, True
    for k, (kind, text, _) in enumerate(t.toks):
        if kind != "str" and text == "{":
            depth += 1
        elif kind != "str" and text == "}":
            depth -= 1
        elif depth == 0 and start and text == "package" and kind != "str":
            found.append(k)
        start = kind != "str" and text in (";", "}")
    if len(found) > 1:
        raise SchemaError(f"{t.where}: more than one package statement")
    if not found:
        return ""
    k, parts = found[0] + 1, []
    while k < len(t.toks) and t.toks[k][1] != ";":
        parts.append(t.toks[k][1])
        k += 1
    return "".join(parts).lstrip(".")


def _join(scope: str, name: str) -> str:
    return f"{scope}.{name}" if scope else name


def _skip_statement(t: _Tokens) -> None:
    depth = 0
    while True:
        tok = t.next()
        if tok == "{":
            depth += 1
        elif tok == "}":
            depth -= 1
        elif tok == ";" and depth <= 0:
            return


def _skip_block(t: _Tokens) -> None:
    while t.next() != "{":
        pass
    depth = 1
    while depth:
        tok = t.next()
        depth += tok == "{"
        depth -= tok == "}"


def _options(t: _Tokens) -> dict:
    """``[name = value, ...]``: the values as text (aggregates dropped)."""
    out = {}
    if not t.accept("["):
        return out
    while True:
        if t.accept("("):
            name = "(" + t.full_ident() + ")"
            t.expect(")")
        else:
            name = t.ident()
        while t.accept("."):
            name += "." + (t.ident() if not t.accept("(") else "(" + t.full_ident() + (t.expect(")") or ")"))
        t.expect("=")
        if t.accept("{"):
            depth = 1
            while depth:
                tok = t.next()
                depth += tok == "{"
                depth -= tok == "}"
            value = None
        elif t.kind() == "str":
            value = t.string()
        else:
            value = t.next()
            if value in ("-", "+"):
                value += t.next()
        out[name] = value
        if t.accept("]"):
            return out
        t.expect(",")


def _field_number(t: _Tokens, where: str) -> int:
    n = t.integer()
    if not 1 <= n <= MAX_FIELD or 19000 <= n <= 19999:
        raise t.error(f"field {where}: number {n} is not a valid field number")
    return n


def _message(t: _Tokens, scope: str, syntax: str) -> MessageDef:
    name = t.ident()
    m = MessageDef(name, _join(scope, name), syntax)
    t.expect("{")
    _message_body(t, m, syntax, None)
    return m


def _message_body(t: _Tokens, m: MessageDef, syntax: str, oneof: str | None) -> None:
    while not t.accept("}"):
        word = t.peek()
        if t.kind() == "str":
            raise t.error(f"unexpected {word!r}")
        if word == ";":
            t.next()
        elif word == "option":
            t.next()
            _skip_statement(t)
        elif word in ("reserved", "extensions") and oneof is None and t.peek(1) not in ("=",):
            t.next()
            _skip_statement(t)
        elif word == "message" and oneof is None and t.kind() == "id" and t.peek(2) == "{":
            t.next()
            m.messages.append(_message(t, m.full_name, syntax))
        elif word == "enum" and oneof is None and t.peek(2) == "{":
            t.next()
            m.enums.append(_enum(t, m.full_name, syntax))
        elif word == "extend" and oneof is None and t.peek(1) != "=":
            _skip_block(t)
        elif word == "oneof" and oneof is None and t.peek(2) == "{":
            t.next()
            name = t.ident()
            t.expect("{")
            m.oneofs.append(name)
            _message_body(t, m, syntax, name)
        elif word == "map" and t.peek(1) == "<":
            t.next()
            t.expect("<")
            key = t.ident()
            if key not in MAP_KEYS:
                raise t.error(f"a map key of type {key!r}")
            t.expect(",")
            vtype = t.full_ident()
            t.expect(">")
            fname = t.ident()
            t.expect("=")
            number = _field_number(t, fname)
            _options(t)
            t.expect(";")
            value = FieldDef("value", 2, None, vtype, scope=m.full_name)
            m.fields.append(FieldDef(fname, number, "repeated", "map", kind="map", key=key, value=value,
                                     scope=m.full_name))
        else:
            label = None
            # a label word starting a field is its label, as protoc's parser
            # takes it, also before a fully qualified type (``repeated
            # .pkg.T``: how Confluent prints schemas from generated classes)
            if word in ("optional", "required", "repeated") and t.peek(1) != "=":
                label = t.next()
            if t.peek() == "group":
                raise t.error("proto2 groups are not read")
            type_name = t.full_ident()
            fname = t.ident()
            t.expect("=")
            number = _field_number(t, fname)
            opts = _options(t)
            t.expect(";")
            if syntax == "proto2" and label is None and oneof is None:
                raise t.error(f"proto2 field {fname} without a label")
            if syntax == "proto3" and label == "required":
                raise t.error(f"proto3 field {fname} is required")
            packed = opts.get("packed")
            m.fields.append(FieldDef(fname, number, label, type_name, oneof=oneof,
                                     packed=None if packed is None else packed == "true",
                                     default=opts.get("default"), scope=m.full_name))
    seen: dict[int, str] = {}
    if oneof is None:
        for fd in m.fields:
            if fd.number in seen:
                raise t.error(f"message {m.full_name}: fields {seen[fd.number]} and {fd.name} "
                              f"share number {fd.number}")
            seen[fd.number] = fd.name


def _enum(t: _Tokens, scope: str, syntax: str) -> EnumDef:
    name = t.ident()
    e = EnumDef(name, _join(scope, name), closed=syntax == "proto2")
    t.expect("{")
    while not t.accept("}"):
        if t.accept(";"):
            continue
        if t.peek() in ("option", "reserved") and t.peek(1) != "=":
            t.next()
            _skip_statement(t)
            continue
        vname = t.ident()
        t.expect("=")
        number = t.integer()
        if not -(1 << 31) <= number < 1 << 31:
            raise t.error(f"enum value {vname} = {number} is not an int32")
        _options(t)
        t.expect(";")
        e.values.append((vname, number))
    if not e.values:
        raise t.error(f"enum {e.full_name} has no values")
    return e


class Pool:
    """Files and their types by full name; ``resolve`` binds every field's
    type name to a message, an enum or a scalar."""

    def __init__(self):
        self.files: dict[str, ProtoFile] = {}
        self.messages: dict[str, MessageDef] = {}
        self.enums: dict[str, EnumDef] = {}

    def add(self, f: ProtoFile) -> None:
        if f.name in self.files:
            return
        self.files[f.name] = f
        pending = [(m, self.messages) for m in f.messages] + [(e, self.enums) for e in f.enums]
        while pending:
            d, table = pending.pop()
            if d.full_name in self.messages or d.full_name in self.enums:
                raise SchemaError(f"{d.full_name} is defined twice")
            table[d.full_name] = d
            if isinstance(d, MessageDef):
                pending += [(m, self.messages) for m in d.messages] + [(e, self.enums) for e in d.enums]

    def resolve(self) -> None:
        for m in list(self.messages.values()):
            for fd in m.fields:
                if fd.kind == "map":
                    self._bind(fd.value, m.full_name)
                elif fd.kind == "scalar" and fd.type_name not in SCALARS:
                    self._bind(fd, m.full_name)

    def _bind(self, fd: FieldDef, scope: str) -> None:
        if fd.type_name in SCALARS:
            return
        full = self.lookup(fd.type_name, scope)
        if full is None:
            raise SchemaError(f"field {scope}.{fd.name}: type {fd.type_name!r} is not defined "
                              "(a missing import or reference?)")
        fd.kind = "message" if full in self.messages else "enum"
        fd.type_name = full

    def lookup(self, name: str, scope: str) -> str | None:
        def known(n):
            return n in self.messages or n in self.enums or any(
                k.startswith(n + ".") for k in self.messages) or any(k.startswith(n + ".") for k in self.enums)
        if name.startswith("."):
            n = name[1:]
            return n if n in self.messages or n in self.enums else None
        first, _, rest = name.partition(".")
        parts = scope.split(".") if scope else []
        for i in range(len(parts), -1, -1):
            cand = ".".join(parts[:i] + [first])
            if known(cand):
                full = f"{cand}.{rest}" if rest else cand
                if full in self.messages or full in self.enums:
                    return full
                if not rest:
                    continue            # a package of that name: look further out
                return None
        return None


# The well-known types Confluent's serializers use without references.
WELL_KNOWN = {
    "google/protobuf/timestamp.proto": 'syntax = "proto3"; package google.protobuf; '
                                       "message Timestamp { int64 seconds = 1; int32 nanos = 2; }",
    "google/protobuf/duration.proto": 'syntax = "proto3"; package google.protobuf; '
                                      "message Duration { int64 seconds = 1; int32 nanos = 2; }",
    "google/protobuf/wrappers.proto": 'syntax = "proto3"; package google.protobuf; '
    + " ".join(f"message {n}Value {{ {t} value = 1; }}" for n, t in (
        ("Double", "double"), ("Float", "float"), ("Int64", "int64"), ("UInt64", "uint64"), ("Int32", "int32"),
        ("UInt32", "uint32"), ("Bool", "bool"), ("String", "string"), ("Bytes", "bytes"))),
    "google/protobuf/empty.proto": 'syntax = "proto3"; package google.protobuf; message Empty {}',
    "google/protobuf/field_mask.proto": 'syntax = "proto3"; package google.protobuf; '
                                        "message FieldMask { repeated string paths = 1; }",
    "google/protobuf/any.proto": 'syntax = "proto3"; package google.protobuf; '
                                 "message Any { string type_url = 1; bytes value = 2; }",
    "google/protobuf/struct.proto": 'syntax = "proto3"; package google.protobuf; '
                                    "message Struct { map<string, Value> fields = 1; } "
                                    "message Value { oneof kind { NullValue null_value = 1; double number_value = 2; "
                                    "string string_value = 3; bool bool_value = 4; Struct struct_value = 5; "
                                    "ListValue list_value = 6; } } enum NullValue { NULL_VALUE = 0; } "
                                    "message ListValue { repeated Value values = 1; }",
}
