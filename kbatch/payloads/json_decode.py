"""JSON Schema payloads (Confluent's ``schemaType: JSON``): the datum after
the framing is JSON text. The reader's JSON Schema gives the Arrow type;
fields are matched by name (a field the reader lacks is ignored, one the
value lacks is null), so versions of a subject decode into one type.

    object (properties)   struct (every field nullable)
    array (items)         list
    string                string; format date-time: timestamp[us, UTC]
                          (RFC 3339: seconds and a Z or +-HH:MM offset; a
                          value without them is a failed row, never read as
                          UTC); format date: date32
    integer / number      int64 / float64 (an integer is any number whose
                          value is whole, as from draft 6: 1.0 and 1e2 too)
    boolean / null        bool / null
    ["T", "null"]         T, nullable
    enum / const          the type of its values where they have one (null
                          aside; integers and numbers together: float64)
    $ref "#/definitions/X" or "#/$defs/X"   the definition; "name" or
                          "name#/definitions/X": in the schema a reference
                          of the registry's record names (``refs``)
    anything else         string: the JSON text of the value (``{}``, an
                          enum of mixed types, allOf...), ``json_python``: no
                          whitespace, members in the writer's order,
                          numbers as written; a JSON null is a null

A schema that says nothing of the value's fields (``{}``, ``true``, an
object without ``properties`` or with ``"properties": {}``, a $ref to one),
or none at all (``JsonValues``: unframed JSON text), gives no type: it is
inferred from the values by pyarrow's JSON reader (objects only; values
whose types conflict across rows raise a ``SchemaError`` asking for a
schema).

A value whose text is ``null`` is a null row where the schema names null
(``["T", "null"]``...: ``accepts_null``) and a failed row otherwise. A
UTF-8 byte order mark before a value is skipped (RFC 8259 8.1: a writer
must not add one, a parser may ignore it), in every row alike.

An object of scalar fields (integer, number, boolean, string, date-time,
date) is decoded by kbatch's compiled decoder (``kbatch._core._json``),
which takes the common form of each and hands every other row back. All
other values are parsed by pyarrow's JSON reader at once (a raw newline can
only be whitespace in JSON, so each value becomes one line); when that
fails, each value is parsed alone and the ones that do not parse or do not
fit the type are converted in Python (``json_python.python_read``: the forms the
reader does not take, such as an integer written 1.0) or become failed
rows. A type holding JSON text is read by ``python_read`` alone.
"""

from __future__ import annotations

import json
import re

import numpy as np

from kbatch.errors import PayloadError, SchemaError
from kbatch.payloads.json_python import after_bom, cast_read, python_read, readable_type
from kbatch.payloads.json_schema import (has_text, accepts_null, arrow_type, public_type,
                                         says_nothing)

def decode(data: np.ndarray, start: np.ndarray, end: np.ndarray, live: np.ndarray, typ, pa,
           nullable: bool = False):
    """(array of ``public_type(typ)``, ``{row: reason}`` of the rows that
    failed) for rows ``live``; other rows null. A value whose JSON text is
    ``null`` is a null row where ``nullable`` (the schema names null:
    ``accepts_null``), a failed row otherwise. A UTF-8 byte order mark
    before a value is skipped (``after_bom``).

    A flat object type (scalar fields only: ``_flat_kinds``) goes through
    the compiled decoder (``kbatch._core._json``); the rows it leaves
    (another form than it takes) and every other type through
    ``_general``."""
    start = after_bom(data, start, end, live)
    kinds = _flat_kinds(typ, pa)
    if kinds is not None and live.any():
        done = _flat(data, start, end, live, typ, kinds, pa, nullable)
        if done is not None:
            return done
    array, reasons = _general(data, start, end, live, typ, pa, nullable)
    return array, {i: why for i, why in enumerate(reasons) if why is not None}


# the compiled decoder's kinds (kbatch._core._json K_*), by Arrow type
def _flat_kinds(typ, pa) -> list[int] | None:
    """The K_* kind of every field of ``typ``, or None when it is not an
    object of scalar fields the compiled decoder takes."""
    if typ is None or not pa.types.is_struct(typ) or typ.num_fields == 0 or typ.num_fields > 64:
        return None
    kinds = []
    for field in typ:
        t = field.type
        kind = (0 if t == pa.int64() else 1 if t == pa.float64() else 2 if t == pa.bool_()
                else 3 if t == pa.string() else 4 if t == pa.timestamp("us", "UTC")
                else 5 if t == pa.date32() else None)
        if kind is None:
            return None
        kinds.append(kind)
    return kinds


