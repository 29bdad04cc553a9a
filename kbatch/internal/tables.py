"""Generic tables over any internal topic: one row per record, every
record type, the decoded key and value as JSON text or as typed columns.

    records(source, family)              all records, JSON fields, raw bytes of unknown ones
    record_counts(source, family)        rows per (type, version), unknown ones included
    typed_records(source, family, type)  one record type, every field a typed column

``family``: "offsets", "transactions", "share-state", "metadata",
"remote-log-metadata". Memory held: one partition's records and the rows.
"""

from __future__ import annotations

import json
import logging
from typing import Iterator

import numpy as np

from kbatch.internal._schemas import VARIANTS
from kbatch.internal.arrow import message_fields
from kbatch.internal.decode import decode_record, jsonable
from kbatch.internal.registry import FAMILIES, FRAMED
from kbatch.internal.sources import iter_parts

log = logging.getLogger("kbatch")


def record_meta_fields():
    import pyarrow as pa
    return [pa.field("topic", pa.string()), pa.field("partition", pa.int32()),
            pa.field("file", pa.string()), pa.field("record_offset", pa.int64()),
            pa.field("record_timestamp", pa.timestamp("ms", tz="UTC"))]


def iter_decoded(source, family: str, *, snapshots: bool | None = None, strict: bool = False,
                 **options) -> Iterator[tuple[dict, dict]]:
    """``(meta, decoded)`` per record, in partition then offset order."""
    topic = FAMILIES[family][0]
    if snapshots is None:
        snapshots = family == "metadata"
    for part in iter_parts(source, topic, snapshots=snapshots, **options):
        rec = part.records
        keys = rec.key.to_arrow().to_pylist()
        values = rec.value.to_arrow().to_pylist()
        offsets = rec.offset.tolist()
        stamps = rec.timestamp.tolist()
        for i in range(len(rec)):
            meta = {"topic": part.topic, "partition": part.partition, "file": part.file,
                    "record_offset": offsets[i],
                    "record_timestamp": stamps[i] if stamps[i] != -1 else None,
                    "raw_key": keys[i], "raw_value": values[i]}
            yield meta, decode_record(family, keys[i], values[i], strict=strict)


def records(source, family: str, **options):
    """Every record of the family's topic as a ``pyarrow.Table``: the record
    metadata, ``type_id``, ``type`` (null when no schema knows the id),
    versions, ``known``, ``error``, ``key``/``value`` as JSON text (bytes as
    base64) and ``raw_key``/``raw_value`` for records not decoded."""
    return records_table(iter_decoded(source, family, **options), family)


def records_table(decoded, family: str):
    """``records`` over already decoded ``(meta, decoded)`` pairs."""
    import pyarrow as pa
    framed = family in FRAMED
    rows = []
    for meta, d in decoded:
        known = d["known"]
        row = {k: meta[k] for k in ("topic", "partition", "file", "record_offset",
                                    "record_timestamp")}
        row.update(type_id=d["type_id"], type=d["type"],
                   key_version=None if framed else d["key_version"],
                   value_version=d["version"] if framed else d["value_version"],
                   tombstone=False if framed else d["tombstone"], known=known, error=d["error"],
                   key=None if framed or d.get("key") is None else json.dumps(jsonable(d["key"])),
                   value=None if d["value"] is None else json.dumps(jsonable(d["value"])),
                   raw_key=None if known else meta["raw_key"],
                   raw_value=None if known else meta["raw_value"])
        rows.append(row)
    schema = pa.schema(record_meta_fields() + [
        pa.field("type_id", pa.int32()), pa.field("type", pa.string()),
        pa.field("key_version", pa.int16()), pa.field("value_version", pa.int16()),
        pa.field("tombstone", pa.bool_()), pa.field("known", pa.bool_()),
        pa.field("error", pa.string()), pa.field("key", pa.string()),
        pa.field("value", pa.string()), pa.field("raw_key", pa.binary()),
        pa.field("raw_value", pa.binary())])
    return pa.Table.from_pylist(rows, schema=schema)


def record_counts(source, family: str, **options):
    """Rows per (type_id, type, value_version, known), sorted."""
    t = records(source, family, **options)
    g = t.group_by(["type_id", "type", "value_version", "known"], use_threads=False)
    out = g.aggregate([("record_offset", "count")]).rename_columns(
        ["type_id", "type", "value_version", "known", "records"])
    return out.sort_by([("type_id", "ascending"), ("value_version", "ascending")])


def typed_records(source, family: str, type: str, **options):
    """Records of one type (e.g. "ConsumerGroupMemberMetadata",
    "PartitionRecord") with every key field (``key_`` prefix, coordinator
    topics) and value field as a typed column."""
    return typed_table(iter_decoded(source, family, **options), family, type)


def typed_table(decoded, family: str, type: str):
    """``typed_records`` over already decoded ``(meta, decoded)`` pairs.

    A type that Kafka wrote in another layout under the same version (the
    schema table's VARIANTS) gets two more columns: ``schema_commit``, the
    Kafka commit of the layout that read the record (null: the current one;
    the columns are the current layout's, null where the older one lacks a
    field), and ``schema_ambiguous``, other layouts that read it too."""
    import pyarrow as pa
    framed = family in FRAMED
    value_name = type if framed else type + "Value"
    fields = record_meta_fields()
    fields += [pa.field("value_version", pa.int16())]
    if not framed:
        fields += [pa.field("key_version", pa.int16()), pa.field("tombstone", pa.bool_())]
        fields += message_fields(type + "Key", "key_")
    fields += message_fields(value_name)
    if value_name in VARIANTS:
        fields += [pa.field("schema_commit", pa.string()),
                   pa.field("schema_ambiguous", pa.list_(pa.string()))]
    rows, unread = [], 0
    for meta, d in decoded:
        if d["type"] != type or not d["known"]:
            unread += d["type"] == type
            continue
        row = {k: meta[k] for k in ("topic", "partition", "file", "record_offset",
                                    "record_timestamp")}
        if framed:
            row["value_version"] = d["version"]
        else:
            row.update(value_version=d["value_version"], key_version=d["key_version"],
                       tombstone=d["tombstone"])
            row.update({"key_" + k: v for k, v in d["key"].items()})
        if d["value"]:
            row.update(d["value"])
            row["schema_commit"] = d["value"].get("_schema_commit")
            row["schema_ambiguous"] = d["value"].get("_schema_ambiguous")
        rows.append(row)
    if unread:
        log.warning("kbatch: %d %s record(s) no schema reads (a newer version, or damage) are "
                    "not in the table (records() lists them with their error)", unread, type)
    return pa.Table.from_pylist(rows, schema=pa.schema(fields))


def timestamps_ms(arr: np.ndarray):
    """int64 ms (-1: none) -> Arrow timestamp[ms, UTC] with nulls."""
    import pyarrow as pa
    arr = np.asarray(arr, np.int64)
    return pa.array(arr, pa.timestamp("ms", tz="UTC"), mask=arr == -1)
