"""Every fuzzing entry point (tests/fuzz/harness.py) runs for a few seconds.

Each run is a subprocess, so a crash (or a finding the harness raises) fails
the test instead of killing pytest. About 35 s for all targets together.
Known findings (harness.KNOWN_FINDINGS, empty today) would be skipped by
the harness, not failed here.
"""

import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("atheris")

ROOT = pathlib.Path(__file__).resolve().parent.parent
SECONDS = {"segment": 5, "chunked": 6, "legacy": 4, "index": 7, "control": 3,
           "differential": 6}


@pytest.mark.parametrize("target", list(SECONDS))
def test_fuzz_target_runs_clean(target, tmp_path):
    cmd = [sys.executable, "-m", "tests.fuzz.harness", target,
           "--seconds", str(SECONDS[target]), "--corpus-dir", str(tmp_path / "corpus"),
           "--artifacts", str(tmp_path), "-timeout=10", "-rss_limit_mb=2048"]
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=SECONDS[target] + 90)
    summary = [line for line in proc.stdout.splitlines() if line.startswith("kbatch-fuzz")]
    assert proc.returncode == 0, (
        f"{target} exited with {proc.returncode}\n" + "\n".join(summary)
        + "\n--- stderr (tail) ---\n" + proc.stderr[-6000:])
    assert summary and " 0 executions" not in summary[0], proc.stdout + proc.stderr[-3000:]
    assert not list(tmp_path.glob("kbatch-fuzz-artifacts-*/crash-*"))


def test_a_chunked_finding_surfaces_as_a_finding(monkeypatch):
    """A finding in the chunked target reaches libFuzzer as ``FuzzFinding``
    (it once went through a helper that no longer existed, so a real finding
    would have surfaced as ``NameError``); a listed known finding is counted."""
    from tests.fuzz import harness

    harness._load()

    def finding(*args):
        raise harness.FuzzFinding("read_segment and iter_segment disagree")

    monkeypatch.setattr(harness, "_compare_chunked", finding)
    with pytest.raises(harness.FuzzFinding):
        harness.t_chunked(bytes(64))
    monkeypatch.setattr(harness, "KNOWN_FINDINGS",
                        [("disagree", lambda target, exc, data: target == "chunked")])
    monkeypatch.setattr(harness, "KNOWN_COUNTS", {})
    harness.t_chunked(bytes(64))
    assert harness.KNOWN_COUNTS == {"disagree": 1}
