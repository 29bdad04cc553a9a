"""``kbatch.spark.register`` checks that Spark's Python workers can import
kbatch (a user's own SparkSession otherwise fails in the executors with
``No module named 'kbatch.spark'``): a local session is pointed at this
interpreter, a cluster gets a KbatchError saying how to fix it. The session
objects here are stand-ins with the attributes ``check_workers`` reads (no
JVM); the real local session is exercised by tests/test_spark.py."""

import os
import sys
from pathlib import Path

import pytest

import kbatch
from kbatch.spark import check_workers

ROOT = Path(__file__).resolve().parent.parent


class _Context:
    def __init__(self, master, python, probe=None):
        self.master = master
        self.pythonExec = python
        self.environment = {}
        self._probe = probe
        self.jobs = 0

    def parallelize(self, data, slices):
        assert slices == 1
        return self

    def map(self, f):
        self._f = f
        return self

    def collect(self):
        self.jobs += 1
        return [self._probe]


class _Session:
    def __init__(self, sc):
        self.sparkContext = sc


@pytest.fixture
def python_without_kbatch(tmp_path):
    """A worker interpreter that cannot import kbatch (no site-packages, no
    PYTHONPATH), as on a machine where it is not installed."""
    script = tmp_path / "python-bare"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -I -S \"$@\"\n")
    script.chmod(0o755)
    return str(script)


def test_local_session_with_another_python_is_pointed_at_this_one(python_without_kbatch):
    sc = _Context("local[2]", python_without_kbatch)
    check_workers(_Session(sc))
    assert sc.pythonExec == sys.executable
    assert sc.environment["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT)
    assert sc.jobs == 0


def test_local_session_with_this_python_keeps_it():
    sc = _Context("local[*]", sys.executable)
    check_workers(_Session(sc))
    assert sc.pythonExec == sys.executable
    # on the workers' path: set for them, or already in this process's (inherited)
    seen = os.pathsep.join([sc.environment.get("PYTHONPATH", ""), os.environ.get("PYTHONPATH", "")])
    assert str(ROOT) in seen.split(os.pathsep)


def test_cluster_without_kbatch_says_how_to_fix_it():
    sc = _Context("spark://master:7077", "python3",
                  probe="ModuleNotFoundError: No module named 'kbatch'")
    with pytest.raises(kbatch.KbatchError) as info:
        check_workers(_Session(sc))
    text = str(info.value)
    assert "No module named 'kbatch'" in text
    assert "pip install kbatch-kafka" in text and "register(spark, ship=True)" in text
    assert "spark.executorEnv.PYTHONPATH" in text
    assert "\n" not in text
    assert sc.jobs == 1


def test_cluster_with_kbatch_passes():
    sc = _Context("yarn", "python3", probe=None)
    check_workers(_Session(sc))
    assert sc.jobs == 1 and sc.pythonExec == "python3"


def test_spark_connect_is_not_probed():
    class Connect:
        @property
        def sparkContext(self):
            raise RuntimeError("not supported in Spark Connect")
    check_workers(Connect())


def test_the_probe_imports_kbatch_spark():
    from kbatch.spark import _probe_import
    assert _probe_import(0) is None
