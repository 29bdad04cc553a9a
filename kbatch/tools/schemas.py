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
    ``value_error``. Returns 1 when any value failed, else 0."""
    reg = open_registry(registry_source, **({"storage": storage} if storage else {}))
    failed = 0
    kw = {"storage": storage} if storage else {}
    for chunk in iter_segment(path, stop=max_bytes, chunk_records=1 << 16, validate_crc=validate_crc, **kw):
        values, errors = reg.decode(chunk.value, offsets=chunk.offset, on_error="null", with_errors=True,
                                    header_ids=schema_id_headers(chunk, "value"),
                                    topic_subject=topic_subject(chunk, "value"))
        values, errors = values.to_pylist(), errors.to_pylist()
        for i, key in enumerate(chunk.key.to_pylist()):
            row = {"offset": int(chunk.offset[i]), "timestamp": int(chunk.timestamp[i]),
                   "key": _key_text(key), "value": _json_floats(values[i])}
            if errors[i] is not None:
                row["value_error"] = errors[i]
                failed = 1
            out.write(json.dumps(row, default=_json_default) + "\n")
    return failed


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
