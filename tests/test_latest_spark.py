"""The ``view`` option's checks, without Spark (the table view through Spark:
tests/test_spark.py, on its session)."""

from __future__ import annotations

import pytest

from kbatch.spark.options import OptionError, parse_options


def test_view_option_checks():
    assert parse_options({"path": "x"}).view == "all"
    assert parse_options({"path": "x", "VIEW": "latest"}).view == "latest"
    with pytest.raises(OptionError, match="view='newest'"):
        parse_options({"path": "x", "view": "newest"})
    with pytest.raises(OptionError, match="batch queries only"):
        parse_options({"path": "x", "view": "latest"}, streaming=True)
