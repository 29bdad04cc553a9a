"""Options of format("kbatch") (kbatch.spark.options), without Spark: names,
value formats and meaning of Spark's Kafka source, strict errors."""

import json
import logging
import re

import pytest

from kbatch.errors import KbatchError
from kbatch.spark.options import (COLUMNS, OPTIONS, DataLossError, OffsetSpec, OptionError,
                                  output_columns, parity_table, parse_options, schema_ddl)

P = {"path": "/data"}


def opts(streaming=False, **kw):
    return parse_options({**P, **{k: str(v) for k, v in kw.items()}}, streaming=streaming)


def fails(match, streaming=False, **kw):
    with pytest.raises(OptionError, match=match) as info:
        opts(streaming, **kw)
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("kbatch: option ")
    assert isinstance(info.value, KbatchError) and isinstance(info.value, ValueError)
    return msg


def test_defaults_batch_and_streaming():
    o = opts()
    assert o.start_spec("t", 0) == ("earliest",)
    assert o.end_spec("t", 0) == ("latest",)
    assert o.isolation == "read_uncommitted" and o.validate_crc and o.fail_on_data_loss
    assert not o.include_headers and "headers" not in o.output_columns
    assert o.output_columns == COLUMNS[:-1]
    s = opts(streaming=True)
    assert s.start_spec("t", 0) == ("latest",)       # Spark's streaming default


def test_names_case_insensitive_and_aliases():
    o = parse_options({"PATH": "/x", "kafka.isolation.level": "READ_COMMITTED",
                       "startingoffset": "5"})
    assert o.isolation == "read_committed" and o.start_spec("t", 1) == ("offset", 5)
    msg = fails("give one", startingOffset="5", startingOffsets="6")
    assert "startingOffset" in msg


@pytest.mark.parametrize("name,value,accepted", [
    ("isolaton", "read_committed", "unknown option"),
    ("startingOffset", "lates", '"earliest", "latest" or JSON'),
    ("startingOffsets", '{"t": {"0": "x"}}', "JSON such as"),
    ("startingOffsets", '{"t": {"a": 1}}', "JSON such as"),
    ("startingOffsets", '{"t": {"0": -3}}', "JSON such as"),
    ("startingOffsets", '{"t": [0]}', "JSON such as"),
    ("startingOffsets", '{"t": {"0": 1}', "JSON such as"),
    ("endingOffsets", "-1", '"earliest", "latest" or JSON'),
    ("validateCrc", "nope", "true or false"),
    ("includeHeaders", "yes", "true or false"),
    ("failOnDataLoss", "1", "true or false"),
    ("useIndex", "", "true or false"),
    ("isolation", "serializable", "read_uncommitted, read_committed"),
    ("onCorrupt", "maybe", "fail, stop, skip"),
    ("maxDecompressedBytes", "0", "positive byte count"),
    ("maxDecompressedBytes", "1e6", "positive byte count"),
    ("minPartitions", "-1", "positive integer"),
    ("startingTimestamp", "yesterday", "milliseconds since the epoch"),
    ("startingTimestamp", "-5", "milliseconds since the epoch"),
    ("startingOffsetsByTimestamp", '{"t": {"0": -1}}', "ms since the epoch"),
    ("startingOffsetsByTimestampStrategy", "skip", "error, latest"),
    ("assign", "t-0", "JSON such as"),
    ("assign", '{"t": [0, -1]}', "JSON such as"),
    ("assign", '{"t": []}', "at least one"),
    ("subscribe", " , ", "comma-separated list of topics"),
    ("subscribePattern", "(", "regular expression"),
    ("columns", "offset,size", "comma-separated list of key"),
    ("paths", "/a", "JSON list of paths"),
])
def test_malformed_values_name_option_value_and_accepted(name, value, accepted):
    msg = fails(re.escape(accepted), **{name: value})
    assert repr(value) in msg
    canonical = name if name.lower() != "startingoffset" else "startingOffsets"
    assert f"option {canonical}=" in msg or f"option {name}=" in msg


def test_unknown_option_lists_the_accepted_names():
    msg = fails("unknown option", isolaton="read_committed")
    for name in ("isolation", "startingOffsets", "includeHeaders", "maxOffsetsPerTrigger"):
        assert name in msg


