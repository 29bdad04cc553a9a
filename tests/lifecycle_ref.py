"""Models of a log's life, written from Apache Kafka's source (not from
kbatch; nothing here imports kbatch), for tests/test_latest.py,
test_recover.py, test_retention.py and test_compact.py.

    write_partition(dir, segments)     a partition directory of raw batches
                                       (bytes from tests/kafka_ref.py's encoders)
    latest_model(records, aborted)     the table a compacted topic stands for
    header(batch) / walk(buf)          batch headers and FileLogInputStream's walk
    recover_model(buf, ...)            LogSegment.recover: valid prefix + indexes
    EpochCacheModel                    LeaderEpochFileCache (TreeMap by epoch)
    retention_model(...)               UnifiedLog.deleteOldSegments' predicates
    clean_model(...)                   Cleaner.cleanSegments' record rules

Each model names the Kafka class and method it follows (apache/kafka trunk,
storage/ and core/ modules).
"""

from __future__ import annotations

import pathlib
import struct

import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")   # DefaultRecordBatch's 61-byte header
LEGACY = struct.Struct(">qiIbb")             # offset, size, crc, magic, attributes


def write_partition(directory, segments: list[list[bytes]], bases: list[int] | None = None):
    """A ``<topic>-<partition>`` directory: one ``.log`` file per list of
    raw batches, named by its first batch's base offset (or ``bases``)."""
    d = pathlib.Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    for i, batches in enumerate(segments):
        base = bases[i] if bases else struct.unpack_from(">q", batches[0])[0]
        (d / f"{base:020d}.log").write_bytes(b"".join(batches))
    return d


def latest_model(records, aborted=frozenset()):
    """``{key: record}`` of the highest offset per key, tombstones (value
    None) and null keys left out; ``records`` are kafka-python rows
    (``tests/kafka_ref.read_with_kafka_python``) with their producer id
    and ``transactional`` flag; ``aborted``: ``(producer_id, offset)`` of
    records of aborted transactions, which never count."""
    table = {}
    for rec in sorted(records, key=lambda r: r["offset"]):
        if (rec.get("producer_id"), rec["offset"]) in aborted or rec["key"] is None:
            continue
        table[rec["key"]] = rec
    return {k: r for k, r in table.items() if r["value"] is not None}


# --- batch headers, as FileLogInputStream reads them ----------------------------

def header(buf: bytes, pos: int) -> dict:
    """The 61-byte header of the magic-2 batch at ``pos`` as a dict."""
    (base, length, ple, magic, crc, attrs, last_delta, first_ts, max_ts, pid, epoch,
     seq, count) = HEADER.unpack_from(buf, pos)
    return {"base_offset": base, "length": length, "size": length + 12, "magic": magic,
            "crc": crc, "attributes": attrs, "last_offset": base + last_delta,
            "first_timestamp": first_ts, "max_timestamp": max_ts, "producer_id": pid,
            "producer_epoch": epoch, "records_count": count, "position": pos,
            "leader_epoch": ple, "transactional": bool(attrs & 0x10),
            "control": bool(attrs & 0x20)}


# --- recovery: LogSegment.recover over FileLogInputStream --------------------------

HEADER_SIZE_UP_TO_MAGIC = 17      # FileLogInputStream
RECORD_OVERHEAD_V0 = 14           # LegacyRecord.RECORD_OVERHEAD_V0
RECORD_BATCH_OVERHEAD = 61        # DefaultRecordBatch.RECORD_BATCH_OVERHEAD


def walk(buf: bytes):
    """FileLogInputStream.nextBatch then batch.ensureValid(), magic 2 only:
    ``(batches, valid_bytes)``: the headers of the valid batches, and where
    the walk stopped (a short or past-the-end batch ends it quietly; a size
    below the minimum, a short v2 batch or a CRC mismatch is
    CorruptRecordException, caught by LogSegment.recover: the same cut)."""
    pos, out, end = 0, [], len(buf)
    while pos < end - HEADER_SIZE_UP_TO_MAGIC:
        size = struct.unpack_from(">i", buf, pos + 8)[0]
        if size < RECORD_OVERHEAD_V0:
            break                                   # CorruptRecordException
        if pos > end - 12 - size:
            break                                   # past the end: nextBatch() is null
        if buf[pos + 16] != 2 or size + 12 < RECORD_BATCH_OVERHEAD:
            break                                   # ensureValid (this model: magic 2)
        h = header(buf, pos)
        if crc32c.crc32c(buf[pos + 21:pos + 12 + size]) != h["crc"]:
            break
        out.append(h)
        pos += 12 + size
    return out, pos


