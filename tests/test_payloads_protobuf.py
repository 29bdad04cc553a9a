"""Protobuf payloads decoded by kbatch.payloads against the protobuf runtime
(the oracle): message classes compiled by protoc from the same .proto
text, their serializer writes the data, Confluent's framing built here.
Every scalar type, enums (aliases, unknown numbers), nested and recursive
messages, repeated (packed and unpacked), maps, oneofs, references
(imports), well-known types, evolution across versions by field number,
merged occurrences, unknown fields, proto2 presence and closed enums, damaged payloads
(a clear error or a null row, never a wrong row), and random message types
(Hypothesis: the runtime's descriptors built directly, kbatch given the same
file as .proto text)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kbatch
from kbatch.errors import PayloadError, SchemaError
from kbatch.payloads import protobuf_schema
from tests.protobuf_ref import Protos, canon, expected, frame_pb, plain

pytest.importorskip("google.protobuf")

COMMON = """
syntax = "proto3";
package shop.common;
message Money { string currency = 1; int64 units = 2; sint32 nanos = 3; }
enum Level { LEVEL_UNSPECIFIED = 0; LOW = 1; HIGH = 2; }
"""

EVERY = """
// every kind of field
syntax = "proto3";
package shop;
import "common.proto";
import "google/protobuf/timestamp.proto";
import "google/protobuf/duration.proto";
import "google/protobuf/wrappers.proto";
option java_package = "com.example.shop";   /* options are read and dropped */

