"""Growable C buffers handed to numpy without a copy (compiled)."""

class OwnedBuffer:
    """Read-only buffer over memory kbatch allocated; freed with its last view."""
    def __len__(self) -> int: ...
