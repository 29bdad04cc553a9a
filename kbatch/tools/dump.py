"""Text and JSON dumps of segments and index files (``kbatch dump``).

The text form is what ``kafka-dump-log.sh --print-data-log`` prints
(DumpLogSegments): per batch

    baseOffset: B lastOffset: L count: N baseSequence: S lastSequence: S'
    producerId: P producerEpoch: E partitionLeaderEpoch: PLE isTransactional: T
    isControl: C deleteHorizonMs: OptionalLong.empty position: POS
    CreateTime: MAXTS size: SIZE magic: 2 compresscodec: none crc: CRC isvalid: true

(one line; legacy messages print ``offset: L position: ...``), then per record

    | offset: O CreateTime: TS keySize: K valueSize: V sequence: S headerKeys: [a,b] key: .. payload: ..

Control records print ``endTxnMarker: COMMIT coordinatorEpoch: 0`` (or their
type) instead of key and payload. Keys and payloads are shown as UTF-8 text,
as the tool's default StringDecoder does. The JSON form is one object per
line (``"type": "batch"`` or ``"record"``) with bytes as base64, or as text
with ``decode="utf8"`` (``{"base64": ...}`` where a value is not UTF-8).
"""

from __future__ import annotations

import base64
import json
from pathlib import PurePosixPath
from typing import Iterator, TextIO

import numpy as np

from kbatch.lib.entry import iter_segment
from kbatch.lib.index import OFFSET_ENTRY, TIME_ENTRY, TXN_ENTRY, OffsetIndex, TimeIndex, \
    TxnIndex
from kbatch.lib.open import tree_of
from kbatch.lib.paths import SEGMENT_NAME
from kbatch.lib.records import Records
from kbatch.lib.storage import Storage
from kbatch.lib.tree import Location
from kbatch.wire import CODEC_NAMES, CONTROL_TYPE_NAMES as CONTROL_TYPES

TIMESTAMP_TYPES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}


def _text(b: bytes | None) -> str:
    return b.decode("utf-8", errors="replace") if b is not None else ""


def _last_sequence(base_seq: int, count_delta: int) -> int:
    if base_seq < 0:
        return -1
    return (base_seq + count_delta) % (1 << 31)


def batch_line(row: dict, position: int) -> str:
    tt = TIMESTAMP_TYPES[row["timestamp_type"]]
    tail = (f" position: {position} {tt}: {row['max_timestamp']} size: {row['size']}"
            f" magic: {row['magic']} compresscodec: {CODEC_NAMES.get(row['codec'], row['codec'])}"
            f" crc: {row['crc']} isvalid: {'false' if row['crc_valid'] == 0 else 'true'}")
    if row["magic"] < 2:
        return f"offset: {row['last_offset']}" + tail
    horizon = (f"OptionalLong[{row['base_timestamp']}]" if row["has_delete_horizon"]
               else "OptionalLong.empty")
    delta = row["last_offset"] - row["base_offset"]
    return (f"baseOffset: {row['base_offset']} lastOffset: {row['last_offset']}"
            f" count: {row['records_count']} baseSequence: {row['base_sequence']}"
            f" lastSequence: {_last_sequence(row['base_sequence'], delta)}"
            f" producerId: {row['producer_id']} producerEpoch: {row['producer_epoch']}"
            f" partitionLeaderEpoch: {row['partition_leader_epoch']}"
            f" isTransactional: {str(bool(row['is_transactional'])).lower()}"
            f" isControl: {str(bool(row['is_control'])).lower()}"
            f" deleteHorizonMs: {horizon}" + tail)


def _rows_in_order(chunk: Records):
    """Batches of a chunk with their data and control rows, in file order."""
    n_batches = len(chunk.batches)
    data_at = np.searchsorted(chunk.batch, np.arange(n_batches + 1))
    ctrl_at = np.searchsorted(chunk.control.batch, np.arange(n_batches + 1))
    for b in range(n_batches):
        yield (b, range(int(data_at[b]), int(data_at[b + 1])),
               range(int(ctrl_at[b]), int(ctrl_at[b + 1])))


