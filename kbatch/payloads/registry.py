"""An offline Schema Registry: ``registry(source)`` replays what a source
holds (``kbatch.payloads.sources``) and ``Registry`` answers lookups and
decodes framed keys and values into Arrow (``decode``).

Which reader schema a column is decoded with: ``reader_schema=`` when
given; else the latest live version of ``subject=``; else, when the records'
topic is known (``topic_subject=``, ``<topic>-value`` / ``-key``, which
``to_arrow`` and ``kbatch dump`` pass) and the registry holds that subject
live, its latest version (as Spark's default ``valueSubject``). Else each
schema id has a reader of its own, whatever else is in the column: the
latest live version of the one live subject it is registered under (or of
several whose latest versions are the same schema), else the id's own
schema; a column whose ids have different readers is refused
(``SchemaError``: pass ``subject=``). So a value decodes to the same thing
in every chunk, range and door.
"""

from __future__ import annotations

import json

import numpy as np

from kbatch._core._avro import Status
from kbatch.errors import PayloadError, SchemaError, UnknownSchemaError
from kbatch.lib.decoded import HeadersNotRead
from kbatch.lib.records import optional_module
from kbatch.payloads import avro_schema, framing, json_decode, protobuf_schema
from kbatch.payloads.avro_decode import AvroReader
from kbatch.payloads.protobuf_decode import ProtoReader
from kbatch.payloads.column import error_column, rows_of
from kbatch.payloads.sources import SCHEMA_TOPIC, load
from kbatch.payloads.store import SchemaInfo, State, Version

ON_ERROR = ("raise", "null")