message Every {
  double d = 1; float f = 2; int32 i32 = 3; int64 i64 = 4; uint32 u32 = 5; uint64 u64 = 6;
  sint32 s32 = 7; sint64 s64 = 8; fixed32 fx32 = 9; fixed64 fx64 = 10; sfixed32 sf32 = 11;
  sfixed64 sf64 = 12; bool b = 13; string s = 14; bytes by = 15;
  enum Kind { option allow_alias = true; UNKNOWN = 0; SMALL = 1; LITTLE = 1; BIG = 2; }
  Kind kind = 16;
  shop.common.Level level = 17;
  common.Money price = 18 [deprecated = true];
  message Line {
    string sku = 1; int32 qty = 2; repeated string tags = 3; Line child = 4;
  }
  repeated Line lines = 19;
  repeated int32 packed_ints = 20;
  repeated int32 loose_ints = 21 [packed = false];
  repeated double ds = 22;
  repeated Kind kinds = 23;
  map<string, int64> counts = 24;
  map<int32, Line> by_id = 25;
  map<bool, string> flags = 26;
  oneof choice {
    string name = 27;
    Line line = 28;
    int64 number = 29;
  }
  optional int32 maybe = 30;
  google.protobuf.Timestamp at = 31;
  google.protobuf.Duration took = 32;
  google.protobuf.Int32Value wi = 33;
  google.protobuf.StringValue ws = 34;
  google.protobuf.BoolValue wb = 35;
  google.protobuf.DoubleValue wd = 36; google.protobuf.FloatValue wf = 37;
  google.protobuf.Int64Value wl = 38; google.protobuf.UInt64Value wul = 39;
  google.protobuf.UInt32Value wu = 46; google.protobuf.BytesValue wby = 47;
  reserved 40 to 45; reserved "old";
  int32 big_number = 100000;
}
message Other { string note = 1; message Inner { int32 x = 1; } Inner inner = 2; }
"""


@pytest.fixture(scope="module")
def protos():
    return Protos({"common.proto": COMMON, "every.proto": EVERY})


def shop_registry(extra=()):
    return kbatch.registry([
        {"subject": "common", "version": 1, "id": 1, "schemaType": "PROTOBUF", "schema": COMMON},
        {"subject": "shop-value", "version": 1, "id": 2, "schemaType": "PROTOBUF", "schema": EVERY,
         "references": [{"name": "common.proto", "subject": "common", "version": 1}]}, *extra])


def line(cls, rnd: random.Random, depth: int = 0):
    m = cls()
    if rnd.random() < 0.7:
        m.sku = rnd.choice(["", "a", "SKU-ü", "x" * 40])
    m.qty = rnd.randint(-5, 1000)
    m.tags.extend(rnd.choice(["t", "", "é"]) for _ in range(rnd.randint(0, 3)))
    if depth < 2 and rnd.random() < 0.3:
        m.child.CopyFrom(line(cls, rnd, depth + 1))
    return m


def every(protos, i: int):
    rnd = random.Random(i)
    E = protos.cls("shop.Every")
    L = protos.cls("shop.Every.Line")
    m = E()
    if i % 5:
        m.d = rnd.uniform(-1e300, 1e300)
        m.f = rnd.choice([0.0, 1.5, -3.25, 1e30])
        m.i32 = rnd.choice([0, -1, 2 ** 31 - 1, -(2 ** 31), rnd.randint(-1000, 1000)])
        m.i64 = rnd.choice([0, -1, 2 ** 63 - 1, -(2 ** 63)])
        m.u32 = rnd.choice([0, 2 ** 32 - 1, 7])
        m.u64 = rnd.choice([0, 2 ** 64 - 1, 12345678901234])
        m.s32 = rnd.choice([0, -1, -(2 ** 31), 2 ** 31 - 1])
        m.s64 = rnd.choice([0, -(2 ** 63), 2 ** 63 - 1, -99])
        m.fx32, m.fx64 = rnd.choice([0, 2 ** 32 - 1]), rnd.choice([0, 2 ** 64 - 1])
        m.sf32, m.sf64 = rnd.choice([-(2 ** 31), 5]), rnd.choice([-(2 ** 63), 5])
        m.b = rnd.random() < 0.5
        m.s = rnd.choice(["", "plain", "ünïcødé ✓", "\x00nul"])
        m.by = bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 9)))
        m.kind = rnd.choice([0, 1, 2, 7])          # 7: a number the enum does not name
        m.level = rnd.choice([0, 1, 2])
    if rnd.random() < 0.5:
        m.price.currency = "EUR"
        m.price.units = rnd.randint(-10 ** 12, 10 ** 12)
        m.price.nanos = rnd.randint(-999_999_999, 999_999_999)
    m.lines.extend(line(L, rnd) for _ in range(rnd.randint(0, 3)))
    m.packed_ints.extend(rnd.randint(-(2 ** 31), 2 ** 31 - 1) for _ in range(rnd.randint(0, 5)))
    m.loose_ints.extend(rnd.randint(-3, 3) for _ in range(rnd.randint(0, 4)))
    m.ds.extend(rnd.uniform(-5, 5) for _ in range(rnd.randint(0, 3)))
    m.kinds.extend(rnd.choice([0, 1, 2]) for _ in range(rnd.randint(0, 3)))
    for _ in range(rnd.randint(0, 3)):
        m.counts[rnd.choice(["a", "b", "c", ""])] = rnd.randint(-(2 ** 40), 2 ** 40)
    for _ in range(rnd.randint(0, 2)):
        m.by_id[rnd.randint(-5, 5)].CopyFrom(line(L, rnd))
    if rnd.random() < 0.5:
        m.flags[rnd.random() < 0.5] = "on"
    which = rnd.randrange(4)
    if which == 1:
        m.name = "n" * rnd.randint(0, 3)
    elif which == 2:
        m.line.CopyFrom(line(L, rnd))
    elif which == 3:
        m.number = rnd.randint(-(2 ** 63), 2 ** 63 - 1)
    if rnd.random() < 0.5:
        m.maybe = rnd.choice([0, 9])
    if rnd.random() < 0.6:
        m.at.seconds = rnd.randint(-(2 ** 33), 2 ** 33)
        m.at.nanos = rnd.randint(0, 999_999_999)
    if rnd.random() < 0.4:
        m.took.seconds = rnd.randint(-(10 ** 9), 10 ** 9)
        m.took.nanos = rnd.randint(0, 999_999_999) * (1 if m.took.seconds >= 0 else -1)
    if rnd.random() < 0.5:
        m.wi.value = rnd.choice([0, -4])
    if rnd.random() < 0.5:
        m.ws.value = rnd.choice(["", "w"])
    if rnd.random() < 0.5:
        m.wb.value = rnd.random() < 0.5
    if rnd.random() < 0.5:
        m.wd.value = rnd.choice([0.0, -2.5, float("inf")])
    if rnd.random() < 0.5:
        m.wf.value = rnd.choice([0.0, 0.5])
    if rnd.random() < 0.5:
        m.wl.value = rnd.choice([0, -(2 ** 63)])
    if rnd.random() < 0.5:
        m.wul.value = rnd.choice([0, 2 ** 64 - 1])
    if rnd.random() < 0.5:
        m.wu.value = rnd.choice([0, 2 ** 32 - 1])
    if rnd.random() < 0.5:
        m.wby.value = rnd.choice([b"", b"\x00\xff"])
    if rnd.random() < 0.3:
        m.big_number = 42
    return m


def test_every_type_against_the_runtime(protos):
    reg = shop_registry()
    msgs = [every(protos, i) for i in range(300)]
    values = [frame_pb(2, m.SerializeToString()) for m in msgs] + [None, b""]
    arr = reg.decode(values)
    arr.validate(full=True)
    t = arr.type
    assert t.field("at").type == pa.timestamp("ns", "UTC") and t.field("took").type == pa.duration("ns")
    assert t.field("wi").type == pa.int32() and t.field("u64").type == pa.uint64()
    assert [t.field(n).type for n in ("wd", "wf", "wl", "wul", "wu", "wby", "ws", "wb")] == [
        pa.float64(), pa.float32(), pa.int64(), pa.uint64(), pa.uint32(), pa.binary(), pa.string(), pa.bool_()]
    assert t.field("kind").type == pa.dictionary(pa.int32(), pa.string())
    assert t.field("by_id").type.item_type.field("tags").type == pa.list_(pa.string())
    assert t.field("counts").type == pa.map_(pa.string(), pa.int64())
    assert [f.name for f in t][-1] == "choice" and t.field("choice").type == pa.dictionary(pa.int8(), pa.string())
    got = plain(arr)
    S = protos.shadow("shop.Every")
    for m, row in zip(msgs, got):
        assert row == expected(m)
        assert protos.entries(S.FromString(m.SerializeToString())) == row    # the damage test's oracle agrees
    assert got[-2:] == [None, None]


def test_parser_agrees_with_protoc(protos):
    """kbatch's .proto parser: numbers, labels, resolved types and oneofs as protoc's descriptors say."""
    reg = shop_registry()
    _root, pool = reg.protobuf(2)
    for name in ("shop.Every", "shop.Every.Line", "shop.Other", "shop.common.Money"):
        mine = pool.messages[name]
        theirs = protos.pool.FindMessageTypeByName(name)
        assert [f.name for f in mine.fields] == [f.name for f in theirs.fields]
        for f, g in zip(mine.fields, theirs.fields):
            assert f.number == g.number
            if g.message_type is not None and g.message_type.GetOptions().map_entry:
                assert f.kind == "map"
                continue
            assert (f.label == "repeated") == g.is_repeated
            if g.message_type is not None:
                assert f.type_name == g.message_type.full_name
            elif g.enum_type is not None:
                assert f.type_name == g.enum_type.full_name
            if g.containing_oneof is not None and not g.containing_oneof.name.startswith("_"):
                assert f.oneof == g.containing_oneof.name
    assert _root.message_path("shop.Other.Inner") == [1, 0]


V1 = 'syntax = "proto3"; package ev; message Item { int32 id = 1; string name = 2; int32 gone = 3; }'
V2 = ('syntax = "proto3"; package ev; message Item { int32 id = 1; string name = 2; '
      'reserved 3; repeated string tags = 4; Sub sub = 5; } message Sub { int64 v = 1; }')
V3 = ('syntax = "proto3"; package ev; message Item { int64 id = 1; string name = 2; '
      'reserved 3; repeated string tags = 4; Sub sub = 5; bool flag = 6; '
      'enum E { Z = 0; O = 1; } E e = 7; } message Sub { int64 v = 1; string w = 2; }')


def test_evolution_by_field_number():
    classes = [Protos({"item.proto": v}).cls("ev.Item") for v in (V1, V2, V3)]
    reader = classes[2]
    reg = kbatch.registry([{"subject": "item-value", "version": k + 1, "id": 10 + k, "schemaType": "PROTOBUF",
                            "schema": v} for k, v in enumerate((V1, V2, V3))])
    payloads, values = [], []
    for i in range(60):
        k = i % 3
        m = classes[k](id=i * (-1) ** i, name=f"n{i}")
        if k == 0:
            m.gone = i
        if k >= 1:
            m.tags.extend(["t"] * (i % 3))
            if i % 2:
                m.sub.v = i
        if k == 2:
            m.flag = bool(i % 2)
            m.e = i % 3             # 2: open enum, no name
            m.sub.w = "w"
        payloads.append(m.SerializeToString())
        values.append(frame_pb(10 + k, payloads[-1]))
    arr = reg.decode(values)
    assert arr.type.field("id").type == pa.int64()
    for raw, row in zip(payloads, plain(arr)):
        assert row == expected(reader.FromString(raw))


MULTI = """syntax = "proto3"; package mi;
message First { int32 a = 1; }
message Second { string b = 1; message Deep { bool c = 1; map<string, string> m = 2; message Deeper { int32 d = 1; } } }
"""


def test_message_indexes_name_the_message():
    protos = Protos({"mi.proto": MULTI})
    reg = kbatch.registry([{"subject": "mi-value", "version": 1, "id": 3, "schemaType": "PROTOBUF",
                            "schema": MULTI}])
    second = protos.cls("mi.Second")(b="x").SerializeToString()
    deeper = protos.cls("mi.Second.Deep.Deeper")(d=4).SerializeToString()
    first = protos.cls("mi.First")(a=1).SerializeToString()
    assert plain(reg.decode([frame_pb(3, second, [1])] * 2)) == [{"b": "x"}] * 2
    assert plain(reg.decode([frame_pb(3, deeper, [1, 0, 0])])) == [{"d": 4}]
    assert plain(reg.decode([frame_pb(3, first), b"\x00\x00\x00\x00\x03\x02\x00" + first])) == [{"a": 1}] * 2
    mixed = [frame_pb(3, first), frame_pb(3, second, [1])]
    with pytest.raises(SchemaError, match="mi.First, mi.Second"):
        reg.decode(mixed)
    arr, errors = reg.decode(mixed, message="mi.Second", on_error="null", with_errors=True)
    assert plain(arr) == [None, {"b": "x"}]
    assert "not the mi.Second" in errors[0].as_py() and errors[1].as_py() is None
    for bad in ([2], [1, 5], [0, 0]):
        with pytest.raises(PayloadError, match="schema id 3.*name no message"):
            reg.decode([frame_pb(3, first, bad)], offsets=[77])
    for raw in (b"\x00\x00\x00\x00\x03\x01", b"\x00\x00\x00\x00\x03\x04\x02", b"\x00\x00\x00\x00\x03\x80"):
        with pytest.raises(PayloadError, match="record offset 5, schema id 3: Protobuf message indexes"):
            reg.decode([raw], offsets=[5])


PROTO2 = """syntax = "proto2"; package p2;
message M { required int32 id = 1; optional string s = 2 [default = "dflt"]; optional int32 n = 3 [default = 5];
            repeated int32 r = 4 [packed = true]; optional Kind k = 5; enum Kind { A = 1; B = 2; } }
