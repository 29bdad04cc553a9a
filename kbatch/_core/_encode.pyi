"""Magic-2 records encoded from columns (compiled)."""

import numpy as np
import numpy.typing as npt

def encode_records(
    start: int,
    stop: int,
    offset_deltas: npt.NDArray[np.int64],
    timestamp_deltas: npt.NDArray[np.int64],
    key_offsets: npt.NDArray[np.int64],
    key_data: npt.NDArray[np.uint8],
    key_valid: npt.NDArray[np.uint8],
    value_offsets: npt.NDArray[np.int64],
    value_data: npt.NDArray[np.uint8],
    value_valid: npt.NDArray[np.uint8],
    header_offsets: npt.NDArray[np.int64],
    hkey_offsets: npt.NDArray[np.int64],
    hkey_data: npt.NDArray[np.uint8],
    hval_offsets: npt.NDArray[np.int64],
    hval_data: npt.NDArray[np.uint8],
    hval_valid: npt.NDArray[np.uint8],
) -> bytes: ...