def dump_text(records_iter: Iterator[Records], out: TextIO, *, print_data: bool = True,
              report_trailing: bool = True) -> None:
    for chunk in records_iter:
        keys, values = chunk.key.to_pylist(), chunk.value.to_pylist()
        headers = chunk.headers.to_pylist()
        seq = chunk.sequence
        for b, data_rows, ctrl_rows in _rows_in_order(chunk):
            row = chunk.batches[b]
            out.write(batch_line(row, row["position"]) + "\n")
            tt = TIMESTAMP_TYPES[row["timestamp_type"]]
            for i in data_rows:
                line = (f"| offset: {chunk.offset[i]} {tt}: {chunk.timestamp[i]}"
                        f" keySize: {len(keys[i]) if keys[i] is not None else -1}"
                        f" valueSize: {len(values[i]) if values[i] is not None else -1}")
                if row["magic"] >= 2:
                    line += (f" sequence: {seq[i]} headerKeys: ["
                             + ",".join(k for k, _ in headers[i]) + "]")
                else:
                    line += f" isValid: {'false' if row['crc_valid'] == 0 else 'true'} crc: {row['crc']}"
                if print_data:
                    if keys[i] is not None:
                        line += f" key: {_text(keys[i])}"
                    if values[i] is not None:
                        line += f" payload: {_text(values[i])}"
                out.write(line + "\n")
            for j in ctrl_rows:
                out.write(_control_line(chunk, j, tt) + "\n")
        if report_trailing and chunk.end is not None and chunk.end.trailing_bytes:
            out.write(f"Found {chunk.end.trailing_bytes} invalid bytes at the end of "
                      f"{(chunk.path or '<buffer>').rsplit('/', 1)[-1]}\n")


def _control_line(chunk: Records, j: int, tt: str) -> str:
    c = chunk.control[j]
    key, value = c.key, c.value
    line = (f"| offset: {c.offset} {tt}: {c.timestamp}"
            f" keySize: {len(key) if key is not None else -1}"
            f" valueSize: {len(value) if value is not None else -1} sequence: -1 headerKeys: []")
    if c.type in (0, 1):
        line += f" endTxnMarker: {CONTROL_TYPES[c.type]} coordinatorEpoch: {c.coordinator_epoch}"
    elif c.type in _KRAFT_LABELS:
        line += f" {_KRAFT_LABELS[c.type]} {_kraft_json(c)}"
    else:
        line += f" controlType: {CONTROL_TYPES.get(c.type, 'UNKNOWN')}({c.type})"
    return line


# how kafka-dump-log.sh labels the KRaft control records it decodes
_KRAFT_LABELS = {2: "LeaderChange:", 3: "SnapshotHeader", 4: "SnapshotFooter",
                 5: "KRaftVersion", 6: "KRaftVoters"}


def _kraft_json(c) -> str:
    from kbatch.lib.control import parse_control_value
    from kbatch.errors import CorruptRecordError
    try:
        fields = parse_control_value(c.type, c.key, c.value)
    except CorruptRecordError as exc:
        return f"(undecodable: {exc.reason})"
    fields.pop("type", None)
    return json.dumps(fields, default=str)


def _json_bytes(b: bytes | None, decode: str | None):
    if b is None:
        return None
    if decode == "utf8":
        try:
            return b.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(b).decode("ascii")}
    return base64.b64encode(b).decode("ascii")


