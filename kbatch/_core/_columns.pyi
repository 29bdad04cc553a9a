"""Growable C buffers handed to numpy without a copy (compiled)."""

class OwnedBuffer:
    """Read-only buffer over memory kbatch allocated; freed with its last view."""
    def __len__(self) -> int: ...

def set_memory_pool(max_bytes: int) -> int:
    """Keep at most ``max_bytes`` of released column memory for reuse (0: none)."""

def memory_pool_bytes() -> int:
    """Bytes of released column memory kept for reuse."""
