"""The tools: command line, dump, stats, verify, transactions report, sample, the make-run pipeline, progress."""