def _flat(data, start, end, live, typ, kinds, pa, nullable):
    """The compiled decoder's columns as one struct array, its FALLBACK rows
    decoded by ``_general`` and put in their place; None when a string
    column would pass 2 GiB (``_general`` then does all)."""
    from kbatch._core._json import decode_flat

    n = len(start)
    status, cols = decode_flat(np.ascontiguousarray(data, np.uint8),
                               np.ascontiguousarray(start, np.int64),
                               np.ascontiguousarray(end, np.int64),
                               np.ascontiguousarray(live, np.uint8),
                               [f.name.encode() for f in typ], kinds)
    children = []
    for field, (valid, values) in zip(typ, cols):
        nulls = n - int(np.count_nonzero(valid))
        bits = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
        t = field.type
        if pa.types.is_string(t):
            offsets, chars = values
            if offsets[-1] > (1 << 31) - 1:
                return None
            buffers = [bits, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(chars)]
        elif pa.types.is_boolean(t):
            buffers = [bits, pa.py_buffer(np.packbits(values, bitorder="little"))]
        else:
            buffers = [bits, pa.py_buffer(values)]
        children.append(pa.Array.from_buffers(t, n, buffers, null_count=nulls))
    fast = pa.StructArray.from_arrays(children, fields=list(typ), mask=pa.array(status != 0))
    again = status == 2
    if not again.any():
        return fast, {}
    rows = np.flatnonzero(again)          # decoded apart, then put in their place
    slow, reasons = _general(data, start[rows], end[rows], np.ones(len(rows), bool), typ, pa,
                             nullable)
    index = np.arange(n, dtype=np.int64)
    index[rows] = n + np.arange(len(rows))
    return (pa.concat_arrays([fast, slow]).take(pa.array(index)),
            {int(rows[k]): why for k, why in enumerate(reasons) if why is not None})


def _general(data: np.ndarray, start: np.ndarray, end: np.ndarray, live: np.ndarray, typ, pa,
             nullable: bool = False):
    """``decode`` by pyarrow's JSON reader: the values read at once, or
    value by value to find those that fail; a value the reader refuses is
    converted by ``python_read`` (which takes the forms the reader does not:
    an integer written ``1.0``), or fails. Values that are not UTF-8 fail
    first (the reader would pass their bytes into its strings); a type
    holding JSON text is read by ``python_read`` alone."""
    import pyarrow.json as pj

    from kbatch._core._json import invalid_utf8

    not_utf8 = invalid_utf8(np.ascontiguousarray(data, np.uint8), np.ascontiguousarray(start, np.int64),
                            np.ascontiguousarray(end, np.int64),
                            np.ascontiguousarray(live, np.uint8)).view(bool)
    if not_utf8.any():
        live = live & ~not_utf8

    n = len(start)
    reasons: list = [None] * n
    for i in np.flatnonzero(not_utf8).tolist():
        reasons[i] = "not JSON: the text is not UTF-8"
    rows = np.flatnonzero(live)
    wrap = typ is not None and not pa.types.is_struct(typ)
    rows = _without_nulls(data, start, end, rows, reasons, None if nullable else
                          "a JSON null, which the schema does not allow" if wrap else
                          "a JSON null, not an object")
    if typ is None:
        return _inferred(data, start, end, rows, reasons, n, pj, pa)
    if pa.types.is_struct(typ):
        target = typ
    else:
        target = pa.struct([pa.field("v", typ)])
    if has_text(target, pa):
        good, why = python_read([bytes(data[start[i]:end[i]]) for i in rows.tolist()], target,
                                 wrap, pa)
        for k, i in enumerate(rows.tolist()):
            reasons[i] = why[k]
        rows = np.array([i for i, w in zip(rows.tolist(), why) if w is None], np.int64)
        return _in_place_of_rows(good, rows, reasons, n, wrap, pa)
    good = None
    if not wrap and len(rows):
        good = _read_in_place(data, start[rows], end[rows], rows, reasons, target, pj, pa)
    texts = [] if good is not None else [bytes(data[start[i]:end[i]]) for i in rows.tolist()]
    if good is None:                 # a raw CR/LF is replaced before reading: check those values alone
        keep = []
        for k, (i, text) in enumerate(zip(rows.tolist(), texts)):
            why = _strict_failure(text) if (b"\n" in text or b"\r" in text) else None
            if why is None:
                keep.append(k)
            else:
                reasons[i] = why
        if len(keep) < len(texts):
            rows, texts = rows[keep], [texts[k] for k in keep]
        good = _read(texts, target, wrap, pj, pa)
    if good is None:                 # one at a time: which values fail
        ok_rows, ok_texts, refused_rows, refused = [], [], [], []
        for i, text in zip(rows.tolist(), texts):
            # the reader skips a BOM at the start of its buffer only: a
            # second one (not JSON) would pass alone and fail together
            if text.startswith(b"\xef\xbb\xbf") or _read([text], target, wrap, pj, pa) is None:
                refused_rows.append(i)
                refused.append(text)
            else:
                ok_rows.append(i)
                ok_texts.append(text)
        good = _read(ok_texts, target, wrap, pj, pa) if ok_texts else pa.array([], target)
        if good is None:             # read alone but not together: all converted in Python
            refused_rows, refused = ok_rows + refused_rows, ok_texts + refused
            ok_rows, good = [], pa.array([], target)
        if refused:                  # the forms the reader does not take, or failed rows
            rescued, why = python_read(refused, target, wrap, pa)
            for i, reason in zip(refused_rows, why):
                reasons[i] = reason
            ok_rows += [i for i, reason in zip(refused_rows, why) if reason is None]
            good = pa.concat_arrays([good, rescued])
        rows = np.array(ok_rows, np.int64)
    return _in_place_of_rows(good, rows, reasons, n, wrap, pa)


