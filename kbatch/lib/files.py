"""Opening the files kbatch reads: regular files only, never blocking, and
reads whose cost follows the data a file holds, not its apparent size.

- ``open_regular(path)``: a file descriptor, after ``stat`` says the path is a
  regular file (a directory, FIFO, socket or device is refused with
  ``NotRegularFileError`` before it is opened, so a FIFO never blocks and a
  device is never touched), opened ``O_NONBLOCK`` and checked again with
  ``fstat`` (the path may have been replaced in between).
- ``data_end(fd, size)``: where the last extent holding data ends
  (``SEEK_DATA``/``SEEK_HOLE``): everything after it is a hole, which reads
  as zeros without being stored. Preallocated segments and index files
  (``file.preallocate``, a broker's active ``.index``) and sparse copies end
  in such holes.
- ``pread_exact(fd, n, offset)``: ``n`` bytes or fewer at the end of the file.
"""

from __future__ import annotations

import errno
import os
import stat

from kbatch.errors import KbatchError

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))
MAX_EXTENTS = 4096   # data_end gives up (reports the file size) past this many


class NotRegularFileError(KbatchError, ValueError):
    """A path kbatch must read is not a regular file (a directory, FIFO,
    socket or device): refused without reading from it. ``path`` names it."""

    def __init__(self, path, kind: str):
        self.path = os.fspath(path)
        self.kind = kind
        super().__init__(f"{self.path}: is {kind}, not a regular file")


def _kind(mode: int) -> str | None:
    for test, name in _KINDS:
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def open_regular(path) -> int | None:
    """A read-only descriptor of the regular file at ``path``; None when the
    path does not exist. Raises ``NotRegularFileError`` for anything else."""
    try:
        before = os.stat(path)
    except FileNotFoundError:
        return None
    kind = _kind(before.st_mode)
    if kind is not None:
        raise NotRegularFileError(path, kind)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return None
    try:
        kind = _kind(os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    if kind is not None:
        os.close(fd)
        raise NotRegularFileError(path, kind)
    return fd


def data_end(fd: int, size: int) -> int:
    """The end of the last data extent of the file (``size`` when the file
    system cannot say, or the file has more than ``MAX_EXTENTS`` extents)."""
    seek_data = getattr(os, "SEEK_DATA", None)
    seek_hole = getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None or size <= 0:
        return size
    end, pos = 0, 0
    try:
        for _ in range(MAX_EXTENTS):
            try:
                start = os.lseek(fd, pos, seek_data)
            except OSError as exc:
                if exc.errno == errno.ENXIO:   # only holes from pos on
                    return min(end, size)
                raise
            pos = os.lseek(fd, start, seek_hole)
            end = pos
            if pos >= size:
                return size
    except OSError:
        return size
    return size


def pread_exact(fd: int, n: int, offset: int) -> bytes:
    """Up to ``n`` bytes at ``offset`` (fewer only at the end of the file)."""
    parts, got = [], 0
    while got < n:
        piece = os.pread(fd, n - got, offset + got)
        if not piece:
            break
        parts.append(piece)
        got += len(piece)
    return b"".join(parts)
