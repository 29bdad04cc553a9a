"""``valueFormat=registry`` / ``keyFormat=registry``: Schema Registry
payloads as typed columns of the Spark source.

The driver reads the registry (``schemaRegistry``: a path or URL, through
the door) to give the schema; each executor reads it once per process and
decodes its batches with ``kbatch.Registry.decode`` (the reader schema: the
latest version of ``valueSubject``, by default ``<topic>-value`` of the one
subscribed topic; schema ids carried in ``__value_schema_id`` /
``__key_schema_id`` record headers are used where records have them, as
in ``Records.to_arrow(decode=...)``). Arrow types Spark has no type for are mapped as Spark's
``from_avro`` maps them:

    dictionary (Avro enum)          string
    uuid                            string ("8-4-4-4-12")
    dense_union (Avro union)        decided on the branches' Avro primitive types, logical
                                    types aside; the null branch is no member (a value taking
                                    it is null): one other branch: that branch's type; int and
                                    long: long (a date's days, a timestamp's number as written),
                                    float and double: double; only null: an empty struct;
                                    else struct<member0, member1, ...>
    month_day_nano (Avro duration)  struct<months: int, days: int, nanoseconds: long>
    time32[ms] (time-millis)        time64[us] (Spark's TIME)
    decimal256 (precision > 38)     string
    timestamp[ns] / duration[ns]    timestamp[us] / duration[us] (Spark's TIMESTAMP, DAY TO SECOND
      (Protobuf Timestamp, Duration)  interval; the nanoseconds below a microsecond dropped as
                                    Spark's from_protobuf drops them: floor for a Timestamp,
                                    toward zero for a Duration)
    uint32 / uint64 (Protobuf)      bigint / decimal(20, 0) (Spark has no unsigned types)
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from kbatch.errors import KbatchError
from kbatch.lib.decoded import schema_id_headers
from kbatch.payloads import registry as open_registry

FORMATS = ("value", "key")
_REGISTRIES: dict = {}          # per process: (source, storage) -> Registry
_OPTION_NAMES = {"valueformat": "value_format", "keyformat": "key_format",
                 "schemaregistry": "schema_registry", "valuesubject": "value_subject",
                 "keysubject": "key_subject", "payloaderrors": "payload_errors", "subscribe": "subscribe",
                 "valuemessage": "value_message", "keymessage": "key_message"}


def raw_options(options) -> dict:
    """The payload options of a raw (case-insensitive) Spark option map, for
    ``schema()``, which runs before the options are parsed."""
    out = {}
    for key, value in dict(options).items():
        attr = _OPTION_NAMES.get(str(key).lower())
        if attr:
            out[attr] = str(value)
    return out


def raw_storage(options):
    """The ``Storage`` of a raw option map's ``storage.<key>`` and ``layout`` (None: defaults)."""
    import json

    from kbatch.lib.storage import Storage
    given = {str(k).split(".", 1)[1]: v for k, v in dict(options).items()
             if str(k).lower().startswith("storage.") and len(str(k)) > len("storage.")}
    for k, v in given.items():
        try:
            given[k] = json.loads(v)
        except ValueError:
            pass
    if not given:
        return None
    return Storage.of(storage_options=given)


def decoded(o) -> tuple[str, ...]:
    """Which of value/key a query decodes (``o``: KafkaOptions or a raw_options dict)."""
    get = o.get if isinstance(o, dict) else lambda a, d=None: getattr(o, a, d)
    return tuple(w for w in FORMATS if get(f"{w}_format", "binary") == "registry")


def registry_of(o, storage=None):
    get = o.get if isinstance(o, dict) else lambda a, d=None: getattr(o, a, d)
    source = get("schema_registry")
    if not source:
        raise KbatchError("valueFormat/keyFormat=registry needs the schemaRegistry option "
                          "(a data directory with _schemas, an export .json or a folder)")
    key = (source, repr(storage))
    reg = _REGISTRIES.get(key)
    if reg is None:
        reg = _REGISTRIES[key] = open_registry(source, **({"storage": storage} if storage else {}))
    return reg


def subject_of(o, which: str) -> str:
    get = o.get if isinstance(o, dict) else lambda a, d=None: getattr(o, a, d)
    given = get(f"{which}_subject")
    if given:
        return given
    topics = get("subscribe")
    topics = topics.split(",") if isinstance(topics, str) else list(topics or ())
    if len(topics) != 1:
        raise KbatchError(f"{which}Format=registry reads with one subject: give {which}Subject, "
                          f"or subscribe to one topic (its subject is <topic>-{which})")
    return f"{topics[0].strip()}-{which}"


def message_of(o, which: str) -> str | None:
    """``valueMessage`` / ``keyMessage``: the Protobuf message to decode."""
    get = o.get if isinstance(o, dict) else lambda a, d=None: getattr(o, a, d)
    return get(f"{which}_message") or None


