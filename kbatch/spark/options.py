"""The options of ``format("kbatch")``: Spark's Kafka source names, value
formats and meaning, checked strictly (pure Python; no Spark session needed).

One declarative table (``OPTIONS``) names every option: its Spark name,
aliases, parser, default, the query types it applies to and a doc line. An
unknown name or a value that does not parse raises ``OptionError`` (a
``KbatchError`` and ``ValueError``) with one line naming the option, the value
and what is accepted; the check runs when the query is planned, before any
file is read.

Offsets, as in Spark's Kafka source (``startingOffsets`` / ``endingOffsets``):

    "earliest" | "latest" | '{"topicA": {"0": 23, "1": -2}, "topicB": {"0": -1}}'

In the JSON, -2 is the earliest offset and -1 the latest; a JSON form must
name exactly the topic-partitions the query reads. Batch queries refuse
"latest" (or -1) as a start and "earliest" (or -2) as an end; streaming
queries refuse ending options. Timestamp options (``startingTimestamp``,
``startingOffsetsByTimestamp`` and the ending ones) map to the earliest offset
whose timestamp is >= the value; they take precedence over the offset
options in Spark's order (timestamp, by-timestamp JSON, offsets). A start
timestamp with no such offset follows ``startingOffsetsByTimestampStrategy``
(``error`` or ``latest``); an end timestamp with none means latest.

``resolve_range`` turns the options into the offsets ``[start, end)`` of one
partition given the partition's earliest and latest offsets; it raises
``DataLossError`` (or, with ``failOnDataLoss=false``, logs a warning and
skips) when the start lies below the earliest offset still on disk.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field
from typing import Callable

from kbatch.errors import KbatchError
from kbatch.lib.timestamps import to_millis

log = logging.getLogger("kbatch.spark")

EARLIEST, LATEST = -2, -1
COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType",
           "headers")


class OptionError(KbatchError, ValueError):
    """An option of ``format("kbatch")`` that is unknown, malformed or not
    allowed in this query type; the message is one line."""

    def __init__(self, option: str, value, accepted: str):
        from kbatch.lib.storage import is_secret_name
        if is_secret_name(option):
            value = "***"          # a password, key or token is never echoed
        self.option, self.value, self.accepted = option, value, accepted
        shown = value if isinstance(value, str) else json.dumps(value)
        if len(shown) > 200:
            shown = shown[:200] + "..."
        super().__init__(f"kbatch: option {option}={shown!r} is not accepted: {accepted}")

    def __reduce__(self):
        return (OptionError, (self.option, self.value, self.accepted))


class DataLossError(KbatchError):
    """Offsets a query asked for are no longer on disk (deleted by retention,
    a partition removed, a log truncated) and ``failOnDataLoss`` is true."""

    def __init__(self, message: str):
        self.reason = message
        super().__init__(
            f"kbatch: {message}. Some data may have been lost (deleted by retention or "
            "the partition removed); set the option failOnDataLoss=false to skip it with "
            "a warning instead")

    def __reduce__(self):
        return (_rebuild_data_loss, (self.reason,))


def _rebuild_data_loss(reason):
    return DataLossError(reason)


class _Bad(Exception):
    """Raised by a parser: ``accepted`` says what would have been."""

    def __init__(self, accepted: str):
        self.accepted = accepted


# --- value parsers -------------------------------------------------------------

def _bool(text: str) -> bool:
    low = text.strip().lower()
    if low not in ("true", "false"):
        raise _Bad("expected true or false")
    return low == "true"


def _int(lo: int | None = None, what: str = "an integer"):
    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise _Bad(f"expected {what}") from None
        if lo is not None and value < lo:
            raise _Bad(f"expected {what}")
        return value
    return parse


def _timestamp(text: str) -> int:
    """Milliseconds since the epoch (Spark's form), or an ISO 8601 time (a
    kbatch extension, UTC when no zone is given)."""
    accepted = "expected milliseconds since the epoch (or an ISO 8601 time), not negative"
    try:
        ms = to_millis(text.strip(), "timestamp")
    except (KbatchError, ValueError):
        raise _Bad(accepted) from None
    if ms < 0:
        raise _Bad(accepted)
    return ms


def _choice(*values: str):
    def parse(text: str) -> str:
        low = text.strip().lower()
        if low not in values:
            raise _Bad("expected one of " + ", ".join(values))
        return low
    return parse


_TIME_UNITS = {"us": 1e-3, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
               "d": 86_400_000}


def _duration_ms(text: str) -> int:
    """Spark's "time with units": 500ms, 10s, 15m, 1h, 2d; a bare number is ms."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if not m or m.group(2) not in ("", *_TIME_UNITS):
        raise _Bad("expected a duration such as 500ms, 30s, 15m, 1h (a bare number is ms)")
    return int(int(m.group(1)) * _TIME_UNITS.get(m.group(2) or "ms", 1))