class Registry:
    """Schemas by id and by subject/version, as the registry held them."""

    def __init__(self, state: State, source: str = "?"):
        self.state = state
        self.source = source
        self._parsed: dict = {}
        self._readers: dict = {}

    # --- lookups ---------------------------------------------------------------------

    def subjects(self, *, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.state.subjects if self.state.versions(s, deleted))

    def versions(self, subject: str, *, deleted: bool = False) -> list[Version]:
        return self.state.versions(subject, deleted)

    def latest(self, subject: str) -> Version:
        live = self.state.versions(subject)
        if not live:
            known = self.state.versions(subject, deleted=True)
            raise SchemaError(f"subject {subject!r}: " + ("every version is deleted" if known
                                                          else "not in the registry"))
        return live[-1]

    def schema(self, sid: int) -> SchemaInfo:
        found = self.state.schemas.get(sid)
        if found is None:
            raise UnknownSchemaError(f"schema id {sid} is not in the registry ({self.source})",
                                     schema_id=sid)
        return found

    @property
    def ids(self) -> list[int]:
        return sorted(self.state.schemas)

    @property
    def ambiguous_ids(self) -> set[int]:
        """Ids the records gave two different schemas (``State.conflicts``):
        a value carrying one fails, naming the conflict, whatever
        ``schema(id)`` shows (the first of them)."""
        return {sid for _, sid, _, _ in self.state.conflicts}

    def _ambiguity(self, sid) -> str | None:
        found = [c for c in self.state.conflicts if c[1] == sid]
        if not found:
            return None
        offset, _, subject, version = found[0]
        at = "" if offset is None else f" at offset {offset}"
        return (f"schema id {sid} was given two different schemas (the second: {subject!r} "
                f"version {version}{at}): which one wrote this value cannot be known")

    def table(self):
        """One row per subject version: subject, version, id, type, deleted."""
        import pyarrow as pa
        rows = [(v.subject, v.version, v.id, self.state.schemas[v.id].schema_type, v.deleted)
                for s in sorted(self.state.subjects) for v in self.state.versions(s, deleted=True)]
        cols = list(zip(*rows)) if rows else [[], [], [], [], []]
        return pa.table({"subject": pa.array(cols[0], pa.string()), "version": pa.array(cols[1], pa.int32()),
                         "id": pa.array(cols[2], pa.int32()), "type": pa.array(cols[3], pa.string()),
                         "deleted": pa.array(cols[4], pa.bool_())})

    def __repr__(self) -> str:
        lines = [f"Registry({self.source}: {len(self.state.schemas)} schemas, "
                 f"{len(self.subjects())} subjects)"]
        for s in sorted(self.state.subjects):
            for v in self.state.versions(s, deleted=True):
                kind = self.state.schemas[v.id].schema_type
                lines.append(f"  {s} v{v.version} id={v.id} {kind}{' (deleted)' if v.deleted else ''}")
        return "\n".join(lines)

    # --- parsed schemas -------------------------------------------------------------

    def avro(self, sid: int) -> avro_schema.AvroType:
        """The Avro type of a schema id, its references' named types resolved."""
        found = self._parsed.get(sid)
        if found is None:
            info = self.schema(sid)
            if info.schema_type != "AVRO":
                raise SchemaError(f"schema id {sid} is {info.schema_type}, not AVRO")
            names = avro_schema.Names()
            self._references(info, names, set())
            found = self._parsed[sid] = avro_schema.parse(info.text, names)
        return found

    def _referenced(self, subject: str, version: int, by: str) -> SchemaInfo:
        """The schema a reference names (``subject``, ``version``); a
        ``SchemaError`` naming ``by`` (who refers) when the registry does
        not hold it."""
        ver = self.state.subjects.get(subject, {}).get(version)
        if ver is None:
            raise SchemaError(f"{by} references {subject!r} version {version}, "
                              "which the registry does not hold")
        return self.schema(ver.id)

    def _references(self, info: SchemaInfo, names: avro_schema.Names, done: set) -> None:
        for _name, subject, version in info.references:
            if (subject, version) in done:
                continue
            done.add((subject, version))
            ref = self._referenced(subject, version, f"schema id {info.id}")
            self._references(ref, names, done)
            avro_schema.parse(ref.text, names)

    def _json_refs(self, info: SchemaInfo):
        """A JSON Schema's references by name: a function of a ``$ref``'s
        document name giving ``(schema, its own references)``, or None for
        a name the record does not list."""
        by_name = {name: (subject, version) for name, subject, version in info.references}

        def find(name: str):
            if name not in by_name:
                return None
            ref = self._referenced(*by_name[name], f"schema id {info.id}")
            try:
                return json.loads(ref.text), self._json_refs(ref)
            except ValueError as exc:
                raise SchemaError(f"schema id {ref.id} ({name!r}) is not JSON: {exc}") from None
        return find

    def protobuf(self, sid: int) -> tuple[protobuf_schema.ProtoFile, protobuf_schema.Pool]:
        """The .proto file of a schema id and the pool its types resolve in
        (its references, recursively, and the well-known types)."""
        found = self._parsed.get(("proto", sid))
        if found is None:
            info = self.schema(sid)
            if info.schema_type != "PROTOBUF":
                raise SchemaError(f"schema id {sid} is {info.schema_type}, not PROTOBUF")
            found = self._parsed[("proto", sid)] = self._proto_pool(info.text, info.references, f"schema {sid}")
        return found

    def _proto_pool(self, text: str, references, name: str):
        pool = protobuf_schema.Pool()
        root = protobuf_schema.parse(text, name)
        pool.add(root)
        todo = [(root, tuple(references), 0)]
        while todo:
            f, refs, depth = todo.pop()
            by_name = {r[0]: (r[1], r[2]) for r in refs}
            for path in f.imports:
                if path in pool.files:
                    continue
                if path in by_name:
                    ref = self._referenced(*by_name[path], f"{name} (importing {path!r})")
                    child = protobuf_schema.parse(ref.text, path)
                    pool.add(child)
                    if depth < 64:
                        todo.append((child, tuple(ref.references), depth + 1))
                elif path in protobuf_schema.WELL_KNOWN:
                    pool.add(protobuf_schema.parse(protobuf_schema.WELL_KNOWN[path], path))
                # any other import (descriptor.proto, options): its types are not
                # needed unless a field names one, which resolve() then reports
        pool.resolve()
        return root, pool

    def guid_id(self, guid: bytes) -> int:
        import uuid
        return self.state.guids.get(str(uuid.UUID(bytes=bytes(guid))), -1)

    # --- decoding ---------------------------------------------------------------------

    def decode(self, column, *, reader_schema=None, subject: str | None = None, on_error: str = "raise",
               offsets=None, header_ids=None, with_errors: bool = False, max_depth: int = 4,
               message: str | None = None, topic_subject: str | None = None):
        """A ``pyarrow.Array``, one row per value of ``column`` (a kbatch
        binary column, a pyarrow binary array or a list of bytes); null or
        empty values are null rows. ``offsets``: the records' offsets, named
        by errors. ``on_error="raise"``: the first bad value raises a
        ``PayloadError`` (``UnknownSchemaError`` for an unknown id) naming
        its offset and schema id; ``"null"``: a bad value is a null row, and
        with ``with_errors=True`` the result is ``(array, errors)``, errors a
        string array (null where the row decoded). ``header_ids``: per row,
        the bytes of a ``__value_schema_id`` header (or None; a
        ``kbatch.lib.decoded.HeadersNotRead``: the headers were not read, and
        a column with any non-null value is refused). ``message``:
        Protobuf only, the full name of the message to decode (needed when
        a column holds several; rows of another message fail).
        ``topic_subject``: the column's TopicNameStrategy subject
        (``<topic>-value``), the reader when neither ``subject=`` nor
        ``reader_schema=`` is given and the registry holds it live (the
        module docstring has the whole rule)."""
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be 'raise' or 'null', not {on_error!r}")
        optional_module("pyarrow", "registry", "Registry.decode()")
        rows = rows_of(column)
        if subject is None and reader_schema is None and topic_subject is not None \
                and self.state.versions(topic_subject):
            subject = topic_subject
        if isinstance(header_ids, HeadersNotRead):
            if rows.valid.any():        # a header-framed datum would read as framed
                raise header_ids.error()
            header_ids = None
        frames = framing.split(rows) if header_ids is None else framing.from_headers(rows, list(header_ids))
        n = len(rows)
        if frames.guids is not None:
            for i in np.flatnonzero(frames.guid_rows):
                frames.ids[i] = self.guid_id(frames.guids[i])
        live = (frames.status == 0) & ~frames.null
        unknown = live & ~np.isin(frames.ids, np.array(self.ids, dtype=np.int64))
        frames.status[unknown] = Status.ST_UNKNOWN_ID
        live &= ~unknown
        # an id two different schemas claimed: which one wrote a value cannot be known
        ambiguous = live & np.isin(frames.ids, np.array(sorted(self.ambiguous_ids), np.int64))
        frames.status[ambiguous] = Status.ST_RESOLVE
        live &= ~ambiguous
        present = np.unique(frames.ids[live]).tolist()
        kinds = {self.state.schemas[i].schema_type for i in present}
        if len(kinds) > 1:
            raise SchemaError(f"one column holds {' and '.join(sorted(kinds))} payloads: decode them apart")
        kind = kinds.pop() if kinds else "AVRO"
        if kind != "PROTOBUF":
            framing.refuse_header_rest(frames, live, kind)
        if kind == "JSON" or (reader_schema is None and not present and subject is not None
                              and self.schema(self.latest(subject).id).schema_type == "JSON"):
            return self._decode_json(rows, frames, live, present, reader_schema, subject, on_error,
                                     offsets, with_errors)
        if kind == "PROTOBUF" or (reader_schema is None and not present and subject is not None
                                  and self.schema(self.latest(subject).id).schema_type == "PROTOBUF"):
            return self._decode_protobuf(rows, frames, live, present, reader_schema, subject, message,
                                         on_error, offsets, with_errors, max_depth)
        if kind != "AVRO":
            raise SchemaError(f"{kind} payloads are not decoded (AVRO, PROTOBUF and JSON are)")
        reader = self._avro_reader(reader_schema, subject, present, max_depth)
        prog = np.full(n, -1, np.int32)
        reasons: dict[int, str] = {}
        for sid in present:
            top = reader.program(sid, self.avro(sid))
            rows_of_id = live & (frames.ids == sid)
            if isinstance(top, SchemaError):
                frames.status[rows_of_id] = Status.ST_RESOLVE
                reasons[sid] = f"{framing.REASONS[Status.ST_RESOLVE]}: {top}"
            else:
                prog[rows_of_id] = top
        status = frames.status.copy()
        errpos = np.zeros(n, np.int64)
        errpos += frames.start - rows.offsets[:-1]          # bytes of framing before each datum
        array, _done = reader.run(rows.data, frames.start, frames.end, prog, status, errpos,
                                  on_error == "raise")
        array = _times_in_range(array, status, errpos, frames.start - rows.offsets[:-1])
        bad = np.flatnonzero(status)
        if on_error == "raise" and len(bad):
            raise self._error(int(bad[0]), status, errpos, frames, offsets, reasons)
        if not with_errors:
            return array
        return array, error_column(n, {i: self._error(i, status, errpos, frames, offsets,
                                                      reasons).reason for i in bad.tolist()})

    def _decode_json(self, rows, frames, live, present, reader_schema, subject, on_error, offsets,
                     with_errors):
        """JSON Schema payloads (``kbatch.payloads.json_decode``)."""
        import pyarrow as pa
        refs = None
        if reader_schema is not None:
            text = reader_schema if isinstance(reader_schema, str) else json.dumps(reader_schema)
        else:
            sid = self._reader_id(subject, present)
            text = self.schema(sid).text if sid is not None else "{}"
            refs = self._json_refs(self.schema(sid)) if sid is not None else None
        try:
            schema = json.loads(text)
        except ValueError as exc:
            raise SchemaError(f"a JSON Schema that is not JSON: {exc}") from None
        typ = (None if json_decode.says_nothing(schema, refs)
               else json_decode.arrow_type(schema, pa, refs=refs))
        array, reasons = json_decode.decode(rows.data, frames.start, frames.end, live, typ, pa,
                                            json_decode.accepts_null(schema, refs))
        failed = dict(reasons)                 # {row: why}: framing, then the JSON
        for i in np.flatnonzero(frames.status).tolist():
            failed[i] = str(self._error(i, frames.status, np.zeros(len(rows), np.int64), frames,
                                        offsets, {}).reason)
        if on_error == "raise" and failed:
            i = min(failed)
            sid = int(frames.ids[i]) if frames.ids[i] >= 0 else None
            cls = UnknownSchemaError if frames.status[i] == Status.ST_UNKNOWN_ID else PayloadError
            raise cls(failed[i], offset=int(offsets[i]) if offsets is not None else None, row=i,
                      schema_id=sid)
        if not with_errors:
            return array
        return array, error_column(len(rows), failed)

    def _decode_protobuf(self, rows, frames, live, present, reader_schema, subject, message, on_error,
                         offsets, with_errors, max_depth):
        """Protobuf payloads (``kbatch.payloads.protobuf_decode``): each row's
        message indexes name a message of its writer's schema; the rows are
        decoded with the reader's definition of that message (by full name)."""
        import pyarrow as pa
        from kbatch._core._protobuf import message_indexes
        n = len(rows)
        status = frames.status.copy()
        start = frames.start.copy()
        reasons: dict = {}
        path = np.zeros((n, 16), np.int32)
        plen = np.zeros(n, np.int32)
        header = frames.header_rows if frames.header_rows is not None else np.zeros(n, bool)
        message_indexes(rows.data, start, frames.end, (live & ~header).astype(np.uint8), path,
                        plen, status)
        if (live & header).any():
            _header_indexes(frames, live & header, path, plen, status, reasons)
        live = live & (status == 0)
        names = np.full(n, -1, np.int32)
        found: list[str] = []
        first = live & (plen == 1) & (path[:, 0] == 0)
        for sid in present:
            of_id = live & (frames.ids == sid)
            groups = [((0,), of_id & first)]
            other = of_id & ~first
            if other.any():
                keys = {tuple(path[i, :plen[i]].tolist()) for i in np.flatnonzero(other).tolist()}
                for key in keys:
                    same = other & (plen == len(key)) & np.all(path[:, :len(key)] == np.array(key, np.int32), axis=1)
                    groups.append((key, same))
            for key, where in groups:
                if not where.any():
                    continue
                try:
                    name = self.protobuf(sid)[0].message_at(key).full_name
                except SchemaError as exc:
                    status[where] = Status.ST_INDEXES if "indexes" in str(exc) else Status.ST_RESOLVE
                    for i in np.flatnonzero(where).tolist():    # each row its own reason
                        reasons[("row", i)] = str(exc)
                    continue
                if name not in found:
                    found.append(name)
                names[where] = found.index(name)
        wanted = message
        if wanted is None:
            if len(found) > 1:
                raise SchemaError(f"one column holds messages {', '.join(found)}: pass message=")
            wanted = found[0] if found else None
        if reader_schema is not None:
            text = reader_schema if isinstance(reader_schema, str) else str(reader_schema)
            key = ("proto-text", text)
            root, pool = self._parsed.get(key) or self._parsed.setdefault(key, self._proto_pool(text, (), "reader"))
        else:
            sid = self._reader_id(subject, present)
            if sid is None:
                return (pa.nulls(n), pa.nulls(n, pa.string())) if with_errors else pa.nulls(n)
            root, pool = self.protobuf(sid)
        if wanted is None:
            wanted = root.message_at((0,)).full_name
        rkey = ("proto", id(pool), wanted, max_depth)
        reader = self._readers.get(rkey)
        if reader is None:
            reader = self._readers[rkey] = ProtoReader(pool, wanted, max_depth=max_depth)
        prog = np.full(n, -1, np.int32)
        for k, name in enumerate(found):
            rows_of_name = live & (names == k)
            if name == wanted:
                prog[rows_of_name] = reader.layout.top
            else:
                status[rows_of_name] = Status.ST_RESOLVE
                for i in np.flatnonzero(rows_of_name).tolist():
                    reasons[("row", i)] = f"a {name} message, not the {wanted} being decoded"
        errpos = (start - rows.offsets[:-1]).astype(np.int64)
        array, _done = reader.run(rows.data, start, frames.end, prog, status, errpos, on_error == "raise")
        bad = np.flatnonzero(status)
        if on_error == "raise" and len(bad):
            raise self._error(int(bad[0]), status, errpos, frames, offsets, reasons)
        if not with_errors:
            return array
        return array, error_column(n, {i: self._error(i, status, errpos, frames, offsets,
                                                      reasons).reason for i in bad.tolist()})

    def _avro_reader(self, reader_schema, subject, present: list, max_depth: int) -> AvroReader:
        if reader_schema is not None:
            text = reader_schema if isinstance(reader_schema, str) else json.dumps(reader_schema)
            key = ("schema", text, max_depth)
            make = lambda: avro_schema.parse(text)       # noqa: E731
        else:
            sid = self._reader_id(subject, present)
            key = ("id", sid, max_depth)
            make = lambda: self.avro(sid) if sid is not None else avro_schema.AvroType("null")   # noqa: E731
        reader = self._readers.get(key)
        if reader is None:
            reader = self._readers[key] = AvroReader(make(), max_depth=max_depth)
        return reader

    def _reader_id(self, subject, present: list) -> int | None:
        """The schema id the column is read with (None: no id, no subject)."""
        if subject is not None:
            return self.latest(subject).id
        readers = {sid: self._own_reader(sid) for sid in present}
        if len(set(readers.values())) <= 1:
            return next(iter(readers.values()), None)
        told = "; ".join(f"id {sid}: {self._reader_story(sid, r)}" for sid, r in readers.items())
        raise SchemaError(f"schema ids {present} have different reader schemas ({told}): "
                          "pass subject= or reader_schema=")

    def _live_subjects(self, sid: int) -> list[str]:
        """The subjects, with a live version, that register ``sid``."""
        return sorted({v.subject for v in self.state.subjects_of(sid) if self.state.versions(v.subject)})

    def _own_reader(self, sid: int) -> int:
        """The reader of a value of ``sid`` when no subject is known, from
        ``sid`` alone: the latest live version of the subjects it is
        registered under when they agree on one, else ``sid`` itself."""
        latest = {self.latest(s).id for s in self._live_subjects(sid)}
        return latest.pop() if len(latest) == 1 else sid

    def _reader_story(self, sid: int, reader: int) -> str:
        subjects = self._live_subjects(sid)
        if reader != sid or len(subjects) == 1:
            return f"the latest of {subjects[0]!r} (id {reader})"
        return f"its own schema ({'in subjects ' + ', '.join(map(repr, subjects)) if subjects else 'in no live subject'})"

    def _error(self, i: int, status, errpos, frames, offsets, reasons) -> PayloadError:
        st = int(status[i])
        sid = int(frames.ids[i]) if frames.ids[i] >= 0 else None
        if sid is None and frames.guids is not None and frames.guid_rows[i]:
            import uuid
            sid = str(uuid.UUID(bytes=bytes(frames.guids[i])))
        offset = int(offsets[i]) if offsets is not None else None
        reason = reasons.get(("row", i), reasons.get(sid)) \
            if st in (Status.ST_RESOLVE, Status.ST_INDEXES) else None
        if st == Status.ST_RESOLVE and isinstance(sid, int):
            reason = self._ambiguity(sid) or reason
        reason = frames.reasons.get(i) or reason or framing.REASONS.get(st, f"status {st}")
        cls = UnknownSchemaError if st == Status.ST_UNKNOWN_ID else PayloadError
        position = int(errpos[i]) if st < Status.ST_MAGIC else None
        return cls(reason, offset=offset, row=i, schema_id=sid, position=position)


