"""Object storage: fsspec filesystems, and bounded, retried reads of objects.

The door (``kbatch.lib.open``) decides what is remote (a URL other than
``file://``, or a path with a filesystem object) and builds its
filesystem here. ``RangeSource`` serves byte ranges of one object:

    read(start, stop)          one ranged GET (retried), exactly stop - start bytes
    blocks(start, stop, ...)   consecutive ranges, a first small one, then
                               ``block`` bytes each, up to ``concurrency``
                               in flight: memory is bounded by
                               ``concurrency * block``; no byte is read twice

Every request (listings and metadata too, ``Retrier``) is retried on
transient failures (throttling, 5xx, connection resets, short reads)
``retries`` times with exponential backoff capped at ``max_backoff``
seconds (plus a little jitter), each retry logged on the ``kbatch.remote``
logger; what is left becomes a ``RemoteError``: "cannot reach endpoint X
(after N attempts over S s)" when no connection could be made. A missing
object is a ``MissingObjectError`` (also a ``FileNotFoundError``) at once
(a read of whole partitions whose listed object was deleted since, by
retention or the cleaner, lists the partition again: ``kbatch.lib.relist``;
a chunked read raises it).
Every read has a timeout (fsspec's own for the protocol; s3fs:
``storage_options`` ``config_kwargs``), so nothing hangs.

A read never mixes two versions of an object. ``RangeSource`` is the
object as listed (``identity``: its size and ETag, or the store's
modification time where it gives no ETag: ``object_identity``). On s3fs
every ranged GET is pinned to the listed ETag (``If-Match``: S3 answers
412 once the object was overwritten, and no byte of another version is
read); on every store ``confirm()``, one HEAD once a read's bytes of the
object are in hand (``kbatch.lib.sources``: once per segment read, not
per range), checks that the object is still the one listed. An object
that changed is a ``FileChangedError`` (a ``CorruptRecordError``) naming
it ("truncated or replaced object"), and so is one found shorter than
listed when a HEAD says it changed (a store without pinned GETs). A read
of whole partitions then lists the partition again and reads it as it is
now, at most three times (``kbatch.lib.relist``: the common case is a sync
uploading the active segment again after appends); a chunked read
(``iter``) raises it: open the log again to read the object as it is now.
A segment pickled to another process (a Spark executor) is pinned there
to the object as that process first finds it (``RangeSource.pin``: one
HEAD more): what a change since planning means is the planner's to say
(``kbatch.spark.planned``: Spark reads the planned bytes of an object
uploaded again after appends, and refuses other bytes at the planned
positions).
"""

from __future__ import annotations

import datetime
import logging
import random
import re
import sys
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

from kbatch.errors import CorruptRecordError, FileChangedError, KbatchError
from kbatch.lib.storage import DEFAULT_BLOCK, DEFAULT_CONCURRENCY, DEFAULT_RETRIES

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
FIRST_BLOCK = 1 << 20          # the first GET after a seek (often all a seek needs)
log = logging.getLogger("kbatch.remote")


class RemoteError(KbatchError, OSError):
    """An object or prefix that cannot be read: refused, unreachable, or
    still failing after the retries. ``url`` names it."""

    def __init__(self, message: str, *, url: str | None = None):
        self.url = url
        super().__init__(f"{url}: {message}" if url else message)

    def __reduce__(self):   # picklable, for Spark executors
        return (_rebuild, (type(self), str(self)))


class MissingObjectError(RemoteError, FileNotFoundError):
    """An object that is not there (deleted, or never written)."""


def _rebuild(cls, message):
    return cls(message)


def is_url(target) -> bool:
    """True for ``scheme://...`` strings (not for local paths)."""
    return isinstance(target, str) and _URL.match(target) is not None


def _fsspec():
    try:
        import fsspec
    except ImportError:
        raise KbatchError("reading URLs needs fsspec, which is not installed: "
                          "pip install 'kbatch-kafka[remote]'") from None
    return fsspec


def filesystem_of(url: str, storage_options: dict):
    """``(filesystem, path inside it)`` of a URL (``storage_options`` go to
    the filesystem: ``{"endpoint_url": ..., "key": ...}`` for s3fs). The
    error names the URL and the scheme, never an option's value."""
    fsspec = _fsspec()
    try:
        fs, stripped = fsspec.core.url_to_fs(url, **storage_options)
    except (ImportError, ValueError, TypeError) as exc:
        scheme = url.split("://", 1)[0]
        raise KbatchError(f"{url}: cannot open this URL: {type(exc).__name__} (the "
                          f"filesystem for {scheme}:// may need a package: pip install "
                          "'kbatch-kafka[remote]' has s3fs; or a storage option it does not "
                          "take)") from None
    return fs, stripped