def control_type(buf: bytes, h: dict) -> int | None:
    """The type of an uncompressed control batch's record (key ``>hh``)."""
    if h["records_count"] == 0:
        return None
    p = h["position"] + 61
    _, p = _varint(buf, p)          # length
    p += 1                          # attributes
    _, p = _varint(buf, p)          # timestamp delta
    _, p = _varint(buf, p)          # offset delta
    klen, p = _varint(buf, p)
    return struct.unpack_from(">h", buf, p + 2)[0] if klen >= 4 else None


def _varint(buf: bytes, p: int) -> tuple[int, int]:
    raw = shift = 0
    while True:
        b = buf[p]
        p += 1
        raw |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), p


class EpochCacheModel:
    """LeaderEpochFileCache (storage/.../epoch/LeaderEpochFileCache.java):
    ``epochs``, a map epoch -> start offset kept sorted by epoch (Java's
    TreeMap); every method as the Java one of that name."""

    def __init__(self, file_entries=()):
        self.epochs: dict[int, int] = {}
        for epoch, start in file_entries:         # the constructor: checkpoint.read().forEach(assign)
            self.assign(epoch, start)

    def entries(self):
        return sorted(self.epochs.items())

    def latest(self):
        return self.entries()[-1] if self.epochs else None

    def _is_update_needed(self, epoch, start):
        last = self.latest()
        return last is None or epoch != last[0] or start < last[1]

    def _remove_while_matching(self, descending, predicate):
        removed = []
        for epoch, start in (reversed(self.entries()) if descending else self.entries()):
            if not predicate(epoch, start):
                break
            removed.append((epoch, start))
            del self.epochs[epoch]
        return removed

    def assign(self, epoch, start):
        if epoch < 0 or start < 0:
            raise ValueError("IllegalArgumentException")
        if not self._is_update_needed(epoch, start):
            return False
        # maybeTruncateNonMonotonicEntries
        self._remove_while_matching(True, lambda e, o: e >= epoch or o >= start)
        self.epochs[epoch] = start
        return True

    def truncate_from_end(self, end):
        last = self.latest()
        if end >= 0 and last is not None and last[1] >= end:
            self._remove_while_matching(True, lambda e, o: o >= end)

    def truncate_from_start(self, start):
        removed = self._remove_while_matching(False, lambda e, o: o <= start)
        if removed:
            self.epochs[removed[-1][0]] = start


def recover_model(segments: list[tuple[int, bytes]], interval: int = 4096,
                  epoch_file=None, log_start: int | None = None):
    """LogLoader.recoverLog + LogSegment.recover over ``[(base offset,
    bytes)]``: per kept segment ``(base, valid_bytes, .index bytes,
    .timeindex bytes, .txnindex bytes)``; segments after the first cut are
    gone. Index rule: an entry (batch last offset, batch position) when
    ``validBytes - lastIndexEntry > indexIntervalBytes`` before the batch
    is added; the time index gets maxTimestampSoFar (and the last offset of
    the batch that raised it) when larger than its last entry, and once
    more at the end. Producer state as ProducerStateManager: an aborted
    non-empty transaction's entry (version 0, pid, first, marker offset,
    LSO) in the segment of its marker. Leader epochs as LogLoader.load: the
    cache built from ``epoch_file``'s entries, each batch's epoch assigned
    when larger than the latest (LogSegment.recover), then truncateFromEnd
    at the log end offset and truncateFromStart at the log start offset
    checkpoint as loaded (``log_start``; 0 without one). A checkpoint past
    the recovered end leaves one empty segment at it and no epochs
    (deleteSegmentsIfLogStartGreaterThanLogEnd)."""
    kept, ongoing = [], {}
    cache = EpochCacheModel(epoch_file or ())
    end = segments[0][0] if segments else None
    for base, buf in segments:
        batches, valid = walk(buf)
        index, times, txn = [], [], []
        last_entry, max_ts, max_off = 0, -1, -1
        for h in batches:
            if h["max_timestamp"] > max_ts:
                max_ts, max_off = h["max_timestamp"], h["last_offset"]
            if h["position"] - last_entry > interval:
                index.append(struct.pack(">ii", h["last_offset"] - base, h["position"]))
                if max_ts > (struct.unpack_from(">q", times[-1])[0] if times else -1):
                    times.append(struct.pack(">qi", max_ts, max_off - base))
                last_entry = h["position"]
            if h["leader_epoch"] >= 0 and (cache.latest() is None
                                           or h["leader_epoch"] > cache.latest()[0]):
                cache.assign(h["leader_epoch"], h["base_offset"])
            end = h["last_offset"] + 1
            pid = h["producer_id"]
            if pid >= 0 and not h["control"] and h["transactional"]:
                ongoing.setdefault(pid, h["base_offset"])
            elif pid >= 0 and h["control"]:
                ctype = control_type(buf, h)
                if ctype in (0, 1) and pid in ongoing:
                    others = sorted(f for p, f in ongoing.items() if p != pid)
                    lso = others[0] if others else h["base_offset"] + 1
                    if ctype == 0:
                        txn.append(struct.pack(">hqqqq", 0, pid, ongoing[pid],
                                               h["base_offset"], lso))
                    del ongoing[pid]
        if max_ts > (struct.unpack_from(">q", times[-1])[0] if times else -1):
            times.append(struct.pack(">qi", max_ts, max_off - base))
        kept.append((base, valid, b"".join(index), b"".join(times), b"".join(txn)))
        if valid < len(buf):
            break
    if segments:
        end = max(end, kept[-1][0])
        checkpoint = 0 if log_start is None else log_start    # LogManager.loadLog's default
        if end < checkpoint:
            # deleteSegmentsIfLogStartGreaterThanLogEnd: every segment deleted,
            # the epoch cache cleared, an empty segment opened at the checkpoint
            kept = [(checkpoint, 0, b"", b"", b"")]
            cache, end = EpochCacheModel(()), checkpoint
        cache.truncate_from_end(end)                # LogLoader.load: truncateFromEnd(nextOffset)
        cache.truncate_from_start(checkpoint)       # then truncateFromStart(checkpoint)
    return kept, cache.entries()


