"""Which schema decodes which record of which internal topic.

    __consumer_offsets     key: int16 key version = record type, then the key struct;
                           value: int16 value version, then the value struct
                           0, 1 OffsetCommit | 2 GroupMetadata | 3..8 ConsumerGroup*
                           (KIP-848) | 9..15 ShareGroup* (KIP-932)
    __transaction_state    the same framing; 0 TransactionLog
    __share_group_state    the same framing; 0 ShareSnapshot | 1 ShareUpdate
    __cluster_metadata     value: uvarint frame version (1) | uvarint apiKey | uvarint
                           version | struct (key null); apiKey -> *Record
    __remote_log_metadata  the same framing as the metadata log; apiKey ->
                           RemoteLogSegmentMetadata*/RemotePartitionDeleteMetadata

All derived from the generated schema table, so new record types in a newer
Kafka spec appear here by regenerating ``_schemas.py``.
"""

from __future__ import annotations

from kbatch.internal._schemas import MESSAGES


def _coordinator(prefix: str) -> dict[int, str]:
    """key version -> record type name (``<type>Key``/``<type>Value`` messages)."""
    out = {}
    for name, m in MESSAGES.items():
        if m["spec"].startswith(prefix) and name.endswith("Key"):
            lo, hi = m["valid"]
            for v in range(lo, hi + 1):
                out[v] = name[:-3]
    return dict(sorted(out.items()))


def _framed(prefix: str) -> dict[int, str]:
    return dict(sorted((m["api_key"], name) for name, m in MESSAGES.items()
                       if m["kind"] == "metadata" and m["spec"].startswith(prefix)))


FAMILIES = {
    "offsets": ("__consumer_offsets", _coordinator("group-coordinator/")),
    "transactions": ("__transaction_state", _coordinator("transaction-coordinator/")),
    "share-state": ("__share_group_state", _coordinator("share-coordinator/")),
    "metadata": ("__cluster_metadata", _framed("metadata/")),
    "remote-log-metadata": ("__remote_log_metadata", _framed("storage/")),
}
FRAMED = {"metadata", "remote-log-metadata"}

OFFSETS_TYPES = FAMILIES["offsets"][1]
METADATA_TYPES = FAMILIES["metadata"][1]

TRANSACTION_STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort",
                      4: "CompleteCommit", 5: "CompleteAbort", 6: "Dead",
                      7: "PrepareEpochFence"}


def family_of_topic(topic: str | None) -> str | None:
    for fam, (name, _) in FAMILIES.items():
        if topic == name:
            return fam
    return None
