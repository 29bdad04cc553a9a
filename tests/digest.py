"""The corpus digest recipe (shared/corpus/README.md), over plain Python values.

sha256 over every data record in file order of: >q offset, >q timestamp,
>b timestamp type, key and value as >i length (-1 null) + bytes, >i header
count, then per header key >i length + UTF-8 bytes, value >i length (-1 null)
+ bytes.
"""

import hashlib
import struct


def _blob(h, b):
    if b is None:
        h.update(struct.pack(">i", -1))
    else:
        h.update(struct.pack(">i", len(b)))
        h.update(b)


def digest(rows) -> str:
    """``rows``: iterable of (offset, timestamp, timestamp_type, key, value, headers)."""
    h = hashlib.sha256()
    for offset, timestamp, ts_type, key, value, headers in rows:
        h.update(struct.pack(">qqb", offset, timestamp, ts_type))
        _blob(h, key)
        _blob(h, value)
        h.update(struct.pack(">i", len(headers)))
        for k, v in headers:
            _blob(h, k.encode("utf-8"))
            _blob(h, v)
    return h.hexdigest()