def _json_object(text: str, example: str) -> dict:
    try:
        parsed = json.loads(text)
    except ValueError:
        raise _Bad(f"expected JSON such as {example}") from None
    if not isinstance(parsed, dict):
        raise _Bad(f"expected JSON such as {example}")
    return parsed


def _partition_number(key) -> int:
    if not isinstance(key, str) or not re.fullmatch(r"[0-9]+", key, re.ASCII):
        raise ValueError
    return int(key)


def _per_partition(text: str, example: str, lo: int) -> dict[tuple[str, int], int]:
    """JSON {"topic": {"0": n}} -> {(topic, 0): n}, every n >= lo."""
    parsed = _json_object(text, example)
    out = {}
    try:
        for topic, parts in parsed.items():
            if not topic or not isinstance(parts, dict):
                raise ValueError
            for p, n in parts.items():
                if isinstance(n, bool) or not isinstance(n, int) or n < lo:
                    raise ValueError
                out[(topic, _partition_number(p))] = n
    except ValueError:
        raise _Bad(f"expected JSON such as {example}") from None
    return out


_OFFSETS_EXAMPLE = '{"topicA": {"0": 23, "1": -2}} (-2 earliest, -1 latest)'


@dataclass(frozen=True)
class OffsetSpec:
    """``kind``: "earliest", "latest", "each" (one offset for every partition,
    a kbatch extension) or "json" (``offsets`` per topic-partition; -2/-1)."""

    kind: str
    offsets: dict = field(default_factory=dict)
    each: int = 0


def _offsets(text: str) -> OffsetSpec:
    low = text.strip().lower()
    if low in ("earliest", "latest"):
        return OffsetSpec(low)
    if re.fullmatch(r"[0-9]+", low, re.ASCII):
        return OffsetSpec("each", each=int(low))
    if not low.startswith("{"):
        raise _Bad(f'expected "earliest", "latest" or JSON such as {_OFFSETS_EXAMPLE}')
    return OffsetSpec("json", _per_partition(text, _OFFSETS_EXAMPLE, EARLIEST))


_TS_EXAMPLE = '{"topicA": {"0": 1700000000000, "1": 1700000000000}} (ms since the epoch)'


def _timestamps(text: str) -> dict[tuple[str, int], int]:
    return _per_partition(text, _TS_EXAMPLE, 0)


def _assign(text: str) -> dict[str, tuple[int, ...]]:
    example = '{"topicA": [0, 1], "topicB": [2, 4]}'
    parsed = _json_object(text, example)
    out = {}
    for topic, parts in parsed.items():
        if (not topic or not isinstance(parts, list)
                or any(isinstance(p, bool) or not isinstance(p, int) or p < 0 for p in parts)):
            raise _Bad(f"expected JSON such as {example}")
        out[topic] = tuple(sorted(set(parts)))
    if not any(out.values()):
        raise _Bad(f"expected at least one topic-partition, as in {example}")
    return out


def _subscribe(text: str) -> tuple[str, ...]:
    topics = tuple(t.strip() for t in text.split(",") if t.strip())
    if not topics:
        raise _Bad("expected a comma-separated list of topics")
    return topics


def _pattern(text: str) -> re.Pattern:
    if not text.strip():
        raise _Bad("expected a regular expression matched against whole topic names")
    try:
        return re.compile(text)
    except re.error as exc:
        raise _Bad(f"expected a regular expression ({exc})") from None


def _columns(text: str) -> tuple[str, ...]:
    names = tuple(c.strip() for c in text.split(",") if c.strip())
    lookup = {c.lower(): c for c in COLUMNS}
    if not names or any(n.lower() not in lookup for n in names):
        raise _Bad("expected a comma-separated list of " + ", ".join(COLUMNS))
    picked = {lookup[n.lower()] for n in names}
    return tuple(c for c in COLUMNS if c in picked)


