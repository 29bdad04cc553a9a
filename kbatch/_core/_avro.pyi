"""Stub of the compiled Avro decoder (kbatch/_core/_avro.pyx)."""

import enum

import numpy as np
import numpy.typing as npt

class ColKind(enum.IntEnum):
    K_NULL = 0
    K_BOOL = 1
    K_FIXED = 2
    K_BINARY = 3
    K_STRUCT = 4
    K_LIST = 5
    K_MAP = 6
    K_UNION = 7

class OpCode(enum.IntEnum):
    OP_NULL = 0
    OP_BOOL = 1
    OP_INT = 2
    OP_INT_LONG = 3
    OP_INT_FLOAT = 4
    OP_INT_DOUBLE = 5
    OP_LONG = 6
    OP_LONG_FLOAT = 7
    OP_LONG_DOUBLE = 8
    OP_FLOAT = 9
    OP_FLOAT_DOUBLE = 10
    OP_DOUBLE = 11
    OP_STRING = 12
    OP_BYTES = 13
    OP_FIXED = 14
    OP_UUID = 15
    OP_DEC_BYTES = 16
    OP_DEC_FIXED = 17
    OP_DURATION = 18
    OP_ENUM = 19
    OP_RECORD = 20
    OP_ARRAY = 21
    OP_MAP = 22
    OP_UNION = 23
    OP_UBRANCH = 24
    OP_NULLOUT = 25
    OP_DEFAULT = 26
    OP_FAIL = 27

class Status(enum.IntEnum):
    ST_OK = 0
    ST_SHORT = 1
    ST_VARINT = 2
    ST_BOOL = 3
    ST_UTF8 = 4
    ST_LENGTH = 5
    ST_UNION_INDEX = 6
    ST_ENUM_INDEX = 7
    ST_ENUM_SYMBOL = 8
    ST_NO_BRANCH = 9
    ST_DECIMAL = 10
    ST_UUID = 11
    ST_TRAILING = 12
    ST_TOO_DEEP = 13
    ST_LIMIT = 14
    ST_NOMEM = 15
    ST_BLOCK = 16
    ST_RANGE = 17
    ST_WIRETYPE = 18
    ST_TAG = 19
    ST_REQUIRED = 20
    ST_PACKED = 21
    ST_MAGIC = 32
    ST_FRAME = 33
    ST_UNKNOWN_ID = 34
    ST_INDEXES = 35
    ST_RESOLVE = 36

ColumnParts = tuple[int, int, npt.NDArray[np.uint8], npt.NDArray[np.uint8], npt.NDArray[np.int32] | None]

class AvroMachine:
    def __init__(self, cols: npt.NDArray[np.int64], col_kids: npt.NDArray[np.int32],
                 ops: npt.NDArray[np.int64], op_kids: npt.NDArray[np.int32],
                 consts: bytes, top: int) -> None: ...
    def run(self, data: npt.NDArray[np.uint8], start: npt.NDArray[np.int64],
            end: npt.NDArray[np.int64], prog: npt.NDArray[np.int32],
            status: npt.NDArray[np.int32], errpos: npt.NDArray[np.int64],
            stop_at_error: bool) -> int: ...
    def take(self) -> list[ColumnParts]: ...
