"""kbatch's compiled core: the batch walk, record loop, column buffers, checksums, codecs (Cython, GIL released)."""