def _paths(text: str) -> tuple[str, ...]:
    try:
        parsed = json.loads(text)
    except ValueError:
        raise _Bad("expected a JSON list of paths") from None
    if not isinstance(parsed, list) or not all(isinstance(p, str) for p in parsed):
        raise _Bad("expected a JSON list of paths")
    return tuple(parsed)


# --- the table ------------------------------------------------------------------

BOTH, BATCH, STREAM = "both", "batch", "streaming"


@dataclass(frozen=True)
class Opt:
    name: str                    # as Spark spells it
    attr: str                    # field of KafkaOptions
    parse: Callable[[str], object]
    default: object
    doc: str
    queries: str = BOTH
    aliases: tuple[str, ...] = ()
    ignored: bool = False        # accepted for Spark parity, no effect without a broker


OPTIONS: tuple[Opt, ...] = (
    # where to read
    Opt("path", "path", str, None, "a segment, partition directory or data directory "
        "(load(path))"),
    Opt("paths", "paths", _paths, (), "several paths (load([...]))"),
    Opt("assign", "assign", _assign, None, 'JSON {"topicA":[0,1]}: read these partitions only'),
    Opt("subscribe", "subscribe", _subscribe, None, "comma-separated topics: read these only"),
    Opt("subscribePattern", "subscribe_pattern", _pattern, None,
        "regex matched against whole topic names: read the topics it matches"),
    # offsets
    Opt("startingOffsets", "starting_offsets", _offsets, None,
        '"earliest" (batch default), "latest" (streaming default) or JSON per '
        "partition (-2 earliest, -1 latest); a bare number: that offset everywhere",
        aliases=("startingOffset",)),
    Opt("endingOffsets", "ending_offsets", _offsets, OffsetSpec("latest"),
        '"latest" (default) or JSON per partition (-1 latest), exclusive; a bare number: '
        "that offset everywhere", BATCH, aliases=("endingOffset",)),
    Opt("startingTimestamp", "starting_timestamp", _timestamp,
        None, "ms: every partition starts at the first offset with a timestamp >= it"),
    Opt("startingOffsetsByTimestamp", "starting_offsets_by_timestamp", _timestamps, None,
        'JSON {"topicA":{"0":ms}}: the same per partition'),
    Opt("startingOffsetsByTimestampStrategy", "starting_by_timestamp_strategy",
        _choice("error", "latest"), "error",
        "no offset at or after the starting timestamp: fail (error) or start at latest"),
    Opt("endingTimestamp", "ending_timestamp", _timestamp, None,
        "ms: stop before the first offset with a timestamp >= it (none: latest)", BATCH),
    Opt("endingOffsetsByTimestamp", "ending_offsets_by_timestamp", _timestamps, None,
        'JSON {"topicA":{"0":ms}}: the same per partition', BATCH),
    Opt("failOnDataLoss", "fail_on_data_loss", _bool, True,
        "offsets asked for are no longer on disk: fail (true) or skip them with a warning"),
    # what to read
    Opt("includeHeaders", "include_headers", _bool, False,
        "add the headers column (not decoded otherwise)"),
    Opt("level", "level", _choice("records", "batches"), "records",
        "records: a row per record; batches: a row per record batch from the CRC-checked "
        "batch headers (baseOffset, lastOffset, records, ...; sum(records) is the record "
        "count of the same read)", BATCH),
    Opt("columns", "columns", _columns, COLUMNS,
        "comma-separated columns of the schema to produce (kbatch): fewer columns, "
        "less decoding and less shipped to the JVM"),
    Opt("isolation", "isolation", _choice("read_uncommitted", "read_committed"),
        "read_uncommitted", "read_committed: no aborted or open transactions, nothing at "
        "or after the LSO", aliases=("kafka.isolation.level",)),
    Opt("visibility", "visibility", _choice("all", "consumer"), "all",
        "consumer: only what a consumer could fetch, [log start offset, high watermark) "
        "from the data directory's log-start-offset-checkpoint and "
        "replication-offset-checkpoint (earliest and latest mean those ends); all: every "
        "record on disk"),
    Opt("view", "view", _choice("all", "latest"), "all",
        "latest: the table a compacted topic stands for, one row per key (its record with "
        "the highest offset; tombstoned keys and records without a key left out), each "
        "Kafka partition read as one input partition", BATCH),
    Opt("validateCrc", "validate_crc", _bool, True, "check every batch's CRC"),
    Opt("onCorrupt", "on_corrupt", _choice("fail", "stop", "skip"), "fail",
        "damaged data: fail; stop each partition at its first damage; or skip to the next "
        "valid batch after each damaged range (both with a warning)"),
    Opt("maxDecompressedBytes", "max_decompressed_bytes", _int(1, "a positive byte count"),
        None, "refuse batches that decompress to more"),
    Opt("useIndex", "use_index", _bool, True,
        "seek and split from the checked .index/.timeindex files (false: a walk over "
        "every batch header on the driver)"),
    Opt("maxPartitionBytes", "max_partition_bytes", _int(1, "a positive byte count"),
        128 << 20, "split segments larger than this, pack smaller ones up to it"),
    Opt("minPartitions", "min_partitions", _int(1, "a positive integer"), None,
        "at least this many input partitions when the data allows (default: the cores)"),
    Opt("chunkRecords", "chunk_records", _int(1, "a positive integer"), 1 << 16,
        "records per Arrow batch"),
    # Schema Registry payloads (kbatch.payloads): value/key as typed structs
    Opt("valueFormat", "value_format", _choice("binary", "registry"), "binary",
        "registry: decode Confluent-framed values with schemaRegistry into a typed column"),
    Opt("keyFormat", "key_format", _choice("binary", "registry"), "binary",
        "registry: decode Confluent-framed keys likewise"),
    Opt("schemaRegistry", "schema_registry", str, None,
        "where the registry is: a data directory with _schemas, a _schemas partition, an "
        "export .json or a folder (a path or URL the executors can read)"),
    Opt("valueSubject", "value_subject", str, None,
        "the subject whose latest version reads the values (default: <topic>-value of "
        "the one subscribed topic)"),
    Opt("keySubject", "key_subject", str, None,
        "the subject whose latest version reads the keys (default: <topic>-key)"),
    Opt("valueMessage", "value_message", str, None,
        "Protobuf: the full name of the message the values are (default: the first "
        "message of the reader's schema; values of another message fail)"),
    Opt("keyMessage", "key_message", str, None,
        "Protobuf: the full name of the message the keys are"),
    Opt("payloadErrors", "payload_errors", _choice("fail", "null"), "fail",
        "a value that does not decode: fail the query, or a null and a <column>_error column"),
    # object storage (s3://, gs://, ... paths; storage.<key> options go to fsspec)
    Opt("layout", "layout", _choice("plain", "tiered"), "plain",
        "URL paths: plain (copied broker directories) or tiered (the tiered-storage "
        "plugin's bucket layout)", BATCH),
    Opt("privateKey", "private_key", str, None,
        "URL paths, tiered: the RSA private key (PEM text or a path on the executors)", BATCH),
    # streaming
    Opt("maxOffsetsPerTrigger", "max_offsets_per_trigger", _int(1, "a positive integer"),
        None, "at most this many offsets per micro-batch, split across partitions by lag",
        STREAM),
    Opt("minOffsetsPerTrigger", "min_offsets_per_trigger", _int(1, "a positive integer"),
        None, "wait for this many new offsets (or maxTriggerDelay) before a micro-batch",
        STREAM),
    Opt("maxTriggerDelay", "max_trigger_delay_ms", _duration_ms, 15 * 60_000,
        "longest wait for minOffsetsPerTrigger (time with units, default 15m)", STREAM),
    # Spark's broker options: accepted, no effect (there is no broker)
    Opt("kafka.bootstrap.servers", "bootstrap_servers", str, None,
        "ignored: kbatch reads files", ignored=True),
    Opt("kafka.group.id", "group_id", str, None, "ignored: no consumer group", ignored=True),
    Opt("groupIdPrefix", "group_id_prefix", str, None, "ignored: no consumer group",
        ignored=True),
    Opt("kafkaConsumer.pollTimeoutMs", "poll_timeout_ms", _int(0, "milliseconds"), None,
        "ignored: nothing is polled", ignored=True),
    Opt("fetchOffset.numRetries", "fetch_offset_retries", _int(0, "a count"), None,
        "ignored: offsets come from the files", ignored=True),
    Opt("fetchOffset.retryIntervalMs", "fetch_offset_retry_ms", _int(0, "milliseconds"), None,
        "ignored: offsets come from the files", ignored=True),
)

