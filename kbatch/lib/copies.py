"""Files of a log copied into a new local directory, as the copies that
retention (``kbatch.lib.retention``) and the cleaner (``kbatch.lib.compact``)
write: what they do not rewrite is carried over byte for byte, as old as
the original (the time pass of a later retention plan falls back on a
segment file's modification time).

    copy_file(loc, dest)          one file, local or remote, in 16 MiB pieces
    copy_partition(loc, dest)     a partition directory's files as a broker
                                  loads them
    copy_own_files(dir, dest)     a data directory's own files not written yet
    carry_untouched(dir, ...)     those, and the partitions the copy had
                                  nothing to do for
    set_aside_notes(entries, done)  what a copy leaves out: ``-future``
                                  and ``-stray`` folders, named
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from kbatch.lib.logfiles import keep_mtime, loaded_files

PIECE = 16 << 20


def copy_file(loc, dest: Path) -> None:
    """The file at ``loc`` (a ``Location``, local or remote) into ``dest``,
    with its modification time where the store has one. Keeps one piece of
    a local file in memory (a remote file is read whole)."""
    local = loc.local_path()
    with open(dest, "wb") as out:
        if isinstance(local, Path):
            with open(local, "rb") as src:
                while piece := src.read(PIECE):
                    out.write(piece)
        else:
            out.write(loc.tree.read_small(loc.path, 1 << 40) or b"")
    keep_mtime(loc, dest)


def copy_partition(location, dest: Path) -> None:
    """The partition directory at ``location`` into ``dest`` (made if
    absent), file by file as a broker loads them (``loaded_files``: an
    interrupted swap completed, no ``.deleted``/``.cleaned`` files)."""
    dest.mkdir(parents=True, exist_ok=True)
    for file, e in loaded_files(location).items():
        copy_file(location.child(e.name), dest / file)


def copy_own_files(data_dir, dest: Path, leave: tuple[str, ...] = (), entries=None) -> None:
    """The files of the data directory at ``data_dir`` (``bootstrap.checkpoint``,
    ``.kafka_cleanshutdown``...) that ``dest`` does not hold yet (the
    checkpoints the caller wrote stay), but those named in ``leave``
    (``entries``: its listing, when the caller has it)."""
    for e in data_dir.list() if entries is None else entries:
        if e.is_file and e.name not in leave and not (dest / e.name).exists():
            copy_file(data_dir.child(e.name), dest / e.name)


def carry_untouched(data_dir, partitions: Iterable, done: set[str], dest: Path) -> None:
    """What a copy of the data directory at ``data_dir`` (a ``Location``)
    leaves as it is: the directory's own files not in ``dest`` yet
    (``bootstrap.checkpoint``, ``.kafka_cleanshutdown``...; the offset
    checkpoints the caller wrote stay), and every partition of
    ``partitions`` (``Partition``) whose folder name is not in ``done``
    (no segment file to work on), file by file as a broker loads them."""
    copy_own_files(data_dir, dest)
    for part in partitions:
        if part.location.name not in done:
            copy_partition(part.location, dest / part.location.name)


def set_aside_notes(entries, done: str) -> list[str]:
    """A note for each folder of a data directory's listing (``entries``)
    that holds a partition's log but not this directory's: a move between
    log directories in progress (``-future``) or a stray log (``-stray``).
    A copy leaves them out; ``done`` says what it did not do to them
    ("recovered", "planned"...)."""
    return [f"{e.name}: a {e.name.rpartition('-')[2]} replica (a move between log "
            f"directories in progress, or a stray log) is not {done} or copied: "
            "give its folder on its own if its data is needed"
            for e in entries if not e.is_file and e.name.endswith(("-future", "-stray"))]


__all__ = ["carry_untouched", "copy_file", "copy_own_files", "copy_partition", "set_aside_notes"]