def protocol_of(fs) -> str:
    proto = fs.protocol
    return proto[0] if isinstance(proto, (tuple, list)) else proto


def endpoint_of(fs) -> str:
    """Where a filesystem's requests go, for messages (an S3 endpoint URL,
    else the protocol)."""
    for attr in ("endpoint_url",):
        value = getattr(fs, attr, None)
        if isinstance(value, str) and value:
            return value
    kwargs = getattr(fs, "client_kwargs", None) or {}
    if isinstance(kwargs, dict) and isinstance(kwargs.get("endpoint_url"), str):
        return kwargs["endpoint_url"]
    return f"{protocol_of(fs)}://"


def object_identity(info: dict) -> tuple:
    """``(size, kind, tag)``: what tells an object from another one written
    at the same key, the same whether a listing or a HEAD gave ``info``:
    its ETag, unquoted (``kind`` "etag": S3, GCS, Azure), else its
    modification or creation time in microseconds ("time": memory://...),
    else nothing (the size alone)."""
    size = int(info.get("size") or 0)
    etag = str(info.get("ETag") or info.get("etag") or "").strip('"')
    if etag:
        return size, "etag", etag
    for key in ("LastModified", "last_modified", "mtime", "modified", "created"):
        value = info.get(key)
        if isinstance(value, datetime.datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=datetime.timezone.utc)
            epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
            return size, "time", (value - epoch) // datetime.timedelta(microseconds=1)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return size, "time", round(value * 1e6)
    return size, "", None


def _pins_etags(fs) -> bool:
    """Whether ranged GETs of ``fs`` can name the ETag they expect (s3fs)."""
    s3fs = sys.modules.get("s3fs")
    return s3fs is not None and isinstance(fs, s3fs.S3FileSystem)


async def _s3_range(fs, path: str, start: int, stop: int, etag: str) -> bytes:
    """Bytes ``[start, stop)`` of an s3fs object, answered only while its
    ETag is ``etag`` (If-Match; else 412 PreconditionFailed): s3fs's own
    ranged GET (``_cat_file``) with the condition added."""
    bucket, key, version_id = fs.split_path(path)
    version = {"VersionId": version_id} if version_id else {}
    resp = await fs._call_s3("get_object", Bucket=bucket, Key=key,
                             Range=f"bytes={start}-{stop - 1}", IfMatch=f'"{etag}"', **version)
    try:
        return await resp["Body"].read()
    finally:
        resp["Body"].close()


def _precondition_failed(exc: BaseException) -> bool:
    """A 412: the object's ETag is no longer the one a GET named."""
    for e in (exc, exc.__cause__):
        response = getattr(e, "response", None)
        if isinstance(response, dict) and (
                response.get("Error", {}).get("Code") == "PreconditionFailed"
                or response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 412):
            return True
    return False


class _Replaced(KbatchError):
    """A pinned GET refused: the object changed (never retried)."""


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


_UNREACHABLE = ("could not connect", "connection refused", "name or service not known",
                "temporary failure in name resolution", "endpointconnectionerror",
                "cannot connect", "connecttimeout", "no route to host", "nodename nor servname")


def _unreachable(exc: BaseException) -> bool:
    """No connection could be made (as opposed to a request that failed)."""
    text = f"{type(exc).__name__} {exc}".lower()
    return isinstance(exc, ConnectionRefusedError) or any(w in text for w in _UNREACHABLE)