_BY_NAME = {n.lower(): o for o in OPTIONS for n in (o.name, *o.aliases)}
_ACCEPTED_NAMES = ", ".join(o.name for o in OPTIONS if o.name not in ("path", "paths"))


@dataclass
class KafkaOptions:
    """The parsed options of one query (see ``OPTIONS`` for each field)."""

    streaming: bool = False
    path: str | None = None
    paths: tuple = ()
    assign: dict | None = None
    subscribe: tuple | None = None
    subscribe_pattern: re.Pattern | None = None
    starting_offsets: OffsetSpec | None = None
    ending_offsets: OffsetSpec = OffsetSpec("latest")
    starting_timestamp: int | None = None
    starting_offsets_by_timestamp: dict | None = None
    starting_by_timestamp_strategy: str = "error"
    ending_timestamp: int | None = None
    ending_offsets_by_timestamp: dict | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    columns: tuple = COLUMNS
    level: str = "records"
    isolation: str = "read_uncommitted"
    visibility: str = "all"
    view: str = "all"
    validate_crc: bool = True
    on_corrupt: str = "fail"
    max_decompressed_bytes: int | None = None
    use_index: bool = True
    max_partition_bytes: int = 128 << 20
    min_partitions: int | None = None
    chunk_records: int = 1 << 16
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    bootstrap_servers: str | None = None
    group_id: str | None = None
    group_id_prefix: str | None = None
    poll_timeout_ms: int | None = None
    fetch_offset_retries: int | None = None
    fetch_offset_retry_ms: int | None = None
    value_format: str = "binary"
    key_format: str = "binary"
    schema_registry: str | None = None
    value_subject: str | None = None
    key_subject: str | None = None
    value_message: str | None = None
    key_message: str | None = None
    payload_errors: str = "fail"
    given: frozenset = frozenset()     # Spark names of the options set
    # where the bytes are (the door, kbatch.lib.open): storage.<key> options, layout,
    # privateKey; ``store``: the one Storage built from them (after parsing)
    storage: dict = field(default_factory=dict, repr=False)   # shown masked by store
    layout: str = "plain"
    private_key: str | None = field(default=None, repr=False)
    store: object = None       # Storage's repr masks its secrets

    # --- derived ------------------------------------------------------------

    @property
    def all_paths(self) -> list[str]:
        return list(self.paths) if self.paths else ([self.path] if self.path else [])

    @property
    def output_columns(self) -> tuple[str, ...]:
        """The schema's columns, in Spark's order: ``columns`` without
        ``headers`` unless ``includeHeaders`` (which adds it when ``columns``
        is not given)."""
        cols = self.columns
        if "columns" not in self.given and self.include_headers:
            return cols
        if not self.include_headers:
            cols = tuple(c for c in cols if c != "headers")
        return cols

    def partition_min(self) -> int:
        return self.min_partitions or os.cpu_count() or 1

    def wants(self, topic: str | None, partition: int | None) -> bool:
        """Whether assign/subscribe/subscribePattern choose this partition
        (all of them when none is given)."""
        if self.assign is not None:
            return partition in self.assign.get(topic, ())
        if self.subscribe is not None:
            return topic in self.subscribe
        if self.subscribe_pattern is not None:
            return topic is not None and self.subscribe_pattern.fullmatch(topic) is not None
        return True

    def select(self, found: list[tuple[str | None, int | None]]) -> list:
        """The partitions of ``found`` the query reads; ``assign`` naming one
        that is not there raises (it cannot be read)."""
        chosen = [tp for tp in found if self.wants(*tp)]
        there = "; the path holds " + (", ".join(
            f"{t} ({', '.join(str(p) for p in sorted(ps))})"
            for t, ps in sorted(_by_topic(found).items(), key=lambda kv: str(kv[0])))
            or "no partitions")
        if self.assign is not None:
            missing = sorted({(t, p) for t, ps in self.assign.items() for p in ps}
                             - set(found))
            if missing:
                raise OptionError("assign", json.dumps(
                    {t: list(ps) for t, ps in self.assign.items()}),
                    "no such partition under the path: "
                    + ", ".join(f"{t}-{p}" for t, p in missing) + there)
        if self.subscribe is not None and not self.streaming:
            # a batch query reads what is there; a stream may wait for a topic
            absent = sorted(set(self.subscribe) - {t for t, _ in found if t is not None})
            if absent:
                raise OptionError("subscribe", ",".join(self.subscribe),
                                  "no such topic under the path: " + ", ".join(absent) + there)
        if self.subscribe_pattern is not None and not self.streaming and not chosen:
            raise OptionError("subscribePattern", self.subscribe_pattern.pattern,
                              "no topic under the path matches it" + there)
        return chosen

    def check_cover(self, chosen: list[tuple[str, int]]) -> None:
        """Spark's rule: a JSON offsets or by-timestamp option names exactly
        the partitions the query reads."""
        specs = [("startingOffsets", self.starting_offsets),
                 ("startingOffsetsByTimestamp", self.starting_offsets_by_timestamp)]
        if not self.streaming:
            specs += [("endingOffsets", self.ending_offsets),
                      ("endingOffsetsByTimestamp", self.ending_offsets_by_timestamp)]
        want = set(chosen)
        for name, spec in specs:
            mapping = spec.offsets if isinstance(spec, OffsetSpec) else spec
            if mapping is None or (isinstance(spec, OffsetSpec) and spec.kind != "json"):
                continue
            if set(mapping) != want:
                extra = sorted(set(mapping) - want)
                absent = sorted(want - set(mapping))
                parts = []
                if extra:
                    parts.append("names partitions the query does not read: "
                                 + ", ".join(f"{t}-{p}" for t, p in extra))
                if absent:
                    parts.append("leaves out partitions the query reads: "
                                 + ", ".join(f"{t}-{p}" for t, p in absent[:10])
                                 + (" ..." if len(absent) > 10 else ""))
                raise OptionError(name, _spec_text(mapping), "; ".join(parts)
                                  + " (name every partition read, -2 earliest, -1 latest; "
                                  "choose partitions with assign or subscribe)")

    def start_spec(self, topic: str, partition: int):
        """("offset", n) | ("earliest",) | ("latest",) | ("timestamp", ms), in
        Spark's order of precedence."""
        if self.starting_timestamp is not None:
            return ("timestamp", self.starting_timestamp)
        if self.starting_offsets_by_timestamp is not None:
            return ("timestamp", self.starting_offsets_by_timestamp[(topic, partition)])
        spec = self.starting_offsets or OffsetSpec("latest" if self.streaming else "earliest")
        return _spec_at(spec, topic, partition)

    def end_spec(self, topic: str, partition: int):
        if self.ending_timestamp is not None:
            return ("timestamp", self.ending_timestamp)
        if self.ending_offsets_by_timestamp is not None:
            return ("timestamp", self.ending_offsets_by_timestamp[(topic, partition)])
        return _spec_at(self.ending_offsets, topic, partition)

    def resolve_start(self, topic, partition, earliest: int, latest,
                      offset_for_timestamp: Callable[[int], int | None]) -> int:
        """The first offset to read of one partition whose log holds
        ``[earliest, latest)``; a start below ``earliest`` is data loss.
        ``latest``: an int, or a function that finds it (called only when a
        start needs it: finding the log end reads the last segment's tail)."""
        spec = self.start_spec(topic, partition)
        if spec[0] == "earliest":
            return earliest
        if spec[0] == "latest":
            return latest() if callable(latest) else latest
        if spec[0] == "timestamp":
            found = offset_for_timestamp(spec[1])
            if found is not None:
                return found
            if self.starting_by_timestamp_strategy == "latest":
                return latest() if callable(latest) else latest
            raise OptionError("startingTimestamp" if self.starting_timestamp is not None
                              else "startingOffsetsByTimestamp", str(spec[1]),
                              f"{topic}-{partition} holds no record at or after it (set "
                              "startingOffsetsByTimestampStrategy=latest to start at latest)")
        return self.check_loss(topic, partition, spec[1], earliest, latest)

    def resolve_end(self, topic, partition, earliest: int, latest: int,
                    offset_for_timestamp: Callable[[int], int | None]) -> int:
        """The end (exclusive) of a batch read of one partition; an end past
        ``latest`` is ``latest``."""
        spec = self.end_spec(topic, partition)
        if spec[0] == "latest":
            return latest
        if spec[0] == "timestamp":
            found = offset_for_timestamp(spec[1])
            return latest if found is None else found
        return max(min(spec[1], latest), earliest)

    def check_loss(self, topic, partition, offset: int, earliest: int, latest: int) -> int:
        """``offset`` when ``earliest <= offset``; else data loss: raise or
        (failOnDataLoss=false) warn and return ``earliest``."""
        if offset >= earliest:
            return offset
        self.data_loss(f"{topic}-{partition}: offset {offset} was asked for but the log "
                       f"starts at {earliest}")
        return earliest

    def data_loss(self, message: str) -> None:
        if self.fail_on_data_loss:
            raise DataLossError(message)
        log.warning("kbatch: %s; skipping the missing offsets (failOnDataLoss=false)", message)