def _header_indexes(frames, rows, path, plen, status, reasons) -> None:
    """Protobuf rows whose schema id came in a header: their message indexes
    are the header's bytes after the id (SchemaId.guidToBytes), all of them;
    none, or bytes left over, fail the row (``ST_INDEXES``)."""
    from kbatch._core._protobuf import message_indexes
    idx = np.flatnonzero(rows)
    rests = [frames.header_rest.get(int(i), b"") for i in idx]
    data = np.frombuffer(b"".join(rests), np.uint8) if any(rests) else np.zeros(0, np.uint8)
    n = len(rows)
    start, end = np.zeros(n, np.int64), np.zeros(n, np.int64)
    at = 0
    for i, rest in zip(idx.tolist(), rests):
        start[i], end[i] = at, at + len(rest)
        at += len(rest)
    message_indexes(data, start, end, rows.astype(np.uint8), path, plen, status)
    for i, rest in zip(idx.tolist(), rests):
        if not rest:
            status[i] = Status.ST_INDEXES
            reasons[("row", i)] = ("no message indexes after the schema id in its header "
                                   "(Protobuf's header framing carries them)")
        elif status[i] == 0 and start[i] != end[i]:
            status[i] = Status.ST_INDEXES
            reasons[("row", i)] = "bytes after the message indexes in the schema id header"