def test_batch_refuses_latest_start_and_earliest_end():
    fails("cannot start at latest", startingOffsets="latest")
    fails("cannot start at latest", startingOffsets='{"t": {"0": -1}}')
    fails("cannot end at earliest", endingOffsets="earliest")
    fails("cannot end at earliest", endingOffsets='{"t": {"0": -2}}')
    # streaming starts at latest happily
    assert opts(True, startingOffsets="latest").start_spec("t", 0) == ("latest",)


def test_query_type_of_each_option():
    fails("streaming queries only", maxOffsetsPerTrigger="10")
    fails("batch queries only", streaming=True, endingOffsets="latest")
    fails("batch queries only", streaming=True, endingTimestamp="5")
    fails("batch queries only", streaming=True, endingOffsetsByTimestamp='{"t": {"0": 5}}')
    o = opts(True, maxOffsetsPerTrigger=10, minOffsetsPerTrigger=4, maxTriggerDelay="2s")
    assert (o.max_offsets_per_trigger, o.min_offsets_per_trigger, o.max_trigger_delay_ms) == \
        (10, 4, 2000)


@pytest.mark.parametrize("text,ms", [("15m", 900_000), ("250", 250), ("250ms", 250),
                                     ("3s", 3000), ("1h", 3_600_000), ("2d", 172_800_000),
                                     ("5min", 300_000)])
def test_max_trigger_delay_units(text, ms):
    o = opts(True, minOffsetsPerTrigger=1, maxTriggerDelay=text)
    assert o.max_trigger_delay_ms == ms


def test_timestamps_in_ms_or_iso_8601():
    assert opts(startingTimestamp="1700000000000").starting_timestamp == 1_700_000_000_000
    assert opts(startingTimestamp="2023-11-14T22:13:20Z").starting_timestamp == \
        1_700_000_000_000
    assert opts(endingTimestamp="1970-01-01").ending_timestamp == 0


def test_combinations():
    fails("maxTriggerDelay", streaming=True, maxTriggerDelay="5s")
    fails("must not exceed", streaming=True, maxOffsetsPerTrigger=5, minOffsetsPerTrigger=6)
    fails("only one of assign, subscribe", subscribe="a", subscribePattern="a.*")
    fails("needs includeHeaders", columns="offset,headers")
    with pytest.raises(OptionError, match="give a path"):
        parse_options({})


def test_columns_and_headers():
    assert opts(columns="partition, OFFSET").output_columns == ("partition", "offset")
    assert opts(includeHeaders="true").output_columns == COLUMNS
    assert opts(includeHeaders="true", columns="headers,key").output_columns == ("key", "headers")
    assert schema_ddl(("partition", "offset", "headers")) == \
        "partition int, offset long, headers array<struct<key:string,value:binary>>"


def test_selection():
    found = [("a", 0), ("a", 1), ("ab", 0), ("b", 3)]
    assert opts().select(found) == found
    assert opts(subscribe="b, a").select(found) == [("a", 0), ("a", 1), ("b", 3)]
    # a pattern matches whole names, as Java's Pattern.matches
    assert opts(subscribePattern="a").select(found) == [("a", 0), ("a", 1)]
    assert opts(subscribePattern="a.*").select(found) == [("a", 0), ("a", 1), ("ab", 0)]
    assert opts(assign='{"a": [1], "b": [3]}').select(found) == [("a", 1), ("b", 3)]
    with pytest.raises(OptionError, match="no such partition under the path: a-7"):
        opts(assign='{"a": [1, 7]}').select(found)


def test_json_offsets_must_name_exactly_the_partitions_read():
    chosen = [("a", 0), ("a", 1)]
    o = opts(startingOffsets='{"a": {"0": 5, "1": -2}}', endingOffsets='{"a": {"0": 9, "1": -1}}')
    o.check_cover(chosen)
    assert o.start_spec("a", 0) == ("offset", 5) and o.start_spec("a", 1) == ("earliest",)
    assert o.end_spec("a", 0) == ("offset", 9) and o.end_spec("a", 1) == ("latest",)
    with pytest.raises(OptionError, match="leaves out partitions the query reads: a-1"):
        opts(startingOffsets='{"a": {"0": 5}}').check_cover(chosen)
    with pytest.raises(OptionError, match="names partitions the query does not read: b-0"):
        opts(endingOffsets='{"a": {"0": 5, "1": 5}, "b": {"0": 1}}').check_cover(chosen)
    with pytest.raises(OptionError, match="startingOffsetsByTimestamp"):
        opts(startingOffsetsByTimestamp='{"a": {"0": 5}}').check_cover(chosen)
    # "earliest"/"latest"/a bare number need no cover
    opts(startingOffsets="7", endingOffsets="latest").check_cover(chosen)