def _in_place_of_rows(good, rows, reasons, n, wrap, pa):
    """(the array of ``n`` rows whose row ``rows[k]`` is ``good[k]``, nulls
    elsewhere and where ``reasons`` names a failure, ``reasons``)."""
    values = good.field("v") if wrap else good
    index = np.full(n, -1, np.int64)
    index[rows] = np.arange(len(rows))
    failed = np.array([r is not None for r in reasons], bool)
    index[failed] = -1
    if len(values) == n and (index >= 0).all():
        return values, reasons       # every row, in order: no gather
    taken = values.take(pa.array(index, mask=index < 0))
    return taken, reasons


_JSON_SPACE = np.array([32, 9, 10, 13], np.uint8)


def _without_nulls(data, start, end, rows, reasons, why) -> np.ndarray:
    """``rows`` without the values whose JSON text is ``null``: null rows
    where ``why`` is None (the schema names null), failed rows for ``why``
    otherwise (pyarrow's JSON reader crashes the process on a line that is
    ``null``, pyarrow 26, so it must never see one). Only values whose
    first byte is ``n`` or a space are looked at whole."""
    if not len(rows):
        return rows
    if not len(data):
        return rows
    first = np.asarray(data)[np.minimum(start[rows], len(data) - 1)]   # an empty value: any byte
    suspect = ((first == ord("n")) | np.isin(first, _JSON_SPACE)) & (end[rows] > start[rows])
    if not suspect.any():
        return rows
    drop = []
    for k in np.flatnonzero(suspect).tolist():
        i = int(rows[k])
        if bytes(data[start[i]:end[i]]).strip(b" \t\r\n") == b"null":
            reasons[i] = why
            drop.append(k)
    return np.delete(rows, drop) if drop else rows


def _inferred(data, start, end, rows, reasons, n, pj, pa):
    """Rows read with the type pyarrow's JSON reader infers: values that are
    not JSON objects fail their rows; the rest are read again together."""
    good = _read_in_place(data, start[rows], end[rows], rows, reasons, None, pj, pa) if len(rows) else None
    if good is None and len(rows):
        keep = []
        for k, i in enumerate(rows.tolist()):
            text = bytes(data[start[i]:end[i]])
            try:
                ok = isinstance(json.loads(text.decode("utf-8")), dict)
                why = None if ok else "a JSON value that is not an object"
            except (ValueError, UnicodeDecodeError) as exc:
                why = f"not JSON: {exc}"
            if why is None:
                keep.append(k)
            else:
                reasons[i] = why
        rows = rows[keep]
        good = _read([bytes(data[start[i]:end[i]]) for i in rows.tolist()], None, False, pj, pa) \
            if len(rows) else pa.array([], pa.struct([]))
        if good is None:
            raise SchemaError("JSON values whose types conflict from row to row (pyarrow's inference "
                              "cannot give them one type): decode them with a JSON Schema")
    if good is None:
        good = pa.array([], pa.struct([]))
    if len(rows) and readable_type(good.type, pa) != good.type:
        # the inference reads ISO-looking strings as timestamps (an offset
        # applied then dropped, a bare date as midnight): read them again as
        # the strings they are (a row equals json.loads of its value)
        target = readable_type(good.type, pa)
        again = _read_in_place(data, start[rows], end[rows], rows, reasons, target, pj, pa)
        if again is None:
            again = _read([bytes(data[start[i]:end[i]]) for i in rows.tolist()], target, False,
                          pj, pa)
        if again is None:
            raise SchemaError("JSON values whose strings pyarrow's inference reads as "
                              "timestamps could not be read as strings: decode them with a "
                              "JSON Schema")
        good = again
    if _big_integral_float(good, pa) and _long_integer(data, start[rows], end[rows]):
        raise SchemaError("an inferred JSON column reads an integer of 16 digits or more as a "
                          "double (a field holding fractions too), which rounds it: decode it "
                          "with a JSON Schema that types that field")
    index = np.full(n, -1, np.int64)
    index[rows] = np.arange(len(rows))
    index[np.array([r is not None for r in reasons], bool)] = -1
    if len(good) == n and (index >= 0).all():
        return good, reasons
    return good.take(pa.array(index, mask=index < 0)), reasons