"""


def test_proto2_presence_and_required():
    M = Protos({"p2.proto": PROTO2}).cls("p2.M")
    reg = kbatch.registry([{"subject": "p2", "version": 1, "id": 4, "schemaType": "PROTOBUF", "schema": PROTO2}])
    msgs = [M(id=1), M(id=2, s="x", n=0, r=[1, 2], k=2)]
    arr = reg.decode([frame_pb(4, m.SerializeToString()) for m in msgs])
    assert plain(arr) == [{"id": 1, "s": None, "n": None, "r": [], "k": None},
                          {"id": 2, "s": "x", "n": 0, "r": [1, 2], "k": "B"}]
    missing = M(s="no id").SerializePartialToString()
    with pytest.raises(PayloadError, match="required field is missing"):
        reg.decode([frame_pb(4, missing)])


OPEN = 'syntax = "proto3"; package op; enum Open { OZ = 0; OA = 1; }'
CLOSED = """syntax = "proto2"; package cl; import "open.proto";
enum Kind { Z = 0; A = 1; B = 2; NEG = -3; }
message Sub { optional Kind k = 1; repeated Kind r = 2; }
message M { optional Kind k = 1; repeated Kind rp = 2 [packed = true]; repeated Kind ru = 3;
            map<string, Kind> mk = 4; oneof o { Kind ok = 5; string os = 6; } optional op.Open open = 7;
            repeated op.Open opens = 8; optional Sub sub = 9; map<int32, Sub> ms = 10; }
