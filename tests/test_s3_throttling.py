"""A throttling S3: an HTTP proxy in front of the real s3s-fs server answers some requests with S3's
``503 SlowDown`` reply, as AWS does under load. Reads and ingests retry them and finish with the right
values; a server that never stops throttling is a bounded retry, then an error naming the URL."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
import segyio

import cubeslab
from cubeslab_bench.s3_server import S3Server, free_port

CLI = Path(sys.executable).parent / "cubeslab"
SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)


class ThrottlingProxy:
    """Forwards every request to ``upstream`` unchanged (its Host header too, which the signature
    covers), except every ``every``-th, which gets 503 SlowDown (``every=1``: all of them)."""

    def __init__(self, upstream_port: int, every: int):
        self.every, self.requests, self.throttled = every, 0, 0
        lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with lock:
                    proxy.requests += 1
                    throttle = proxy.requests % proxy.every == 0
                    proxy.throttled += throttle
                if throttle:
                    self.send_response(503)
                    self.send_header("Content-Type", "application/xml")
                    self.send_header("Content-Length", str(len(SLOW_DOWN)))
                    self.end_headers()
                    self.wfile.write(SLOW_DOWN)
                    return
                upstream = http.client.HTTPConnection("127.0.0.1", upstream_port, timeout=60)
                upstream.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    upstream.putheader(name, value)
                upstream.endheaders(body)
                answer = upstream.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for name, value in answer.getheaders():
                    if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                upstream.close()

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server(tmp_path):
    running = S3Server(tmp_path / "s3", free_port()).start()
    running.bucket("busy")
    yield running
    running.stop()


def through(proxy: ThrottlingProxy, server: S3Server, **extra: str) -> dict[str, str]:
    return os.environ | server.env() | {"AWS_ENDPOINT_URL": proxy.endpoint} | extra


def test_slow_down_replies_are_retried_by_ingest_and_reads(server, segy_dir):
    proxy = ThrottlingProxy(server.port, every=3)
    try:
        env = through(proxy, server)
        done = subprocess.run(
            [str(CLI), "ingest", "--layout", "8x6x75/8x6x75", str(segy_dir / "f3.sgy"), "s3://busy/f3.zarr"],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        written = proxy.throttled
        assert written > 0
        options = server.storage_options() | {"endpoint_url": proxy.endpoint}
        cube = cubeslab.open("s3://busy/f3.zarr", storage_options=options)
        with segyio.open(segy_dir / "f3.sgy") as f:
            np.testing.assert_array_equal(cube.amplitude[...], segyio.tools.cube(f))
        assert proxy.throttled > written  # the reads were throttled too, and retried
    finally:
        proxy.close()


def test_a_server_that_keeps_throttling_is_a_bounded_retry_then_an_error_naming_the_url(server, segy_dir):
    proxy = ThrottlingProxy(server.port, every=1)
    try:
        env = through(proxy, server, AWS_MAX_ATTEMPTS="2")
        done = subprocess.run(
            [str(CLI), "info", "s3://busy/f3.zarr"], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 1
        assert "s3://busy/f3.zarr" in done.stderr and "SlowDown" in done.stderr
        assert "Traceback" not in done.stderr
        assert proxy.throttled >= 2
    finally:
        proxy.close()
