"""Test helpers for Schema Registry payloads, independent of kbatch's decoders:
Confluent framing built here, payloads written by fastavro, values read back
by fastavro, and a normaliser that turns Arrow's Python values into
fastavro's forms (guided by the schema)."""

from __future__ import annotations

import datetime
import io
import json
import struct

import fastavro


def frame(schema_id: int, payload: bytes) -> bytes:
    """Confluent's wire format: magic 0, the id big-endian, the payload."""
    return b"\x00" + struct.pack(">i", schema_id) + payload


def frame_guid(guid: bytes, payload: bytes) -> bytes:
    return b"\x01" + guid + payload


def avro_bytes(schema, record) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema, named_schemas={}), record)
    return out.getvalue()


def avro_read(payload: bytes, writer, reader=None):
    """fastavro's value of a payload (writer schema, optional reader schema);
    raises when fastavro cannot read it or leaves bytes over."""
    bio = io.BytesIO(payload)
    w = fastavro.parse_schema(writer, named_schemas={})
    r = fastavro.parse_schema(reader, named_schemas={}) if reader is not None else None
    value = fastavro.schemaless_reader(bio, w, r) if r is not None else fastavro.schemaless_reader(bio, w)
    if bio.tell() != len(payload):
        raise ValueError("bytes left over")
    return value


def export(*entries) -> list[dict]:
    """A registry export (GET /schemas?deleted=true): (subject, version, id, schema[, references])."""
    out = []
    for e in entries:
        subject, version, sid, schema = e[:4]
        item = {"subject": subject, "version": version, "id": sid,
                "schema": schema if isinstance(schema, str) else json.dumps(schema)}
        if len(e) > 4:
            item["references"] = e[4]
        out.append(item)
    return out


PRIMS = ("null", "boolean", "int", "long", "float", "double", "bytes", "string")


def normalize(value, schema, names=None):
    """Arrow's ``to_pylist`` value of an Avro type as fastavro gives it."""
    names = {} if names is None else names
    if isinstance(schema, str):
        if schema in PRIMS:
            return value
        return normalize(value, names[schema], names)
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if value is None:
            return None
        if len(schema) == 2 and "null" in schema:
            return normalize(value, branches[0], names)
        # a dense union: to_pylist gives the branch value; try the branches in order
        for b in schema:
            try:
                return normalize(value, b, names)
            except (TypeError, KeyError, AttributeError, ValueError):
                continue
        return value
    t = schema.get("type")
    if isinstance(t, (dict, list)):
        return normalize(value, t, names)
    if "name" in schema and t in ("record", "enum", "fixed"):
        names[schema["name"]] = schema
        names[schema["name"].rpartition(".")[2]] = schema
    logical = schema.get("logicalType")
    if value is None:
        return None
    if t == "record":
        if not isinstance(value, dict):
            raise TypeError("not a record")
        return {f["name"]: normalize(value[f["name"]], f["type"], names) for f in schema["fields"]}
    if t == "array":
        return [normalize(v, schema["items"], names) for v in value]
    if t == "map":
        if not isinstance(value, list):
            raise TypeError("not a map")
        return {k: normalize(v, schema["values"], names) for k, v in value}
    if t == "fixed" and logical == "duration":
        return (value.months, value.days, value.nanoseconds // 1_000_000)
    if t == "string" and logical == "uuid" or t == "fixed" and logical == "uuid":
        return value
    if t == "int" and logical == "time-millis" or t == "long" and logical == "time-micros":
        return value
    if t == "long" and logical and "timestamp" in logical:
        return value
    return value


def fastavro_view(value, schema, names=None):
    """fastavro's value with its own quirks made comparable: a duration as
    (months, days, millis), time values as they are."""
    names = {} if names is None else names
    if isinstance(schema, str):
        if schema in names:
            return fastavro_view(value, names[schema], names)
        return value
    if isinstance(schema, list):
        if value is None:
            return None
        branches = [b for b in schema if b != "null"]
        if len(schema) == 2 and "null" in schema:
            return fastavro_view(value, branches[0], names)
        return value
    t = schema.get("type")
    if isinstance(t, (dict, list)):
        return fastavro_view(value, t, names)
    if "name" in schema and t in ("record", "enum", "fixed"):
        names[schema["name"]] = schema
        names[schema["name"].rpartition(".")[2]] = schema
    if value is None:
        return None
    if t == "record":
        return {f["name"]: fastavro_view(value[f["name"]], f["type"], names) for f in schema["fields"]}
    if t == "array":
        return [fastavro_view(v, schema["items"], names) for v in value]
    if t == "map":
        return {k: fastavro_view(v, schema["values"], names) for k, v in value.items()}
    if t == "fixed" and schema.get("logicalType") == "duration" and isinstance(value, (bytes, bytearray)):
        return struct.unpack("<III", value)
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(datetime.timezone.utc)
    return value
