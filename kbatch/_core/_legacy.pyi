"""Legacy message sets, magic 0 and 1 (compiled; C-level API only, used by _batch)."""