def field_types(o, storage=None) -> dict[str, pa.DataType]:
    """The Spark-ready Arrow type of each decoded column (driver)."""
    reg = registry_of(o, storage)
    out = {}
    for which in decoded(o):
        empty = reg.decode(pa.array([], pa.binary()), subject=subject_of(o, which),
                           message=message_of(o, which))
        t = spark_compatible(empty).type
        if pa.types.is_struct(t) and t.num_fields == 0:
            raise KbatchError(
                f"the {which}s' schema ({subject_of(o, which)}) names no fields: a JSON Schema "
                "without properties is decoded into a type inferred from the values, which a "
                "Spark query's schema cannot be planned with; register one with properties, or "
                f"read the {which}s as binary and decode them with kbatch.JsonValues")
        out[which] = t
    return out


def _as_planned(arr: pa.Array, planned: pa.DataType, which: str) -> pa.Array:
    """``arr`` in the type the driver gave the query; a decode of another
    shape (a Protobuf message other than the one planned, a schema that
    changed since) fails rather than be cast field by name, which would
    fill the fields it lacks with nulls."""
    if arr.type == planned:
        return arr
    if _shape(arr.type) != _shape(planned):
        raise KbatchError(
            f"the {which}s decode to {arr.type}, but the query was planned for {planned} "
            f"(Protobuf: the values name another message than the schema's first: set "
            f"{which}Message to its full name; else the registry changed since planning)")
    return arr.cast(planned)


def _shape(t: pa.DataType):
    """The field names of ``t`` at every depth (what a cast matches by)."""
    if pa.types.is_struct(t):
        return tuple((f.name, _shape(f.type)) for f in t)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return ("list", _shape(t.value_type))
    if pa.types.is_map(t):
        return ("map", _shape(t.key_type), _shape(t.item_type))
    return "scalar"


