"""Shared test set-up.

- Proves the compiled extension is the one loaded (not a stale or pure copy).
- Fails a test when Cython swallowed an exception ("Exception ignored in").
- Hypothesis profiles: KBATCH_HYPOTHESIS=ci (default, quick) or =long.
"""

import os
import pathlib
import sys

import pytest
from hypothesis import HealthCheck, settings

import kbatch
import kbatch._core._batch

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The whole shared corpus: ../shared/corpus beside the checkout (every
# development and CI machine), or KBATCH_CORPUS. A fresh clone without it
# still runs tests/data (a small real-data fixture set) and skips the rest
# with the one reason below.
CORPUS = pathlib.Path(os.environ.get("KBATCH_CORPUS") or ROOT.parent / "shared" / "corpus")
NO_CORPUS = (f"needs the shared corpus at {CORPUS} (absent: set KBATCH_CORPUS, or put "
             f"shared/ beside the checkout; CI runs it; tests/data covers a sample)")
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason=NO_CORPUS)

settings.register_profile(
    "ci", max_examples=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile(
    "long", max_examples=2000, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("KBATCH_HYPOTHESIS", "ci"))


def pytest_report_header(config):
    return [f"kbatch compiled core: {kbatch._core._batch.__file__}"]


def pytest_sessionstart(session):
    # KBATCH_BUILD_DIR: where the extension must come from (make test-asan
    # builds a sanitizer copy outside the checkout)
    expected = pathlib.Path(os.environ.get("KBATCH_BUILD_DIR", ROOT)) / "kbatch" / "_core"
    path = pathlib.Path(kbatch._core._batch.__file__)
    assert path.suffix == ".so", f"kbatch._core._batch is not compiled: {path}"
    assert path.parent.resolve() == expected.resolve(), (
        f"kbatch loaded from {path.parent}, not {expected}")
    # CI sets KBATCH_REQUIRE_CORPUS=1: there the corpus tests must run, not skip
    if os.environ.get("KBATCH_REQUIRE_CORPUS") == "1" and not CORPUS.is_dir():
        raise pytest.UsageError(f"KBATCH_REQUIRE_CORPUS=1 but {NO_CORPUS}")


@pytest.fixture(autouse=True)
def _no_swallowed_exceptions(capfd):
    yield
    captured = capfd.readouterr()
    sys.stdout.write(captured.out)
    sys.stderr.write(captured.err)
    assert "Exception ignored" not in captured.err, captured.err


@pytest.fixture(scope="session")
def corpus():
    if not CORPUS.is_dir():
        pytest.skip(NO_CORPUS)
    return CORPUS


# --- one classic local Spark session for the test files that can share it ----
# Starting one (a JVM, then the first Python worker) takes 15-25 s on a 2-core
# machine. shared_spark() hands out one local[2] session, created on first use
# and again after a test file stopped it; its settings are the union of what
# the files' own sessions set, so a file whose builder's getOrCreate() picks it
# up gets what it asked for. A file that needs another master (local-cluster)
# stops it first (stop_shared_spark()).
_SHARED_SPARK = None


def shared_spark():
    global _SHARED_SPARK
    if _SHARED_SPARK is None or _SHARED_SPARK.sparkContext._jsc is None:
        from kbatch.spark import local_session
        _SHARED_SPARK = local_session(
            "kbatch-tests-shared", cores="2", tests=True,
            extra_conf={"spark.ui.showConsoleProgress": "false",
                        "spark.sql.streaming.minBatchesToRetain": "100",
                        # a loaded machine starts Python workers slowly
                        "spark.python.authenticate.socketTimeout": "120s"})
    return _SHARED_SPARK


def stop_shared_spark() -> None:
    """Stops whichever classic session this process runs (the shared one or
    one a test file left running)."""
    global _SHARED_SPARK
    if "pyspark" in sys.modules:
        from pyspark import SparkContext
        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
    _SHARED_SPARK = None


@pytest.fixture(scope="session", autouse=True)
def _stop_shared_spark_at_the_end():
    yield
    if _SHARED_SPARK is not None:
        stop_shared_spark()
