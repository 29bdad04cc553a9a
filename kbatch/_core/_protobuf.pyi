"""Stub of the compiled Protobuf decoder (kbatch/_core/_protobuf.pyx)."""

import enum

import numpy as np
import numpy.typing as npt

class PType(enum.IntEnum):
    T_DOUBLE = 1
    T_FLOAT = 2
    T_INT64 = 3
    T_UINT64 = 4
    T_INT32 = 5
    T_FIXED64 = 6
    T_FIXED32 = 7
    T_BOOL = 8
    T_STRING = 9
    T_MESSAGE = 11
    T_BYTES = 12
    T_UINT32 = 13
    T_ENUM = 14
    T_SFIXED32 = 15
    T_SFIXED64 = 16
    T_SINT32 = 17
    T_SINT64 = 18
    T_CUT = 19

class Presence(enum.IntEnum):
    P_IMPLICIT = 0
    P_EXPLICIT = 1
    P_REPEATED = 2
    P_REQUIRED = 3
    P_DEFAULT_MSG = 4

class Mode(enum.IntEnum):
    M_STRUCT = 0
    M_WRAPPER = 1
    M_TIMESTAMP = 2
    M_DURATION = 3

ColumnParts = tuple[int, int, npt.NDArray[np.uint8], npt.NDArray[np.uint8], npt.NDArray[np.int32] | None]

def message_indexes(data: npt.NDArray[np.uint8], start: npt.NDArray[np.int64], end: npt.NDArray[np.int64],
                    live: npt.NDArray[np.uint8], path: npt.NDArray[np.int32], plen: npt.NDArray[np.int32],
                    status: npt.NDArray[np.int32]) -> None: ...

class ProtoMachine:
    def __init__(self, cols: npt.NDArray[np.int64], col_kids: npt.NDArray[np.int32],
                 msgs: npt.NDArray[np.int64], fields: npt.NDArray[np.int64],
                 which: npt.NDArray[np.int32], dense: npt.NDArray[np.int32], enums: npt.NDArray[np.int32],
                 top: int) -> None: ...
    def run(self, data: npt.NDArray[np.uint8], start: npt.NDArray[np.int64],
            end: npt.NDArray[np.int64], prog: npt.NDArray[np.int32],
            status: npt.NDArray[np.int32], errpos: npt.NDArray[np.int64],
            stop_at_error: bool) -> int: ...
    def take(self) -> list[ColumnParts]: ...
