"""Where files live: the local file system or an object store, behind one
small interface, so that the door (``kbatch.lib.open``), the partition
logs and the tools apply one set of rules to both.

    Tree.stat(path)            Entry (kind "missing", "file", "directory", or
                               what else a local path is: "FIFO", "socket", ...)
    Tree.list(path)            the Entries directly under a directory, by name
    Tree.source(path, entry)   the file's bytes (``kbatch.lib.sources``; an
                               object's reads are of the object ``entry`` lists)
    Tree.read_entries(...)     the live entries of an index file
    Tree.read_small(path, n)   a small file whole (checkpoints, manifests)
    Tree.display(path)         the path or URL messages name

A ``Location`` is a tree and a path in it. Listings of an object store are
fresh at each call (fsspec's listing cache is dropped first): a new open
after the bucket changed sees the change. In an object store a key may be
an object and a prefix at once: a URL ending in "/" names the prefix; a
zero-byte object at a prefix's own key (``data/t-0`` beside
``data/t-0/...``: the folder placeholder S3 consoles and tools write) is the
prefix too; any other object stays an object (a segment key that is also
a prefix is a segment). Every failure of an object
store is a ``RemoteError`` (retried first when transient) or a
``MissingObjectError``, never a foreign exception.
"""

from __future__ import annotations

import os
import posixpath
import stat as _stat
from dataclasses import dataclass

import numpy as np

from kbatch.lib.files import NotRegularFileError, data_end, open_regular, pread_exact
from kbatch.lib.index import live_entries
from kbatch.lib.objects import (RangeSource, RemoteError, Retrier, endpoint_of, filesystem_of,
                                is_url, object_identity, protocol_of)
from kbatch.lib.sources import FileRange, MappedFile, RemoteBytes

_LOCAL_KINDS = ((_stat.S_ISDIR, "directory"), (_stat.S_ISREG, "file"),
                (_stat.S_ISFIFO, "FIFO"), (_stat.S_ISSOCK, "socket"),
                (_stat.S_ISCHR, "character device"), (_stat.S_ISBLK, "block device"))


@dataclass(frozen=True)
class Entry:
    """One name in a tree: ``kind`` ("file", "directory", "missing", or a
    local special file's kind), ``size`` (files), ``version`` (changes when
    the file does), ``identity`` (an object's: ``objects.object_identity``,
    what reads of it are pinned to and checked against)."""

    name: str
    path: str
    kind: str
    size: int = 0
    version: tuple = ()
    identity: tuple = ()

    @property
    def is_dir(self) -> bool:
        return self.kind == "directory"

    @property
    def is_file(self) -> bool:
        return self.kind == "file"


def by_name(entries) -> dict:
    """``{name: entry}`` of a listing; where a name is an object and a
    prefix at once (``ObjectTree.list`` lists both, the object first), the
    object."""
    out: dict = {}
    for e in entries:
        out.setdefault(e.name, e)
    return out


