"""A real Dask cluster on this machine for the cluster tests and the scale benchmark: a ``dask scheduler``
process and N ``dask worker`` processes (each under its nanny, which starts it again if it dies), started
on a free localhost port and stopped afterwards."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .s3_server import free_port

DASK = Path(sys.executable).parent / "dask"


def wait_for_port(port: int, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on port {port}")


@dataclass
class DaskCluster:
    """``workers`` worker processes of ``threads`` threads each, with their scratch folders under
    ``folder``; ``env`` is their environment (default: this process's)."""

    folder: Path
    workers: int = 2
    threads: int = 1
    env: dict[str, str] | None = None
    port: int = field(default_factory=free_port)
    processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def address(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> DaskCluster:
        env = dict(os.environ if self.env is None else self.env)

        def start(*arguments: str) -> None:
            self.processes.append(
                subprocess.Popen(
                    [str(DASK), *arguments], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
                )
            )

        start("scheduler", "--host", "127.0.0.1", "--port", str(self.port), "--no-dashboard")
        try:
            wait_for_port(self.port)
            for n in range(self.workers):
                worker = ["worker", self.address, "--nthreads", str(self.threads), "--no-dashboard"]
                local = ["--local-directory", str(self.folder / f"worker-{n}")]
                start(*worker, *local)
            from distributed import Client

            with Client(self.address, timeout=timeout) as client:
                client.wait_for_workers(self.workers, timeout=timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.kill()
            process.wait()
        self.processes.clear()

    def __enter__(self) -> DaskCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
