import numpy as np
import numpy.typing as npt

def take_binary(
    offsets: npt.NDArray[np.int32] | npt.NDArray[np.int64],
    data: npt.NDArray[np.uint8],
    indices: npt.NDArray[np.int64],
    out_offsets: npt.NDArray[np.int32] | npt.NDArray[np.int64],
    out_data: npt.NDArray[np.uint8],
) -> int: ...
