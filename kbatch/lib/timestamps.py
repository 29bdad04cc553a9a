"""Timestamp arguments (``start_timestamp``/``end_timestamp``) to Kafka's
milliseconds since the Unix epoch.

Accepted: an int (milliseconds; a numpy integer too), a ``datetime.datetime``
(naive ones are UTC, not local time), a ``datetime.date`` (its midnight,
UTC), a ``numpy.datetime64``, a ``pandas.Timestamp`` (naive: UTC), and a
string: decimal milliseconds or ISO 8601 (``2024-05-01T12:00:00Z``,
``2024-05-01 12:00:00+02:00``, ``2024-05-01``; no zone: UTC). Finer than a
millisecond is floored. Floats and bools are refused (seconds or
milliseconds? the caller must say).
"""

from __future__ import annotations

import datetime as _dt
import numbers

import numpy as np

from kbatch.wire import INT64_MAX, INT64_MIN
from kbatch.errors import ArgumentError

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_MS = _dt.timedelta(milliseconds=1)
_INT64_MIN, _INT64_MAX = INT64_MIN, INT64_MAX


def to_millis(value, name: str = "timestamp") -> int | None:
    """``value`` as int milliseconds since the epoch (None stays None);
    ``ArgumentError`` naming ``name`` for anything else."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)):
        raise ArgumentError(f"{name}: expected milliseconds, a datetime or an ISO 8601 "
                            f"string, not a bool")
    if isinstance(value, numbers.Integral):
        ms = int(value)
    elif isinstance(value, np.datetime64):
        if np.isnat(value):
            raise ArgumentError(f"{name}: NaT is not a time")
        ms = int(value.astype("datetime64[ms]").astype(np.int64))
    elif isinstance(value, _dt.datetime):
        if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        try:
            ms = int((value - _EPOCH) // _MS)
        except (TypeError, ValueError) as exc:  # pandas.NaT
            raise ArgumentError(f"{name}: {value!r} is not a time") from exc
    elif isinstance(value, _dt.date):
        ms = int((_dt.datetime(value.year, value.month, value.day, tzinfo=_dt.timezone.utc)
                  - _EPOCH) // _MS)
    elif isinstance(value, str):
        ms = _parse_text(value.strip(), name)
    else:
        raise ArgumentError(f"{name}: expected int milliseconds, a datetime, numpy.datetime64, "
                            f"pandas.Timestamp or an ISO 8601 string, not "
                            f"{type(value).__name__}")
    if not _INT64_MIN <= ms <= _INT64_MAX:
        raise ArgumentError(f"{name}: {ms} ms is out of range")
    return ms


def _parse_text(text: str, name: str) -> int:
    if text.lstrip("-").isdigit() and text.isascii():
        return int(text)
    try:
        parsed = _dt.datetime.fromisoformat(text)
    except ValueError:
        raise ArgumentError(f"{name}: {text!r} is neither milliseconds nor an ISO 8601 "
                            f"date/time (e.g. 2024-05-01T12:00:00Z)") from None
    return to_millis(parsed, name)