class Retrier:
    """Runs one kind of request against ``url`` with the retry rule of the
    module docstring. ``endpoint``: where requests go, for the message
    when none could be made."""

    def __init__(self, url: str, *, retries: int = DEFAULT_RETRIES, endpoint: str | None = None,
                 backoff: float = 0.1, max_backoff: float = 2.0):
        self.url = url
        self.retries = retries
        self.endpoint = endpoint
        self.backoff = backoff
        self.max_backoff = max_backoff

    def __call__(self, what: str, call):
        delay = self.backoff
        began = time.monotonic()
        for attempt in range(self.retries + 1):
            try:
                return call()
            except KbatchError:
                raise
            except Exception as exc:   # noqa: BLE001 - every failure becomes a RemoteError
                if isinstance(exc, FileNotFoundError):
                    raise MissingObjectError(f"no such object ({what})", url=self.url) from None
                if isinstance(exc, (PermissionError, IsADirectoryError, NotADirectoryError)):
                    why = "access denied" if isinstance(exc, PermissionError) else "not readable"
                    raise RemoteError(f"{why} ({what}): {type(exc).__name__}",
                                      url=self.url) from None
                if not _transient(exc) or attempt == self.retries:
                    spent = time.monotonic() - began
                    tries = f"after {attempt + 1} attempt{'s' if attempt else ''} over " \
                            f"{spent:.1f} s"
                    if _unreachable(exc):
                        where = self.endpoint or self.url
                        raise RemoteError(f"cannot reach endpoint {where} ({tries}): "
                                          f"{type(exc).__name__}", url=self.url) from None
                    failed = RemoteError(f"{what} failed ({tries}): {type(exc).__name__}: "
                                         f"{exc}", url=self.url)
                    failed.cause_type = type(exc)
                    raise failed from None
                log.warning("%s of %s failed (%s), retrying (%d of %d)", what, self.url,
                            type(exc).__name__, attempt + 1, self.retries)
                time.sleep(min(delay, self.max_backoff) * (1 + random.random() / 4))
                delay *= 2
        raise AssertionError("unreachable")


