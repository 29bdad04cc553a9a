"""``kbatch.read_segment`` / ``kbatch.iter_segment``: a URL (or a path with
``filesystem=``) is read in ranges here; anything else goes to
``kbatch.lib.segment`` unchanged (local paths keep the memory-mapped path).
``open_log``/``open_log_dir`` hand URLs to ``kbatch.lib.remote.log``."""

from __future__ import annotations

from typing import Iterator

from kbatch.lib import segment as local
from kbatch.lib.records import Records
from kbatch.lib.remote.fs import RangeSource, is_url, resolve
from kbatch.lib.remote.scan import scan
from kbatch.lib.segment import DecodeOptions, check_options
from kbatch.lib.txn import apply_isolation, check_isolation

REMOTE_KEYS = ("storage_options", "filesystem")


def is_remote(source, kwargs: dict) -> bool:
    """A URL, or a path given with a filesystem object."""
    return is_url(source) or kwargs.get("filesystem") is not None


def split_remote(kwargs: dict) -> tuple[dict, dict]:
    """``(remote keyword arguments, the rest)``."""
    remote = {k: kwargs[k] for k in REMOTE_KEYS if k in kwargs}
    return remote, {k: v for k, v in kwargs.items() if k not in REMOTE_KEYS}


def _source(url, remote: dict) -> RangeSource:
    fs, path, name = resolve(url, remote.get("storage_options"), remote.get("filesystem"))
    return RangeSource(fs, path, url=name)


def _options(where, kwargs, extra):
    check_options(where, kwargs, extra)
    return DecodeOptions(**{k: v for k, v in kwargs.items() if k not in extra})


def read_segment(source, **kwargs) -> Records:
    """``kbatch.lib.segment.read_segment``, and for a URL (``s3://...``; with
    ``storage_options=`` or ``filesystem=``) the same read in ranges."""
    remote, rest = split_remote(kwargs)
    if not is_remote(source, remote):
        return local.read_segment(source, **rest)
    isolation = check_isolation(rest.get("isolation", "read_uncommitted"))
    opts = _options("read_segment", rest, ("isolation", "start", "stop"))
    return read_remote_segment(source, remote, opts, isolation, rest.get("start", 0),
                               rest.get("stop"))


def iter_segment(source, **kwargs) -> Iterator[Records]:
    """``kbatch.lib.segment.iter_segment``, and for a URL the same chunks
    read in ranges."""
    remote, rest = split_remote(kwargs)
    if not is_remote(source, remote):
        return local.iter_segment(source, **rest)
    isolation = check_isolation(rest.get("isolation", "read_uncommitted"))
    extra = ("isolation", "start", "stop", "chunk_records", "chunk_bytes")
    opts = _options("iter_segment", rest, extra)
    chunk_records = rest.get("chunk_records", local.DEFAULT_CHUNK_RECORDS)
    chunk_bytes = rest.get("chunk_bytes", local.DEFAULT_CHUNK_BYTES)
    if chunk_records < 1 or chunk_bytes < 1:
        raise ValueError("chunk_records and chunk_bytes must be positive")
    return iter_remote_segment(source, remote, opts, isolation, rest.get("start", 0),
                               rest.get("stop"), chunk_records, chunk_bytes)


read_segment.__wrapped__ = local.read_segment      # inspect.signature shows its keywords
iter_segment.__wrapped__ = local.iter_segment
read_segment.__doc__ = (local.read_segment.__doc__ or "") + """
    A URL (``s3://...``, any fsspec URL; ``storage_options=`` or
    ``filesystem=``, see ``kbatch.lib.remote.fs.resolve``) is read in
    ranges (``kbatch.lib.remote.scan``): never into memory whole."""
iter_segment.__doc__ = (local.iter_segment.__doc__ or "") + """
    A URL is read in ranges, as ``read_segment`` says."""


def read_remote_segment(url, remote: dict, opts: DecodeOptions, isolation: str, start: int,
                        stop: int | None) -> Records:
    """One remote segment object: read in ranges (``kbatch.lib.remote.scan``),
    transactions resolved within it for read_committed (as for a file)."""
    parts = list(scan(_source(url, remote), opts, start=start, stop=stop))
    records = Records.concat(parts) if parts else Records.empty()
    return apply_isolation(records, isolation)


def iter_remote_segment(url, remote: dict, opts: DecodeOptions, isolation: str, start: int,
                        stop: int | None, chunk_records: int,
                        chunk_bytes: int) -> Iterator[Records]:
    """Chunks of one remote segment object. read_committed needs the
    markers of the whole object first: it reads it twice (as the local
    iterator decodes twice)."""
    state = None
    if isolation == "read_committed":
        # a first pass that keeps one row per batch and the control records
        from kbatch.lib.remote.scan import batches_and_control, offsets_only
        from kbatch.lib.txn import TxnState
        state = TxnState.build(*batches_and_control(
            scan(_source(url, remote), offsets_only(opts), start=start, stop=stop,
                 chunk_records=chunk_records, chunk_bytes=chunk_bytes)))
    for chunk in scan(_source(url, remote), opts, start=start, stop=stop,
                      chunk_records=chunk_records, chunk_bytes=chunk_bytes):
        yield chunk if state is None else state.filter(chunk)
