"""Output for people: the ``make run`` summary (binary keys escaped, columns
aligned whatever the topic names) and the JSON of ``dump`` and ``stats``
(the same names and types for the same things)."""

import datetime
import json

import kbatch
import kbatch.tools.cli
from kbatch.tools.pipeline import format_table, show_key, summary_rows

T = datetime.datetime(2024, 5, 1, 12, 0, 0)


def _row(topic, partition, records, first=T):
    return {"topic": topic, "partition": partition, "records": records, "bytes": records * 100,
            "first_time": first, "last_time": first, "first_offset": 0,
            "last_offset": records - 1}


def test_show_key_keeps_text_and_escapes_bytes():
    assert show_key(b"user-17") == "user-17"
    assert show_key("h\u00e9llo \u6771\u4eac".encode()) == "h\u00e9llo \u6771\u4eac"
    assert show_key(b"\x00\x00\x00\x2a") == "0x0000002a"             # an int32 key
    assert show_key(b"\xff\xfe\xfd") == "0xfffefd"                    # not UTF-8
    assert show_key(b"order-\x01-12345") == "order-\\x01-12345"       # mostly text
    assert show_key(b"line\nbreak") == "line\\x0abreak"                # never a raw newline
    assert show_key(b"") == '""'
    long = show_key(b"k" * 100)
    assert len(long) == 32 and long.endswith("...")
    for key in (b"\x00", b"\x1b[31mred", b"a\rb", b"\xe2\x80\xae"):  # control chars, RTL override
        shown = show_key(key)
        assert shown.isprintable(), shown


def test_table_columns_align_with_long_topic_names():
    per = [_row("orders", 0, 5), _row("a-much-longer-topic-name.with.dots-v2", 11, 123_456_789),
           _row("x", 3, 7, first=None)]
    top = {("orders", 0): [(show_key(b"\x00\x01\x02"), 3), ("k", 2)]}
    lines = format_table(per, top)
    head, rule, *rows, total = lines
    assert set(rule) == {"-"}
    # every column starts at the same character in every line
    for name in ("first time (UTC)", "last time (UTC)", "offsets"):     # left-aligned
        col = head.index(name)
        for line in rows:
            assert line[col - 1] == " " and line[col] != " ", (name, line)
    for name in ("records", "MB"):                                         # right-aligned
        end = head.index(name) + len(name)
        for line in rows + [total]:
            assert line[end - 1] != " " and (line + " ")[end] == " ", (name, line)
    # right-aligned numbers end where their header ends
    rec_end = head.index("records") + len("records")
    assert [line[:rec_end].split()[-1] for line in rows] == ["5", "123456789", "7"]
    assert "0x000102 (3), k (2)" in rows[0]
    assert total.split()[:2] == ["total", str(5 + 123_456_789 + 7)]
    assert "None" not in "\n".join(lines)


def test_summary_json_keys_are_escaped_strings():
    per = [_row("orders", 0, 5)]
    top = {("orders", 0): [(show_key(b"\xff\x00"), 4)]}
    [row] = json.loads(json.dumps(summary_rows(per, top)))
    assert row["top_keys"] == [{"key": "0xff00", "count": 4}]
    assert row["first_time"] == "2024-05-01 12:00:00"


def test_dump_and_stats_json_use_the_same_names(capfd, tmp_path):
    path = tmp_path / "t-0"
    kbatch.write_log(path, [(b"k%d" % i, b"v", 1_700_000_000_000 + i) for i in range(30)],
                     codec="gzip", batch_records=10)
    seg = path / "00000000000000000000.log"
    capfd.readouterr()
    assert kbatch.tools.cli.main(["dump", "--format", "json", str(seg)]) == 0
    dumped = [json.loads(x) for x in capfd.readouterr().out.splitlines()]
    assert kbatch.tools.cli.main(["stats", "--format", "json", str(seg)]) == 0
    stats = [json.loads(x) for x in capfd.readouterr().out.splitlines()]
    batches = [o for o in dumped if o["type"] == "batch"]
    [segment] = stats[0]["segments"]
    assert {b["codec"] for b in batches} == {"gzip"}                 # names, not numbers
    assert segment["codecs"] == ["gzip"] and stats[0]["codecs"] == ["gzip"]
    assert {b["file"] for b in batches} == {segment["file"]} == {str(seg)}
    assert [b["magic"] for b in batches] == [2, 2, 2] and segment["magics"] == [2]


def test_stats_text_never_prints_none(capfd, tmp_path):
    part = tmp_path / "t-0"
    part.mkdir()
    (part / "00000000000000000000.log").write_bytes(b"")            # an empty active segment
    capfd.readouterr()
    assert kbatch.tools.cli.main(["stats", str(part)]) == 0
    out = capfd.readouterr().out
    assert "None" not in out
    assert "offsets -," in out
