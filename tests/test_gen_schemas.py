"""kbatch/internal/_gen_schemas.py on a throwaway git repository shaped like
apache/kafka: coordinator-key/-value specs (type id = apiKey), a record type
deleted on the newer commit (RETIRED), a layout changed in place
(HISTORICAL), comments, and the rendered table read back."""

import json
import shutil
import subprocess

import pytest

from kbatch.internal import _gen_schemas as gen

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")

GROUP = "group-coordinator/src/main/resources/common/message/"


def _spec(**kw):
    return "// Licensed to the ASF\n// a comment line\n" + json.dumps(kw, indent=1) + "\n"


def _commit(repo, files: dict, message: str) -> str:
    for path, text in files.items():
        f = repo / path
        if text is None:
            f.unlink()
            continue
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["add", "-A"], check=True, capture_output=True)
    subprocess.run(git + ["commit", "-qm", message], check=True, capture_output=True)
    return subprocess.run(git + ["rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def _key(api_key, name):
    return _spec(apiKey=api_key, type="coordinator-key", name=name, validVersions="0",
                 flexibleVersions="none",
                 fields=[{"name": "GroupId", "type": "string", "versions": "0"}])


@pytest.fixture
def kafka(tmp_path):
    repo = tmp_path / "kafka"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    old = _commit(repo, {
        GROUP + "OldThingKey.json": _key(9, "OldThingKey"),
        GROUP + "OldThingValue.json": _spec(
            apiKey=9, type="coordinator-value", name="OldThingValue", validVersions="0",
            flexibleVersions="0+", fields=[{"name": "Epoch", "type": "int32", "versions": "0+"}]),
        GROUP + "ThingKey.json": _key(17, "ThingKey"),
        GROUP + "ThingValue.json": _spec(
            apiKey=17, type="coordinator-value", name="ThingValue", validVersions="0",
            flexibleVersions="0+",
            fields=[{"name": "Epoch", "type": "uint16", "versions": "0+"}]),
    }, "old")
    new = _commit(repo, {
        GROUP + "OldThingKey.json": None, GROUP + "OldThingValue.json": None,
        GROUP + "ThingValue.json": _spec(
            apiKey=17, type="coordinator-value", name="ThingValue", validVersions="0",
            flexibleVersions="0+",
            fields=[{"name": "Epoch", "type": "int32", "versions": "0+"},
                    {"name": "Hash", "type": "int64", "versions": "0+", "taggedVersions": "0+",
                     "tag": 0, "default": -1}]),
    }, "new")
    return repo / ".git", old, new


def test_load_coordinator_specs_retired_and_historical(kafka, monkeypatch):
    git, old, new = kafka
    monkeypatch.setattr(gen, "EXTRA", ())
    monkeypatch.setattr(gen, "HISTORICAL", ((GROUP + "ThingValue.json", old[:10], (0, 0)),))
    retired = ((GROUP + "OldThingKey.json", old), (GROUP + "OldThingValue.json", old))
    messages = gen.load(str(git), new, retired=retired)
    assert sorted(messages) == ["OldThingKey", "OldThingValue", "ThingKey", "ThingValue"]
    key = messages["ThingKey"]
    assert (key["kind"], key["api_key"], key["valid"]) == ("coordinator-key", 17, (0, 0))
    assert messages["OldThingKey"]["commit"] == old and "commit" not in key
    value = messages["ThingValue"]
    assert [(f["column"], f["type"], f["tag"], f["default"]) for f in value["fields"]] == [
        ("epoch", "int32", None, 0), ("hash", "int64", 0, -1)]
    variants = gen.load_variants(str(git))
    [v] = variants["ThingValue"]
    assert v["commit"] == old and v["fields"][0]["type"] == "uint16"
    # the rendered table is plain data that reads back the same
    text = gen.render(messages, variants, new)
    ns: dict = {}
    exec(compile(text, "_schemas.py", "exec"), ns)
    assert ns["KAFKA_COMMIT"] == new
    assert ns["MESSAGES"] == messages and ns["VARIANTS"] == variants


def test_main_needs_a_git_directory(monkeypatch, capfd):
    monkeypatch.delenv("KAFKA_GIT", raising=False)
    assert gen.main([]) == 2
    assert "KAFKA_GIT" in capfd.readouterr().err


def test_the_checked_in_table_names_the_pinned_commit():
    from kbatch.internal._schemas import KAFKA_COMMIT, VARIANTS
    assert KAFKA_COMMIT == gen.PINNED
    assert {name for name in VARIANTS} == {
        path.rsplit("/", 1)[1][:-5] for path, _, _ in gen.HISTORICAL}