message R { required Kind k = 1; }
"""


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytes([n]))


def _closed_payload(rnd: random.Random, depth: int = 0) -> bytes:
    """Fields of cl.M (or cl.Sub, ``depth`` 1) in any order and number, enum
    numbers the enums name or not (7, -1, past int32: protobuf keeps the low 32 bits)."""
    def number():
        return _varint(rnd.choice([0, 1, 2, -3, 7, -1, 2 ** 32 + 1, 2 ** 31 + 1]))

    def ln(tag: int, body: bytes) -> bytes:
        return bytes([tag]) + _varint(len(body)) + body

    out = b""
    for _ in range(rnd.randint(0, 8)):
        which = rnd.randrange(2 if depth else 10)
        if which == 0:
            out += b"\x08" + number()
        elif which == 1:
            out += b"".join(b"\x10" + number() for _ in range(rnd.randint(1, 3)))
        elif which == 2:
            out += ln(0x12, b"".join(number() for _ in range(rnd.randint(0, 4))))
        elif which == 3:
            out += b"\x18" + number()
        elif which == 4:                    # a map entry: key, 0-2 values (the value given twice, or missing)
            out += ln(0x22, ln(0x0A, rnd.choice([b"x", b"y"])) + b"".join(
                b"\x10" + number() for _ in range(rnd.choice([0, 1, 1, 2]))))
        elif which == 5:
            out += b"\x28" + number()
        elif which == 6:
            out += ln(0x32, b"s")
        elif which == 7:
            out += rnd.choice([b"\x38", b"\x40"]) + number()
        elif which == 8:
            out += ln(0x4A, _closed_payload(rnd, 1))
        else:
            out += ln(0x52, b"\x08" + _varint(rnd.randint(0, 2)) + ln(0x12, _closed_payload(rnd, 1)))
    return out


def test_proto2_closed_enums_leave_unknown_numbers_out():
    """A proto2 enum is closed: the runtime keeps a number it does not name
    out of the field (a singular field, a oneof member, keeps what it had;
    a list drops it; a map drops the entry) and in the unknown fields; an
    enum of a proto3 file stays open in a proto2 message."""
    protos = Protos({"open.proto": OPEN, "closed.proto": CLOSED})
    M, R = protos.cls("cl.M"), protos.cls("cl.R")
    reg = kbatch.registry([
        {"subject": "open", "version": 1, "id": 5, "schemaType": "PROTOBUF", "schema": OPEN},
        {"subject": "closed", "version": 1, "id": 6, "schemaType": "PROTOBUF", "schema": CLOSED,
         "references": [{"name": "open.proto", "subject": "open", "version": 1}]}])
    fixed = [b"\x08\x07", b"\x08\x01\x08\x07", b"\x28\x01\x28\x07", b"\x32\x01s\x28\x07",
             b"\x12\x03\x01\x07\x02\x18\x07\x18\x02", b"\x22\x05\x0a\x01x\x10\x07",
             b"\x22\x05\x0a\x01x\x10\x01\x22\x05\x0a\x01x\x10\x07", b"\x38\x09\x40\x09"]
    rnd = random.Random(7)
    raws = fixed + [_closed_payload(rnd) for _ in range(400)]
    arr = reg.decode([frame_pb(6, raw, [1]) for raw in raws])
    arr.validate(full=True)
    for raw, row in zip(raws, plain(arr)):
        assert row == expected(M.FromString(raw)), raw
    assert plain(arr)[:2] == [expected(M())] + [expected(M(k=1))]
    assert R.FromString(b"\x08\x07").HasField("k") is False      # absent: as for a missing required field
    assert plain(reg.decode([frame_pb(6, b"\x08\x02", [2])])) == [{"k": "B"}]
    with pytest.raises(PayloadError, match="required field is missing"):
        reg.decode([frame_pb(6, b"\x08\x07", [2])])


def test_occurrences_merge_as_the_runtime_merges(protos):
    """Concatenated messages parse as their merge: scalars last, repeated
    appended, message fields merged, a oneof switching members."""
    E = protos.cls("shop.Every")
    a, b, c = E(i32=1, s="a", packed_ints=[1]), E(i32=2, loose_ints=[5]), E(name="oneof")
    a.counts.update({"k": 1, "j": 2})
    b.counts.update({"k": 3, "": 4})                # "k" again: the later entry wins
    a.by_id[7].sku = "first"
    b.by_id[7].qty = 9                              # a message value replaced, not merged
    a.price.currency = "EUR"
    a.line.sku = "l1"
    b.price.units = 7
    b.lines.add(sku="x")
    c.price.nanos = -3
    reg = shop_registry()
    for raw in (a.SerializeToString() + b.SerializeToString(), a.SerializeToString() + c.SerializeToString(),
                c.SerializeToString() + a.SerializeToString() + b.SerializeToString()):
        assert plain(reg.decode([frame_pb(2, raw)])) == [expected(E.FromString(raw))]


def test_unknown_fields_and_groups_are_skipped(protos):
    E = protos.cls("shop.Every")
    body = E(i32=3).SerializeToString()
    unknown = (b"\xb8\x0c\x05"                      # field 199 varint
               b"\xc1\x0c" + b"\x01" * 8 +          # field 200 fixed64
               b"\xca\x0c\x02hi"                    # field 201 bytes
               b"\xd3\x0c\x08\x01\xd4\x0c"          # field 202 group holding field 1 = 1
               b"\xdd\x0c\x00\x00\x00\x00")         # field 203 fixed32
    raw = unknown + body + unknown
    assert E.FromString(raw).i32 == 3
    assert plain(shop_registry().decode([frame_pb(2, raw)])) == [expected(E.FromString(raw))]


BAD = [
    ("truncated", lambda raw: raw[:-1], "ends early"),
    ("a varint of 11 bytes", lambda raw: b"\x18" + b"\xff" * 10 + b"\x01", "varint runs on"),
    ("a wrong wire type", lambda raw: b"\x1a\x01x" + raw, "wire type"),            # i32 as LEN
    ("trailing garbage", lambda raw: raw + b"\x07", "tag that is not valid"),
    ("field number 0", lambda raw: b"\x00\x01" + raw, "tag that is not valid"),
    ("a length past the end", lambda raw: raw + b"\x72\x7f", "ends early"),
    ("invalid UTF-8", lambda raw: raw + b"\x72\x02\xc3\x28", "UTF-8"),
    ("an unmatched group end", lambda raw: raw + b"\xd4\x0c", "tag that is not valid"),
    ("a packed run of partial doubles", lambda raw: raw + b"\xb2\x01\x03abc", "whole values"),
]


@pytest.mark.parametrize("why, damage, words", BAD, ids=[b[0] for b in BAD])
def test_bad_payloads(protos, why, damage, words):
    reg = shop_registry()
    good = every(protos, 3).SerializeToString()
    bad = damage(good)
    with pytest.raises(PayloadError, match=f"record offset 41, schema id 2, byte \\d+: .*{words}"):
        reg.decode([frame_pb(2, good), frame_pb(2, bad)], offsets=[40, 41])
    arr, errors = reg.decode([frame_pb(2, good), frame_pb(2, bad)], on_error="null", with_errors=True)
    arr.validate(full=True)
    assert plain(arr)[1] is None and errors[1].as_py() and errors[0].as_py() is None
    assert plain(arr)[0] == expected(protos.cls("shop.Every").FromString(good))


def test_recursion_deeper_than_max_depth(protos):
    L = protos.cls("shop.Every.Line")
    E = protos.cls("shop.Every")
    m = E()
    node = m.line
    for k in range(6):
        node.sku = str(k)
        node = node.child
    node.qty = 1
    raw = m.SerializeToString()
    reg = shop_registry()
    with pytest.raises(PayloadError, match="deeper"):
        reg.decode([frame_pb(2, raw)])
    assert plain(reg.decode([frame_pb(2, raw)], max_depth=8)) == [expected(E.FromString(raw))]
    assert L  # the class exists (protoc compiled the recursion)


def test_the_parser_refuses_what_it_does_not_read():
    for text, words in (('syntax = "proto2"; message M { optional group G = 1 { optional int32 a = 2; } }', "group"),
                        ('edition = "2023"; message M {}', "editions"),
                        ('syntax = "proto3"; message M { Missing x = 1; }', "not defined"),
                        ('syntax = "proto3"; message M { int32 a = 1; int32 b = 1; }', "share number"),
                        ('syntax = "proto3"; message M { int32 a = 0; }', "not a valid field number"),
                        ('syntax = "proto3"; message M { int32 a = 1 }', "expected ';'")):
        with pytest.raises(SchemaError, match=words):
            pool = protobuf_schema.Pool()
            pool.add(protobuf_schema.parse(text))
            pool.resolve()


# --- Hypothesis: random messages round trip, damaged ones are the runtime's value or an error


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seeds=st.lists(st.integers(0, 10 ** 6), min_size=1, max_size=5), data=st.data())
def test_damaged_payloads_are_the_runtimes_value_or_an_error(protos, seeds, data):
    E, S = protos.cls("shop.Every"), protos.shadow("shop.Every")
    reg = shop_registry()
    raws = []
    for s in seeds:
        raw = bytearray(every(protos, s).SerializeToString())
        how = data.draw(st.sampled_from(["cut", "flip", "insert", "overwrite", "none"]))
        if raw and how == "cut":
            raw = raw[:data.draw(st.integers(0, len(raw) - 1))]
        elif raw and how == "flip":
            at = data.draw(st.integers(0, len(raw) - 1))
            raw[at] ^= 1 << data.draw(st.integers(0, 7))
        elif how == "insert":
            at = data.draw(st.integers(0, len(raw)))
            raw[at:at] = data.draw(st.binary(min_size=1, max_size=4))
        elif raw and how == "overwrite":
            at = data.draw(st.integers(0, len(raw) - 1))
            raw[at] = data.draw(st.integers(0, 255))
        raws.append(bytes(raw))
    arr, errors = reg.decode([frame_pb(2, r) for r in raws], on_error="null", with_errors=True)
    arr.validate(full=True)
    for raw, row, err in zip(raws, plain(arr), errors.to_pylist()):
        if err is not None:
            assert row is None
            continue
        try:
            E.FromString(raw)
            truth = S.FromString(raw)
        except Exception:           # noqa: BLE001 - the runtime refuses what kbatch read
            pytest.fail(f"kbatch decoded what the runtime refuses: {raw!r}")
        assert canon(row) == canon(protos.entries(truth))        # NaN (a flipped double) equal to NaN


# --- Hypothesis: random message types (descriptors built for the runtime, .proto text for kbatch)

SCALARS = {  # name: (FieldDescriptorProto type, a value strategy)
    "double": (1, st.floats(allow_nan=True)), "float": (2, st.floats(width=32, allow_nan=True)),
    "int64": (3, st.integers(-(2 ** 63), 2 ** 63 - 1)), "uint64": (4, st.integers(0, 2 ** 64 - 1)),
    "int32": (5, st.integers(-(2 ** 31), 2 ** 31 - 1)), "fixed64": (6, st.integers(0, 2 ** 64 - 1)),
    "fixed32": (7, st.integers(0, 2 ** 32 - 1)), "bool": (8, st.booleans()),
    "string": (9, st.text(max_size=6)), "bytes": (12, st.binary(max_size=6)),
    "uint32": (13, st.integers(0, 2 ** 32 - 1)), "sfixed32": (15, st.integers(-(2 ** 31), 2 ** 31 - 1)),
    "sfixed64": (16, st.integers(-(2 ** 63), 2 ** 63 - 1)), "sint32": (17, st.integers(-(2 ** 31), 2 ** 31 - 1)),
    "sint64": (18, st.integers(-(2 ** 63), 2 ** 63 - 1))}
MAP_KEYS = [k for k in SCALARS if k not in ("double", "float", "bytes")]


@st.composite
def proto_specs(draw):
    """A proto3 file: message M (fields of every kind, a oneof) using enum E and message N."""
    nested = [(f"n{i}", draw(st.sampled_from(sorted(SCALARS))), draw(st.booleans()))
              for i in range(draw(st.integers(1, 3)))]          # (name, type, repeated)
    numbers = draw(st.lists(st.integers(1, 3000), min_size=1, max_size=8, unique=True))
    fields = []
    for i, number in enumerate(numbers):
        kind = draw(st.sampled_from(["scalar", "scalar", "repeated", "optional", "map", "enum", "message",
                                     "repeated_message", "oneof"]))
        typ = draw(st.sampled_from(sorted(SCALARS)))
        value = draw(st.sampled_from(sorted(SCALARS) + ["E", "N"])) if kind == "map" else None
        key = draw(st.sampled_from(MAP_KEYS)) if kind == "map" else None
        fields.append((f"f{i}", number, kind, typ, key, value))
    return nested, fields


def render(spec) -> str:
    nested, fields = spec
    lines = ['syntax = "proto3";', "package h;", "enum E { Z = 0; A = 1; B = 5; }",
             "message N { " + " ".join(f"{'repeated ' if rep else ''}{t} {n} = {k + 1};"
                                       for k, (n, t, rep) in enumerate(nested)) + " }", "message M {"]
    members = []
    for name, number, kind, typ, key, value in fields:
        if kind == "oneof":
            members.append(f"{typ} {name} = {number};")
            continue
        decl = {"scalar": f"{typ}", "repeated": f"repeated {typ}", "optional": f"optional {typ}",
                "map": f"map<{key}, {value}>", "enum": "E", "message": "N",
                "repeated_message": "repeated N"}[kind]
        lines.append(f"  {decl} {name} = {number};")
    if members:
        lines.append("  oneof o { " + " ".join(members) + " }")
    return "\n".join(lines + ["}"]) + "\n"


def descriptors(spec):
    """The same file as a FileDescriptorProto (as protoc would make it), in a fresh pool."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    nested, fields = spec
    F = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name="h.proto", package="h", syntax="proto3")
    e = fd.enum_type.add(name="E")
    for n, v in (("Z", 0), ("A", 1), ("B", 5)):
        e.value.add(name=n, number=v)
    n_msg = fd.message_type.add(name="N")
    for k, (name, typ, rep) in enumerate(nested):
        n_msg.field.add(name=name, number=k + 1, type=SCALARS[typ][0], json_name=name,
                        label=F.LABEL_REPEATED if rep else F.LABEL_OPTIONAL)
    m = fd.message_type.add(name="M")
    oneofs = 0
    if any(f[2] == "oneof" for f in fields):         # the real oneof first, synthetic ones after (as protoc)
        m.oneof_decl.add(name="o")
        oneofs = 1
    for name, number, kind, typ, key, value in fields:
        f = m.field.add(name=name, number=number, json_name=name, label=F.LABEL_OPTIONAL)
        if kind in ("scalar", "repeated", "optional", "oneof"):
            f.type = SCALARS[typ][0]
        elif kind == "enum":
            f.type, f.type_name = F.TYPE_ENUM, ".h.E"
        elif kind in ("message", "repeated_message"):
            f.type, f.type_name = F.TYPE_MESSAGE, ".h.N"
        if kind in ("repeated", "repeated_message", "map"):
            f.label = F.LABEL_REPEATED
        if kind == "oneof":
            f.oneof_index = 0
        if kind == "optional":
            f.proto3_optional = True
            f.oneof_index = oneofs
            m.oneof_decl.add(name="_" + name)
            oneofs += 1
        if kind == "map":
            entry_name = "".join(p.capitalize() for p in name.split("_")) + "Entry"
            entry = m.nested_type.add(name=entry_name)
            entry.options.map_entry = True
            entry.field.add(name="key", number=1, type=SCALARS[key][0], label=F.LABEL_OPTIONAL, json_name="key")
            v = entry.field.add(name="value", number=2, label=F.LABEL_OPTIONAL, json_name="value")
            if value == "E":
                v.type, v.type_name = F.TYPE_ENUM, ".h.E"
            elif value == "N":
                v.type, v.type_name = F.TYPE_MESSAGE, ".h.N"
            else:
                v.type = SCALARS[value][0]
            f.type, f.type_name = F.TYPE_MESSAGE, f".h.M.{entry_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("h.M"))


