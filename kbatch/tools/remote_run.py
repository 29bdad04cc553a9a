"""``kbatch main --source s3`` (``make run SOURCE=s3``): the main job's
Spark pipeline against object storage. A local S3 server (moto's server
mode, on 127.0.0.1 and a free port) is started in this process and loaded
with a copy of the whole data directory (every partition, internal topics
included, with their index files, and the checkpoint files), and Spark
reads ``s3://`` with ``storage.*`` options exactly as ``make run`` reads
the local directory: read_committed, with headers, every topic. The driver
plans through the same door as for local paths (listings, index objects,
the batches their entries name, and each partition's transaction markers),
the executors read their own ranges. The summary comes from the Parquet
written, and every partition's count and offset range are checked against
kbatch's local read_committed read of the same files.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
from pathlib import Path

from kbatch.errors import KbatchError

BUCKET = "kbatch-sample"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_s3():
    """``(server, storage options)`` of a local moto S3 server."""
    try:
        from moto.server import ThreadedMotoServer
    except ImportError:
        raise KbatchError("--source s3 needs moto's server mode: pip install 'moto[server]' "
                          "(and 'kbatch-kafka[remote]')") from None
    import logging
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    import boto3
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(
        Bucket=BUCKET)
    options = {"key": "testing", "secret": "testing",
               "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
    return server, options


def upload(log_dir: str, options: dict) -> tuple[int, int]:
    """A copy of the data directory (every file, partitions and checkpoint
    files alike) under s3://BUCKET/data/; ``(objects, bytes)``."""
    import s3fs
    fs = s3fs.S3FileSystem(**options)
    objects = size = 0
    root = Path(log_dir)
    for f in sorted(root.rglob("*")):
        if not f.is_file():
            continue
        data = f.read_bytes()
        fs.pipe_file(f"{BUCKET}/data/{f.relative_to(root).as_posix()}", data)
        objects += 1
        size += len(data)
    return objects, size


def run_s3(log_dir: str, out_dir: str, cores: str = "*") -> int:
    from kbatch.lib.log import open_log_dir
    from kbatch.spark import local_session
    from kbatch.tools.pipeline import Stages, print_table, summarize, summary_rows

    stages = Stages()
    with stages.stage("start a local S3 server (moto) and upload the partitions"):
        server, options = start_s3()
        objects, size = upload(log_dir, options)
        print(f"   {objects} objects, {size / 2**20:.1f} MiB in s3://{BUCKET}/data/")
    url = f"s3://{BUCKET}/data"
    parquet_dir = str(Path(out_dir, "parquet-s3").resolve())
    try:
        with stages.stage("start Spark (local, all cores)"):
            spark = local_session("kbatch-main-s3", cores=cores,
                                  extra_conf={"spark.ui.showConsoleProgress": "false"})
        reader = spark.read.format("kbatch").option("storage.key", "testing") \
            .option("storage.secret", "testing") \
            .option("storage.client_kwargs", json.dumps(options["client_kwargs"])) \
            .option("isolation", "read_committed").option("includeHeaders", "true")
        with stages.stage(f"read {url} read_committed (as make run), write Parquet by topic"):
            if Path(parquet_dir).exists():
                shutil.rmtree(parquet_dir)
            reader.load(url).write.partitionBy("topic").parquet(parquet_dir)
        with stages.stage("summarize per topic/partition"):
            per, top = summarize(spark, parquet_dir)
        print()
        print_table(per, top)
        print()
        ok = True
        with stages.stage("check counts and offset ranges against kbatch's local read"):
            got = {(r["topic"], r["partition"]): (r["records"], r["first_offset"],
                                                  r["last_offset"]) for r in per}
            for log in open_log_dir(log_dir).partitions:
                records = log.read(isolation="read_committed")
                key = (log.topic, log.partition)
                want = ((len(records), int(records.offset.min()), int(records.offset.max()))
                        if len(records) else None)
                agree = got.get(key) == want
                ok &= agree
                print(f"   {log.topic}-{log.partition}: local {want} = s3 via Spark "
                      f"{got.get(key)}" + ("" if agree else "   <-- MISMATCH"))
        Path(out_dir, "summary-s3.json").write_text(
            json.dumps(summary_rows(per, top), indent=1, ensure_ascii=False))
        spark.stop()
    finally:
        server.stop()
    print()
    print(f"Parquet (partitioned by topic): {parquet_dir}")
    print("Stages: " + ", ".join(f"{name} {took:.1f} s" for name, took in stages.times))
    print("Counts agree with kbatch." if ok else "COUNTS DISAGREE (see above).")
    return 0 if ok else 1