def decode_batch(batch: pa.RecordBatch, records, o, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` (binary key/value) with the decoded columns, cast to ``schema``'s types."""
    reg = registry_of(o, getattr(o, "store", None))
    cols = {name: batch.column(name) for name in batch.schema.names}
    on_error = "null" if getattr(o, "payload_errors", "fail") == "null" else "raise"
    for which in decoded(o):
        if which not in schema.names:
            continue
        arr, errors = reg.decode(cols[which], subject=subject_of(o, which), offsets=records.offset,
                                 on_error=on_error, with_errors=True,
                                 header_ids=schema_id_headers(records, which),
                                 message=message_of(o, which))
        cols[which] = _as_planned(spark_compatible(arr), schema.field(which).type, which)
        cols[f"{which}_error"] = errors
    return pa.RecordBatch.from_arrays([cols[f.name] for f in schema], schema=schema)


# --- Arrow types Spark does not have -----------------------------------------------

def spark_compatible(arr: pa.Array) -> pa.Array:
    t = arr.type
    if isinstance(t, pa.BaseExtensionType):
        storage = arr.storage
        if t == pa.uuid():
            return _uuid_strings(storage)
        return spark_compatible(storage)
    if pa.types.is_dictionary(t):
        return arr.cast(t.value_type)
    if pa.types.is_struct(t):
        kids = [spark_compatible(arr.field(i)) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(kids, names=[f.name for f in t],
                                          mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_map(t):
        keys, items = spark_compatible(arr.keys), spark_compatible(arr.items)
        offsets = arr.offsets
        return pa.MapArray.from_arrays(offsets, keys, items,
                                       mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_list(t):
        return pa.ListArray.from_arrays(arr.offsets, spark_compatible(arr.values),
                                        mask=arr.is_null() if arr.null_count else None)
    if pa.types.is_union(t):
        return _union_struct(arr)
    if t == pa.month_day_nano_interval():
        raw = np.frombuffer(arr.buffers()[1], np.uint8)[arr.offset * 16:(arr.offset + len(arr)) * 16]
        rows = raw.reshape(-1, 16) if len(arr) else np.zeros((0, 16), np.uint8)
        months = rows[:, 0:4].copy().view("<i4").ravel()
        days = rows[:, 4:8].copy().view("<i4").ravel()
        nanos = rows[:, 8:16].copy().view("<i8").ravel()
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays([pa.array(months, pa.int32()), pa.array(days, pa.int32()),
                                           pa.array(nanos, pa.int64())],
                                          names=["months", "days", "nanoseconds"], mask=mask)
    if pa.types.is_time32(t):
        return arr.cast(pa.time64("us"))
    if pa.types.is_timestamp(t) and t.unit == "ns":
        # Spark keeps microseconds; from_protobuf reads seconds * 1e6 + nanos / 1000 with
        # 0 <= nanos < 1e9: the floor of the nanoseconds / 1000
        ns = arr.cast(pa.int64()).fill_null(0).to_numpy()
        return pa.array(np.floor_divide(ns, 1000), pa.int64(),
                        mask=arr.is_null().to_numpy(zero_copy_only=False) if arr.null_count else None
                        ).cast(pa.timestamp("us", t.tz))
    if pa.types.is_duration(t) and t.unit == "ns":
        # Duration's seconds and nanos share their sign: / 1000 cuts toward zero
        return arr.cast(pa.duration("us"), safe=False)
    if t == pa.uint32():
        return arr.cast(pa.int64())
    if t == pa.uint64():
        return arr.cast(pa.decimal128(20, 0))
    if pa.types.is_decimal256(t):
        return arr.cast(pa.string())
    return arr


def _uuid_strings(storage: pa.Array) -> pa.Array:
    n = len(storage)
    raw = np.frombuffer(storage.buffers()[1], np.uint8)[storage.offset * 16:(storage.offset + n) * 16]
    hexed = np.frombuffer(b"0123456789abcdef", np.uint8)
    rows = raw.reshape(-1, 16) if n else np.zeros((0, 16), np.uint8)
    digits = np.empty((n, 32), np.uint8)
    digits[:, 0::2] = hexed[rows >> 4]
    digits[:, 1::2] = hexed[rows & 15]
    text = np.full((n, 36), ord("-"), np.uint8)
    for src, dst, width in ((0, 0, 8), (8, 9, 4), (12, 14, 4), (16, 19, 4), (20, 24, 12)):
        text[:, dst:dst + width] = digits[:, src:src + width]
    offsets = np.arange(n + 1, dtype=np.int32) * 36
    validity = storage.buffers()[0] if storage.null_count and not storage.offset else None
    if storage.null_count and storage.offset:
        validity = pa.py_buffer(np.packbits(storage.is_valid().to_numpy(zero_copy_only=False),
                                            bitorder="little"))
    return pa.Array.from_buffers(pa.string(), n, [validity, pa.py_buffer(offsets),
                                                  pa.py_buffer(text.tobytes())],
                                 null_count=storage.null_count)


_WIDER = ({"int", "long"}, pa.int64()), ({"float", "double"}, pa.float64())
_NUMBERS = {"int": pa.int32(), "long": pa.int64(), "float": pa.float32(), "double": pa.float64()}


def _avro_primitive(t: pa.DataType) -> str | None:
    """The Avro primitive type a union branch of Arrow type ``t`` was read
    from, where it is a number (``kbatch.payloads.avro_layout``'s types)."""
    if t == pa.int32() or pa.types.is_date32(t) or pa.types.is_time32(t):
        return "int"
    if t == pa.int64() or pa.types.is_timestamp(t) or pa.types.is_time64(t):
        return "long"
    return {pa.float32(): "float", pa.float64(): "double"}.get(t)


def _union_struct(arr: pa.Array) -> pa.Array:
    """A dense union as Spark's from_avro gives it (SchemaConverters.toSqlType,
    AvroDeserializer), decided on the branches' Avro primitive types: a
    value that takes the null branch is null; one other branch is that
    branch's value; int and long branches are one long, float and double one
    double (the numbers as written: GenericDatumReader applies no logical
    type); other unions a struct<member0, ...> with the branch taken set and
    the others null (the null branch is no member; only it: struct<>)."""
    t = arr.type
    types = np.asarray(arr.type_codes)
    offsets = np.asarray(arr.offsets)
    is_null = np.zeros(len(arr), bool)
    branches = []
    for k in range(t.num_fields):
        child = arr.field(k)
        taken = types == t.type_codes[k]
        if pa.types.is_null(child.type):
            is_null |= taken
            continue
        idx = pa.array(np.where(taken, offsets, 0), pa.int64(), mask=~taken)
        branches.append((taken, child.take(idx)))
    if not branches:
        return pa.nulls(len(arr), pa.struct([]))
    if len(branches) == 1:
        return spark_compatible(branches[0][1])         # null where the null branch is taken
    mask = pa.array(is_null) if is_null.any() else None
    kinds = {_avro_primitive(b.type) for _, b in branches}
    for pair, wider in _WIDER:
        if len(branches) == 2 and kinds == pair:
            values = np.zeros(len(arr), wider.to_pandas_dtype())
            for taken, b in branches:
                number = b.cast(_NUMBERS[_avro_primitive(b.type)])     # a date's days, a time's count
                got = number.cast(wider).fill_null(0).to_numpy(zero_copy_only=False)
                values[taken] = got[taken]
            return pa.array(values, wider, mask=is_null if is_null.any() else None)
    return pa.StructArray.from_arrays([spark_compatible(b) for _, b in branches],
                                      names=[f"member{i}" for i in range(len(branches))],
                                      mask=mask)