def _by_topic(found: list) -> dict:
    out: dict = {}
    for topic, partition in found:
        out.setdefault(topic, set()).add(partition)
    return out


def _spec_text(mapping: dict) -> str:
    out: dict = {}
    for (t, p), n in sorted(mapping.items()):
        out.setdefault(t, {})[str(p)] = n
    return json.dumps(out)


def _spec_at(spec: OffsetSpec, topic: str, partition: int):
    if spec.kind in ("earliest", "latest"):
        return (spec.kind,)
    if spec.kind == "each":
        return ("offset", spec.each)
    n = spec.offsets[(topic, partition)]
    return ("earliest",) if n == EARLIEST else ("latest",) if n == LATEST else ("offset", n)


def _storage_value(text: str):
    """A ``storage.<key>`` value for fsspec: JSON objects, lists, numbers
    and booleans decoded, anything else the string itself."""
    if text[:1] in "{[" or text in ("true", "false") or re.fullmatch(r"-?\d+(\.\d+)?", text):
        try:
            return json.loads(text)
        except ValueError:
            pass
    return text


def parse_options(options, *, streaming: bool = False) -> KafkaOptions:
    """Check and parse the options Spark passes (a case-insensitive mapping
    of strings) for a batch (``streaming=False``) or streaming query."""
    out = KafkaOptions(streaming=streaming)
    seen: dict[str, str] = {}
    kind = "streaming" if streaming else "batch"
    for key, raw in dict(options).items():
        name = str(key)
        if name.lower().startswith("storage.") and len(name) > len("storage."):
            out.storage[name.split(".", 1)[1]] = _storage_value(str(raw))
            continue
        opt = _BY_NAME.get(name.lower())
        if opt is None:
            raise OptionError(name, str(raw), "unknown option; accepted: " + _ACCEPTED_NAMES)
        if opt.name in seen:
            raise OptionError(name, str(raw), f"{seen[opt.name]} is also given and means "
                              "the same; give one")
        seen[opt.name] = name
        if opt.queries not in (BOTH, kind):
            raise OptionError(opt.name, str(raw), f"applies to {opt.queries} queries only, "
                              f"and this is a {kind} query")
        try:
            value = opt.parse(str(raw))
        except _Bad as bad:
            raise OptionError(opt.name, str(raw), bad.accepted) from None
        setattr(out, opt.attr, value)
    out.given = frozenset(seen)
    _check_combination(out, kind)
    out.store = _storage_of(out)
    return out


