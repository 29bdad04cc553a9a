"""Generate ``kbatch/internal/_schemas.py`` from Kafka's JSON message specs.

    make schemas KAFKA_GIT=/path/to/kafka.git [KAFKA_COMMIT=trunk]
    python -m kbatch.internal._gen_schemas [/path/to/kafka.git] [commit]

Reads the specs straight out of a git directory of apache/kafka (``git show
<commit>:<file>``), strips their ``//`` comments, and writes every message
as plain Python data: no code from Kafka, only the field tables. The git
directory defaults to ``$KAFKA_GIT``, the commit to ``PINNED`` (the one the
checked-in table comes from, so a rerun reproduces it byte for byte); name
a newer commit to pick up new record types or versions, then move
``PINNED``. The older commits named in ``RETIRED`` and ``HISTORICAL`` must
be in the same git directory (any clone of apache/kafka has them).

Memory held: the parsed specs of one commit (a few hundred kB).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

SPEC_DIRS = (
    "group-coordinator/src/main/resources/common/message/",
    "transaction-coordinator/src/main/resources/common/message/",
    "share-coordinator/src/main/resources/common/message/",
    "metadata/src/main/resources/common/metadata/",
    "storage/src/main/resources/message/",
)
# The consumer protocol's subscription and assignment, found in group metadata.
EXTRA = (
    "clients/src/main/resources/common/message/ConsumerProtocolSubscription.json",
    "clients/src/main/resources/common/message/ConsumerProtocolAssignment.json",
)
MAX = 0x7FFF
# apache/kafka trunk, 2026-08-22 ("MINOR: Revert setup-gradle action to v5.0.2 (#23240)").
PINNED = "d79bd502ec7fa49335afa422f442af80ed0ab8f6"
# The 4.0 branch as released (4.0.0, 2025-03-18): the parent of "MINOR: Bump to
# 4.0.1-SNAPSHOT (#19224)". KIP-932 share groups were early access in 4.0 and
# changed their record layouts afterwards without bumping versions.
KAFKA_4_0 = "4ae681446f18f9a6d7a59f317013ef82379a4ba4"
# Record types a release wrote that trunk has since deleted: (spec file, commit).
# They are decoded like any other type (their message names the commit).
RETIRED = (
    # share-group partition metadata (key 9), 4.0 only: replaced by a metadata hash
    ("group-coordinator/src/main/resources/common/message/ShareGroupPartitionMetadataKey.json",
     KAFKA_4_0),
    ("group-coordinator/src/main/resources/common/message/ShareGroupPartitionMetadataValue.json",
     KAFKA_4_0),
)
# Layouts that Kafka wrote for a while and later changed in place, without a
# new version number (unreleased metadata versions that test and
# early-access clusters did write; early-access record types of a release):
# (spec file, commit, versions of that layout). The decoder reads a record of
# such a version with every layout it has and keeps the one that reads the
# record exactly to its end (see protocol.decode).
_SHARE = "group-coordinator/src/main/resources/common/message/"
_SHARE_STATE = "share-coordinator/src/main/resources/common/message/"
HISTORICAL = (
    # PartitionRecord v1 was ELR (KIP-966) from af747fbfed7 until a94bc8d6d52
    # renumbered it (v1 Directories, v2 ELR); Kafka's own test data has it.
    ("metadata/src/main/resources/common/metadata/PartitionRecord.json", "af747fbfed7", (1, 1)),
    # PartitionChangeRecord v1 of the same commits: ELR at tags 6/7 (now v2;
    # v1 became Directories at tag 8)
    ("metadata/src/main/resources/common/metadata/PartitionChangeRecord.json", "af747fbfed7",
     (1, 1)),
    # Kafka 4.0's share groups (KIP-932 early access), changed for 4.1:
    # MetadataHash added after Epoch
    (_SHARE + "ShareGroupMetadataValue.json", KAFKA_4_0, (0, 0)),
    # InitializingTopics added before InitializedTopics
    (_SHARE + "ShareGroupStatePartitionMetadataValue.json", KAFKA_4_0, (0, 0)),
    # SnapshotEpoch uint16 -> int32; CreateTimestamp, WriteTimestamp added
    (_SHARE_STATE + "ShareSnapshotValue.json", KAFKA_4_0, (0, 0)),
    # SnapshotEpoch uint16 -> int32
    (_SHARE_STATE + "ShareUpdateValue.json", KAFKA_4_0, (0, 0)),
)


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True,
                          capture_output=True, text=True).stdout


def _strip_comments(text: str) -> str:
    out = []
    for line in text.splitlines():
        # a // comment outside a string: the specs put them on their own
        # lines or after a value
        in_str, cut = False, None
        for i, ch in enumerate(line):
            if ch == '"' and (i == 0 or line[i - 1] != "\\"):
                in_str = not in_str
            elif not in_str and line.startswith("//", i):
                cut = i
                break
        out.append(line if cut is None else line[:cut])
    return "\n".join(out)


def _range(spec: str | None):
    """'0+' -> (0, MAX), '1-3' -> (1, 3), '2' -> (2, 2), 'none'/None -> None."""
    if spec is None or spec == "none":
        return None
    spec = spec.strip()
    if spec.endswith("+"):
        return (int(spec[:-1]), MAX)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def snake(name: str) -> str:
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    return s.lower()


def _default(ftype: str, value):
    if ftype == "[]":
        return None if value == "null" else []
    if value is None:
        if ftype in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
            return 0
        if ftype == "float64":
            return 0.0
        if ftype == "bool":
            return False
        if ftype == "string":
            return ""
        if ftype == "uuid":
            return "AAAAAAAAAAAAAAAAAAAAAA"
        return None
    if isinstance(value, str):
        if value == "null":
            return None
        if ftype in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
            return int(value, 0)
        if ftype == "float64":
            return float(value)
        if ftype == "bool":
            return value == "true"
    return value


def _fields(fields: list, commons: dict) -> tuple:
    out = []
    for f in fields:
        ftype = f["type"]
        base = ftype[2:] if ftype.startswith("[]") else ftype
        sub = None
        if "fields" in f:
            sub = _fields(f["fields"], commons)
        elif base in commons:
            sub = commons[base]
        out.append({
            "name": f["name"],
            "column": snake(f["name"]),
            "type": ftype if sub is None else ("[]" if ftype.startswith("[]") else "") + "struct",
            "struct": base if sub is not None else None,
            "versions": _range(f.get("versions")),
            "nullable": _range(f.get("nullableVersions")),
            "tagged": _range(f.get("taggedVersions")),
            "tag": None if f.get("tag") is None else int(f["tag"]),
            "default": _default("[]" if ftype.startswith("[]") else
                                base if sub is None else "struct", f.get("default")),
            "fields": sub,
        })
    return tuple(out)


def _message(spec: dict, path: str) -> dict:
    """One spec as data. ``kind`` is the spec's type: "metadata" (framed,
    ``api_key``), "coordinator-key"/"coordinator-value" (a coordinator record
    whose type id on the wire is ``api_key``; keys have one version, 0) or
    "data" (older coordinator specs: a key's versions are its type ids)."""
    commons: dict = {}
    for c in spec.get("commonStructs", ()):
        commons[c["name"]] = _fields(c["fields"], commons)
    return {
        "kind": spec["type"],
        "api_key": spec.get("apiKey"),
        "valid": _range(spec["validVersions"]),
        "flexible": _range(spec.get("flexibleVersions")),
        "fields": _fields(spec["fields"], commons),
        "spec": path,
    }


def _spec(git_dir: str, commit: str, path: str) -> dict:
    return json.loads(_strip_comments(_git(git_dir, "show", f"{commit}:{path}")))


def _full(git_dir: str, commit: str) -> str:
    return _git(git_dir, "rev-parse", "--verify", commit + "^{commit}").strip()


def load_variants(git_dir: str) -> dict:
    out: dict = {}
    for path, commit, versions in HISTORICAL:
        full = _full(git_dir, commit)
        spec = _spec(git_dir, full, path)
        m = _message(spec, path)
        m["valid"] = versions
        m["commit"] = full
        out.setdefault(spec["name"], []).append(m)
    return out


def spec_files(git_dir: str, commit: str) -> list[str]:
    names = _git(git_dir, "ls-tree", "-r", "--name-only", commit).splitlines()
    files = [n for n in names if n.endswith(".json")
             and any(n.startswith(d) and "/" not in n[len(d):] for d in SPEC_DIRS)]
    return sorted(set(files) | set(EXTRA))


def load(git_dir: str, commit: str, retired=RETIRED) -> dict:
    messages = {}
    for path in spec_files(git_dir, commit):
        spec = _spec(git_dir, commit, path)
        messages[spec["name"]] = _message(spec, path)
    for path, old in retired:
        full = _full(git_dir, old)
        spec = _spec(git_dir, full, path)
        if spec["name"] not in messages:
            messages[spec["name"]] = dict(_message(spec, path), commit=full)
    return messages


def render(messages: dict, variants: dict, commit: str) -> str:
    lines = [
        '"""Kafka message schemas as data (generated: do not edit).',
        "",
        f"Generated by kbatch/internal/_gen_schemas.py from apache/kafka commit {commit},",
        "from the JSON message specs under group-coordinator/, transaction-coordinator/,",
        "share-coordinator/, metadata/ and storage/ (plus the consumer protocol's",
        "subscription and assignment from clients/). Apache Kafka's specs are",
        "Apache-2.0 licensed data; this table is our own rendering of them.",
        "",
        "MESSAGES[name] = {kind, api_key, valid: (lo, hi), flexible: (lo, hi) | None,",
        "                  fields, spec[, commit]}",
        "kind: 'metadata' (framed: api_key), 'coordinator-key'/'coordinator-value' (the",
        "      record type id on the wire is api_key; the key struct is version 0) or",
        "      'data' (older coordinator specs: a key's valid versions are its type ids).",
        "commit: only for a record type trunk deleted, the older commit it comes from",
        "        (see RETIRED in the script).",
        "field = {name, column (snake_case), type, struct, versions, nullable, tagged,",
        "         tag, default, fields (for struct and []struct types)}",
        "Version ranges are inclusive (lo, hi); hi = 0x7FFF means 'and later'.",
        "",
        "VARIANTS[name] = [message from an older commit (its 'commit'), valid only for",
        "                  the versions it lists]: layouts Kafka once wrote under a",
        "                  version number it later reused (trunk's ELR Partition(Change)Record v1,",
        "                  Kafka 4.0's share-group records; see HISTORICAL in the script).",
        "                  The decoder keeps the layout that reads a record to its end.",
        '"""',
        "",
        f"KAFKA_COMMIT = {commit!r}",
        "",
        "MESSAGES = {",
    ]
    for name in sorted(messages):
        lines.append(f"    {name!r}: {messages[name]!r},")
    lines.append("}")
    lines.append("")
    lines.append("VARIANTS = {")
    for name in sorted(variants):
        lines.append(f"    {name!r}: {variants[name]!r},")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    git_dir = argv[0] if argv else os.environ.get("KAFKA_GIT")
    if not git_dir:
        print("usage: python -m kbatch.internal._gen_schemas [KAFKA_GIT] [COMMIT]\n"
              "  KAFKA_GIT: a git directory of apache/kafka (or set $KAFKA_GIT)\n"
              f"  COMMIT: default {PINNED} (the pinned one)", file=sys.stderr)
        return 2
    commit = _full(git_dir, argv[1] if len(argv) > 1 else PINNED)
    out = Path(__file__).with_name("_schemas.py")
    messages = load(git_dir, commit)
    out.write_text(render(messages, load_variants(git_dir), commit))
    print(f"wrote {out} from {commit}: {len(messages)} messages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
