"""Test helpers for Protobuf payloads, independent of kbatch's decoder:
.proto files compiled by protoc into a descriptor set (``protoc
--include_imports --descriptor_set_out``), loaded into the protobuf
runtime's pool as message classes; Confluent's framing built here; the
runtime's value of a message in the form kbatch's Arrow rows take (read
through the runtime's own descriptors); Arrow arrays as plain Python values
(timestamps and durations as int64 nanoseconds, dictionaries as their
strings).

The compiled sets are kept in ``tests/data/protobuf/<hash of the .proto
texts>.pb``, so the tests need only the protobuf runtime: protoc
(grpcio-tools, in-process) runs only for a set not stored yet, and writes it
there (grpcio-tools is not an extra: it requires setuptools >= 77, which
the build pins below 77)."""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import struct
import tempfile

import pyarrow as pa
import pytest

pytest.importorskip("google.protobuf")
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # noqa: E402
from google.protobuf.descriptor import FieldDescriptor  # noqa: E402

STORE = pathlib.Path(__file__).resolve().parent / "data" / "protobuf"


def descriptor_set(files: dict[str, str]) -> bytes:
    """protoc's FileDescriptorSet of ``{path: text}`` (imports included)."""
    key = hashlib.sha256(json.dumps(sorted(files.items())).encode()).hexdigest()[:20]
    stored = STORE / f"{key}.pb"
    if stored.exists():
        return stored.read_bytes()
    try:
        import grpc_tools
        from grpc_tools import protoc
    except ImportError:
        pytest.fail(f"no stored descriptor set {stored.name} for {sorted(files)}: run the test once "
                    f"with grpcio-tools installed (protoc) to write it")
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, name)) or d, exist_ok=True)
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        out = os.path.join(d, "set.pb")
        rc = protoc.main(["protoc", f"-I{d}", f"-I{include}", "--include_imports",
                          f"--descriptor_set_out={out}", *[os.path.join(d, n) for n in files]])
        if rc != 0:
            raise ValueError(f"protoc failed ({rc})")
        with open(out, "rb") as f:
            raw = f.read()
    STORE.mkdir(parents=True, exist_ok=True)
    stored.write_bytes(raw)
    return raw


class Protos:
    """The runtime's pool of some .proto files (``{path: text}``)."""

    def __init__(self, files: dict[str, str]):
        fds = descriptor_pb2.FileDescriptorSet.FromString(descriptor_set(files))
        self.pool = descriptor_pool.DescriptorPool()
        for fd in fds.file:
            self.pool.Add(fd)
        # The same files with every map entry a plain nested message: the
        # encoding doc's definition of a map field (``repeated XEntry``), read
        # by the runtime without its map parsing (see ``entries``).
        self.entry_types: set[str] = set()
        self.shadow_pool = descriptor_pool.DescriptorPool()
        for fd in fds.file:
            fd = descriptor_pb2.FileDescriptorProto.FromString(fd.SerializeToString())
            stack = [(fd.package, m) for m in fd.message_type]
            while stack:
                scope, m = stack.pop()
                full = f"{scope}.{m.name}" if scope else m.name
                if m.options.map_entry:
                    self.entry_types.add(full)
                    m.options.ClearField("map_entry")
                stack.extend((full, n) for n in m.nested_type)
            self.shadow_pool.Add(fd)

    def cls(self, name: str):
        return message_factory.GetMessageClass(self.pool.FindMessageTypeByName(name))

    def shadow(self, name: str):
        """The message class whose map fields are repeated entry messages."""
        return message_factory.GetMessageClass(self.shadow_pool.FindMessageTypeByName(name))

    def entries(self, shadow_msg) -> dict:
        """``expected`` of a message parsed by its ``shadow`` class, each map
        field rebuilt from its entries as the encoding doc defines it (a later
        key wins; a missing key or value is the type's default). upb moves an
        entry holding an unknown field into the parent's unknown fields
        (upb/wire/decode.c, _upb_Decoder_DecodeToMap) where Java's and the
        pure-Python runtime keep the entry; kbatch keeps it, as Java does, so
        damaged payloads are compared against this reading."""
        out = {}
        d = shadow_msg.DESCRIPTOR
        for f in d.fields:
            if f.message_type is not None and f.message_type.full_name in self.entry_types:
                kf, vf = f.message_type.fields_by_name["key"], f.message_type.fields_by_name["value"]
                m = {}
                for e in getattr(shadow_msg, f.name):
                    m[_one(kf, e.key)] = (self.entries(e.value) if vf.message_type is not None
                                          and vf.message_type.full_name not in WRAPPERS | _TIMES
                                          else _one(vf, e.value))
                out[f.name] = m
            elif f.message_type is not None and f.message_type.full_name not in WRAPPERS | _TIMES:
                value = getattr(shadow_msg, f.name)
                if f.is_repeated:
                    out[f.name] = [self.entries(v) for v in value]
                elif not shadow_msg.HasField(f.name):
                    out[f.name] = None
                else:
                    out[f.name] = self.entries(value)
            else:
                out[f.name] = expected_field(shadow_msg, f)
        for o in d.oneofs:
            if not (len(o.fields) == 1 and o.name == "_" + o.fields[0].name):
                out[o.name] = shadow_msg.WhichOneof(o.name)
        return out


