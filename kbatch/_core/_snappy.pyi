"""Snappy (raw blocks and xerial framing) decoded without the GIL (compiled)."""

from typing import Any

def decompress(data: Any, limit: int) -> bytes | None: ...
