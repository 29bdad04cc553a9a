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
import kbatch._batch

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = pathlib.Path(os.environ.get("KBATCH_CORPUS", ROOT.parent / "shared" / "corpus"))

settings.register_profile(
    "ci", max_examples=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile(
    "long", max_examples=2000, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("KBATCH_HYPOTHESIS", "ci"))


def pytest_report_header(config):
    return [f"kbatch compiled core: {kbatch._batch.__file__}"]


def pytest_sessionstart(session):
    # KBATCH_BUILD_DIR: where the extension must come from (make test-asan
    # builds a sanitizer copy outside the checkout)
    expected = pathlib.Path(os.environ.get("KBATCH_BUILD_DIR", ROOT)) / "kbatch"
    path = pathlib.Path(kbatch._batch.__file__)
    assert path.suffix == ".so", f"kbatch._batch is not compiled: {path}"
    assert path.parent.resolve() == expected.resolve(), (
        f"kbatch loaded from {path.parent}, not {expected}")


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
        pytest.skip(f"corpus not found at {CORPUS}")
    return CORPUS