def dump_json(records_iter: Iterator[Records], out: TextIO, *, decode: str | None = None,
              source: str | None = None) -> None:
    """One JSON object per batch and per record (data and control), in file order."""
    for chunk in records_iter:
        keys, values = chunk.key.to_pylist(), chunk.value.to_pylist()
        headers = chunk.headers.to_pylist()
        seq = chunk.sequence.tolist()
        for b, data_rows, ctrl_rows in _rows_in_order(chunk):
            row = chunk.batches[b]
            row.pop("source", None)
            row["codec"] = CODEC_NAMES.get(row["codec"], str(row["codec"]))   # as stats names it
            out.write(json.dumps({"type": "batch", "file": source, **row}) + "\n")
            for i in data_rows:
                out.write(json.dumps({
                    "type": "record", "offset": int(chunk.offset[i]),
                    "timestamp": int(chunk.timestamp[i]),
                    "timestamp_type": int(chunk.timestamp_type[i]),
                    "key": _json_bytes(keys[i], decode),
                    "value": _json_bytes(values[i], decode),
                    "headers": [{"key": k, "value": _json_bytes(v, decode)} for k, v in headers[i]],
                    "sequence": seq[i], "batch_base_offset": row["base_offset"],
                }) + "\n")
            for j in ctrl_rows:
                c = chunk.control[j]
                out.write(json.dumps({
                    "type": "control", "offset": c.offset, "timestamp": c.timestamp,
                    "producer_id": c.producer_id, "producer_epoch": c.producer_epoch,
                    "control_type": c.type, "control_type_name": c.type_name,
                    "version": c.version, "coordinator_epoch": c.coordinator_epoch,
                    "key": _json_bytes(c.key, None), "value": _json_bytes(c.value, None),
                }) + "\n")
        if chunk.end is not None:
            out.write(json.dumps({"type": "end", "file": source,
                                  "valid_bytes": chunk.end.valid_bytes,
                                  "trailing_bytes": chunk.end.trailing_bytes,
                                  "reason": chunk.end.reason}) + "\n")


def dump_index(loc: Location, out: TextIO, fmt: str = "text") -> None:
    """One index file, wherever it is stored (its live entries, by the rule
    of ``kbatch.lib.index``)."""
    name = PurePosixPath(loc.name)
    match = SEGMENT_NAME.match(name.with_suffix(".log").name)
    base = int(match.group(1)) if match else 0
    dtype, zero_ends = {".index": (OFFSET_ENTRY, True), ".timeindex": (TIME_ENTRY, True),
                        ".txnindex": (TXN_ENTRY, False)}[name.suffix]
    entries = loc.tree.read_entries(loc.path, dtype, None, zero_ends)
    if name.suffix == ".index":
        idx = OffsetIndex.of(entries, base)
        rows = [{"offset": int(o), "position": int(p)} for o, p in zip(idx.offsets, idx.positions)]
    elif name.suffix == ".timeindex":
        ti = TimeIndex.of(entries, base)
        rows = [{"timestamp": int(t), "offset": int(o)} for t, o in zip(ti.timestamps, ti.offsets)]
    else:
        tx = TxnIndex.of(entries)
        rows = [{"version": int(tx.version[i]), "producerId": int(tx.producer_id[i]),
                 "firstOffset": int(tx.first_offset[i]), "lastOffset": int(tx.last_offset[i]),
                 "lastStableOffset": int(tx.last_stable_offset[i])} for i in range(len(tx))]
    if not rows and fmt == "text":
        out.write(f"{loc} is empty.\n")
    for row in rows:
        if fmt == "json":
            out.write(json.dumps({"type": name.suffix[1:], **row}) + "\n")
        else:
            out.write(" ".join(f"{k}: {v}" for k, v in row.items()) + "\n")


INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")


def dump_file(path, out: TextIO, *, fmt: str = "text", decode: str | None = None,
              max_bytes: int | None = None, print_data: bool = True, **options) -> None:
    """Dump one ``.log``/``.records``/``.checkpoint`` file or one index file,
    local or in object storage (storage keywords as ``kbatch.open_log``;
    an object is read in ranges, an index object whole)."""
    storage, options = Storage.split(options)
    loc = Location(*tree_of(path, storage))
    if PurePosixPath(loc.name).suffix in INDEX_SUFFIXES:
        if fmt == "text":
            out.write(f"Dumping {loc}\n")
        dump_index(loc, out, fmt)
        return
    chunks = iter_segment(loc, storage=storage, stop=max_bytes, chunk_records=1 << 16, **options)
    if fmt == "json":
        dump_json(chunks, out, decode=decode, source=str(loc))
        return
    out.write(f"Dumping {loc}\n")
    match = SEGMENT_NAME.match(loc.name)
    out.write(f"Log starting offset: {int(match.group(1)) if match else 0}\n")
    dump_text(chunks, out, print_data=print_data, report_trailing=max_bytes is None)
