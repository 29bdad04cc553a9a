"""A local S3 server (moto's server mode) behind a request-counting proxy.

    s3fs --HTTP--> CountingProxy (127.0.0.1:p) --HTTP--> moto server (127.0.0.1:q)

The proxy counts requests by method and the response body bytes of GETs,
and can inject failures: ``fail_next(n, status)`` answers the next n GETs
with that status (503 SlowDown), ``truncate_next(n)`` sends the next n GET
bodies cut in half (Content-Length promises the whole) and drops the
connection, ``after_next_get(match, action, skip)`` runs ``action()`` once
the next GET whose path holds ``match`` (past ``skip`` of them) was answered (before its body is sent
on: an object overwritten between two GETs of one read). Used by the
remote tests and the remote benchmark.
"""

from __future__ import annotations

import http.client
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BUCKET = "kbatch-test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CountingProxy:
    def __init__(self, upstream_port: int):
        self.upstream = upstream_port
        self.lock = threading.Lock()
        self.reset()
        self._fail = []          # statuses still to inject
        self._truncate = 0
        self._after_get = None   # (match, action)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _forward(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                with proxy.lock:
                    proxy.requests[self.command] = proxy.requests.get(self.command, 0) + 1
                    proxy.log.append((self.command, self.path, self.headers.get("Range")))
                    status = proxy._fail.pop(0) if (self.command == "GET" and proxy._fail) \
                        else None
                    cut = False
                    if status is None and self.command == "GET" and proxy._truncate:
                        proxy._truncate -= 1
                        cut = True
                if status is not None:
                    msg = (b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>SlowDown</Code>"
                           b"<Message>Please reduce your request rate.</Message></Error>")
                    self.send_response(status)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    self.wfile.write(msg)
                    return
                conn = http.client.HTTPConnection("127.0.0.1", proxy.upstream, timeout=30)
                try:
                    headers = {k: v for k, v in self.headers.items()
                               if k.lower() not in ("connection", "proxy-connection")}
                    conn.request(self.command, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    data = resp.read()
                finally:
                    conn.close()
                hook = None
                if self.command == "GET":
                    with proxy.lock:
                        if proxy._after_get and proxy._after_get[0] in self.path:
                            match, action, skip = proxy._after_get
                            proxy._after_get = (match, action, skip - 1) if skip else None
                            hook = None if skip else action
                if hook is not None:
                    hook()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length",
                                         "date", "server"):
                        self.send_header(k, v)
                length = resp.getheader("Content-Length") if self.command == "HEAD" else None
                self.send_header("Content-Length", length or str(len(data)))
                self.end_headers()
                if self.command == "HEAD":
                    return
                if cut:
                    self.wfile.write(data[:len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                self.wfile.write(data)
                if self.command == "GET":
                    with proxy.lock:
                        proxy.get_bytes += len(data)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reset(self):
        with self.lock:
            self.requests = {}
            self.log = []
            self.get_bytes = 0

    @property
    def gets(self) -> int:
        return self.requests.get("GET", 0)

    def fail_next(self, n: int, status: int = 503):
        with self.lock:
            self._fail = [status] * n

    def truncate_next(self, n: int):
        with self.lock:
            self._truncate = n

    def after_next_get(self, match: str, action, skip: int = 0):
        with self.lock:
            self._after_get = (match, action, skip)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class S3:
    """moto's ThreadedMotoServer on a free port, a bucket, and the proxy."""

    def __init__(self):
        from moto.server import ThreadedMotoServer
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
        self.port = free_port()
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        import logging
        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self.server.start()
        self.proxy = CountingProxy(self.port)
        self.direct = self.options(direct=True)
        import s3fs
        self.fs = s3fs.S3FileSystem(**self.direct)
        import boto3
        boto3.client("s3", endpoint_url=f"http://127.0.0.1:{self.port}",
                     region_name="us-east-1").create_bucket(Bucket=BUCKET)

    def options(self, direct: bool = False, retries: int | None = None) -> dict:
        """storage_options for s3fs: through the proxy, or straight to moto."""
        endpoint = f"http://127.0.0.1:{self.port}" if direct else self.proxy.url
        config = {"connect_timeout": 5, "read_timeout": 30}
        if retries is not None:
            config["retries"] = {"max_attempts": retries, "mode": "standard"}
        return {"key": "testing", "secret": "testing", "skip_instance_cache": True,
                "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
                "config_kwargs": config}

    def put_dir(self, local: str, key: str):
        """Upload a local directory tree under ``s3://BUCKET/key``."""
        for root, _, files in os.walk(local):
            for name in files:
                path = os.path.join(root, name)
                rel = os.path.relpath(path, local).replace(os.sep, "/")
                with open(path, "rb") as fh:
                    self.fs.pipe_file(f"{BUCKET}/{key}/{rel}", fh.read())
        self.fs.invalidate_cache()

    def stop(self):
        self.proxy.stop()
        self.server.stop()