def fill(draw, msg, spec):
    nested, fields = spec

    def n_value(target):
        for name, typ, rep in nested:
            if rep:
                getattr(target, name).extend(draw(st.lists(SCALARS[typ][1], max_size=3)))
            elif draw(st.booleans()):
                setattr(target, name, draw(SCALARS[typ][1]))

    enum_value = st.sampled_from([0, 1, 5, 9])          # 9: open enum, no name
    chosen = draw(st.sampled_from([None] + [f[0] for f in fields if f[2] == "oneof"]))
    for name, _number, kind, typ, key, value in fields:
        if kind in ("scalar", "optional") and draw(st.booleans()):
            setattr(msg, name, draw(SCALARS[typ][1]))
        elif kind == "oneof" and name == chosen:
            setattr(msg, name, draw(SCALARS[typ][1]))
        elif kind == "repeated":
            getattr(msg, name).extend(draw(st.lists(SCALARS[typ][1], max_size=4)))
        elif kind == "enum":
            setattr(msg, name, draw(enum_value))
        elif kind == "message" and draw(st.booleans()):
            n_value(getattr(msg, name))
        elif kind == "repeated_message":
            for _ in range(draw(st.integers(0, 2))):
                n_value(getattr(msg, name).add())
        elif kind == "map":
            for k in draw(st.lists(SCALARS[key][1], max_size=3)):
                if value == "N":
                    n_value(getattr(msg, name)[k])
                else:
                    getattr(msg, name)[k] = draw(enum_value if value == "E" else SCALARS[value][1])


