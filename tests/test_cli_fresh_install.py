"""kbatch as a user has it after ``pip install kbatch`` without extras: the
optional dependencies missing (simulated by a package of that name that
cannot be imported, first on the path), each failure names the extra to
install, and nothing is written before the main job fails.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SEGMENT = ROOT / "tests" / "data" / "corpus" / "seanorth__kafka-server" / "kafka-logs" / \
    "some-topic-0" / "00000000000000000000.log"


def _without(tmp_path: Path, *modules: str) -> dict:
    """An environment where importing each of ``modules`` fails as when it is
    not installed."""
    fake = tmp_path / "missing"
    for name in modules:
        (fake / name).mkdir(parents=True)
        (fake / name / "__init__.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{name}'\", name={name!r})\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(fake), str(ROOT)])
    env.pop("LOG_DIR", None)
    return env


def _python(code: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("call,extra", [
    ("r.to_arrow()", "kbatch-kafka[arrow]"),
    ("r.batches.to_arrow()", "kbatch-kafka[arrow]"),
    ("r.__arrow_c_stream__()", "kbatch-kafka[arrow]"),
])
def test_to_arrow_without_pyarrow_names_the_extra(tmp_path, call, extra):
    env = _without(tmp_path, "pyarrow")
    code = (f"import kbatch\nr = kbatch.read_segment({str(SEGMENT)!r})\n"
            f"try:\n    {call}\nexcept ImportError as e:\n    print(e)\n")
    proc = _python(code, env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"pip install '{extra}'" in proc.stdout
    assert "pyarrow, which is not installed" in proc.stdout


@pytest.mark.parametrize("missing", ["pandas", "pyarrow"])
def test_to_pandas_without_pandas_names_the_extra(tmp_path, missing):
    env = _without(tmp_path, missing)
    code = (f"import kbatch\nr = kbatch.read_segment({str(SEGMENT)!r})\n"
            f"try:\n    r.to_pandas()\nexcept ImportError as e:\n    print(e)\n")
    proc = _python(code, env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "pip install 'kbatch-kafka[pandas]'" in proc.stdout
    assert f"needs {missing}" in proc.stdout


def test_the_core_needs_no_extra(tmp_path):
    env = _without(tmp_path, "pyarrow", "pandas", "pyspark")
    code = f"import kbatch\nprint(len(kbatch.read_segment({str(SEGMENT)!r})))"
    proc = _python(code, env, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) == 9          # tests/data/corpus/EXPECTED.jsonl: 9 records


def test_main_without_pyspark_fails_first_and_writes_nothing(tmp_path):
    env = _without(tmp_path, "pyspark")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    proc = subprocess.run([sys.executable, "-m", "kbatch.tools.cli", "main"], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "pip install 'kbatch-kafka[spark]'" in proc.stderr
    assert list(cwd.iterdir()) == []       # no ./sample written first


def test_version_matches_the_project(tmp_path):
    import tomllib
    want = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    proc = subprocess.run([sys.executable, "-m", "kbatch.tools.cli", "--version"], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"kbatch {want}"
