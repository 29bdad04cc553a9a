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