# --- retention: UnifiedLog.deleteOldSegments ------------------------------------------

def retention_model(segments: list[tuple[int, bytes, int]], *, log_start: int, hw: int | None,
                    retention_ms: int | None, retention_bytes: int | None, now: int):
    """``segments``: ``(base offset, bytes, mtime ms)`` in order. Returns
    ``(deleted [(base, reason)], new log start, rolled)`` by the three
    passes of deleteOldSegments (logStartOffset, size, ms), each a prefix
    (deletableSegments: stops at the first miss, at an upper bound above
    the high watermark, at an empty last segment), rolling an empty segment
    at the log end offset when all would go (deleteSegments); a log start
    above the log end deletes every segment first, as loading the directory
    does (LogLoader)."""
    infos = []
    end = segments[0][0]
    for base, buf, mtime in segments:
        batches, _ = walk(buf)
        largest = max((h["max_timestamp"] for h in batches), default=-1)
        infos.append([base, len(buf), largest if largest >= 0 else mtime])
        if batches:
            end = max(end, batches[-1]["last_offset"] + 1)
        end = max(end, base)
    hw = end if hw is None else hw
    # the checkpoint's high watermark as the partition loads it
    # (Partition.createLogIfNotExists -> UnifiedLog.updateHighWatermark):
    # at least the log start offset, at most the log end offset
    hw = min(max(hw, log_start, infos[0][0]), end)
    if log_start > end:
        # LogLoader.deleteSegmentsIfLogStartGreaterThanLogEnd: loading the
        # directory deletes every segment and opens an empty one at the start
        return [(s[0], "log_start_offset") for s in infos], log_start, True
    segs, deleted, start, rolled = infos, [], max(log_start, infos[0][0]), False

    def prefix(pred):
        out = []
        for k, s in enumerate(segs):
            nxt = segs[k + 1] if k + 1 < len(segs) else None
            upper = nxt[0] if nxt else end
            if hw >= upper and pred(s, nxt) and not (nxt is None and s[1] == 0):
                out.append(s)
            else:
                break
        return out

    def remove(found, reason):
        nonlocal segs, start, rolled
        if not found:
            return
        if len(found) == len(segs):
            new = [end, 0, -1]
            if found[-1][0] == end:
                found = found[:-1]
            else:
                rolled = True
                segs = segs + [new]
        if not found:
            return
        start = max(start, segs[len(found)][0])
        deleted.extend((s[0], reason) for s in found)
        segs = segs[len(found):]

    remove(prefix(lambda s, nxt: nxt is not None and nxt[0] <= start), "log_start_offset")
    if retention_bytes is not None and retention_bytes >= 0:
        size = sum(s[1] for s in segs)
        if size >= retention_bytes:
            left = [size - retention_bytes]

            def by_size(s, _):
                if left[0] - s[1] >= 0:
                    left[0] -= s[1]
                    return True
                return False
            remove(prefix(by_size), "size")
    if retention_ms is not None and retention_ms >= 0:
        remove(prefix(lambda s, _: now - s[2] > retention_ms), "time")
    return deleted, start, rolled


