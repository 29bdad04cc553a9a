"""``register(spark, ship=True)``: a cluster whose executors' Python cannot
import kbatch reads through the package shipped with the job.

A ``local-cluster[1,1,1024]`` session (an executor JVM apart from the
driver's, with its own Python workers; one, not two: each JVM costs about
10 s of start-up on a 2-core machine) in a child process: the executors' Python
(``spark.pyspark.python``) is a virtualenv that sees kbatch's dependencies
but not kbatch (checked first, by a task), the driver's sees kbatch. The
expected counts are those the partitions were written with.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import numpy as np
import pytest

from kbatch.lib.writer import LogWriter

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.spark
RECORDS, PARTITIONS = 3000, 2

JOB = r"""
import importlib.util, json, sys
sys.path.insert(0, sys.argv[3])   # the driver imports kbatch (not through PYTHONPATH:
                                  # the executors would inherit it)
from pyspark.sql import SparkSession, functions as F
spark = (SparkSession.builder.master("local-cluster[1,1,1024]").appName("kbatch-ship")
         .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.pyspark.python", sys.argv[2])
         .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
         .config("spark.executor.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
out = {}
probe = lambda _: importlib.util.find_spec("kbatch") is None
out["executors_lack_kbatch"] = all(spark.sparkContext.parallelize(range(4), 4).map(probe).collect())
import kbatch.spark as ks
ks.register(spark, ship=True)
df = spark.read.format("kbatch").load(sys.argv[1])
out["count"] = df.count()
out["batch_sum"] = ks.count(spark, sys.argv[1])
def unpacked(_):
    import glob, os
    from pyspark import SparkFiles
    return glob.glob(os.path.join(SparkFiles.getRootDirectory(), "kbatch-unpacked-*"))
out["where"] = spark.sparkContext.parallelize(range(2), 2).map(unpacked).collect()
spark.stop()
print("RESULT " + json.dumps(out))
"""


def test_register_ship_reads_where_executors_lack_kbatch(tmp_path):
    if shutil.which("java") is None:
        pytest.skip("Java is not installed")
    data = tmp_path / "data"
    for p in range(PARTITIONS):
        with LogWriter(data / f"ship-{p}", segment_bytes=40_000, codec="lz4") as log:
            log.append({"value": [b"v%d" % i for i in range(RECORDS)],
                        "timestamp": 1_700_000_000_000 + np.arange(RECORDS)})
    # the executors' Python: this interpreter's dependencies, not kbatch (a .pth
    # line puts site-packages on the path without running its own .pth files,
    # so an editable kbatch there stays out of sight)
    venv = tmp_path / "executors"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env.pop("PYTHONPATH", None)          # the executors inherit the driver's environment
    env.update(SPARK_WORKER_DIR=str(tmp_path / "work"),
               PYSPARK_PYTHON=str(venv / "bin" / "python"),
               PYSPARK_DRIVER_PYTHON=sys.executable)
    proc = subprocess.run([sys.executable, "-c", JOB, str(data), str(venv / "bin" / "python"),
                           str(ROOT)],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-4000:]
    out = json.loads(lines[-1][len("RESULT "):])
    if not out["executors_lack_kbatch"]:
        pytest.skip("the executors' Python imports kbatch here (installed into "
                    f"{sysconfig.get_paths()['purelib']}, not editable): nothing to ship")
    assert out["count"] == PARTITIONS * RECORDS
    assert out["batch_sum"] == PARTITIONS * RECORDS
    # the executors unpacked the shipped copy into their SparkFiles directories
    assert all(len(where) == 1 for where in out["where"]), out["where"]