def _big_integral_float(arr, pa) -> bool:
    """Whether a double column of ``arr`` (nested ones too) holds a whole
    number of 2**53 or more: an integer literal the inference may have
    rounded."""
    import pyarrow.compute as pc
    typ = arr.type
    if pa.types.is_floating(typ):
        big = pc.and_(pc.greater_equal(pc.abs(arr), 2.0 ** 53), pc.equal(pc.floor(arr), arr))
        return bool(pc.any(big).as_py())
    if pa.types.is_struct(typ):
        return any(_big_integral_float(arr.field(i), pa) for i in range(typ.num_fields))
    if pa.types.is_list(typ) or pa.types.is_large_list(typ):
        return _big_integral_float(arr.flatten(), pa)
    return False


_LONG_INTEGER = re.compile(rb"[:\[,\s]-?[0-9]{16,}(?![0-9.eE])")


def _long_integer(data, starts, ends) -> bool:
    """Whether a value holds an integer literal of 16 digits or more (more
    than a double keeps exactly; a digit run inside a string after a colon
    or comma counts too: the check errs on the side of refusing)."""
    if not len(starts):
        return False
    lo, hi = int(starts.min()), int(ends.max())
    return _LONG_INTEGER.search(memoryview(data[lo:hi]).cast("B")) is not None