# --- the log cleaner: Cleaner.cleanInto / MemoryRecords.filterTo ----------------------

def clean_model(segments: list[list[dict]], *, now: int, delete_retention_ms: int,
                expiration_ms: int = 86_400_000, first_dirty: int | None = None,
                map_keys: int = 5_033_164, min_compaction_lag_ms: int = 0,
                min_cleanable_dirty_ratio: float | None = None,
                max_compaction_lag_ms: int | None = None):
    """One cleaning of a partition. ``segments``: per segment, kafka-python
    batch dicts (``tests/kafka_ref.read_with_kafka_python``) each with
    ``records`` (its data rows) and ``control_type``. Returns, per batch
    in order, ``None`` (gone) or ``(kept offsets, horizon or None, empty)``
    and where the run ended (the offset map's latest offset + 1: the first
    uncleanable offset unless the map filled; the cleaner checkpoint after
    it). ``first_dirty``: the cleaner checkpoint (None: the log start);
    ``map_keys``: the keys the offset map holds (128 MiB / 24 B x 0.9);
    ``min_compaction_lag_ms`` (min.compaction.lag.ms), and with
    ``min_cleanable_dirty_ratio`` whether the broker picks the log at all
    (LogCleanerManager.grabFilthiestCompactedLog, ``max_compaction_lag_ms``).
    A segment's size is the sum of its batches' sizes, its largest
    timestamp their largest max timestamp.

    Written from LogCleaner.scala: the cleanable range ends at the active
    segment's base (or the first open transaction); the offset map holds
    the latest offset per key of non-aborted data below it; a record stays
    when it is its key's latest and has a value, or is a tombstone not past
    its batch's delete horizon; no key: dropped; aborted batches lose their
    records; markers go by CleanedTransactionMetadata (ABORT kept while its
    data was seen, COMMIT while its batches were seen), and once
    discardable only after a delete horizon; an emptied batch stays as a
    header when it holds an active producer's last data offset or ends the
    round; a kept batch with tombstones (or a discardable marker) and no
    horizon gets ``now + delete_retention_ms``."""
    flat = [(k, b) for k, seg in enumerate(segments) for b in seg]
    active_base = segments[-1][0]["base_offset"] if segments[-1] else None
    # open and aborted transactions, from the markers
    ongoing, aborted = {}, []
    for _, b in flat:
        pid = b["producer_id"]
        if pid < 0:
            continue
        if not b["is_control"]:
            if b["is_transactional"]:
                ongoing.setdefault(pid, b["base_offset"])
        elif b["control_type"] in (0, 1) and pid in ongoing:
            if b["control_type"] == 0:
                aborted.append((pid, ongoing[pid], b["base_offset"]))
            del ongoing[pid]
    bases = [seg[0]["base_offset"] for seg in segments if seg]
    uncleanable = min([active_base] + list(ongoing.values()))
    # LogCleanerManager.calculateCleanableBytes: the base of the segment holding it
    uncleanable = max([b for b in bases if b <= uncleanable], default=uncleanable)
    # LogCleanerManager.cleanableOffsets: the dirty range starts at the
    # cleaner checkpoint (``first_dirty``), else at the log start
    log_end = max([b["last_offset"] + 1 for _, b in flat] + bases)
    dirty_from = bases[0] if first_dirty is None or not bases[0] <= first_dirty <= log_end \
        else first_dirty
    # nonActiveLogSegmentsFrom(firstDirtyOffset): from the segment holding it
    # (floorKey) up to the active segment, which is left out
    home_k = max((k for k in range(len(bases)) if bases[k] <= dirty_from), default=0)
    dirty_non_active = range(home_k, len(segments) - 1)
    # cleanableOffsets: min.compaction.lag.ms; the first such segment whose
    # largestTimestamp > now - minCompactionLagMs is uncleanable
    if min_compaction_lag_ms > 0:
        for k in dirty_non_active:
            if max(b["max_timestamp"] for b in segments[k]) > now - min_compaction_lag_ms:
                uncleanable = min(uncleanable, bases[k])
                break
    uncleanable = max(dirty_from, uncleanable)
    picked = True
    if min_cleanable_dirty_ratio is not None:
        # LogToClean: cleanBytes = logSegments(-1, firstDirty); cleanableBytes
        # from calculateCleanableBytes (the first uncleanable segment: the
        # non-active one holding the offset, else the active one)
        sizes = [sum(b["size"] for b in seg) for seg in segments]
        first_unclean = max(b for b in bases if b <= uncleanable)
        low = min(dirty_from, first_unclean)
        low = max(b for b in bases if b <= low)
        clean_bytes = sum(sz for b, sz in zip(bases, sizes) if b < dirty_from)
        cleanable_bytes = sum(sz for b, sz in zip(bases, sizes) if low <= b < first_unclean)
        total = clean_bytes + cleanable_bytes
        ratio = cleanable_bytes / total if total else 0.0
        # maxCompactionDelay: the dirty non-active segments' first batch timestamps
        firsts = [segments[k][0]["max_timestamp"] for k in dirty_non_active
                  if segments[k][0]["max_timestamp"] > 0]
        until = now - (max_compaction_lag_ms if max_compaction_lag_ms is not None
                       else (1 << 63) - 1)
        need_now = bool(firsts) and min(firsts) < until
        picked = (need_now and cleanable_bytes > 0) or ratio > min_cleanable_dirty_ratio

    def is_aborted(b):
        return b["is_transactional"] and not b["is_control"] and any(
            p == b["producer_id"] and f <= b["base_offset"] <= last for p, f, last in aborted)

    # Cleaner.buildOffsetMap over the dirty segments: a keyed record at or
    # past the dirty start is put unless the map already holds ``map_keys``
    # (then the map is full and the pass ends there); latestOffset is set
    # to each batch's last offset once the batch is read whole, and to the
    # next segment's base - 1 once a segment is
    latest, latest_offset, full = {}, -1, False
    home_of_start = max(b for b in bases if b <= dirty_from) \
        if dirty_from < uncleanable and picked else None
    for k, seg in enumerate(segments):
        if home_of_start is None or full or not seg or bases[k] < home_of_start \
                or bases[k] >= uncleanable:
            continue
        for b in seg:
            if not b["is_control"] and not is_aborted(b):
                for r in b["records"]:
                    if r["key"] is not None and r["offset"] >= dirty_from:
                        if len(latest) >= map_keys:
                            full = True
                            break
                        latest[r["key"]] = r["offset"]
            if full:
                break
            if b["last_offset"] >= dirty_from:
                latest_offset = b["last_offset"]
        if not full:
            latest_offset = (bases[k + 1] if k + 1 < len(bases) else log_end) - 1
    if home_of_start is None:           # nothing dirty: the cleaner does not pick the log
        end, clean_segs = dirty_from, set()
    else:
        end = latest_offset + 1
        clean_segs = {k for k in range(len(segments) - 1) if segments[k] and bases[k] < end}
    # ProducerStateEntry: batchMetadata (whose last entry is lastDataOffset)
    # is cleared by maybeUpdateProducerEpoch when a batch or marker comes
    # with another epoch; a marker adds none and ends currentTxnFirstOffset;
    # isProducerExpired spares a producer whose transaction is open
    producers, txn_open = {}, set()
    for _, b in flat:
        pid = b["producer_id"]
        if pid < 0:
            continue
        last_data, epoch, _ = producers.get(pid, (-1, b["producer_epoch"], 0))
        if b["producer_epoch"] != epoch:
            last_data = -1
        if b["is_control"]:
            txn_open.discard(pid)
        else:
            last_data = b["last_offset"]
            if b["is_transactional"]:
                txn_open.add(pid)
        producers[pid] = (last_data, b["producer_epoch"], b["max_timestamp"])
    producers = {p: v for p, v in producers.items()
                 if p in txn_open or now - v[2] < expiration_ms}
    pending = sorted(aborted, key=lambda a: a[1])
    seen_aborted, committed, out = {}, set(), []
    for k, b in flat:
        if k not in clean_segs:          # copied untouched
            kept = ([b["base_offset"]] if b["is_control"] and b["records_count"]
                    else [r["offset"] for r in b["records"]])
            out.append((kept, b.get("horizon"), False))
            continue
        while pending and pending[0][1] <= b["last_offset"]:
            t = pending.pop(0)
            seen_aborted.setdefault(t[0], [t, False])
        pid, horizon = b["producer_id"], b.get("horizon")
        if b["is_control"]:
            ctype = b["control_type"]
            if ctype is None:
                discard = True
            elif ctype == 0:
                e = seen_aborted.pop(pid, None)
                discard = not (e is not None and e[1])
            elif ctype == 1:
                discard = pid not in committed
                committed.discard(pid)
            else:
                discard = False
            drop_records = discard and horizon is not None and horizon <= now
            marker_of_empty = discard
        else:
            drop_records = False
            if b["is_transactional"]:
                if pid in seen_aborted:
                    seen_aborted[pid][1] = True
                    drop_records = True
                else:
                    committed.add(pid)
            marker_of_empty = False
        act = producers.get(pid)
        last_of_producer = act is not None and (b["last_offset"] == act[0] if act[0] >= 0
                                                else b["is_control"] and
                                                b["producer_epoch"] == act[1])
        retain_empty = last_of_producer or b["last_offset"] + 1 == uncleanable
        if drop_records and not retain_empty:
            out.append(None)
            continue
        if drop_records:
            kept = []
        elif b["is_control"]:
            kept = [b["base_offset"]]
        else:
            # shouldRetainRecord: past the map's latest offset a record stays
            kept = [r for r in b["records"] if r["offset"] > latest_offset or (
                    r["key"] is not None and r["offset"] >= latest.get(r["key"], -1)
                    and (r["value"] is not None or horizon is None or now < horizon))]
            tomb = any(r["value"] is None for r in kept)
            kept = [r["offset"] for r in kept]
        if kept:
            tomb = (not b["is_control"] and any(r["value"] is None for r in b["records"]
                                                 if r["offset"] in kept))
            new = now + delete_retention_ms if (tomb or marker_of_empty) and horizon is None \
                else horizon
            out.append((kept, new, False))
        elif retain_empty:
            out.append(([], None, True))
        else:
            out.append(None)
    return out, end