def _times_in_range(array, status, errpos, datum_at):
    """``array`` with the rows that hold a time of day outside [0, one day)
    (Avro time-millis/time-micros, Connect Time: the writer's int or long
    is not checked by the decoder) failed: ``status`` ST_RANGE, the row
    null (an Arrow time column cannot hold them: they would read as wrapped
    clock times)."""
    import pyarrow as pa
    if not _has_time(array.type, pa):
        return array
    bad = _bad_times(array, pa) & (status == 0)
    if not bad.any():
        return array
    status[bad] = Status.ST_RANGE
    errpos[bad] = datum_at[bad]
    return array.take(pa.array(np.arange(len(array)), mask=bad))


def _has_time(typ, pa) -> bool:
    if pa.types.is_time32(typ) or pa.types.is_time64(typ):
        return True
    return any(_has_time(typ.field(i).type, pa) for i in range(typ.num_fields)) \
        if hasattr(typ, "num_fields") and not pa.types.is_dictionary(typ) else False


def _bad_times(arr, pa) -> np.ndarray:
    """Per row of ``arr``: whether it holds an out-of-range time anywhere."""
    import pyarrow.compute as pc
    typ = arr.type
    n = len(arr)
    if pa.types.is_time32(typ) or pa.types.is_time64(typ):
        day = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000,
               "ns": 86_400_000_000_000}[typ.unit]
        ints = arr.cast(pa.int32() if pa.types.is_time32(typ) else pa.int64())
        out = pc.or_(pc.less(ints, 0), pc.greater_equal(ints, day)).fill_null(False)
        return out.to_numpy(zero_copy_only=False)
    mask = np.zeros(n, bool)
    if pa.types.is_struct(typ):
        for i in range(typ.num_fields):
            if _has_time(typ.field(i).type, pa):
                mask |= _bad_times(arr.field(i), pa)
    elif pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_map(typ):
        values = arr.values                  # a map's: its entries, struct<key, value>
        if _has_time(values.type, pa) and len(values):
            # per row, any bad child in [offsets[i], offsets[i + 1]), by a running count
            off = np.asarray(arr.offsets)
            seen = np.concatenate([[0], np.cumsum(_bad_times(values, pa))])
            mask |= seen[off[1:]] > seen[off[:-1]]
    elif pa.types.is_union(typ):
        codes = np.asarray(arr.type_codes)
        offsets = np.asarray(arr.offsets)
        for k in range(typ.num_fields):
            child = arr.field(k)
            if _has_time(child.type, pa) and len(child):
                cm = _bad_times(child, pa)
                at = np.flatnonzero(codes == typ.type_codes[k])
                mask[at] |= cm[offsets[at]]
    return mask


def registry(source, *, topic: str = SCHEMA_TOPIC, **storage) -> Registry:
    """A ``Registry`` from a broker data directory (its ``_schemas`` topic),
    a ``_schemas`` partition or segment, a URL of one (storage keywords as
    ``open_log``), a JSON export (a ``.json`` file or the list itself) or a
    folder of schema files with ``ids.json``."""
    from kbatch.lib.storage import Storage
    st, rest = Storage.split(storage)
    if rest:
        raise TypeError(f"registry: unknown argument(s) {', '.join(sorted(rest))}")
    state, where = load(source, topic=topic, storage=st)
    return Registry(state, where)