@given(spec=proto_specs(), data=st.data())
def test_random_message_types_against_the_runtime(spec, data):
    M = descriptors(spec)
    reg = kbatch.registry([{"subject": "h-value", "version": 1, "id": 1, "schemaType": "PROTOBUF",
                            "schema": render(spec)}])
    msgs = []
    for _ in range(data.draw(st.integers(1, 4))):
        m = M()
        fill(data.draw, m, spec)
        msgs.append(m)
    raws = [m.SerializeToString() for m in msgs]
    arr = reg.decode([frame_pb(1, r, [1]) for r in raws])          # M: the second message of the file
    arr.validate(full=True)
    for raw, row in zip(raws, plain(arr)):
        assert canon(row) == canon(expected(M.FromString(raw)))


def test_each_failed_row_gives_its_own_reason():
    """Rows of one schema id that fail for different causes (indexes that do
    not parse, indexes naming no message, another message than the one
    decoded) each give their own reason, as when decoded alone."""
    text = ('syntax = "proto3"; package mi; message A { int32 a = 1; } '
            'message B { string b = 1; }')
    reg = kbatch.registry([{"subject": "m-value", "version": 1, "id": 1,
                            "schemaType": "PROTOBUF", "schema": text}])
    head = b"\x00\x00\x00\x00\x01"
    body = b"\x08\x96\x01"                             # a = 150
    values = [head + b"\x01" + body,                   # count -1: does not parse
              head + b"\x04\x00\x00" + body,           # [0, 0]: no such message
              head + b"\x02\x02" + body,               # [1]: an mi.B
              head + b"\x00" + body]                   # [0]: an mi.A
    _, errors = reg.decode(values, on_error="null", with_errors=True, message="mi.A")
    alone = [reg.decode([v], on_error="null", with_errors=True, message="mi.A")[1][0].as_py()
             for v in values]
    assert errors.to_pylist() == alone
    assert len(set(alone[:3])) == 3 and alone[3] is None and "mi.B" in alone[2]


