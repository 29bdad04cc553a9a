"""Reading JSON values where pyarrow's JSON reader cannot (for
``kbatch.payloads.json_decode``): each value parsed by json.loads with its
numbers kept as written, converted to the reader's Arrow type in Python
(an integer written ``1.0``, a field held as its JSON text); dates and
date-times read as strings and cast, after an RFC 3339 check; a UTF-8 byte
order mark before a value skipped.
"""

from __future__ import annotations

import json

import numpy as np

from kbatch.payloads.json_schema import is_text, public_type

def readable_type(t, pa):
    """``t`` as pyarrow's JSON reader can fill it: dates and date-times read
    as strings, cast after (the reader takes a date-time without a UTC
    offset as UTC; the cast refuses it, as RFC 3339 does: the row fails)."""
    if pa.types.is_date32(t) or pa.types.is_timestamp(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, readable_type(f.type, pa)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(readable_type(t.value_type, pa))
    return t


# RFC 3339 (section 5.6) date-time: seconds and a Z or +-HH:MM offset are
# required (pyarrow's cast also takes 10:00Z, 10Z and +0200); a space for
# the T as section 5.6's note allows, upper-case T and Z only, as the
# compiled decoder
_RFC3339_DATE_TIME = (r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
                      r"(Z|[+-][0-9]{2}:[0-9]{2})$")


def cast_read(arr, target, pa):
    """``arr`` (read as ``readable_type(target)``) cast to ``target``; raises
    ArrowInvalid for a date or date-time the type refuses, as the cast
    does, and for a date-time that is not RFC 3339's (``_check_times``)."""
    if target is None or readable_type(target, pa) == target:
        return arr
    _check_times(arr, target, pa)
    return arr.cast(target)


def _check_times(arr, t, pa) -> None:
    """Raises ArrowInvalid when a string of ``arr`` read for a date-time of
    ``t`` (at any depth) is not an RFC 3339 date-time."""
    import pyarrow.compute as pc
    if pa.types.is_timestamp(t):
        if arr.null_count < len(arr):
            ok = pc.match_substring_regex(arr, _RFC3339_DATE_TIME)
            if not pc.all(ok).as_py():
                raise pa.ArrowInvalid("a date-time that is not RFC 3339's (seconds and a Z "
                                      "or +-HH:MM offset)")
    elif pa.types.is_struct(t):
        for child, field in zip(arr.flatten(), t):
            _check_times(child, field.type, pa)
    elif pa.types.is_list(t):
        _check_times(arr.flatten(), t.value_type, pa)


_BOM = (0xEF, 0xBB, 0xBF)


def after_bom(data, start, end, live) -> np.ndarray:
    """``start`` past a UTF-8 byte order mark that begins a live value.
    RFC 8259 (8.1) lets a parser ignore one (a writer must not add it);
    Python's json.loads of bytes does, and pyarrow's reader does at the
    start of its buffer only, so every value is read without it."""
    rows = np.flatnonzero(live & (end - start >= 3))
    if not len(rows):
        return start
    at = np.asarray(data)
    s = start[rows]
    bom = (at[s] == _BOM[0]) & (at[s + 1] == _BOM[1]) & (at[s + 2] == _BOM[2])
    if not bom.any():
        return start
    start = start.copy()
    start[rows[bom]] += 3
    return start


class _Number(str):
    """A JSON number as json.loads met it: its literal text."""


class _Pairs(list):
    """A JSON object as json.loads met it: its (key, value) pairs, in order
    (a repeated key kept)."""


class _Misfit(ValueError):
    """A value that is not JSON or not of the reader's type: the reason."""


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def _loads(text: bytes):
    """The JSON value of ``text`` (UTF-8) with objects as ``_Pairs`` and
    numbers as ``_Number``; ``_Misfit`` when it is not JSON (NaN and
    Infinity, which json.loads takes, included)."""
    try:
        return json.loads(text.decode("utf-8"), object_pairs_hook=_Pairs, parse_int=_Number,
                          parse_float=_Number, parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _Misfit(f"not JSON: {exc}") from None
    except RecursionError:
        raise _Misfit("not read: a JSON value nested too deeply") from None


def python_read(texts: list, target, wrap: bool, pa):
    """(an array of ``public_type(target)`` of the ``texts`` that are
    values of ``target``, in order; a reason per text, None for those):
    each value parsed by json.loads and converted by ``_value``, where
    pyarrow's JSON reader cannot go (JSON text fields, an integer written
    ``1.0``). Dates and date-times are cast as the reader's are."""
    public = public_type(target, pa)
    readable = readable_type(public, pa)
    values, reasons = [], []
    for text in texts:
        try:
            value = _loads(text)
            if wrap:
                value = {"v": _value(value, target.field(0).type, pa, "")}
            elif not isinstance(value, _Pairs):
                raise _Misfit("a JSON value that is not an object")
            else:
                value = _value(value, target, pa, "")
        except _Misfit as exc:
            reasons.append(str(exc))
            continue
        except RecursionError:
            reasons.append("not read: a JSON value nested too deeply")
            continue
        values.append(value)
        reasons.append(None)
    try:
        return cast_read(pa.array(values, readable), public, pa), reasons
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        pass
    kept, k = [], 0                   # a date or date-time the type refuses: each alone
    for j, why in enumerate(reasons):
        if why is not None:
            continue
        try:
            kept.append(cast_read(pa.array([values[k]], readable), public, pa))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            reasons[j] = ("a JSON value whose types do not fit the reader's schema "
                          "(a date or date-time that is not one)")
        k += 1
    return (pa.concat_arrays(kept) if kept else pa.array([], public)), reasons


def _misfit(where: str, x, what: str) -> _Misfit:
    return _Misfit(f"a JSON value whose types do not fit the reader's schema ({where or 'the value'}: "
                   f"{_text(x)[:40]} is not {what})")


def _value(x, t, pa, where: str):
    """The Python value that JSON value ``x`` (as ``_loads`` gives it) is
    in Arrow type ``t`` (dates and date-times as their strings); raises
    ``_Misfit`` when it is not one. Null is null; a JSON text field holds
    ``_text(x)``; an integer is any number whose value is a whole number
    within int64 (JSON Schema from draft 6: ``1.0`` and ``1e2`` are
    integers); an object with a repeated key fails, as pyarrow's reader
    fails it."""
    if x is None:
        return None
    if is_text(t):
        return _text(x)
    if pa.types.is_struct(t):
        if not isinstance(x, _Pairs):
            raise _misfit(where, x, "an object")
        members = dict(x)
        if len(members) != len(x):
            raise _misfit(where, x, "an object without a repeated key")
        return {f.name: _value(members.get(f.name), f.type, pa,
                                   f"{where}.{f.name}" if where else f.name) for f in t}
    if pa.types.is_list(t):
        if not isinstance(x, list) or isinstance(x, _Pairs):
            raise _misfit(where, x, "an array")
        return [_value(v, t.value_type, pa, f"{where}[{k}]") for k, v in enumerate(x)]
    if isinstance(x, _Number):
        if t == pa.int64():
            return _integer(x, where)
        if t == pa.float64():
            value = float(x)
            if value - value != 0:
                raise _misfit(where, x, "a number within the double range")
            return value
    elif isinstance(x, bool):
        if t == pa.bool_():
            return x
    elif isinstance(x, str):
        if pa.types.is_string(t) or pa.types.is_date32(t) or pa.types.is_timestamp(t):
            try:
                x.encode("utf-8")
            except UnicodeEncodeError:
                raise _misfit(where, x, "Unicode text (a lone surrogate escape)") from None
            return x
    raise _misfit(where, x, "a string" if pa.types.is_string(t) else
                  "a date string" if pa.types.is_date32(t) else
                  "a date-time string" if pa.types.is_timestamp(t) else
                  {"int64": "an integer", "double": "a number", "bool": "a boolean",
                   "null": "null"}.get(str(t), str(t)))


def _integer(literal: str, where: str) -> int:
    """A JSON number literal as an int64, when its value is a whole number
    in range (read exactly, as a decimal: ``1.0000000000000001`` is not)."""
    from decimal import Decimal
    value = Decimal(literal)
    if not -(1 << 63) <= value < (1 << 63):
        raise _misfit(where, _Number(literal), "an integer within int64")
    _sign, digits, exponent = value.as_tuple()
    if exponent < 0 and any(digits[exponent:]):
        raise _misfit(where, _Number(literal), "an integer")
    return int(value)


def _text(x) -> str:
    """The JSON text of a value as ``_loads`` gives it: no whitespace,
    members in the writer's order (a repeated key kept), numbers as the
    writer wrote them, strings as json.dumps writes them (UTF-8, not
    \\u escapes, unless a lone surrogate needs one)."""
    if isinstance(x, _Pairs):
        return "{" + ",".join(_string(k) + ":" + _text(v) for k, v in x) + "}"
    if isinstance(x, list):
        return "[" + ",".join(_text(v) for v in x) + "]"
    if isinstance(x, _Number):
        return str.__str__(x)
    if isinstance(x, str):
        return _string(x)
    return json.dumps(x)


def _string(s: str) -> str:
    text = json.dumps(s, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:          # a lone surrogate: its \\u escape
        text = json.dumps(s)
    return text