def _storage_of(o: KafkaOptions):
    """The query's one ``Storage`` (``storage.*``, ``layout``, ``privateKey``)."""
    from kbatch.errors import KbatchError
    from kbatch.lib.storage import Storage
    try:
        return Storage.of(storage_options=o.storage, layout=o.layout, private_key=o.private_key)
    except KbatchError as exc:
        name = "privateKey" if "private_key" in str(exc) else "storage"
        raise OptionError(name, "***", str(exc)) from None


def _check_combination(o: KafkaOptions, kind: str) -> None:
    for which in ("value", "key"):
        if getattr(o, f"{which}_format") == "registry" and not o.schema_registry:
            raise OptionError(f"{which}Format", "registry", "needs the schemaRegistry option (a data "
                              "directory with _schemas, an export .json or a folder)")
    chosen = [n for n in ("assign", "subscribe", "subscribePattern") if n in o.given]
    if len(chosen) > 1:
        raise OptionError(chosen[1], "...", f"give only one of assign, subscribe and "
                          f"subscribePattern ({', '.join(chosen)} are given)")
    if not o.all_paths:
        raise OptionError("path", "", "give a path: spark.read.format('kbatch').load(path)")
    start = o.starting_offsets
    if not o.streaming and start is not None:
        if start.kind == "latest" or (start.kind == "json" and LATEST in start.offsets.values()):
            raise OptionError("startingOffsets", _show(start), "a batch query cannot start "
                              'at latest (use "earliest", offsets or -2)')
    end = o.ending_offsets
    if not o.streaming:
        if end.kind == "earliest" or (end.kind == "json" and EARLIEST in end.offsets.values()):
            raise OptionError("endingOffsets", _show(end), "a batch query cannot end at "
                              'earliest (use "latest", offsets or -1)')
    if (o.max_offsets_per_trigger is not None and o.min_offsets_per_trigger is not None
            and o.min_offsets_per_trigger > o.max_offsets_per_trigger):
        raise OptionError("minOffsetsPerTrigger", str(o.min_offsets_per_trigger),
                          f"must not exceed maxOffsetsPerTrigger={o.max_offsets_per_trigger}")
    if "maxTriggerDelay" in o.given and o.min_offsets_per_trigger is None:
        raise OptionError("maxTriggerDelay", str(o.max_trigger_delay_ms) + "ms",
                          "applies only with minOffsetsPerTrigger, which is not given")
    if "columns" in o.given and "headers" in o.columns and not o.include_headers:
        raise OptionError("columns", ",".join(o.columns),
                          "the headers column needs includeHeaders=true")
    if o.level == "batches":
        for name in ("columns", "includeHeaders", "view", "valueFormat", "keyFormat",
                     "schemaRegistry", "valueSubject", "keySubject", "payloadErrors",
                     "valueMessage", "keyMessage"):
            if name in o.given:
                raise OptionError(name, "...", "applies to level=records; level=batches "
                                  "has its own columns (one row per batch)")
    if o.streaming and o.on_corrupt == "stop":
        # a batch read ends at the first damage; a stream would either stall
        # there for ever or move past it in the next micro-batch
        raise OptionError("onCorrupt", "stop", 'a stream cannot stop at damage and go on: use '
                          '"fail" (the default: the query fails naming file and byte) or "skip"')