class LocalTree:
    """The local file system (paths as strings; symbolic links followed)."""

    remote = False
    sep = os.sep

    def __eq__(self, other) -> bool:
        return isinstance(other, LocalTree)

    def __hash__(self) -> int:
        return hash("local")

    def __repr__(self) -> str:
        return "LocalTree()"

    def display(self, path: str) -> str:
        return path

    def join(self, path: str, name: str) -> str:
        return os.path.join(path, name)

    def parent(self, path: str) -> str:
        stripped = path.rstrip(os.sep)
        if not stripped:
            return os.sep                 # the root is its own parent
        head = os.path.dirname(stripped)
        if head and os.path.basename(stripped) not in (".", ".."):
            return head
        # a bare name, "." or "..": the parent of what it names (a partition
        # named "t-0" from inside its data directory has that directory)
        return os.path.dirname(os.path.abspath(stripped))

    def name(self, path: str) -> str:
        name = os.path.basename(path.rstrip(os.sep))
        if name in ("", ".", ".."):      # what "." or ".." names
            name = os.path.basename(os.path.abspath(path)) or name
        return name

    def stat(self, path: str) -> Entry:
        try:
            st = os.stat(path)
        except OSError:
            return Entry(self.name(path), path, "missing")
        kind = next((name for test, name in _LOCAL_KINDS if test(st.st_mode)), "special file")
        return Entry(self.name(path), path, kind, st.st_size, (st.st_size, st.st_mtime_ns))

    def mtime_ns(self, path: str) -> int | None:
        """The file's modification time (ns since the epoch)."""
        return os.stat(path).st_mtime_ns

    def list(self, path: str) -> list[Entry]:
        from kbatch.lib.paths import PathError
        try:
            with os.scandir(path) as it:
                found = sorted(it, key=lambda e: e.name)
        except PermissionError as exc:
            raise PathError(f"{path}: permission denied") from exc
        except OSError as exc:
            raise PathError(f"{path}: cannot list directory ({exc.strerror})") from exc
        out = []
        for e in found:
            try:
                if e.is_dir():
                    out.append(Entry(e.name, e.path, "directory"))
                elif e.is_file():
                    st = e.stat()
                    out.append(Entry(e.name, e.path, "file", st.st_size,
                                     (st.st_size, st.st_mtime_ns)))
                else:
                    out.append(Entry(e.name, e.path, "special file"))
            except OSError:
                out.append(Entry(e.name, e.path, "missing"))    # gone while listed
        return out

    def source(self, path: str, entry: Entry | None = None) -> MappedFile:
        return MappedFile(path)          # a file's size is read when asked: it may grow

    def raw(self, path: str, size: int | None = None, identity: tuple = ()) -> FileRange:
        """Ranges of the file, read as an object is (a tiered segment's chunks)."""
        return FileRange(path, size)

    def read_entries(self, path: str, dtype: np.dtype, max_entries: int | None,
                     zero_ends: bool, size: int | None = None) -> tuple[np.ndarray, int]:
        """The live entries of an index file read in bounded pieces
        (``kbatch.lib.index.live_entries``); the file's trailing hole is
        never read. A directory, FIFO or device raises ``NotRegularFileError``."""
        fd = open_regular(path)
        if fd is None:
            return np.empty(0, dtype), 0
        try:
            size = os.fstat(fd).st_size
            # entries wholly inside the trailing hole are zeros: where a zero
            # entry ends the index anyway they are not read; otherwise (a
            # .txnindex) they are read as written, as from an object store
            end = data_end(fd, size) if zero_ends else size
            return live_entries(lambda a, b: pread_exact(fd, b - a, a), size, end, dtype,
                                max_entries, zero_ends)
        finally:
            os.close(fd)

    def read_small(self, path: str, limit: int, size: int | None = None) -> bytes | None:
        """The file whole (None when missing); more than ``limit`` bytes raises
        (``size``: as listed, which an object store takes instead of asking)."""
        fd = open_regular(path)
        if fd is None:
            return None
        try:
            size = os.fstat(fd).st_size
            if size > limit:
                raise NotRegularFileError(path, f"a file of {size} bytes (more than {limit})")
            return pread_exact(fd, size, 0)
        finally:
            os.close(fd)


