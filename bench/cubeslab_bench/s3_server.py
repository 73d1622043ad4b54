"""A real S3-compatible server for the object-storage tests: s3s-fs's file-system backend behind the s3s
protocol crate, served with TCP_NODELAY (``tools/s3-server``, built by ``make test`` into .tools/),
started on a free localhost port over a folder of the test's, with its own credentials, and stopped
afterwards. Buckets are folders of that root."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BINARY = Path(os.environ.get("CUBESLAB_S3_SERVER", ROOT / ".tools" / "bin" / "cubeslab-s3-server"))
ACCESS_KEY, SECRET_KEY = "cubeslab-test", "cubeslab-test-secret-0123456789"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class S3Server:
    """A running server process over ``root`` at ``endpoint``."""

    root: Path
    port: int
    process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """The ``AWS_*`` variables a client connects with."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": "us-east-1",
        }

    def storage_options(self) -> dict[str, str]:
        """The same as fsspec-style options."""
        return {"key": ACCESS_KEY, "secret": SECRET_KEY, "endpoint_url": self.endpoint, "region": "us-east-1"}

    def bucket(self, name: str) -> str:
        (self.root / name).mkdir(exist_ok=True)
        return name

    def start(self) -> S3Server:
        if not BINARY.is_file():
            raise RuntimeError(f"{BINARY} is missing: `make test` builds it (tools/s3-server)")
        self.root.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [str(BINARY), "--host", "127.0.0.1", "--port", str(self.port), "--access-key", ACCESS_KEY,
             "--secret-key", SECRET_KEY, str(self.root)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{BINARY.name} did not start listening on port {self.port}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None
