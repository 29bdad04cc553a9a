"""Every __consumer_offsets and __cluster_metadata record, KRaft .checkpoint
snapshot, producer .snapshot and checkpoint file of the shared corpus,
decoded; field values checked against the hand-written decoders of
tests/internal_ref.py."""

import collections


import kbatch
from kbatch.internal import checkpoints, offset_commits, read_checkpoint, read_producer_snapshot
from kbatch.internal.decode import decode_coordinator, decode_framed
from kbatch.internal.offsets import group_metadata
from tests.internal_ref import (ref_assignment, ref_group_metadata, ref_metadata,
                                ref_offset_commit, ref_subscription)


def _offsets_dirs(corpus):
    return sorted(p for p in corpus.rglob("__consumer_offsets-*") if p.is_dir())


def _metadata_files(corpus):
    logs = sorted(p for p in corpus.rglob("__cluster_metadata-*/*.log"))
    snaps = sorted(corpus.rglob("*.checkpoint"))
    return logs + snaps


def _kv(records):
    return records.key.to_arrow().to_pylist(), records.value.to_arrow().to_pylist()


def test_consumer_offsets_counts_and_values(corpus):
    counts = collections.Counter()
    for d in _offsets_dirs(corpus):
        rec = kbatch.open_log(d).read()
        keys, values = _kv(rec)
        commits = offset_commits(d).to_pylist()
        groups = group_metadata(d).to_pylist()
        ci = gi = 0
        for k, v in zip(keys, values):
            dec = decode_coordinator("offsets", k, v)
            counts[(dec["type"], dec["value_version"] if v is not None else "tombstone",
                    dec["known"])] += 1
            kver = int.from_bytes(k[:2], "big")
            if kver in (0, 1):
                ref = ref_offset_commit(k, v)
                got = commits[ci]
                ci += 1
                assert got["error"] is None
                for f in ("group", "topic", "partition", "committed_offset", "leader_epoch",
                          "metadata", "tombstone", "value_version"):
                    assert got[f] == ref[f], (d, f)
                for f in ("commit_timestamp", "expire_timestamp"):
                    ms = None if got[f] is None else int(got[f].timestamp() * 1000)
                    assert ms == ref[f]
            elif kver == 2:
                ref = ref_group_metadata(k, v)
                got = groups[gi]
                gi += 1
                assert got["group"] == ref["group"] and got["tombstone"] == ref["tombstone"]
                if v is None:
                    continue
                for f in ("protocol_type", "generation", "protocol", "leader", "value_version"):
                    assert got[f] == ref[f]
                cst = got["current_state_timestamp"]
                assert (None if cst is None else int(cst.timestamp() * 1000)) == \
                    ref["current_state_timestamp"]
                assert len(got["members"]) == len(ref["members"])
                for gm, rm in zip(got["members"], ref["members"]):
                    for f in ("member_id", "group_instance_id", "client_id", "client_host",
                              "rebalance_timeout", "session_timeout"):
                        assert gm[f] == rm[f]
                    assert gm["subscription_raw"] == rm["subscription"]
                    assert gm["assignment_raw"] == rm["assignment"]
                    if ref["protocol_type"] == "consumer":
                        assert gm["subscription"] == ref_subscription(rm["subscription"])
                        assert gm["assignment"] == ref_assignment(rm["assignment"])
        assert ci == len(commits) and gi == len(groups)
    print("\n__consumer_offsets records by (type, value version):")
    for key, n in sorted(counts.items(), key=str):
        print(f"  {key}: {n}")
    assert not [k for k in counts if not k[2]], "unknown records"
    assert sum(counts.values()) > 27_000
    # every offset-commit value version the corpus holds
    assert {k[1] for k in counts if k[0] == "OffsetCommit"} >= {1, 3, 4, "tombstone"}
    assert {k[1] for k in counts if k[0] == "GroupMetadata"} >= {1, 2, 3, "tombstone"}


def _norm(d):
    return {k: v for k, v in d.items() if not k.startswith("_")}


def test_cluster_metadata_counts_and_values(corpus):
    counts = collections.Counter()
    files = _metadata_files(corpus)
    assert len(files) >= 138
    for f in files:
        rec = kbatch.read_segment(f)
        for v in rec.value.to_arrow().to_pylist():
            dec = decode_framed("metadata", v)
            counts[(dec["type_id"], dec["type"], dec["version"], dec["known"])] += 1
            assert dec["known"], (f, dec)
            key, version, ref = ref_metadata(v)
            assert (key, version) == (dec["type_id"], dec["version"])
            got = _norm(dec["value"])
            for field, value in ref.items():
                assert got[field] == value, (f, dec["type"], field)
    print("\n__cluster_metadata records by (api key, type, version):")
    for key, n in sorted(counts.items()):
        print(f"  {key}: {n}")
    assert sum(counts.values()) > 30_000
    assert not [k for k in counts if not k[3]]


def test_producer_snapshots(corpus):
    files = sorted(corpus.rglob("*.snapshot"))
    assert len(files) >= 116
    entries = 0
    for f in files:
        snap = read_producer_snapshot(f)
        assert snap["crc_ok"] and snap["version"] == 1
        entries += len(snap["entries"])
    assert entries > 0


def test_checkpoint_files(corpus):
    names = ("replication-offset-checkpoint", "recovery-point-offset-checkpoint",
             "log-start-offset-checkpoint", "cleaner-offset-checkpoint", "leader-epoch-checkpoint")
    files = [p for n in names for p in corpus.rglob(n)]
    assert len(files) > 700
    kinds = collections.Counter(read_checkpoint(f)[0] for f in files)
    assert set(kinds) == {"high_watermark", "recovery_point", "log_start_offset",
                          "cleaner_offset", "leader_epoch"}
    d = next(corpus.rglob("replication-offset-checkpoint")).parent
    t = checkpoints(d)
    assert len(t) and set(t.column("kind").to_pylist()) <= set(kinds)


def test_a_snapshot_cut_short_is_damage(corpus, tmp_path):
    """A KRaft .checkpoint is written whole (SnapshotHeader first,
    SnapshotFooter last) and renamed when complete: a copy cut inside a
    batch, or at a batch boundary before the footer, raises naming the file
    in every table over it; every whole snapshot of the corpus reads."""
    import pytest

    from kbatch.errors import CorruptRecordError
    from kbatch.internal import cluster_metadata
    from tests.lifecycle_ref import walk
    snaps = sorted(corpus.rglob("__cluster_metadata-0/*.checkpoint"))
    assert snaps
    for s in snaps:
        cluster_metadata(s)
    src = snaps[0]
    whole = src.read_bytes()
    heads = walk(whole)[0]
    assert len(heads) >= 3
    last = heads[-1]
    part = tmp_path / "__cluster_metadata-0"
    part.mkdir()
    for cut in (len(whole) // 2, last["position"]):        # inside a batch; before the footer's
        f = part / src.name
        f.write_bytes(whole[:cut])
        for target in (f, part):
            with pytest.raises(CorruptRecordError, match=src.name):
                cluster_metadata(target)
