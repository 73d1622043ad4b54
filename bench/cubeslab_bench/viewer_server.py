"""A real ``cubeslab view`` server for the viewer's tests and benchmark: started on a free localhost port
over the stores given, waited for until it answers, stopped afterwards."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from .s3_server import free_port

CLI = Path(sys.executable).parent / "cubeslab"


@contextmanager
def viewer_server(stores, *options: str, port: int | None = None, wait: bool = True):
    """``(process, base URL)`` of a running viewer over ``stores``; ``wait=False`` returns at once
    (a server that asks for a token refuses the readiness probe)."""
    port = port or free_port()
    process = subprocess.Popen(
        [str(CLI), "view", *map(str, stores), "--port", str(port), *options],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while wait:
            try:
                urllib.request.urlopen(f"{base}/api/stores", timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    said = process.stderr.read() if process.stderr and process.poll() is not None else ""
                    raise RuntimeError(f"the viewer did not start: {said}") from None
                time.sleep(0.1)
        yield process, base
    finally:
        process.terminate()
        process.wait(timeout=30)