class ObjectTree:
    """An fsspec filesystem (an object store, or any fsspec protocol):
    ``root``/``root_url``: the path and the URL the user gave, so that
    messages name objects as the user named their prefix."""

    remote = True
    sep = "/"

    def __init__(self, fs, root: str, root_url: str, *, retries: int, block: int,
                 concurrency: int):
        self.fs = fs
        self.root = root.rstrip("/") or root
        self.root_is_prefix = root_url.endswith("/")     # "s3://b/data/": a prefix
        self.root_url = root_url.rstrip("/") if root_url.rstrip("/") else root_url
        self.protocol = protocol_of(fs)
        self.endpoint = endpoint_of(fs)
        self.retries, self.block, self.concurrency = retries, block, concurrency

    def __eq__(self, other) -> bool:
        return isinstance(other, ObjectTree) and other.fs is self.fs

    def __hash__(self) -> int:
        return id(self.fs)

    def __repr__(self) -> str:
        return f"ObjectTree({self.root_url!r})"

    def display(self, path: str) -> str:
        path = path.rstrip("/") or path
        if path == self.root:
            return self.root_url
        if path.startswith(self.root + "/"):
            return self.root_url + path[len(self.root):]
        return f"{self.protocol}://{path}"

    def join(self, path: str, name: str) -> str:
        return posixpath.join(path.rstrip("/"), name)

    def parent(self, path: str) -> str:
        return posixpath.dirname(path.rstrip("/")) or path

    def name(self, path: str) -> str:
        return posixpath.basename(path.rstrip("/"))

    def _retrier(self, path: str) -> Retrier:
        return Retrier(self.display(path), retries=self.retries, endpoint=self.endpoint)

    def _fresh(self, path: str) -> None:
        """Drop fsspec's cached listings, so each open sees the store as it is."""
        try:
            self.fs.invalidate_cache(path)
        except Exception:     # noqa: BLE001 - a filesystem without a cache
            pass

    def _entry(self, info: dict) -> Entry:
        path = str(info.get("name", "")).rstrip("/")
        kind = "directory" if info.get("type") == "directory" else "file"
        size = int(info.get("size") or 0) if kind == "file" else 0
        tag = (info.get("ETag") or info.get("etag") or info.get("LastModified")
               or info.get("mtime") or info.get("created"))
        return Entry(self.name(path), path, kind, size, (size, str(tag)),
                     object_identity(info) if kind == "file" else ())

    def stat(self, path: str) -> Entry:
        """What ``path`` names (see the module docstring for a key that is an
        object and a prefix at once: a zero-byte object, or a path ending in
        "/", costs one listing more)."""
        from kbatch.lib.objects import MissingObjectError
        prefix = path.endswith("/") or (self.root_is_prefix and path.rstrip("/") == self.root)
        path = path.rstrip("/") or path
        self._fresh(path)
        try:
            info = self._retrier(path)("stat", lambda: self.fs.info(path))
        except MissingObjectError:
            return Entry(self.name(path), path, "missing")
        entry = self._entry(info)
        kind = entry.kind
        if kind == "file" and (prefix or entry.size == 0):
            kind = ("directory" if self._holds_objects(path)
                    else "missing" if prefix else "file")
        if kind != entry.kind:
            return Entry(self.name(path), path, kind)
        return Entry(entry.name or self.name(path), path, kind, entry.size, entry.version,
                     entry.identity)

    def _holds_objects(self, path: str) -> bool:
        """Whether ``path`` is also a prefix of other objects (one listing)."""
        def listed():
            try:
                return self.fs.ls(path, detail=False)
            except (FileNotFoundError, NotADirectoryError):
                return []
        return any(str(name).rstrip("/") != path
                   for name in self._retrier(path)("listing", listed))

    def mtime_ns(self, path: str) -> int | None:
        """The object's modification time as the store reports it (S3's
        ``LastModified``, a filesystem's ``mtime``), None when it does not."""
        import datetime
        self._fresh(path)
        info = self._retrier(path)("stat", lambda: self.fs.info(path))
        for key in ("LastModified", "last_modified", "mtime", "modified", "created"):
            value = info.get(key)
            if isinstance(value, datetime.datetime):
                if value.tzinfo is None:
                    value = value.replace(tzinfo=datetime.timezone.utc)
                return int(value.timestamp() * 1_000_000) * 1000
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
                return int(value * 1e9)
        return None

    def list(self, path: str) -> list[Entry]:
        from kbatch.lib.objects import MissingObjectError
        from kbatch.lib.paths import PathError
        self._fresh(path)
        try:
            items = self._retrier(path)("listing", lambda: self.fs.ls(path, detail=True))
        except MissingObjectError:
            raise PathError(f"{self.display(path)}: no such file or directory") from None
        base = path.rstrip("/")
        out = {}
        for info in items:
            entry = self._entry(info)
            if entry.path == base or not entry.name:
                continue       # some stores list the prefix itself
            # a key may be an object and a prefix at once (".../x.log" and
            # ".../x.log/manifest.json"): both are listed, the object first,
            # so neither the segment nor the folder is lost
            out[(entry.name, not entry.is_file)] = entry
        # ... but a zero-byte object beside a prefix of its name is that
        # prefix's folder placeholder: the prefix alone is listed
        prefixes = {name for name, is_dir in out if is_dir}
        return [e for (name, is_dir), e in sorted(out.items())
                if is_dir or e.size or name not in prefixes]

    def source(self, path: str, entry: Entry | None = None) -> RemoteBytes:
        """The object's bytes: of the object ``entry`` lists, or without its
        identity (a segment pickled to a Spark executor) of the object as
        one request finds it now (see ``kbatch.lib.objects``)."""
        raw = RangeSource(self.fs, path, url=self.display(path),
                          size=entry.size if entry else None,
                          identity=(entry.identity if entry else None) or None, pinned=True,
                          retries=self.retries, block=self.block,
                          concurrency=self.concurrency, endpoint=self.endpoint)
        return RemoteBytes(raw, entry.version if entry else None)

    def raw(self, path: str, size: int | None = None, identity: tuple = ()) -> RangeSource:
        return RangeSource(self.fs, path, url=self.display(path), size=size,
                           identity=identity or None, retries=self.retries, block=self.block,
                           concurrency=self.concurrency, endpoint=self.endpoint)

    def read_entries(self, path: str, dtype: np.dtype, max_entries: int | None,
                     zero_ends: bool, size: int | None = None) -> tuple[np.ndarray, int]:
        """The live entries of an index object, read in ``CHUNK_BYTES``
        ranges that stop at the piece holding its first all-zero entry (a
        copied active segment's index is preallocated: 10 MiB of zeros)."""
        src = self.raw(path, size)
        try:
            total = src.size
        except RemoteError:
            if self.stat(path).kind == "missing":
                return np.empty(0, dtype), 0
            raise
        return live_entries(src.read, total, total, dtype, max_entries, zero_ends)

    def read_small(self, path: str, limit: int, size: int | None = None) -> bytes | None:
        from kbatch.lib.objects import MissingObjectError
        if size is None:            # not listed: one metadata request first
            entry = self.stat(path)
            if entry.kind == "missing":
                return None
            if entry.kind != "file":
                raise RemoteError("is a prefix, not an object", url=self.display(path))
            size = entry.size
        if size > limit:
            raise RemoteError(f"an object of {size} bytes (more than {limit})",
                              url=self.display(path))
        try:
            return self.raw(path, size).read(0, size)
        except MissingObjectError:
            return None


