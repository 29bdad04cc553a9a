"""The command line of the offline registry:

    kbatch schemas DATA_DIR        subjects, versions, ids and types of its _schemas topic
                                   (or a _schemas partition, an export .json, a folder)
    kbatch dump --registry SRC F   one JSON object per record, the value decoded
                                   through the registry SRC (``value_error`` on a bad one)
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import sys
import uuid
from typing import TextIO

from kbatch.lib.decoded import schema_id_headers, topic_subject
from kbatch.lib.entry import iter_segment
from kbatch.payloads import registry as open_registry


def add_schemas_command(sub, url_flags, storage_of) -> None:
    p = sub.add_parser("schemas", help="subjects, versions, ids and types of a Schema Registry's topic",
                       description="List what the Schema Registry held: its _schemas topic in a broker "
                                   "data directory, a _schemas partition, a JSON export or a folder "
                                   "of schema files with ids.json.")
    p.add_argument("path")
    p.add_argument("--format", choices=["text", "json"], default="text")
    p.add_argument("--topic", default="_schemas", help="the registry's topic (kafkastore.topic)")
    url_flags(p)
    p.set_defaults(func=lambda args: cmd_schemas(args, storage_of(args)))


def cmd_schemas(args, storage=None) -> int:
    reg = open_registry(args.path, topic=args.topic, **({"storage": storage} if storage else {}))
    rows = reg.table().to_pylist()
    out = sys.stdout
    if args.format == "json":
        for row in rows:
            out.write(json.dumps(row) + "\n")
    else:
        out.write(f"{reg.source}: {len(reg.ids)} schemas, {len(reg.subjects())} live subjects, "
                  f"{sum(reg.state.key_types.values())} records "
                  f"({', '.join(f'{k} {v}' for k, v in sorted(reg.state.key_types.items()))})\n")
        width = max([len(r["subject"]) for r in rows] + [7])
        if rows:
            out.write(f"{'subject':<{width}}  version  id        type      \n")
        for r in rows:
            out.write(f"{r['subject']:<{width}}  {r['version']:>7}  {r['id']:<8}  {r['type']:<8}"
                      f"{'  deleted' if r['deleted'] else ''}\n")
        for off, why in reg.state.skipped:
            out.write(f"record {off}: skipped: {why}\n")
    return 0


def _json_default(v):
    if isinstance(v, (bytes, bytearray)):
        return {"base64": base64.b64encode(bytes(v)).decode("ascii")}
    if isinstance(v, (datetime.datetime, datetime.date, datetime.time)):
        return v.isoformat()
    if isinstance(v, datetime.timedelta):
        return v.total_seconds()
    if isinstance(v, (decimal.Decimal, uuid.UUID)):
        return str(v)
    if hasattr(v, "months") and hasattr(v, "nanoseconds"):
        return {"months": v.months, "days": v.days, "nanoseconds": v.nanoseconds}
    return str(v)


def dump_decoded(path, out: TextIO, registry_source: str, *, storage=None, max_bytes=None,
                 validate_crc: bool = True) -> int:
    """One JSON line per data record: offset, timestamp, key (UTF-8 text or
    base64) and the value decoded (its schema id from a ``__value_schema_id``
    header where it has one, read with the topic's subject when the file's
    folder names the topic, as ``to_arrow(decode=)``); a value that does not decode is null with
    ``value_error``. A date or timestamp beyond Python's years (1-9999) is
    ISO 8601 text with an expanded year (``_iso_day``). Returns 1 when any
    value failed, else 0."""
    reg = open_registry(registry_source, **({"storage": storage} if storage else {}))
    failed = 0
    kw = {"storage": storage} if storage else {}
    for chunk in iter_segment(path, stop=max_bytes, chunk_records=1 << 16, validate_crc=validate_crc, **kw):
        values, errors = reg.decode(chunk.value, offsets=chunk.offset, on_error="null", with_errors=True,
                                    header_ids=schema_id_headers(chunk, "value"),
                                    topic_subject=topic_subject(chunk, "value"))
        values, errors = _python_rows(values), errors.to_pylist()
        for i, key in enumerate(chunk.key.to_pylist()):
            row = {"offset": int(chunk.offset[i]), "timestamp": int(chunk.timestamp[i]),
                   "key": _key_text(key), "value": _json_floats(values[i])}
            if errors[i] is not None:
                row["value_error"] = errors[i]
                failed = 1
            out.write(json.dumps(row, default=_json_default) + "\n")
    return failed


def _python_rows(values) -> list:
    """``values.to_pylist()``, except that a date or timestamp Python's
    datetime cannot hold (a year outside 1-9999: Avro's and Arrow's range is
    wider) is an ISO 8601 string with an expanded year (``_iso_day``), the
    rest of its row as ``to_pylist`` gives it."""
    try:
        return values.to_pylist()
    except (OverflowError, ValueError):
        return [_python_row(values[i]) for i in range(len(values))]


def _python_row(scalar):
    try:
        return scalar.as_py()
    except (OverflowError, ValueError):
        return _python_value(scalar)


def _python_value(scalar):
    """``scalar.as_py()`` walked by hand, out-of-range dates and times as text."""
    import pyarrow as pa
    if not scalar.is_valid:
        return None
    typ = scalar.type
    if pa.types.is_struct(typ):
        return {typ.field(k).name: _python_value(scalar[k]) for k in range(typ.num_fields)}
    if pa.types.is_map(typ):
        return [(_python_value(e["key"]), _python_value(e["value"])) for e in scalar.values]
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_fixed_size_list(typ):
        return [_python_value(x) for x in scalar.values]
    if pa.types.is_union(typ):
        return _python_value(scalar.value)
    if pa.types.is_temporal(typ):
        try:
            return scalar.as_py()
        except (OverflowError, ValueError):
            return _temporal_text(scalar)
    return scalar.as_py()


_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def _temporal_text(scalar):
    """A date or timestamp beyond datetime's years as ISO 8601 text, laid out
    as ``isoformat()`` lays out the others; a duration as its seconds."""
    import pyarrow as pa
    typ = scalar.type
    if pa.types.is_timestamp(typ):
        return _iso_instant(scalar.value, typ.unit, typ.tz is not None)
    if pa.types.is_date32(typ):
        return _iso_day(scalar.value)
    if pa.types.is_date64(typ):
        return _iso_day(scalar.value // 86_400_000)
    if pa.types.is_duration(typ):
        return scalar.value / _PER_SECOND[typ.unit]
    return str(scalar)


def _iso_instant(count: int, unit: str, utc: bool) -> str:
    """``count`` ``unit``s since 1970-01-01T00:00:00 (UTC when ``utc``)."""
    per_second = _PER_SECOND[unit]
    seconds, fraction = divmod(count, per_second)
    days, seconds = divmod(seconds, 86_400)
    text = f"{_iso_day(days)}T{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    if fraction:        # isoformat: microseconds, six digits; nanoseconds: nine
        text += (f".{fraction:09d}" if unit == "ns" else f".{fraction * 1_000_000 // per_second:06d}")
    return text + ("+00:00" if utc else "")


def _iso_day(days: int) -> str:
    """The proleptic Gregorian date ``days`` after 1970-01-01, its year
    astronomical (0000 is 1 BC) and expanded past four digits: "+10000-01-01",
    "-0001-12-31". The calendar repeats every 400 years (146097 days), so
    the day within the cycle is ``datetime.date``'s."""
    cycles, rest = divmod(days, 146_097)
    day = datetime.date(1970, 1, 1) + datetime.timedelta(days=rest)
    year = day.year + 400 * cycles
    shown = f"{year:04d}" if 0 <= year <= 9999 else (f"+{year}" if year > 0 else f"-{-year:04d}")
    return f"{shown}-{day.month:02d}-{day.day:02d}"


def _json_floats(v):
    """``v`` with NaN and the infinities as the strings "NaN", "Infinity" and
    "-Infinity" (JSON has no literal for them; Protobuf's JSON mapping
    writes them so)."""
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, dict):
        return {k: _json_floats(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_floats(x) for x in v]
    return v


def _key_text(key: bytes | None):
    if key is None:
        return None
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(key).decode("ascii")}