def _read_in_place(data, starts, ends, rows, reasons, target, pj, pa):
    """The values of ``rows`` read as one newline-delimited body made from
    the data buffer itself (no copy per value), or None where the layout
    does not allow it (values out of order, touching or empty) or the reader
    fails (then the caller decides value by value).

    Each value's framing (at least one byte, as the values lie in a kbatch
    or pyarrow column) becomes ``"\\n"`` after spaces, so every value is one
    line; a raw CR or LF inside a value can only be whitespace in valid
    JSON, so it becomes a space, and such a value is checked alone by
    ``_strict_failure`` (a raw newline inside a string fails it; a failed
    one is read as ``{}`` and its reason recorded)."""
    if np.any(ends <= starts) or np.any(starts[1:] <= ends[:-1]):
        return None
    base = int(starts[0])
    size = int(ends[-1]) - base
    text = bytearray(memoryview(data[base:base + size]))    # the values (a copy) and a last "\\n"
    text.append(10)
    body = np.frombuffer(text, np.uint8)
    rel_s, rel_e = starts - base, ends - base
    failed = {}
    gap_len = rel_s[1:] - rel_e[:-1]
    if len(gap_len) and (gap_len == gap_len[0]).all():     # the framing between values: spaces
        body[(rel_e[:-1, None] + np.arange(int(gap_len[0]))).ravel()] = 32
    elif len(gap_len):
        first = np.repeat(rel_e[:-1], gap_len)
        step = np.arange(len(first)) - np.repeat(np.cumsum(gap_len) - gap_len, gap_len)
        body[first + step] = 32
    if text.find(b"\n", 0, size) >= 0 or text.find(b"\r", 0, size) >= 0:    # memchr: rare, then numpy
        raw_nl = np.flatnonzero((body[:-1] == 10) | (body[:-1] == 13))
        body[raw_nl] = 32
        owner = np.searchsorted(rel_s, raw_nl, side="right") - 1
        for k in np.unique(owner).tolist():
            why = _strict_failure(bytes(data[int(starts[k]):int(ends[k])]))
            if why is not None:
                if rel_e[k] - rel_s[k] < 2:
                    return None
                failed[int(rows[k])] = why
                body[rel_s[k]:rel_e[k]] = 32
                body[rel_s[k]:rel_s[k] + 2] = (123, 125)        # "{}" keeps the row's line
    body[rel_s[1:] - 1] = 10                                # one line per value
    readable = readable_type(target, pa) if target is not None else None
    try:
        table = pj.read_json(pa.py_buffer(text), parse_options=_parse_options(readable, pj, pa),
                             read_options=pj.ReadOptions(block_size=max(len(text), 1 << 20)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    if table.num_rows != len(rows):
        return None
    for i, why in failed.items():
        reasons[i] = why
    arr = table.to_struct_array()
    arr = arr.combine_chunks() if hasattr(arr, "combine_chunks") else arr
    try:
        return cast_read(arr, target, pa)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None                   # a value the type refuses (a date that is not one):
                                      # read them apart, to name it


def _strict_failure(text: bytes):
    """Why a value holding a raw CR or LF is not JSON (None if it is):
    outside strings they are whitespace, inside they are not allowed."""
    try:
        json.loads(text.decode("utf-8"))     # str: bytes would also take UTF-16 and a BOM
    except (ValueError, UnicodeDecodeError) as exc:
        return f"not JSON: {exc}"
    return None


def _read(texts: list, target, wrap: bool, pj, pa):
    if not texts:
        return pa.array([], target)
    body = b"\n".join((b'{"v":' + t.replace(b"\n", b" ").replace(b"\r", b" ") + b"}") if wrap
                      else t.replace(b"\n", b" ").replace(b"\r", b" ") for t in texts) + b"\n"
    readable = readable_type(target, pa) if target is not None else None
    try:
        table = pj.read_json(pa.py_buffer(body), parse_options=_parse_options(readable, pj, pa),
                             read_options=pj.ReadOptions(block_size=max(len(body), 1 << 20)))
        if table.num_rows != len(texts):
            return None
        arr = table.to_struct_array()
        arr = arr.combine_chunks() if hasattr(arr, "combine_chunks") else arr
        return cast_read(arr, target, pa)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def _parse_options(readable, pj, pa):
    if readable is None:                                    # inferred
        return pj.ParseOptions(newlines_in_values=False)
    return pj.ParseOptions(explicit_schema=pa.schema(list(readable)), unexpected_field_behavior="ignore",
                           newlines_in_values=False)


class JsonValues:
    """Keys or values that are plain JSON text (no Confluent framing, no
    registry): ``JsonValues().decode(column)`` gives a struct array whose
    type pyarrow's JSON reader infers from the values, or the type of
    ``schema`` (a JSON Schema, as a dict or its text). A decoder for
    ``Records.to_arrow(decode={"value": JsonValues()})``. Null or empty
    values are null rows; a value that is not a JSON object (or does not fit
    the schema) raises a ``PayloadError`` naming its offset, or with
    ``on_error="null"`` is a null row."""

    def __init__(self, schema=None):
        import pyarrow as pa

        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except ValueError as exc:
                raise SchemaError(f"a JSON Schema that is not JSON: {exc}") from None
        self.schema = schema
        self._plan = None if schema is None or says_nothing(schema) else arrow_type(schema, pa)
        self._nullable = schema is not None and accepts_null(schema)
        self.type = None if self._plan is None else public_type(self._plan, pa)

    def __repr__(self) -> str:
        return f"JsonValues({'inferred' if self.type is None else self.type})"

    def decode(self, column, *, offsets=None, on_error: str = "raise", with_errors: bool = False,
               header_ids=None, **_ignored):
        import pyarrow as pa

        from kbatch.payloads.column import error_column, rows_of

        if on_error not in ("raise", "null"):
            raise ValueError(f"on_error must be 'raise' or 'null', not {on_error!r}")
        rows = rows_of(column)
        start, end = rows.offsets[:-1], rows.offsets[1:]
        live = rows.valid & (end > start)
        array, reasons = decode(rows.data, start, end, live, self._plan, pa, self._nullable)
        if on_error == "raise" and reasons:
            i = min(reasons)
            raise PayloadError(reasons[i], offset=int(offsets[i]) if offsets is not None else None,
                               row=i)
        if not with_errors:
            return array
        return array, error_column(len(start), reasons)