@dataclass(frozen=True)
class Location:
    """A path in a tree: what the door hands out."""

    tree: object
    path: str

    def __str__(self) -> str:
        return self.tree.display(self.path)

    @property
    def name(self) -> str:
        return self.tree.name(self.path)

    @property
    def remote(self) -> bool:
        return self.tree.remote

    def child(self, name: str) -> "Location":
        return Location(self.tree, self.tree.join(self.path, name))

    @property
    def parent(self) -> "Location":
        return Location(self.tree, self.tree.parent(self.path))

    def stat(self) -> Entry:
        return self.tree.stat(self.path)

    def list(self) -> list[Entry]:
        return self.tree.list(self.path)

    def local_path(self):
        """A ``pathlib.Path`` for a local location, the URL text otherwise
        (what ``.path`` attributes of logs and results show)."""
        from pathlib import Path
        return self.tree.display(self.path) if self.tree.remote else Path(self.path)


def is_remote(target, storage=None) -> bool:
    """Whether the door reads ``target`` from an fsspec filesystem: a URL
    other than ``file://``, or any path when ``storage.filesystem`` is set
    (the rule ``tree_of`` follows)."""
    if getattr(storage, "filesystem", None) is not None:
        return True
    return (isinstance(target, str) and is_url(target)
            and not target.lower().startswith("file://"))


def tree_of(target, storage=None) -> tuple[object, str]:
    """``(tree, path in it)`` of one target: the one answer to "local or
    remote?" (the door, ``kbatch.lib.open``, documents the rules).
    ``storage``: a ``Storage`` (None: defaults)."""
    from kbatch.lib.paths import PathError
    from kbatch.lib.storage import Storage
    storage = Storage.of(storage)
    if isinstance(target, Location):
        return target.tree, target.path
    if storage.filesystem is not None:
        fs = storage.filesystem
        if not isinstance(target, (str, os.PathLike)):
            raise PathError(f"expected a path, got {type(target).__name__}")
        text = os.fspath(target)
        stripped = fs._strip_protocol(text)
        url = text if is_url(text) else f"{protocol_of(fs)}://{stripped}"
        if text.endswith("/") and not url.endswith("/"):
            url += "/"          # a prefix, as the user named it
        return (ObjectTree(fs, stripped, url, retries=storage.retries, block=storage.block,
                           concurrency=storage.concurrency), stripped)
    if is_remote(target, storage):
        fs, stripped = filesystem_of(target, storage.storage_options)
        return (ObjectTree(fs, stripped, target, retries=storage.retries, block=storage.block,
                           concurrency=storage.concurrency), stripped)
    if isinstance(target, str) and target.lower().startswith("file://"):
        path = target[len("file://"):]
        if not path.startswith("/"):
            raise PathError(f"{target}: a file:// URL needs an absolute path "
                            "(file:///data/kafka)")
        return LOCAL_TREE, path
    if isinstance(target, (str, os.PathLike)):
        text = os.fspath(target)
        if not text:
            raise PathError("an empty path")
        return LOCAL_TREE, text
    raise PathError(f"expected a path or a URL, got {type(target).__name__}")


def locate(target, storage=None) -> Location:
    """``tree_of`` as a ``Location``."""
    return Location(*tree_of(target, storage))


LOCAL_TREE = LocalTree()
__all__ = ["Entry", "LOCAL_TREE", "LocalTree", "Location", "ObjectTree", "is_remote", "locate",
           "tree_of"]
