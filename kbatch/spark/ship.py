"""``register(spark, ship=True)``: kbatch shipped to executors whose Python
cannot import it.

The package goes with the job as one file: a wheel (``ship="path.whl"``; with
``ship=True`` the newest ``dist/kbatch_kafka-<version>-<python>-*.whl`` beside
this checkout, else a zip of the running package, compiled core included),
added with ``SparkContext.addFile`` (classic) or ``addArtifacts(...,
file=True)`` (Spark Connect). A wheel is a zip, and a zip on ``sys.path``
cannot load compiled modules, so a Python worker that needs kbatch unpacks
it once into its SparkFiles directory and puts that on ``sys.path``.

What makes the worker do that before anything asks for kbatch:

- the source registered is a class made here and pickled by value (its
  methods import kbatch only after unpacking), not ``KbatchDataSource``,
  which a worker could only unpickle by importing kbatch;
- the readers it returns pickle as an envelope: a by-value function that
  unpacks kbatch, then loads the reader (``copyreg``, in the planning
  worker). An executor unpickles its reader (so unpacks kbatch) before the
  input partitions, which are then ordinary kbatch objects.

The executors still need kbatch's dependencies (numpy, pyarrow, crc32c,
zstandard, lz4, python-snappy, zlib-ng: PySpark's own need the first two),
and the same platform and Python version as the package shipped.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from pathlib import Path

from kbatch._version import __version__
from kbatch.errors import KbatchError

PACKAGE = Path(__file__).resolve().parents[1]          # the kbatch directory
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


def package_file(ship) -> Path:
    """The file to ship: ``ship`` itself (a ``.whl`` or ``.zip`` path), or
    for ``True`` a wheel of this version and Python in ``dist/`` beside the
    checkout, else a zip of the running package (made once per process)."""
    if ship is not True:
        path = Path(os.fspath(ship))
        if not path.is_file() or path.suffix not in (".whl", ".zip"):
            raise KbatchError(f"ship={ship!r}: expected True or the path of a kbatch wheel "
                              "(.whl) or zip")
        return path
    dist = PACKAGE.parent / "dist"
    wheels = sorted(dist.glob(f"kbatch_kafka-{__version__}-{TAG}-{TAG}-*.whl"),
                    key=lambda p: p.stat().st_mtime) if dist.is_dir() else []
    if wheels and wheels[-1].stat().st_mtime >= _newest(PACKAGE):
        return wheels[-1]
    return _zip_of_package()


def _newest(root: Path) -> float:
    return max((p.stat().st_mtime for p in root.rglob("*") if p.suffix in (".py", ".so")),
               default=0.0)


_ZIPPED: dict = {}


def _zip_of_package() -> Path:
    """The running kbatch package (Python files, compiled modules, data) as
    ``kbatch_kafka-<version>-<python>-shipped.zip`` in a temporary directory."""
    key = _newest(PACKAGE)
    if _ZIPPED.get("key") == key and Path(_ZIPPED["path"]).is_file():
        return Path(_ZIPPED["path"])
    out = Path(tempfile.mkdtemp(prefix="kbatch-ship-")) / \
        f"kbatch_kafka-{__version__}-{TAG}-{int(key)}-shipped.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(PACKAGE.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".c":
                z.write(path, str(path.relative_to(PACKAGE.parent)))
    _ZIPPED.update(key=key, path=str(out))
    return out


def add_to_session(spark, path: Path) -> str:
    """Ship ``path`` with the session's jobs; returns the name workers find
    it under (``SparkFiles.get``)."""
    try:
        sc = spark.sparkContext
    except Exception:               # Spark Connect: no SparkContext on this side
        spark.addArtifacts(str(path), file=True)
        return path.name
    sc.addFile(str(path))
    return path.name


def shipped_source(name: str, pushdown: bool, source: str, readers: tuple[str, ...]):
    """The ``DataSource`` class ``register(spark, ship=True)`` registers:
    ``format("kbatch")`` whose workers unpack the shipped file ``name``
    when they cannot import kbatch. ``source``: the real source class
    (``"module:Name"``; ``pushdown`` as ``register`` sets it); ``readers``:
    the classes its readers have, which pickle as envelopes. Everything
    here is made in this call, so that cloudpickle sends it by value (no
    import of kbatch to load it)."""
    from pyspark.sql.datasource import DataSource

    def named(path: str):
        """The object ``"package.module:Name"`` names (imported where it runs)."""
        import importlib
        module, _, attr = path.partition(":")
        return getattr(importlib.import_module(module), attr)

    def ensure():
        import importlib.util
        import os as _os
        import shutil as _shutil
        import sys as _sys
        import zipfile as _zipfile
        if importlib.util.find_spec("kbatch") is None:
            from pyspark import SparkFiles
            root = SparkFiles.getRootDirectory()
            target = _os.path.join(root, "kbatch-unpacked-" + name.rsplit(".", 1)[0])
            if not _os.path.isdir(target):
                found = SparkFiles.get(name)
                if not _os.path.isfile(found):
                    raise ImportError(f"kbatch is not importable here and the shipped "
                                      f"{name} is not in SparkFiles ({root})")
                partial = f"{target}.{_os.getpid()}"
                with _zipfile.ZipFile(found) as z:
                    z.extractall(partial)
                try:
                    _os.rename(partial, target)
                except OSError:       # another worker unpacked it first
                    _shutil.rmtree(partial, ignore_errors=True)
            _sys.path.insert(0, target)
        envelope_readers()

    def load(blob):
        ensure()
        import pickle
        return pickle.loads(blob)

    def envelope(obj):
        """``(load, (the reader pickled as usual,))``: the envelope entries
        are out of copyreg's table while the reader itself is pickled."""
        import copyreg

        from pyspark import cloudpickle
        ours = {cls: f for cls, f in copyreg.dispatch_table.items()
                if getattr(f, "__name__", "") == "envelope"}
        for cls in ours:
            del copyreg.dispatch_table[cls]
        try:
            blob = cloudpickle.dumps(obj)
        finally:
            copyreg.dispatch_table.update(ours)
        return load, (blob,)

    def envelope_readers():
        import copyreg
        for path in readers:
            copyreg.pickle(named(path), envelope)

    def real(options):
        ensure()
        base = named(source)
        return type(base.__name__, (base,), {"pushdown": pushdown})(options)

    class ShippedKbatchDataSource(DataSource):
        """``format("kbatch")`` (``kbatch.spark.KbatchDataSource``), kbatch
        unpacked from the shipped file where it is not installed."""

        @classmethod
        def name(cls) -> str:
            return "kbatch"

        def schema(self):
            return real(self.options).schema()

        def reader(self, schema):
            return real(self.options).reader(schema)

        def streamReader(self, schema):
            return real(self.options).streamReader(schema)

    return ShippedKbatchDataSource


__all__ = ["add_to_session", "package_file", "shipped_source"]
