"""Magic-2 record batches decoded into columns (compiled)."""

from typing import Any

import numpy as np

BATCH_DTYPE: np.dtype
CONTROL_DTYPE: np.dtype
END_REASONS: dict[int, str | None]
STATUS_CHUNK_FULL: int
STATUS_END: int
STATUS_COMPRESSED: int

class BatchDecoder:
    path: Any
    end_error: Exception | None
    def __init__(
        self,
        view: Any,
        *,
        start: int = 0,
        stop: int = -1,
        path: Any = None,
        validate_crc: bool | str = True,
        headers_only: bool = False,
        control_only: bool = False,
        include_control: bool = False,
        strict: bool = False,
        stop_on_corrupt: bool = False,
        chunk_records: int = ...,
        chunk_bytes: int = ...,
        max_batch_bytes: int = ...,
        max_records_per_batch: int = ...,
        max_headers_per_record: int = ...,
        drop_positions: "np.ndarray | None" = ...,   # sorted int64 batch positions
        max_decompressed_bytes: int = ...,
        native_lz4: bool = True,          # lz4 batches decompressed without the GIL
        zeros_from: int = -1,             # bytes from here on are known zero (a file's hole)
        max_read_bytes: int = -1,         # what one chunk's columns may hold (-1: no limit)
        native_gzip: bool = True,         # gzip, snappy, zstd: the same
        native_snappy: bool = True,
        native_zstd: bool = True,
        zero_copy: bool = False,          # keys/values as binary views: take()["data"]
                                          # then has "views" per column and "buffers"
        skip_key: bool = False,           # projection: keys checked, not stored
                                          # (take()["data"]["key"] is None)
        skip_value: bool = False,         # ... values likewise
        skip_headers: bool = False,       # ... headers likewise ("headers" etc. None)
        more_follows: bool = False,       # a range of a larger object: zeros up to
                                          # stop are damage, not a padded tail
        validate_control_crc: bool = False,  # CRCs off but for control batches
        expect_bytes: int = 0,            # data the chunk spans over every source
                                          # (continue_with): sizes the first reservation
        data_end: int = -1,               # where the data ends when stop is a window's
                                          # end (default: stop)
    ) -> None: ...
    @property
    def position(self) -> int: ...
    @property
    def end_reason(self) -> str | None: ...
    @property
    def valid_end(self) -> int: ...
    @property
    def stop(self) -> int: ...
    @property
    def rows(self) -> int: ...
    @property
    def batch_rows(self) -> int: ...
    def max_last_offset(self, first_row: int = 0) -> int | None: ...
    def source_windows(self) -> list[tuple[int, int]]: ...
    def replace_source_windows(self, buffers: list[Any]) -> None: ...
    def release(self) -> None: ...
    def continue_with(self, view: Any, *, start: int = 0, stop: int = -1, path: Any = None,
                      zeros_from: int = -1,
                      drop_positions: "np.ndarray | None" = None,
                      more_follows: bool | None = None, data_end: int = -1) -> None: ...
    def run(self) -> int: ...
    def pending(self) -> tuple[int, int, int, int, int, int] | None: ...
    def pending_bytes(self) -> bytearray: ...
    def feed(self, records: Any) -> int: ...
    def fail_pending(self, exc: Exception) -> int: ...
    def take(self) -> dict[str, Any]: ...
    def set_read_budget(self, budget: int) -> None: ...