def _lookup(table):
    """offset_for_timestamp over a partition whose record i has timestamp table[i]."""
    def find(ts):
        hits = [i for i, t in enumerate(table) if t >= ts]
        return hits[0] if hits else None
    return find


def test_resolve_start_and_end():
    times = _lookup([100, 100, 200, 150, 300])          # offsets 0..4
    o = opts(startingOffsets='{"t": {"0": 2}}', endingOffsets='{"t": {"0": 4}}')
    assert (o.resolve_start("t", 0, 0, 5, times), o.resolve_end("t", 0, 0, 5, times)) == (2, 4)
    # an end past the log end is the log end
    assert opts(endingOffsets="99").resolve_end("t", 0, 0, 5, times) == 5
    # timestamps: the first offset whose timestamp is >= the value
    o = opts(startingTimestamp=150, endingTimestamp=250)
    assert (o.resolve_start("t", 0, 0, 5, times), o.resolve_end("t", 0, 0, 5, times)) == (2, 4)
    # precedence: startingTimestamp > startingOffsetsByTimestamp > startingOffsets
    o = opts(startingTimestamp=300, startingOffsetsByTimestamp='{"t": {"0": 150}}',
             startingOffsets="1")
    assert o.resolve_start("t", 0, 0, 5, times) == 4
    o = opts(startingOffsetsByTimestamp='{"t": {"0": 150}}', startingOffsets="1")
    assert o.resolve_start("t", 0, 0, 5, times) == 2
    o = opts(endingOffsetsByTimestamp='{"t": {"0": 101}}', endingOffsets="1")
    assert o.resolve_end("t", 0, 0, 5, times) == 2
    # no record that recent: the end is latest; the start fails or goes to latest
    assert opts(endingTimestamp=999).resolve_end("t", 0, 0, 5, times) == 5
    with pytest.raises(OptionError, match="startingOffsetsByTimestampStrategy=latest"):
        opts(startingTimestamp=999).resolve_start("t", 0, 0, 5, times)
    o = opts(startingTimestamp=999, startingOffsetsByTimestampStrategy="LATEST")
    assert o.resolve_start("t", 0, 0, 5, times) == 5


def test_fail_on_data_loss_both_ways(caplog):
    never = _lookup([])
    with pytest.raises(DataLossError, match=r"t-0: offset 3 was asked for but the log starts "
                                            r"at 10.*failOnDataLoss=false"):
        opts(startingOffsets="3").resolve_start("t", 0, 10, 20, never)
    o = opts(startingOffsets="3", failOnDataLoss="false")
    with caplog.at_level(logging.WARNING, logger="kbatch.spark"):
        assert o.resolve_start("t", 0, 10, 20, never) == 10
    assert "offset 3 was asked for" in caplog.text
    # -2 / earliest are never data loss
    assert opts(startingOffsets='{"t": {"0": -2}}').resolve_start("t", 0, 10, 20, never) == 10
    import pickle
    err = pickle.loads(pickle.dumps(DataLossError("x")))
    assert isinstance(err, DataLossError) and str(err) == str(DataLossError("x"))


def test_ignored_broker_options_are_accepted():
    o = opts(**{"kafka.bootstrap.servers": "h:9092", "groupIdPrefix": "g",
                "kafkaConsumer.pollTimeoutMs": "100"})
    assert o.bootstrap_servers == "h:9092"
    fails("unknown option", **{"kafka.sasl.mechanism": "PLAIN"})


def test_every_option_parses_its_documented_default_kind():
    names = {o.name.lower() for o in OPTIONS}
    assert len(names) == len(OPTIONS)
    table = parity_table()
    for o in OPTIONS:
        if o.name not in ("path", "paths"):
            assert f"`{o.name}`" in table
    assert isinstance(opts().ending_offsets, OffsetSpec)
    json.dumps(parity_table())


def test_output_columns_before_the_query_type_is_known():
    assert output_columns({"path": "/x", "maxOffsetsPerTrigger": "5"}) == COLUMNS[:-1]
    assert output_columns({"INCLUDEHEADERS": "true"}) == COLUMNS
    assert output_columns({"columns": "offset,partition"}) == ("partition", "offset")
    with pytest.raises(OptionError, match="includeHeaders=true"):
        output_columns({"columns": "headers"})
    with pytest.raises(OptionError, match="true or false"):
        output_columns({"includeHeaders": "si"})
