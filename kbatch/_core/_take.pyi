from typing import Callable

import numpy as np
import numpy.typing as npt

def take_binary(
    offsets: npt.NDArray[np.int32] | npt.NDArray[np.int64],
    data: npt.NDArray[np.uint8],
    validity: npt.NDArray[np.uint8] | None,     # LSB-first bitmap, or None
    rows: npt.NDArray[np.int64],
    threads: int,
    allocate: Callable[[int], npt.NDArray[np.uint8]],
) -> tuple[npt.NDArray[np.int32] | npt.NDArray[np.int64],   # offsets, m + 1
           npt.NDArray[np.uint8],                           # data, from allocate
           npt.NDArray[np.uint8] | None,                    # validity
           int]: ...                                        # null count

def take_views(
    views: npt.NDArray[np.uint8],                # 16 bytes a value (Arrow binary views)
    buffers: list,                               # the data buffers the views point into
    validity: npt.NDArray[np.uint8] | None,
    rows: npt.NDArray[np.int64],
    threads: int,
    allocate: Callable[[int], npt.NDArray[np.uint8]],
) -> tuple[npt.NDArray[np.int32] | npt.NDArray[np.int64],
           npt.NDArray[np.uint8],
           npt.NDArray[np.uint8] | None,
           int]: ...
