"""Where remote bytes come from: fsspec URLs and bounded, retried range reads.

A path is remote when it is a URL (``s3://``, ``gs://``, ``abfs://``,
``hdfs://``, ``memory://``, ``file://``, anything fsspec knows) or when a
filesystem object is given. ``RangeSource`` serves byte ranges of one object:

    read(start, stop)          one ranged GET (retried), exactly stop - start bytes
    blocks(start, stop, ...)   consecutive ranges, a first small one, then
                               ``block`` bytes each, up to ``concurrency``
                               in flight: memory is bounded by
                               ``concurrency * block``; no byte is read twice

Transient failures (throttling, 5xx, connection resets, short reads) are
retried ``retries`` times with exponential backoff capped at ``max_backoff``
seconds (plus a little jitter); what is left becomes a ``RemoteError``. A
missing object is a ``RemoteError`` at once. Every read has a timeout
(fsspec's own for the protocol; s3fs: ``storage_options`` ``config_kwargs``),
so nothing hangs.
"""

from __future__ import annotations

import os
import random
import re
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

from kbatch.errors import CorruptRecordError, KbatchError

DEFAULT_BLOCK = 8 << 20        # one ranged GET of a scan
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
FIRST_BLOCK = 1 << 20          # the first GET after a seek (often all a seek needs)
DEFAULT_CONCURRENCY = 4


class RemoteError(KbatchError, OSError):
    """An object that cannot be read: missing, refused, or still failing
    after the retries. ``url`` names it."""

    def __init__(self, message: str, *, url: str | None = None):
        self.url = url
        super().__init__(f"{url}: {message}" if url else message)

    def __reduce__(self):   # picklable, for Spark executors
        return (_rebuild, (str(self), None))


def _rebuild(message, url):
    return RemoteError(message, url=url)


def is_url(path) -> bool:
    """True for ``scheme://...`` strings (not for local paths)."""
    return isinstance(path, str) and _URL.match(path) is not None


def _fsspec():
    try:
        import fsspec
    except ImportError:
        raise KbatchError("reading URLs needs fsspec, which is not installed: "
                          "pip install 'kbatch[remote]'") from None
    return fsspec


def resolve(path, storage_options: dict | None = None, filesystem=None):
    """``(filesystem, path inside it, url for messages)``.

    ``filesystem``: an fsspec filesystem object (then ``path`` is a path in
    it). Otherwise ``path`` is a URL and ``storage_options`` go to its
    filesystem (``{"endpoint_url": ..., "key": ...}`` for s3fs and so on).
    """
    if filesystem is not None:
        if storage_options:
            raise KbatchError("give storage_options or a filesystem object, not both")
        stripped = filesystem._strip_protocol(os.fspath(path)) if isinstance(
            path, (str, os.PathLike)) else path
        proto = filesystem.protocol[0] if isinstance(filesystem.protocol, (tuple, list)) \
            else filesystem.protocol
        return filesystem, stripped, f"{proto}://{stripped}"
    if not isinstance(path, str) or "://" not in path:
        raise KbatchError(f"{path!r} is not a URL (expected scheme://...)")
    fsspec = _fsspec()
    try:
        fs, stripped = fsspec.core.url_to_fs(path, **(storage_options or {}))
    except (ImportError, ValueError) as exc:
        raise KbatchError(f"{path}: cannot open this URL: {exc} (the filesystem for "
                          f"{path.split('://', 1)[0]}:// may need a package: "
                          "pip install 'kbatch[remote]' has s3fs)") from None
    return fs, stripped, path.rstrip("/")


def _transient(exc: BaseException) -> bool:
    """Worth retrying: throttling, 5xx, timeouts, resets, short reads."""
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError)):
        return False
    if isinstance(exc, (TimeoutError, ConnectionError, _ShortRead)):
        return True
    text = f"{type(exc).__name__} {exc}".lower()
    return any(word in text for word in (
        "slowdown", "throttl", "503", "500", "502", "504", "internalerror",
        "serviceunavailable", "timeout", "timed out", "connection", "reset",
        "temporar", "incomplete", "toomanyrequests", "429", "payload", "request rate",
        "errno 16"))


class _ShortRead(Exception):
    pass