def test_schema_id_in_a_header_carries_the_message_indexes():
    """Confluent's header framing (SchemaId.idToBytes / guidToBytes): magic,
    id or guid, then the message indexes; the value is the message alone,
    and an empty value is a message of defaults. A header without indexes,
    or with bytes after them, fails its row with that reason."""
    protos = Protos({"mi.proto": MULTI})
    entries = [{"subject": "mi-value", "version": 1, "id": 3, "schemaType": "PROTOBUF",
                "schema": MULTI, "guid": "12345678-1234-5678-1234-567812345678"}]
    reg = kbatch.registry(entries)
    guid = bytes.fromhex("12345678123456781234567812345678")
    second = protos.cls("mi.Second")(b="x").SerializeToString()
    first = protos.cls("mi.First")(a=1).SerializeToString()
    by_id = frame_pb(3, b"", [1])                    # magic 0, id, indexes [1]
    by_guid = b"\x01" + guid + by_id[5:]             # magic 1, guid, the same indexes
    assert plain(reg.decode([second, second, b""], header_ids=[by_id, by_guid, by_id])) == \
        [{"b": "x"}, {"b": "x"}, {"b": ""}]
    assert plain(reg.decode([first], header_ids=[frame_pb(3, b"")])) == [{"a": 1}]
    arr, errors = reg.decode([second, second], header_ids=[by_id[:5], by_id + b"\x00"],
                             on_error="null", with_errors=True, message="mi.Second")
    assert plain(arr) == [None, None]
    assert "no message indexes after the schema id" in errors[0].as_py()
    assert "bytes after the message indexes" in errors[1].as_py()


