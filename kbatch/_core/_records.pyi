"""The record loop of magic-2 batches (compiled; C-level API only, used by _batch)."""