def _show(spec: OffsetSpec) -> str:
    if spec.kind == "json":
        return _spec_text(spec.offsets)
    return str(spec.each) if spec.kind == "each" else spec.kind


def output_level(options) -> str:
    """``level`` of these options (read for ``DataSource.schema()``; a bad
    value raises here, the rest is checked by ``parse_options``)."""
    for key, raw in dict(options).items():
        opt = _BY_NAME.get(str(key).lower())
        if opt is not None and opt.attr == "level":
            try:
                return opt.parse(str(raw))
            except _Bad as bad:
                raise OptionError(opt.name, str(raw), bad.accepted) from None
    return "records"


def output_columns(options) -> tuple[str, ...]:
    """The schema's columns for these options (``DataSource.schema()`` runs
    before the query type is known: only ``columns`` and ``includeHeaders``
    are read here; everything else is checked by ``parse_options``)."""
    out = KafkaOptions()
    given = set()
    for key, raw in dict(options).items():
        opt = _BY_NAME.get(str(key).lower())
        if opt is not None and opt.attr in ("columns", "include_headers"):
            try:
                setattr(out, opt.attr, opt.parse(str(raw)))
            except _Bad as bad:
                raise OptionError(opt.name, str(raw), bad.accepted) from None
            given.add(opt.name)
    out.given = frozenset(given)
    if "columns" in given and "headers" in out.columns and not out.include_headers:
        raise OptionError("columns", ",".join(out.columns),
                          "the headers column needs includeHeaders=true")
    return out.output_columns


