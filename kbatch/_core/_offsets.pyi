import numpy as np
import numpy.typing as npt

def decode_offset_commits(
    koff: npt.NDArray[np.int64], kdata: npt.NDArray[np.uint8],
    voff: npt.NDArray[np.int64], vdata: npt.NDArray[np.uint8],
    vvalid: npt.NDArray[np.uint8],
    status: npt.NDArray[np.int8], kver: npt.NDArray[np.int16], vver: npt.NDArray[np.int16],
    partition: npt.NDArray[np.int32], offset: npt.NDArray[np.int64],
    epoch: npt.NDArray[np.int32], commit: npt.NDArray[np.int64],
    expire: npt.NDArray[np.int64],
    gs: npt.NDArray[np.int64], gl: npt.NDArray[np.int32],
    ts: npt.NDArray[np.int64], tl: npt.NDArray[np.int32],
    ms: npt.NDArray[np.int64], ml: npt.NDArray[np.int32],
) -> int: ...
def string_bytes(length: npt.NDArray[np.int32], rows: npt.NDArray[np.int64]) -> int: ...
def gather_strings(
    data: npt.NDArray[np.uint8], start: npt.NDArray[np.int64],
    length: npt.NDArray[np.int32], rows: npt.NDArray[np.int64],
    out_offsets: npt.NDArray[np.int32], out_data: npt.NDArray[np.uint8],
) -> tuple[int, bool]: ...
