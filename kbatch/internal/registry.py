"""Which schema decodes which record of which internal topic.

    __consumer_offsets     key: int16 key version = record type, then the key struct;
                           value: int16 value version, then the value struct
                           0, 1 OffsetCommit | 2 GroupMetadata
                           | 3..8 ConsumerGroup* (KIP-848) | 9..15 ShareGroup* (KIP-932)
                           | 16 ConsumerGroupRegularExpression | 17..23 StreamsGroup*
                           (KIP-1071)
    __transaction_state    the same framing; 0 TransactionLog
    __share_group_state    the same framing; 0 ShareSnapshot | 1 ShareUpdate
    __cluster_metadata     value: uvarint frame version (1) | uvarint apiKey | uvarint
                           version | struct (key null); apiKey -> *Record
    __remote_log_metadata  the same framing as the metadata log; apiKey ->
                           RemoteLogSegmentMetadata*/RemotePartitionDeleteMetadata

All derived from the generated schema table, so new record types in a newer
Kafka spec appear here by regenerating ``_schemas.py``. Newer specs name a
coordinator record's type id as the key's ``apiKey`` (``coordinator-key``)
and give the key struct one version, 0; older ones made the type id the
key's version. ``key_schema_version`` hides the difference.
"""

from __future__ import annotations

from kbatch.internal._schemas import MESSAGES


# Record types read with another type's schemas. Kafka 4 gave type id 0 (the
# offset commits of 0.8.2) its own LegacyOffsetCommitKey/Value, byte for byte
# OffsetCommitKey and OffsetCommitValue v0; Kafka up to 3.x read key 0 like
# key 1, with any value version, and so do kbatch and its compiled offsets
# kernel: both ids are "OffsetCommit" (tests check the layouts stay equal).
ALIASES = {"LegacyOffsetCommit": "OffsetCommit"}


def _coordinator(prefix: str) -> dict[int, str]:
    """key version -> record type name (``<type>Key``/``<type>Value`` messages)."""
    out = {}
    for name, m in MESSAGES.items():
        if not (m["spec"].startswith(prefix) and name.endswith("Key")):
            continue
        if m["kind"] == "coordinator-key":
            out[m["api_key"]] = ALIASES.get(name[:-3], name[:-3])
            continue
        lo, hi = m["valid"]
        for v in range(lo, hi + 1):
            out[v] = name[:-3]
    return dict(sorted(out.items()))


def key_schema_version(key_name: str, type_id: int) -> int:
    """The version to read a coordinator key struct with: 0 for a
    ``coordinator-key`` spec (its type id is its apiKey), else the type id."""
    return 0 if MESSAGES[key_name]["kind"] == "coordinator-key" else type_id


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
