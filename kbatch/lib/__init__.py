"""The library: decoding segments, partition logs, index files, transactions, records/columns, the writer."""