# --- a cleaned segment's indexes: Cleaner.cleanInto appends, LogSegment.append --------

def cleaned_indexes(sources: list[list[dict]], written: list[list[tuple | None]], base: int,
                    interval: int = 4096, io_buffer: int = 256 * 1024,
                    max_message: int = 1048588) -> tuple[bytes, bytes]:
    """``(.index, .timeindex)`` of one cleaned segment. ``sources``: the
    batch headers (``walk``) of each source segment of its group;
    ``written``: per source batch, ``(size, max offset, max timestamp,
    last offset)`` of what the cleaner wrote for it, or None.

    cleanInto, per source segment: the read buffer (``io_buffer`` at the
    start of each segment, restoreBuffers) takes the whole batches that fit
    from the current position; when none fits, growBuffersOrFail doubles it
    (up to max.message.bytes, past that up to the batch's size) and reads
    again; what one read kept is one LogSegment.append of (largest offset,
    max timestamp, its shallow offset). LogSegment.append: an index entry
    (largest offset, position) when more than ``interval`` bytes were
    appended since the last one, before this append's bytes are counted;
    the time index gets the largest timestamp so far (and its shallow
    offset) when it grew; onBecomeInactiveSegment adds it once more."""
    appends = []
    for heads, outs in zip(sources, written):
        cap, i = io_buffer, 0
        while i < len(heads):
            start, j = heads[i]["position"], i
            while j < len(heads) and heads[j]["position"] + heads[j]["size"] - start <= cap:
                j += 1
            if j == i:
                wanted = max_message if cap < max_message else heads[i]["size"]
                cap = min(cap * 2, max(wanted, max_message))
                continue
            kept = [o for o in outs[i:j] if o is not None]
            if kept:
                ts, shallow = -1, -1
                for _, _, t, last in kept:
                    if t > ts:
                        ts, shallow = t, last
                appends.append((sum(o[0] for o in kept), max(o[1] for o in kept), ts, shallow))
            i = j
    index, times = [], []
    position = since = 0
    max_ts, max_off = -1, -1

    def last_time():
        return struct.unpack_from(">q", times[-1])[0] if times else -1
    for size, largest, ts, shallow in appends:
        if ts > max_ts:
            max_ts, max_off = ts, shallow
        if since > interval:
            index.append(struct.pack(">ii", largest - base, position))
            if max_ts > last_time():
                times.append(struct.pack(">qi", max_ts, max_off - base))
            since = 0
        since += size
        position += size
    if max_ts > last_time():
        times.append(struct.pack(">qi", max_ts, max_off - base))
    return b"".join(index), b"".join(times)