def schema_ddl(columns: tuple[str, ...]) -> str:
    """The Spark DDL schema of ``columns`` (Spark's Kafka source types)."""
    types = {"key": "binary", "value": "binary", "topic": "string", "partition": "int",
             "offset": "long", "timestamp": "timestamp", "timestampType": "int",
             "headers": "array<struct<key:string,value:binary>>"}
    return ", ".join(f"{c} {types[c]}" for c in columns)


def parity_table() -> str:
    """The README's table: every option, its query types and default."""
    rows = ["| option | queries | default | what format(\"kbatch\") does |",
            "|---|---|---|---|"]
    for o in OPTIONS:
        if o.name in ("path", "paths"):
            continue
        names = "`" + o.name + "`" + "".join(f" (alias `{a}`)" for a in o.aliases)
        default = "-" if o.default is None or o.default == () else _default_text(o.default)
        rows.append(f"| {names} | {o.queries} | {default} | {o.doc} |")
    return "\n".join(rows)


def _default_text(value) -> str:
    if isinstance(value, OffsetSpec):
        return value.kind
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return "all"
    return str(value)


__all__ = ["DataLossError", "KafkaOptions", "OPTIONS", "OffsetSpec", "OptionError",
           "output_columns", "output_level", "parse_options", "parity_table", "schema_ddl"]
