"""A SEG-Y ingest run as Dask tasks on a cluster.

This process scans the headers, plans the layout and creates the store (marked incomplete), as a local
ingest does. Each task then reads its block of traces and writes whole shards, on a worker: into the
store's staging folder for a store on a filesystem (which the workers must see at the same path), or, for
a store on S3, into a folder of its own whose files it uploads to their final keys. The workers must see
the source at the same path. This process counts the tasks' outcomes, then checks every task's files and
marks the store complete, last. A worker killed midway costs only its tasks: Dask runs them again, and a
shard is written whole (temporary file then rename; one upload), so the store is the same. After a stop
(Ctrl-C, the whole cluster gone), ``--resume`` hands out only the tasks whose files are missing.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import _engine, schema
from .errors import ClusterError, InvalidInputError, OptionError

TASK_ARRAYS = (schema.AMPLITUDE, schema.TRACE_MASK, schema.CDP_X, schema.CDP_Y, schema.RAW_HEADERS)
"""The arrays an ingest task writes."""

AWS_OPTIONS = {
    "key": "AWS_ACCESS_KEY_ID",
    "secret": "AWS_SECRET_ACCESS_KEY",
    "token": "AWS_SESSION_TOKEN",
    "region": "AWS_REGION",
    "endpoint_url": "AWS_ENDPOINT_URL",
}

POLL_SECONDS = 0.05
CONNECT_SECONDS = 10
CLOSE_SECONDS = 2


def connect(scheduler: Any):
    """A ``distributed.Client``: the one given, or one connected to the scheduler at this address."""
    try:
        from distributed import Client
    except ImportError:
        raise InvalidInputError(
            "an ingest on a cluster needs the 'distributed' package: pip install 'cubeslab[dask]'"
        ) from None
    if isinstance(scheduler, Client):
        return scheduler
    address = checked_address(str(scheduler))
    # Made in two steps to hold the client when connecting fails: left to the garbage collector, a
    # client that never connected waits twice the timeout in Client.__del__, then prints a traceback.
    client = Client.__new__(Client)
    try:
        Client.__init__(client, address, timeout=CONNECT_SECONDS, set_as_default=False)
    except (OSError, TimeoutError) as error:
        _close(client)
        raise ClusterError(
            f"{address}: no Dask scheduler answers there (waited {CONNECT_SECONDS} s): {error}"
        ) from None
    except BaseException:
        _close(client)
        raise
    return client


def checked_address(address: str) -> str:
    """``address`` if it is a Dask scheduler's (``tcp://host:port``; ``inproc://`` too), else an
    :class:`OptionError` naming it: Dask would try to connect, then fail with a traceback."""
    from distributed.comm import get_address_host_port

    if address.startswith("inproc://"):
        return address
    try:
        host, port = get_address_host_port(address)
    except ValueError:
        host, port = "", 0
    if not host or not 0 < port < 65536:
        raise OptionError(
            f"{address!r} is not a Dask scheduler's address (--scheduler, client=): "
            "give it as tcp://host:port, e.g. tcp://scheduler:8786"
        )
    return address


def _close(client) -> None:
    """Close a client whose connection failed (quickly: it has no scheduler to say goodbye to)."""
    if getattr(client, "status", "closed") in ("closed", "newly-created"):
        return
    with contextlib.suppress(Exception):  # a courtesy: the connection's own error is the one to report
        client.close(timeout=CLOSE_SECONDS)


def run_task(source: str, staging: str, segy_options: dict, task: str) -> str:
    """On a worker: run one task an ingest handed out; returns its outcome."""
    options = _engine.IngestOptions(**segy_options)
    return _engine.run_ingest_task(source, staging, options, task)


def run_task_uploading(
    source: str, url: str, storage_options: dict, segy_options: dict, documents: dict, task: str
) -> str:
    """On a worker: run one task of an ingest to S3 in a folder of its own (the arrays' documents given),
    then upload the files it wrote under ``url``; returns its outcome."""
    with tempfile.TemporaryDirectory(prefix="cubeslab-task-") as folder:
        for name, text in documents.items():
            (Path(folder) / name).mkdir()
            (Path(folder) / name / "zarr.json").write_text(text)
        outcome = run_task(source, folder, segy_options, task)
        _engine.upload_folder(folder, url, storage_options)
    return outcome


def connection_options() -> dict[str, str]:
    """This process's S3 connection (its ``AWS_*`` variables) as storage options, for workers that do
    not have it."""
    return {name: os.environ[variable] for name, variable in AWS_OPTIONS.items() if os.environ.get(variable)}


def check_workers_see(client, paths: dict[str, str]) -> None:
    """Refuse, before any task runs, a cluster whose workers do not see the source or the staging folder."""
    for what, path in paths.items():
        seen = client.run(os.path.exists, path)
        blind = sorted(worker for worker, exists in seen.items() if not exists)
        if blind:
            raise ClusterError(
                f"{path}: worker {blind[0]} does not see the {what} here; an ingest on a cluster reads the "
                "source and writes the store's staging folder at the same paths on every worker "
                "(a shared filesystem)"
            )
    if not seen:
        raise ClusterError(f"{client.scheduler.address}: the cluster has no workers")


def run_on_cluster(
    job, client, source: str, segy_options: dict, handle, storage_options: dict | None = None
) -> None:
    """Hand the ingest's tasks not done yet to the cluster and count their outcomes as they finish;
    stops (cancelling what is left) when ``handle`` is asked to stop. Workers upload to a store on S3
    with ``storage_options``, else with this process's ``AWS_*`` variables."""
    from distributed import as_completed

    staging = os.path.abspath(job.staging)
    url = job.upload_target()
    work: Callable[..., str]
    arguments: tuple[Any, ...]
    if url is None:
        check_workers_see(client, {"source": source, "store's staging folder": staging})
        work, arguments = run_task, (source, staging, segy_options)
    else:
        check_workers_see(client, {"source": source})
        documents = {name: (Path(staging) / name / "zarr.json").read_text() for name in TASK_ARRAYS}
        [shared] = client.scatter([documents], broadcast=True)
        work = run_task_uploading
        # The caller's options over this process's AWS_* variables, as the engine here takes them.
        arguments = (source, url, connection_options() | (storage_options or {}), segy_options, shared)
    tasks = job.hand_out()
    futures = [
        client.submit(work, *arguments, task, key=f"cubeslab-ingest-{n}-{id(job)}")
        for n, task in enumerate(tasks)
    ]
    number = {future.key: n for n, future in enumerate(futures)}
    finished = as_completed(futures, loop=client.loop)
    try:
        while not finished.is_empty():
            if handle.stop_requested:
                raise KeyboardInterrupt
            if not finished.has_ready():
                time.sleep(POLL_SECONDS)
                continue
            for future in finished.next_batch(block=False):
                job.take_outcome(number[future.key], future.result())
    finally:
        client.cancel(futures)