def _pb_registry(files: dict, main: str):
    """One value subject whose schema is ``files[main]``, the others its references."""
    entries, refs = [], []
    for k, (path, text) in enumerate(f for f in files.items() if f[0] != main):
        entries.append({"subject": path, "version": 1, "id": 100 + k, "schemaType": "PROTOBUF",
                        "schema": text})
        refs.append({"name": path, "subject": path, "version": 1})
    entries.append({"subject": "v-value", "version": 1, "id": 1, "schemaType": "PROTOBUF",
                    "schema": files[main], "references": refs})
    return kbatch.registry(entries)


@pytest.mark.parametrize("case", ["label-before-absolute-type", "proto2-absolute-type",
                                  "package-after-messages", "minus-apart"])
def test_schema_text_as_protoc_reads_it(case):
    """Schema text protoc reads, and kbatch refused or read otherwise: a label
    before a fully qualified type (``repeated .pkg.T``: how Confluent prints
    schemas registered from generated classes, and normalized ones); a
    ``package`` statement after definitions (protoc puts the whole file in
    it: A.b is pl.B, not another file's B); an enum value ``- 1``. The truth
    is the protobuf runtime's decode of the same bytes, its classes built
    by protoc from the same text."""
    files, main, name, value, index = {
        "label-before-absolute-type": (
            {"m.proto": 'syntax = "proto3"; package com.acme; message Item { string sku = 1; }'
                        ' message Order { string id = 1; repeated .com.acme.Item items = 2;'
                        ' map<string, .com.acme.Item> by_sku = 3; }'},
            "m.proto", "com.acme.Order",
            {"id": "o1", "items": [{"sku": "a"}, {"sku": "b"}], "by_sku": {"a": {"sku": "a"}}},
            (1,)),
        "proto2-absolute-type": (
            {"m.proto": 'syntax = "proto2"; package p; message Sub { optional int32 z = 1; }'
                        ' message M { optional .p.Sub one = 1; repeated .p.Sub many = 2; }'},
            "m.proto", "p.M", {"one": {"z": 2}, "many": [{"z": 3}]}, (1,)),
        "package-after-messages": (
            {"other.proto": 'syntax = "proto3"; message B { sint32 x = 1; }',
             "main.proto": 'syntax = "proto3"; import "other.proto"; message A { B b = 1; }'
                           ' package pl; message B { int32 x = 1; }'},
            "main.proto", "pl.A", {"b": {"x": 10}}, (0,)),
        "minus-apart": (
            {"m.proto": 'syntax = "proto3"; message M { E e = 1; }'
                        ' enum E { Z = 0; A = - 1; }'},
            "m.proto", "M", {"e": "A"}, (0,)),
    }[case]
    cls = Protos(files).cls(name)
    raw = cls(**value).SerializeToString()
    want = expected(cls.FromString(raw))
    got = plain(_pb_registry(files, main).decode([frame_pb(1, raw, index)]))
    assert [canon(g) for g in got] == [canon(want)]


def test_a_oneof_of_more_members_than_its_column_holds_is_a_schema_error():
    # its column is an int8 dictionary: 129 members raised "malformed field 128"
    members = " ".join(f"int32 m{k} = {k};" for k in range(1, 130))
    text = f'syntax = "proto3"; package big; message M {{ oneof choice {{ {members} }} }}'
    reg = _pb_registry({"m.proto": text}, "m.proto")
    with pytest.raises(SchemaError, match="oneof choice has 129 members"):
        reg.decode([frame_pb(1, b"\x08\x07")])
