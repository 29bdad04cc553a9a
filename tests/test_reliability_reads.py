"""Issue 11, part 1: every read returns all the data or says what it missed.

Partitions are written with ``kbatch.write_log`` and then damaged; what the
records are comes from the writer's inputs (offset i holds value V(i)), the
byte layout from the segment files' own length fields.
"""

import struct

import numpy as np
import pytest

import kbatch
from kbatch.errors import CorruptRecordError

N = 330   # 4 segments of 70 records, an active one of 50
PER_BATCH = 10
T0 = 1_700_000_000_000


def V(i):
    return b"v%05d" % i + b"x" * 40


def _write(tmp_path, name="t-0"):
    part = tmp_path / name
    kbatch.write_log(part, {"value": [V(i) for i in range(N)],
                            "timestamp": T0 + np.arange(N) * 1000},
                     segment_bytes=4300, batch_records=PER_BATCH)
    segs = sorted(part.glob("*.log"))
    assert len(segs) >= 4
    return part, segs


def _layout(path):
    """(position, base_offset) of every batch, from the length fields."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos + 12 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        out.append((pos, base))
        pos += 12 + length
    return out


def _base(path):
    return int(path.name[:20])


def _flip(path, position):
    b = bytearray(path.read_bytes())
    b[position] ^= 0xFF
    path.write_bytes(bytes(b))


def _values(records):
    return records.value.to_pylist()


# --- damage in a segment that is not the last one ---------------------------------------

def test_truncated_non_last_segment_raises_stops_or_skips(tmp_path):
    part, segs = _write(tmp_path)
    victim = segs[1]
    layout = _layout(victim)
    cut_batch_pos, cut_base = layout[2]
    size = victim.stat().st_size
    victim.write_bytes(victim.read_bytes()[:cut_batch_pos + 30])   # a torn batch
    log = kbatch.open_log(part)
    with pytest.raises(CorruptRecordError, match="not the last segment") as info:
        log.read()
    assert info.value.path == str(victim) and info.value.position == cut_batch_pos
    stopped = log.read(on_corrupt="stop")
    assert _values(stopped) == [V(i) for i in range(cut_base)]
    assert stopped.end.reason == "corrupt" and stopped.end.valid_bytes == cut_batch_pos
    skipped = log.read(on_corrupt="skip")
    next_base = _base(segs[2])
    assert _values(skipped) == [V(i) for i in range(N) if not cut_base <= i < next_base]
    [gap] = skipped.skipped
    assert (gap.path, gap.start, gap.stop, gap.reason) == (
        str(victim), cut_batch_pos, cut_batch_pos + 30, "truncated")
    assert (gap.offset_before, gap.offset_after) == (cut_base - 1, next_base)
    assert size > cut_batch_pos + 30
    # the same through open_log_dir
    logdir = kbatch.open_log_dir(tmp_path)
    with pytest.raises(CorruptRecordError):
        logdir.read()
    assert _values(logdir.read(on_corrupt="stop")[("t", 0)]) == _values(stopped)
    got = logdir.read(on_corrupt="skip", threads=2)[("t", 0)]
    assert _values(got) == _values(skipped) and got.skipped == skipped.skipped


def test_zero_padding_in_a_non_last_segment_is_damage(tmp_path):
    part, segs = _write(tmp_path)
    with open(segs[0], "ab") as f:
        f.write(b"\0" * 512)
    with pytest.raises(CorruptRecordError, match="zero bytes"):
        kbatch.open_log(part).read()
    report = kbatch.verify(part)
    assert not report.ok
    first = report.segments[0]
    assert not first.ok and any("not the last one" in p for p in first.problems())
    # the last segment may end in zeros (a preallocated active segment)
    with open(segs[-1], "ab") as f:
        f.write(b"\0" * 512)
    last = kbatch.verify(part).segments[-1]
    assert last.end_reason == "zero_padding"
    assert not any("zero" in p for p in last.problems())


def test_crc_damage_in_non_last_segment(tmp_path):
    part, segs = _write(tmp_path)
    victim = segs[1]
    pos, base = _layout(victim)[3]
    next_pos, next_base = _layout(victim)[4]
    _flip(victim, pos + 70)
    log = kbatch.open_log(part)
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.read()
    stopped = log.read(on_corrupt="stop")
    assert _values(stopped) == [V(i) for i in range(base)]      # no later segment
    assert stopped.end.reason == "corrupt" and stopped.end.error.path == str(victim)
    skipped = log.read(on_corrupt="skip")
    assert _values(skipped) == [V(i) for i in range(N) if not base <= i < next_base]
    assert [(g.start, g.stop, g.offset_before, g.offset_after) for g in skipped.skipped] == [
        (pos, next_pos, base - 1, next_base)]
    # iter: the gap rides on the chunk after it; the chunks add up to the read
    chunks = list(log.iter(chunk_records=7, on_corrupt="skip"))
    assert _values(kbatch.Records.concat(chunks)) == _values(skipped)
    carriers = [k for k, c in enumerate(chunks) if c.skipped]
    assert len(carriers) == 1 and int(chunks[carriers[0]].offset[0]) == next_base
    # verify goes on past the damage and reports the range
    report = kbatch.verify(part)
    assert report.segments[1].crc_failures == [(pos, base)]
    assert report.segments[1].records == 70 - PER_BATCH


def test_damaged_length_field_mid_segment_is_not_a_torn_tail(tmp_path):
    part, segs = _write(tmp_path)
    last = segs[-1]
    layout = _layout(last)
    pos, base = layout[1]
    next_pos, next_base = layout[2]
    b = bytearray(last.read_bytes())
    struct.pack_into(">i", b, pos + 8, 1 << 24)     # runs past the file
    last.write_bytes(bytes(b))
    log = kbatch.open_log(part)
    with pytest.raises(CorruptRecordError, match="damaged length"):
        log.read()
    skipped = log.read(on_corrupt="skip")
    assert _values(skipped) == [V(i) for i in range(N) if not base <= i < next_base]
    assert [(g.start, g.stop, g.reason) for g in skipped.skipped] == [
        (pos, next_pos, "truncated")]
    stopped = log.read(on_corrupt="stop")
    assert _values(stopped) == [V(i) for i in range(base)]


def test_range_reads_are_the_full_read_filtered(tmp_path):
    part, segs = _write(tmp_path)
    pos, _ = _layout(segs[2])[2]
    _flip(segs[2], pos + 70)
    log = kbatch.open_log(part)
    full = log.read(on_corrupt="skip")
    for lo, hi in [(0, N), (5, 95), (_base(segs[2]), _base(segs[3]) + 3), (150, 151)]:
        got = log.read(lo, hi, on_corrupt="skip")
        want = full.select_offsets(lo, hi)
        assert got.offset.tolist() == want.offset.tolist()
        assert _values(got) == _values(want)


# --- the options of a read reach every decode it makes --------------------------------

def test_timestamp_seek_and_read_committed_use_the_reads_options(tmp_path):
    part, segs = _write(tmp_path)
    pos, base = _layout(segs[0])[1]
    _flip(segs[0], pos + 20)     # inside the CRC-covered header: CRC mismatch
    log = kbatch.open_log(part)
    # the seek decodes the damaged batch itself (it holds the first record >= t)
    t = T0 + (base + 5) * 1000
    want = [V(i) for i in range(N) if i >= base + 5]
    got = log.read(start_timestamp=t, validate_crc=False)
    assert _values(got) == want
    got = log.read(start_timestamp=t, validate_crc=False, isolation="read_committed")
    assert _values(got) == want
    assert _values(log.read(end_timestamp=t, validate_crc=False)) == [
        V(i) for i in range(base + 5)]
    skipped = log.read(start_timestamp=T0 + 1000, on_corrupt="skip")
    assert _values(skipped) == [V(i) for i in range(1, N) if not base <= i < base + PER_BATCH]


# --- batch headers that disagree with their records ------------------------------------
#
# Decision: such a batch is corrupt. Every seek (header walk, index check,
# range plans) trusts a batch's header for its offsets; records outside
# 0..lastOffsetDelta (or magic 0 inner offsets above their wrapper's offset)
# would be returned by a full read and missed by a range read. Kafka's own
# validation never writes such a batch, so it is damage: raise, stop or skip.

def _disagreeing_partition(tmp_path):
    from .kafka_ref import build_batch
    part = tmp_path / "h-0"
    part.mkdir()
    batches = [build_batch([(T0 + i, None, V(i), [])], base_offset=i) for i in range(3)]
    # offsets 3..5 in one batch whose header says it ends at 3 (lastOffsetDelta 0)
    batches.append(build_batch([(T0 + 3 + i, None, V(3 + i), []) for i in range(3)],
                               base_offset=3, last_offset_delta=0))
    batches += [build_batch([(T0 + i, None, V(i), [])], base_offset=i) for i in range(6, 9)]
    (part / "00000000000000000000.log").write_bytes(b"".join(batches))
    return part


def test_last_offset_delta_below_the_records_is_corrupt_on_every_path(tmp_path):
    part = _disagreeing_partition(tmp_path)
    log = kbatch.open_log(part)
    for call in (lambda: log.read(), lambda: log.read(3, 5), lambda: log.read(2, 4),
                 lambda: kbatch.read_segment(part / "00000000000000000000.log")):
        with pytest.raises(CorruptRecordError, match="lastOffsetDelta"):
            call()
    full = log.read(on_corrupt="skip")
    assert full.offset.tolist() == [0, 1, 2, 6, 7, 8]
    for lo, hi in [(0, 9), (4, 9), (3, 5), (2, 7), (6, 7)]:
        assert log.read(lo, hi, on_corrupt="skip").offset.tolist() == \
            full.select_offsets(lo, hi).offset.tolist(), (lo, hi)
    stopped = log.read(on_corrupt="stop")
    assert stopped.offset.tolist() == [0, 1, 2] and stopped.end.reason == "corrupt"
    assert not kbatch.verify(part).ok


def test_magic0_wrapper_below_its_inner_offsets_is_corrupt():
    from .kafka_ref import legacy_message
    inner = b"".join(legacy_message(offset=o, magic=0, value=b"x%d" % o) for o in (5, 6, 7))
    import gzip
    wrapper = legacy_message(offset=6, magic=0, attributes=1, value=gzip.compress(inner))
    with pytest.raises(CorruptRecordError, match="below its last inner offset"):
        kbatch.read_segment(wrapper)
    ok = legacy_message(offset=7, magic=0, attributes=1, value=gzip.compress(inner))
    assert kbatch.read_segment(ok).offset.tolist() == [5, 6, 7]
