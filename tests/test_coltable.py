"""The fixed-width record columns are listed once (kbatch/_core/coltable.py):
the generated Cython declarations, the compiled build, what the decoder
hands over and the Python column registry all agree with that table."""

import io

import numpy as np
import pytest

import kbatch
from kbatch._core import _columns, coltable
from kbatch._core.coltable import FIXED_COLUMNS, FixedColumn
from kbatch.lib.decoder import decoder, empty_chunk
from kbatch.lib.records import RECORD_COLUMNS
from kbatch.lib.segment import PROJECTABLE, DecodeOptions


def test_generated_pxd_is_current():
    """_coltable.pxd is what coltable.py generates (setup.py rewrites it;
    after editing the table by hand: python kbatch/_core/coltable.py)."""
    assert coltable.PXD.read_text() == coltable.pxd_text(), \
        "kbatch/_core/_coltable.pxd is stale: run python kbatch/_core/coltable.py"


def test_compiled_core_was_built_from_the_table():
    assert _columns.FIXED_COLUMNS == tuple((c.name, c.ctype, c.dtype, c.width, c.role)
                                           for c in FIXED_COLUMNS), \
        "the compiled core is stale: rebuild (python setup.py build_ext --inplace)"


def test_the_table_is_valid():
    coltable.check()


def _segment(n: int) -> bytes:
    out = io.BytesIO()
    kbatch.write_segment(out, {"key": [b"k"] * n, "value": [b"v"] * n,
                               "headers": [[("h", b"1")]] * n})
    return out.getvalue()


def _chunks():
    yield empty_chunk()["data"]
    dec = decoder(memoryview(_segment(3)), None, DecodeOptions(), 0, None, 1 << 30, 1 << 30)
    try:
        dec.run()
        yield dec.take()["data"]
    finally:
        dec.release()


def test_the_decoder_hands_over_each_column_as_the_table_says():
    chunks = list(_chunks())
    assert [d["n"] for d in chunks] == [0, 3]
    for data in chunks:
        for c in FIXED_COLUMNS:
            arr = data[c.name]
            assert arr.dtype == np.dtype(c.dtype) and arr.itemsize == c.width
            assert len(arr) == data["n"]


def test_records_columns_follow_the_table():
    fixed = [(c.name, c.arrow) for c in RECORD_COLUMNS if c.kind == "fixed"]
    assert sorted(fixed) == sorted((c.name, c.arrow) for c in FIXED_COLUMNS)
    assert set(PROJECTABLE) == {c.name for c in RECORD_COLUMNS if c.arrow is not None}
    records = kbatch.read_segment(_segment(5))
    for c in FIXED_COLUMNS:
        assert getattr(records, c.name).dtype == np.dtype(c.dtype)
    arrow_names = set(records.to_arrow().column_names)
    assert {c.name for c in FIXED_COLUMNS if c.arrow} <= arrow_names
    assert not {c.name for c in FIXED_COLUMNS if not c.arrow} & arrow_names


def _free_role() -> int:
    return min(set(coltable.FIXED_ROLES) - {coltable.HEADERS_ROLE} - {c.role for c in FIXED_COLUMNS})


def test_a_new_column_is_one_row():
    """What the generator makes of a table with one more column (say a
    leader epoch, int32)."""
    extra = FIXED_COLUMNS + (FixedColumn("example_epoch", "int32_t", _free_role(), "int32", ""),)
    text = coltable.pxd_text(extra)
    n = len(FIXED_COLUMNS)
    assert f"    COL_EXAMPLE_EPOCH = {n}\n" in text
    assert f"    N_FIXED = {n + 1}\n" in text
    assert f"    FIXED_ROW_BYTES = {sum(c.width for c in FIXED_COLUMNS) + 4}\n" in text
    assert "ctypedef int32_t col_example_epoch_t\n" in text
    assert f"        (fixed)[{n}].len += (rows) * 4; \\\\\n" in text
    assert '"example_epoch"}' in text


@pytest.mark.parametrize("row,message", [
    (FixedColumn("offset", "int64_t", _free_role(), "int64", ""), "unique"),
    (FixedColumn("example_epoch", "int24_t", _free_role(), None, ""), "C type"),
    (FixedColumn("example_epoch", "int32_t", 5, None, ""), "pool role"),     # the header offsets'
    (FixedColumn("example_epoch", "int32_t", 10, None, ""), "pool role"),    # the key builder's
    (FixedColumn("example_epoch", "int32_t", FIXED_COLUMNS[0].role, None, ""), "roles must differ"),
    (FixedColumn("example_epoch", "int32_t", _free_role(), "int64", ""), "Arrow type"),
    (FixedColumn("example_epoch", "int32_t", _free_role(), "timestamp_ms", ""), "Arrow type"),
])
def test_the_table_check_refuses_bad_rows(row, message):
    with pytest.raises(ValueError, match=message):
        coltable.check(FIXED_COLUMNS + (row,))
