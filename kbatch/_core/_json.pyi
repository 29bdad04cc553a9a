"""Stub of the compiled JSON decoder for objects of scalar fields (kbatch/_core/_json.pyx)."""

import numpy as np
import numpy.typing as npt

# kinds: 0 int64, 1 float64, 2 bool, 3 string, 4 timestamp (us, UTC), 5 date32
# row status: 0 decoded, 1 not live (null), 2 left to the general decoder

def decode_flat(data: npt.NDArray[np.uint8], start: npt.NDArray[np.int64],
                end: npt.NDArray[np.int64], live: npt.NDArray[np.uint8],
                names: list[bytes], kinds: list[int]
                ) -> tuple[npt.NDArray[np.uint8], list[tuple[npt.NDArray[np.uint8], object]]]: ...

def invalid_utf8(data: npt.NDArray[np.uint8], start: npt.NDArray[np.int64],
                 end: npt.NDArray[np.int64], live: npt.NDArray[np.uint8]
                 ) -> npt.NDArray[np.uint8]: ...