def zigzag(v: int) -> bytes:
    u = (v << 1) ^ (v >> 31)
    u &= 0xFFFFFFFF
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def frame_pb(sid: int, payload: bytes, indexes=(0,)) -> bytes:
    """Confluent's Protobuf framing: magic 0, id, the message indexes ([0]: one 0 byte)."""
    prefix = b"\x00" + struct.pack(">i", sid)
    if list(indexes) == [0]:
        return prefix + b"\x00" + payload
    return prefix + zigzag(len(indexes)) + b"".join(zigzag(i) for i in indexes) + payload


_TIMES = {"google.protobuf.Timestamp", "google.protobuf.Duration"}
WRAPPERS = {f"google.protobuf.{n}Value" for n in
            ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")}


def expected(msg) -> dict:
    """The runtime's message as kbatch's row of it: every field in declaration
    order (null when it has presence and is not set), then one entry per
    oneof naming the member set."""
    d = msg.DESCRIPTOR
    out = {}
    for f in d.fields:
        out[f.name] = expected_field(msg, f)
    for o in d.oneofs:
        if not (len(o.fields) == 1 and o.name == "_" + o.fields[0].name):    # proto3 optional
            out[o.name] = msg.WhichOneof(o.name)
    return out


def expected_field(msg, f):
    value = getattr(msg, f.name)
    if f.is_repeated:
        if f.message_type is not None and f.message_type.GetOptions().map_entry:
            vf = f.message_type.fields_by_name["value"]
            return {k: _one(vf, v) for k, v in value.items()}
        return [_one(f, v) for v in value]
    if f.has_presence and not msg.HasField(f.name):
        return None
    return _one(f, value)


def _one(f, v):
    if f.type == FieldDescriptor.TYPE_ENUM:
        known = f.enum_type.values_by_number.get(v)
        return known.name if known is not None else str(v)
    if f.type == FieldDescriptor.TYPE_MESSAGE:
        name = f.message_type.full_name
        if name in ("google.protobuf.Timestamp", "google.protobuf.Duration"):
            return v.seconds * 1_000_000_000 + v.nanos
        if name in WRAPPERS:
            return v.value
        return expected(v)
    return v


def plain(arr) -> list:
    """An Arrow array as Python values: timestamps and durations int64,
    dictionaries their strings, maps dicts (each key once, checked)."""
    t = arr.type
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    valid = arr.is_valid().to_pylist()
    if pa.types.is_struct(t):
        kids = {t.field(i).name: plain(arr.field(i)) for i in range(t.num_fields)}
        return [{k: v[j] for k, v in kids.items()} if valid[j] else None for j in range(len(arr))]
    if pa.types.is_map(t):
        keys, items = plain(arr.keys), plain(arr.items)
        offs = arr.offsets.to_pylist()
        base = offs[0]
        out = []
        for j, (a, b) in enumerate(zip(offs, offs[1:])):
            ks = keys[a - base:b - base]
            assert len(set(ks)) == len(ks), f"a map repeating a key: {ks}"       # protobuf keeps the last
            out.append(dict(zip(ks, items[a - base:b - base])) if valid[j] else None)
        return out
    if pa.types.is_list(t):
        items = plain(arr.flatten())
        offs = arr.offsets.to_pylist()
        base = offs[0]
        return [items[a - base:b - base] if valid[j] else None for j, (a, b) in enumerate(zip(offs, offs[1:]))]
    if pa.types.is_dictionary(t):
        return arr.cast(pa.string()).to_pylist()
    if pa.types.is_timestamp(t) or pa.types.is_duration(t):
        return arr.cast(pa.int64()).to_pylist()
    return arr.to_pylist()


def canon(v):
    """NaN as a string, so that equal values compare equal."""
    if isinstance(v, float) and v != v:
        return "NaN"
    if isinstance(v, dict):
        return {k: canon(x) for k, x in v.items()}
    if isinstance(v, list):
        return [canon(x) for x in v]
    return v
