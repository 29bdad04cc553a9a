import numpy as np
import numpy.typing as npt

def views_to_pylist(
    views: npt.NDArray[np.uint8],          # 16 bytes per value
    validity: npt.NDArray[np.uint8] | None,
    buffers: list,                         # the data buffers the views point into
) -> list[bytes | None]: ...

def views_from_binary(
    offsets: npt.NDArray[np.int32] | npt.NDArray[np.int64],
    data: npt.NDArray[np.uint8],
    out_views: npt.NDArray[np.uint8],      # 16 bytes per value, filled
    buffer: int,                           # index ``data`` gets among the data buffers
) -> None: ...
