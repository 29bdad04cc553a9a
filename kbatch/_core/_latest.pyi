import numpy as np
import numpy.typing as npt

def latest_rows(
    key_offsets: npt.NDArray[np.int32] | npt.NDArray[np.int64] | None,
    key_data: npt.NDArray[np.uint8] | None,
    key_validity: npt.NDArray[np.uint8] | None,   # LSB-first bitmap, None: no null key
    key_views: npt.NDArray[np.uint8] | None,      # binary views (16 bytes per row) instead
    key_buffers: list,                            # the data buffers the views point into
    offsets: npt.NDArray[np.int64],               # the records' offsets
    value_validity: npt.NDArray[np.uint8] | None,  # null value: a tombstone
) -> tuple[npt.NDArray[np.int64], int, int, int]: ...  # rows, keys, tombstones, null keys