class RangeSource:
    """Byte ranges of one remote object (see the module docstring).

    ``size``: the object's size when the caller knows it from a listing
    (no request then); otherwise one metadata request finds it.
    ``identity``: the object as listed (``object_identity``), what GETs
    are pinned to and ``confirm`` checks. None: ``pinned``, to the object
    as one metadata request before the first GET finds it (a segment no
    listing of this process named), else not pinned (an index object,
    whose entries are checked before use).
    """

    def __init__(self, fs, path: str, *, url: str | None = None, size: int | None = None,
                 identity: tuple | None = None, pinned: bool = False,
                 retries: int = DEFAULT_RETRIES, backoff: float = 0.1, max_backoff: float = 2.0,
                 block: int = DEFAULT_BLOCK, concurrency: int = DEFAULT_CONCURRENCY,
                 endpoint: str | None = None):
        self.fs = fs
        self.path = path
        self.url = url or path
        self.block = max(int(block), 1 << 16)
        self.concurrency = max(int(concurrency), 1)
        self._size = size
        self.identity = identity
        self.pinned = pinned or identity is not None
        self._lock = threading.Lock()
        self._retrying = Retrier(self.url, retries=retries, backoff=backoff,
                                 max_backoff=max_backoff,
                                 endpoint=endpoint or endpoint_of(fs))

    def __repr__(self) -> str:
        return f"RangeSource({self.url!r})"

    @property
    def size(self) -> int:
        with self._lock:
            if self._size is None:
                info = self._info()
                if info.get("type") == "directory":
                    raise RemoteError("is a directory, not an object", url=self.url)
                self._size = int(info["size"])
                if self.pinned and self.identity is None:
                    self.identity = object_identity(info)
            return self._size

    def pin(self) -> tuple:
        """The identity reads are pinned to: the object as listed, or for a
        ``pinned`` source listed without one, the object as it is now (one
        HEAD, the first time)."""
        with self._lock:
            if self.identity is None:
                self.identity = object_identity(self._info())
            return self.identity

    def _info(self) -> dict:
        """The object's metadata as the store has it now (a HEAD)."""
        try:
            self.fs.invalidate_cache(self.path)
        except Exception:     # noqa: BLE001 - a filesystem without a cache
            pass
        return self._retrying("stat", lambda: self.fs.info(self.path))

    def confirm(self) -> None:
        """One HEAD: the object is still the one listed, else the
        ``CorruptRecordError`` of a replaced object (see the module
        docstring). A read calls it once its bytes are in hand."""
        self.pin()
        now = object_identity(self._info())
        if now != self.identity:
            raise self._replaced(now)

    def _replaced(self, now: tuple | None = None) -> CorruptRecordError:
        """The error of an object that is no longer the one listed (``now``:
        its identity as found, else asked for)."""
        size, kind, tag = self.identity
        if now is None:
            try:
                now = object_identity(self._info())
            except RemoteError:
                pass
        if now is not None and now[0] < size:
            what = f"object shorter than its listed size {size} (now {now[0]} bytes)"
        else:
            listed = f"{size} bytes" + (f", ETag {tag}" if kind == "etag" else "")
            found = "" if now is None else f"; now {now[0]} bytes" + (
                f", ETag {now[2]}" if now[1] == "etag" else "")
            what = f"object changed since it was listed ({listed}{found})"
        return FileChangedError(f"{what}: truncated or replaced object (open it again to "
                                "read it as it is now)", path=self.url)

    def _get(self, start: int, stop: int) -> bytes:
        """One ranged GET, pinned to the listed ETag where the store allows."""
        if self.pinned:
            self.pin()
        kind, etag = self.identity[1:] if self.identity else (None, None)
        if kind != "etag" or not _pins_etags(self.fs):
            return self.fs.cat_file(self.path, start=start, end=stop)
        from fsspec.asyn import sync
        try:
            return sync(self.fs.loop, _s3_range, self.fs, self.path, start, stop, etag)
        except OSError as exc:
            if _precondition_failed(exc):
                raise _Replaced() from None
            raise

    def read(self, start: int, stop: int) -> bytes:
        """Bytes ``[start, stop)`` (clipped to the object): one ranged GET,
        retried; an object shorter than its known size, or (pinned GETs)
        no longer the one listed, is a ``CorruptRecordError`` (truncated or
        replaced) once the retries agree."""
        stop = min(stop, self.size)
        if stop <= start:
            return b""

        def get():
            data = self._get(start, stop)
            if len(data) != stop - start:
                raise _ShortRead(f"{len(data)} bytes instead of {stop - start}")
            return data
        try:
            return self._retrying(f"read of bytes {start}-{stop}", get)
        except _Replaced:
            raise self._replaced() from None
        except RemoteError as exc:
            if getattr(exc, "cause_type", None) is _ShortRead:
                raise self._shorter(start, stop) from None
            raise

    def _shorter(self, start: int, stop: int) -> CorruptRecordError:
        """The error of a read of ``[start, stop)`` that kept returning less:
        a ``FileChangedError`` when one HEAD finds the object is no longer
        the one listed (a store that cannot pin GETs), else the object's
        own damage."""
        if self.identity is not None:
            try:
                now = object_identity(self._info())
            except RemoteError:
                now = None
            if now is not None and now != self.identity:
                return self._replaced(now)
        return CorruptRecordError(
            f"object shorter than its listed size {self.size}: a read of bytes "
            f"{start}-{stop} returned less (truncated or replaced object)",
            path=self.url, position=start)

    def ranges(self, start: int, stop: int, first: int = FIRST_BLOCK):
        """The ``(start, stop)`` pieces ``blocks`` reads, one at a time (never
        a list: an object claiming an enormous size costs nothing up front)."""
        stop = min(stop, self.size)
        pos, step = start, min(first, self.block)
        while pos < stop:
            end = min(pos + step, stop)
            yield pos, end
            pos, step = end, self.block

    def blocks(self, start: int = 0, stop: int | None = None, *,
               first: int = FIRST_BLOCK) -> Iterator[tuple[int, bytes]]:
        """``(position, bytes)`` of consecutive ranges covering ``[start, stop)``.

        The first range (``first`` bytes) is read alone: a short read after
        a seek costs one GET. Later ranges are read ``concurrency`` at a
        time ahead of the consumer. Keeps in memory at most
        ``concurrency`` blocks; closing the generator stops the reads.
        """
        pieces = self.ranges(start, self.size if stop is None else stop, first)
        head = next(pieces, None)
        if head is None:
            return
        yield head[0], self.read(*head)
        yield from read_ahead(pieces, self.read, self.concurrency, "kbatch-range")


def read_ahead(pieces, read, concurrency: int, name: str) -> Iterator[tuple[int, bytes]]:
    """``(start, read(start, stop))`` of each piece of the iterator
    ``pieces``, in order, with up to ``concurrency`` reads in flight ahead of
    the consumer; closing the generator cancels what is in flight."""
    if concurrency <= 1:
        for a, b in pieces:
            yield a, read(a, b)
        return
    pool = ThreadPoolExecutor(concurrency, thread_name_prefix=name)
    pending: deque = deque()
    try:
        for a, b in pieces:
            pending.append((a, pool.submit(read, a, b)))
            if len(pending) >= concurrency:
                break
        while pending:
            a, fut = pending.popleft()
            data = fut.result()
            nxt = next(pieces, None)
            if nxt is not None:
                pending.append((nxt[0], pool.submit(read, *nxt)))
            yield a, data
            del data
    finally:
        for _, fut in pending:
            fut.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