class RangeSource:
    """Byte ranges of one remote object (see the module docstring).

    ``size``: the object's size when the caller knows it from a listing
    (no request then); otherwise one metadata request finds it.
    """

    def __init__(self, fs, path: str, *, url: str | None = None, size: int | None = None,
                 retries: int = 5, backoff: float = 0.1, max_backoff: float = 2.0,
                 block: int = DEFAULT_BLOCK, concurrency: int = DEFAULT_CONCURRENCY):
        self.fs = fs
        self.path = path
        self.url = url or path
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.block = max(int(block), 1 << 16)
        self.concurrency = max(int(concurrency), 1)
        self._size = size
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RangeSource({self.url!r})"

    def _retrying(self, what: str, call):
        delay = self.backoff
        for attempt in range(self.retries + 1):
            try:
                return call()
            except KbatchError:
                raise
            except Exception as exc:   # noqa: BLE001 - every failure becomes a RemoteError
                if isinstance(exc, FileNotFoundError):
                    raise RemoteError(f"no such object ({what})", url=self.url) from None
                if isinstance(exc, PermissionError):
                    raise RemoteError(f"access denied ({what}): {exc}", url=self.url) from None
                if not _transient(exc) or attempt == self.retries:
                    tries = f" after {attempt + 1} attempts" if attempt else ""
                    raise RemoteError(f"{what} failed{tries}: {type(exc).__name__}: "
                                      f"{exc}", url=self.url) from None
                time.sleep(min(delay, self.max_backoff) * (1 + random.random() / 4))
                delay *= 2
        raise AssertionError("unreachable")

    @property
    def size(self) -> int:
        with self._lock:
            if self._size is None:
                info = self._retrying("stat", lambda: self.fs.info(self.path))
                if info.get("type") == "directory":
                    raise RemoteError("is a directory, not an object", url=self.url)
                self._size = int(info["size"])
            return self._size

    def read(self, start: int, stop: int) -> bytes:
        """Bytes ``[start, stop)`` (clipped to the object): one ranged GET,
        retried; an object shorter than its known size is a
        ``CorruptRecordError`` (truncated) once the retries agree."""
        stop = min(stop, self.size)
        if stop <= start:
            return b""

        def get():
            data = self.fs.cat_file(self.path, start=start, end=stop)
            if len(data) != stop - start:
                raise _ShortRead(f"{len(data)} bytes instead of {stop - start}")
            return data
        try:
            return self._retrying(f"read of bytes {start}-{stop}", get)
        except RemoteError as exc:
            if "_ShortRead" in str(exc):
                raise CorruptRecordError(
                    f"object shorter than its listed size {self.size}: a read of bytes "
                    f"{start}-{stop} returned less (truncated or replaced object)",
                    path=self.url, position=start) from None
            raise

    def ranges(self, start: int, stop: int, first: int = FIRST_BLOCK):
        """The ``(start, stop)`` pieces ``blocks`` reads."""
        stop = min(stop, self.size)
        out, pos, step = [], start, min(first, self.block)
        while pos < stop:
            end = min(pos + step, stop)
            out.append((pos, end))
            pos, step = end, self.block
        return out

    def blocks(self, start: int = 0, stop: int | None = None, *,
               first: int = FIRST_BLOCK) -> Iterator[tuple[int, bytes]]:
        """``(position, bytes)`` of consecutive ranges covering ``[start, stop)``.

        The first range (``first`` bytes) is read alone: a short read after
        a seek costs one GET. Later ranges are read ``concurrency`` at a
        time ahead of the consumer. Keeps in memory at most
        ``concurrency`` blocks; closing the generator stops the reads.
        """
        pieces = self.ranges(start, self.size if stop is None else stop, first)
        if not pieces:
            return
        yield pieces[0][0], self.read(*pieces[0])
        rest = pieces[1:]
        if not rest:
            return
        if self.concurrency == 1:
            for a, b in rest:
                yield a, self.read(a, b)
            return
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="kbatch-range")
        pending: deque = deque()
        try:
            it = iter(rest)
            for a, b in it:
                pending.append((a, pool.submit(self.read, a, b)))
                if len(pending) >= self.concurrency:
                    break
            while pending:
                a, fut = pending.popleft()
                data = fut.result()
                nxt = next(it, None)
                if nxt is not None:
                    pending.append((nxt[0], pool.submit(self.read, *nxt)))
                yield a, data
                del data
        finally:
            for _, fut in pending:
                fut.cancel()
            pool.shutdown(wait=True, cancel_futures=True)
