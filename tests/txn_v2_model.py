"""Transactions v2 (KIP-890) scenarios for tests/test_txn_v2.py: a Hypothesis
strategy of partition logs whose transactional producers follow TV1 or TV2,
with what each producer's markers must be reported as. Nothing here
imports kbatch.

How each protocol writes a partition (tests/test_txn_v2.py's docstring has
the rules and where they come from):

    TV1  data at epoch e, its marker at e. A timed-out transaction is fenced:
         ABORT at e + 1, and the next producer instance starts at e + 2
         (InitProducerId bumps again; past 32767 it gets a new producer id).
    TV2  data at e, its marker at e + 1, the next transaction's data at e + 1.
         A marker may be written again right after (a retry: same type, same
         epoch, no data of that producer in between). Data at 32766 ends with
         a marker at 32767; the transactional id then goes on under a new
         producer id, epochs from 0.

Both may end a transaction that has no data in this partition (an "empty"
transaction: the partition was added, nothing written) and leave the last
transaction open.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import strategies as st

from .kafka_ref import ABORT, COMMIT
from .txn_model import B, Scenario

EPOCH_MAX = 32767


@dataclass
class Truth:
    """What the generator knows about each producer id."""

    protocol: dict = field(default_factory=dict)      # pid -> "TV1" / "TV2"
    retries: dict = field(default_factory=dict)       # marker offset -> offset it repeats
    retries_of_empty: set = field(default_factory=set)  # retries of a marker that ended no data
    ended_data: dict = field(default_factory=dict)    # pid -> [(status, delta)] markers ending data
    exhausted: set = field(default_factory=set)       # pids with a marker at epoch 32767
    successor: dict = field(default_factory=dict)     # pid -> the pid after it (same txn id)


@st.composite
def tv2_scenarios(draw, max_steps: int = 30):
    """``(Scenario, Truth)``: one segment (``txn_index`` empty) or several."""
    n = draw(st.integers(1, 3))
    protocols = [draw(st.sampled_from(["TV1", "TV2"])) for _ in range(n)]
    next_pid = draw(st.integers(0, 1 << 40))
    truth = Truth()
    producers = []              # per transactional id: dict(pid, epoch, open, protocol, last)
    for proto in protocols:
        pid = next_pid
        next_pid += draw(st.integers(1, 1000))
        truth.protocol[pid] = proto
        epoch = draw(st.sampled_from([0, 5, 32760, 32765, 32766]))
        producers.append({"pid": pid, "epoch": epoch, "open": False, "proto": proto,
                          "last": None, "last_ended_data": False})
    batches: list[B] = []
    nxt = draw(st.sampled_from([0, 7]))

    def add(b):
        nonlocal nxt
        batches.append(b)
        nxt = b.last_offset + 1

    def marker(p, ctype, epoch):
        b = B("marker", nxt, nxt, p["pid"], epoch, -1, True, control_type=ctype,
              coordinator_epoch=draw(st.integers(0, 3)))
        add(b)
        p["last"] = b
        return b

    for _ in range(draw(st.integers(1, max_steps))):
        p = draw(st.sampled_from(producers))
        step = draw(st.sampled_from(["data", "data", "end", "end", "plain", "retry", "empty"]))
        if step == "plain":
            add(B("data", nxt, nxt, -1, -1, -1, False, [nxt], [b"p%d" % nxt]))
        elif step == "data":
            k = draw(st.integers(1, 2))
            offs = list(range(nxt, nxt + k))
            add(B("data", nxt, offs[-1], p["pid"], p["epoch"], 0, True, offs,
                  [b"v%d" % o for o in offs]))
            p["open"] = True
        elif step in ("end", "empty") and (p["open"] or step == "empty"):
            had_data = p["open"]
            ctype = draw(st.sampled_from([COMMIT, ABORT]))
            data_epoch = p["epoch"]
            if p["proto"] == "TV2":
                m = marker(p, ctype, data_epoch + 1)
                p["epoch"] = data_epoch + 1
            elif ctype == ABORT and had_data and draw(st.booleans()):
                m = marker(p, ABORT, data_epoch + 1)       # a TV1 fencing abort
                p["epoch"] = data_epoch + 2                # InitProducerId of the next instance
            else:
                m = marker(p, ctype, data_epoch)
            if had_data:
                truth.ended_data.setdefault(p["pid"], []).append(
                    ("COMMIT" if ctype == COMMIT else "ABORT", m.producer_epoch - data_epoch))
            p["open"] = False
            p["last_ended_data"] = had_data
            p["last_original"] = m.base_offset
            if m.producer_epoch == EPOCH_MAX:
                truth.exhausted.add(p["pid"])
            if p["epoch"] >= EPOCH_MAX:
                # the id can go no further: the transactional id moves to a new
                # producer id (TV2 at this marker, TV1 at the next InitProducerId)
                new = next_pid
                next_pid += draw(st.integers(1, 1000))
                truth.successor[p["pid"]] = new
                truth.protocol[new] = p["proto"]
                p.update(pid=new, epoch=0, last=None)
        elif step == "retry" and p["proto"] == "TV2" and not p["open"] and p["last"] is not None:
            last = p["last"]
            m = marker(p, last.control_type, last.producer_epoch)
            p["last"] = last                        # a retry repeats the original
            if p["last_ended_data"]:
                truth.retries[m.base_offset] = p["last_original"]
            else:
                truth.retries_of_empty.add(m.base_offset)
    if not batches:
        add(B("data", nxt, nxt, -1, -1, -1, False, [nxt], [b"p%d" % nxt]))
    starts = [0]
    if len(batches) > 2 and draw(st.booleans()):
        starts.append(draw(st.integers(1, len(batches) - 1)))
    names = [batches[s].base_offset for s in starts]
    return Scenario(batches, starts, names, [[] for _ in starts], set()), truth


def expected_protocol(pid: int, truth: Truth) -> str:
    """The protocol the report must give ``pid`` (see kbatch.lib.txn_protocol):
    only what its markers ending data show."""
    ends = truth.ended_data.get(pid, [])
    tv1 = any(d == 0 for _, d in ends)
    tv2 = any(s == "COMMIT" and d == 1 for s, d in ends)
    if truth.protocol[pid] == "TV2":
        assert not tv1
    else:
        assert not tv2
    return "mixed" if tv1 and tv2 else "TV2" if tv2 else "TV1" if tv1 else "unknown"
