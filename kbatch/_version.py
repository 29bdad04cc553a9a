"""The package version (one place; pyproject.toml carries the same number)
and the distribution name it is installed under (the import name is kbatch;
"kbatch" on PyPI is an unrelated project)."""

__version__ = "0.1.0"
DISTRIBUTION = "kbatch-kafka"
