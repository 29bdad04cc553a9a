"""Growable C buffers handed to numpy without a copy (compiled)."""

# The fixed-width record columns this build was generated from (coltable.py):
# (name, C type, numpy dtype, bytes, memory-pool role) per column, in index order.
FIXED_COLUMNS: tuple[tuple[str, str, str, int, int], ...]

class OwnedBuffer:
    """Buffer over memory kbatch allocated (read-only unless from
    ``pooled_empty``); freed (to the pool) with its last view."""
    def __len__(self) -> int: ...

def pooled_empty(nbytes: int, role: int) -> OwnedBuffer:
    """A writable buffer of ``nbytes`` uninitialised bytes, from the memory pool when one fits."""

def default_memory_pool_bytes() -> int:
    """The pool limit kbatch starts with (1 GiB)."""

def set_memory_pool(max_bytes: int) -> int:
    """Keep at most ``max_bytes`` of released column memory for reuse (0: none)."""

def memory_pool_bytes() -> int:
    """Bytes of released column memory kept for reuse."""

def memory_stats() -> dict[str, int]:
    """Fresh mapped bytes, pooled blocks reused, bytes unmapped (since start), and the pool's bytes."""
