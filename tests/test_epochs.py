"""The leader epoch cache (``kbatch.lib.epochs``) and the
``leader-epoch-checkpoint`` that recovery writes: against the outcomes of
Kafka's own LeaderEpochFileCacheTest, against
``tests/lifecycle_ref.EpochCacheModel`` (LeaderEpochFileCache written from
Kafka's source) on generated operations, and recovery of partitions whose
source file holds epochs that no batch holds any more (compacted away),
misses the latest epochs, names an epoch elected at the log end with no
writes, or cannot be parsed."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

import kbatch
from kbatch.lib import epochs
from kbatch.lib.checkpoints import read_checkpoint
from tests.kafka_ref import build_batch
from tests.lifecycle_ref import EpochCacheModel, recover_model, write_partition

T0 = 1_700_000_000_000

# (operations, entries after them): the cases of Kafka's
# core/src/test/scala/unit/kafka/server/epoch/LeaderEpochFileCacheTest.scala
THREE = [("assign", 2, 6), ("assign", 3, 8), ("assign", 4, 11)]
KAFKA_CASES = [
    ([("assign", 2, 9), ("assign", 2, 10)], [(2, 9)]),      # not overwritten once assigned
    ([("assign", 2, 9), ("assign", 3, 9)], [(3, 9)]),       # start offsets increase
    ([("assign", 2, 6), ("assign", 3, 5)], [(3, 5)]),
    ([("assign", 5, 11), ("assign", 6, 12), ("assign", 7, 13), ("assign", 7, 12)],
     [(5, 11), (7, 12)]),
    ([("assign", e, o) for e, o in ((1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16))],
     [(1, 11), (2, 13), (3, 15)]),
    ([("assign", e, o) for e, o in ((0, 0), (0, 1), (0, 2), (1, 3), (1, 4), (1, 5), (2, 6),
                                    (2, 7), (2, 8))],
     [(0, 0), (1, 3), (2, 6)]),
    (THREE + [("end", 8)], [(2, 6)]),                       # remove is inclusive
    (THREE + [("end", 9)], [(2, 6), (3, 8)]),
    (THREE + [("start", 8)], [(3, 8), (4, 11)]),
    (THREE + [("start", 9)], [(3, 9), (4, 11)]),
    (THREE + [("start", 1)], [(2, 6), (3, 8), (4, 11)]),
    (THREE + [("start", 6)], [(2, 6), (3, 8), (4, 11)]),
    (THREE + [("start", 11)], [(4, 11)]),
    (THREE + [("start", 15)], [(4, 15)]),
    ([("assign", 0, 0), ("assign", 1, 7), ("assign", 2, 10), ("start", 5)],
     [(0, 5), (1, 7), (2, 10)]),
]


def _run(ops) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for op, *args in ops:
        if op == "assign":
            out = epochs.assign(out, *args)
        elif op == "end":
            out = epochs.truncate_from_end(out, *args)
        else:
            out = epochs.truncate_from_start(out, *args)
    return out


@pytest.mark.parametrize("ops, want", KAFKA_CASES)
def test_kafkas_own_cases(ops, want):
    assert _run(ops) == want


OPS = st.lists(st.one_of(
    st.tuples(st.just("assign"), st.integers(0, 8), st.integers(0, 60)),
    st.tuples(st.just("end"), st.integers(-1, 60)),
    st.tuples(st.just("start"), st.integers(0, 60))), max_size=25)


@given(OPS)
def test_operations_match_the_model(ops):
    model = EpochCacheModel()
    for op, *args in ops:
        {"assign": model.assign, "end": model.truncate_from_end,
         "start": model.truncate_from_start}[op](*args)
    assert _run(ops) == model.entries()


@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 50)), max_size=12))
def test_loading_a_file_matches_the_model(entries):
    assert epochs.load(entries) == EpochCacheModel(entries).entries()
    text = epochs.epoch_file_text(epochs.load(entries))
    assert text.splitlines()[:2] == ["0", str(len(epochs.load(entries)))]


def test_negative_entries_are_refused():
    for epoch, start in ((-1, 0), (0, -1)):
        with pytest.raises(ValueError):
            epochs.assign([], epoch, start)


# --- recovery ---------------------------------------------------------------------------

def _partition(directory, epoch_file: str | None, torn_at: int | None = None):
    """Epoch 0 at offsets 0-9, epoch 3 at 20-29 and epoch 5 at 30-39 (epoch
    1's records, 10-19, compacted away), in two segments; ``torn_at``: the
    second segment ends inside its batch starting at that offset."""
    def batch(base, epoch):
        return build_batch([(T0 + base + i, b"k%d" % (base + i), b"v" * 50, [])
                            for i in range(5)], base_offset=base, partition_leader_epoch=epoch)
    first = [batch(0, 0), batch(5, 0)]
    second = [batch(20, 3), batch(25, 3), batch(30, 5), batch(35, 5)]
    if torn_at is not None:
        cut = [20, 25, 30, 35].index(torn_at)
        second = second[:cut] + [second[cut][:40]]
    write_partition(directory, [first, second])
    if epoch_file is not None:
        (directory / "leader-epoch-checkpoint").write_text(epoch_file)
    return directory


def _raw(directory):
    files = sorted(directory.glob("*.log"))
    return [(int(f.name[:20]), f.read_bytes()) for f in files]


FULL = "0\n5\n0 0\n1 10\n3 20\n5 30\n6 40\n"     # epoch 6 elected at the log end, no writes


@pytest.mark.parametrize("name, epoch_file, torn_at, want", [
    # the compacted epoch 1 stays; epoch 6 (no writes, at the end) goes as on a broker's load
    ("full file", FULL, None, [(0, 0), (1, 10), (3, 20), (5, 30)]),
    # a torn tail cuts epoch 5's first batch: the entries from the new log end go
    ("torn", FULL, 30, [(0, 0), (1, 10), (3, 20)]),
    # a stale file (written before epochs 3 and 5): the batches add them
    ("stale file", "0\n2\n0 0\n1 10\n", None, [(0, 0), (1, 10), (3, 20), (5, 30)]),
    ("no file", None, None, [(0, 0), (3, 20), (5, 30)]),
    ("empty file", "", None, [(0, 0), (3, 20), (5, 30)]),
])
def test_recovery_keeps_the_source_epochs(tmp_path, name, epoch_file, torn_at, want):
    src = _partition(tmp_path / "t-0", epoch_file, torn_at)
    report = kbatch.recover(src, tmp_path / "out")
    entries = read_checkpoint(tmp_path / "out" / "leader-epoch-checkpoint")[1]
    file_entries = [] if not epoch_file else read_checkpoint(src / "leader-epoch-checkpoint")[1]
    _, model = recover_model(_raw(src), epoch_file=file_entries)
    assert entries == model == want == report.partitions[0].leader_epochs
    assert not any("leader-epoch" in n for n in report.notes)
    assert kbatch.verify(tmp_path / "out").ok


def test_recovery_moves_the_first_epoch_to_the_log_start(tmp_path):
    data = tmp_path / "data"
    _partition(data / "t-0", FULL)
    (data / "log-start-offset-checkpoint").write_text("0\n1\nt 0 15\n")
    report = kbatch.recover(data, tmp_path / "out")
    want = [(1, 15), (3, 20), (5, 30)]
    _, model = recover_model(_raw(data / "t-0"), epoch_file=[(0, 0), (1, 10), (3, 20),
                                                             (5, 30), (6, 40)], log_start=15)
    assert read_checkpoint(tmp_path / "out" / "t-0" / "leader-epoch-checkpoint")[1] == \
        model == want
    assert report.partitions[0].log_start_offset == 15


@pytest.mark.parametrize("text", ["1\n1\n0 0\n", "0\n2\n0 0\n", "0\n1\n-1 5\n", "0\n1\nx y\n"])
def test_a_file_that_cannot_be_used_is_named_and_left_out(tmp_path, text, capfd):
    """A wrong version, a wrong count, a negative epoch (Kafka refuses it)
    or words: the epochs come from the batches alone, and the note says so."""
    src = _partition(tmp_path / "t-0", text)
    report = kbatch.recover(src, tmp_path / "out")
    assert report.partitions[0].leader_epochs == [(0, 0), (3, 20), (5, 30)]
    (note,) = [n for n in report.notes if "leader-epoch-checkpoint" in n]
    assert note.startswith("t-0: leader-epoch-checkpoint not used") and "batches alone" in note
    from kbatch.tools.cli import main
    assert main(["recover", str(src), str(tmp_path / "again")]) == 0
    assert "leader-epoch-checkpoint not used" in capfd.readouterr().out
