"""A SEG-Y ingest run as tasks on a real Dask cluster (a ``dask scheduler`` and two ``dask worker``
processes started here): the store is the one a local ingest writes, byte for byte but for the store's
random generation; a worker killed midway costs only its tasks; after the whole cluster and the ingest
stop, ``--resume`` on a new cluster finishes the store; a scheduler that does not answer is named.
Values are checked against segyio."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import segyio

import cubeslab
from cubeslab.errors import ClusterError, InvalidInputError
from cubeslab.synthetic import SyntheticSurvey, write_segy
from cubeslab_bench.dask_cluster import DaskCluster
from cubeslab_bench.s3_server import S3Server, free_port

CUBESLAB = Path(sys.executable).parent / "cubeslab"
LAYOUT = "10x10x100/10x10x100"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with DaskCluster(tmp_path_factory.mktemp("dask")) as running:
        yield running


@pytest.fixture(scope="module")
def survey(tmp_path_factory) -> Path:
    """A 60 x 50 x 100 survey: 30 tasks of one 10 x 10 column of traces each."""
    path = tmp_path_factory.mktemp("survey") / "survey.sgy"
    write_segy(path, SyntheticSurvey(60, 50, 100), sample_format=5)
    return path


@pytest.fixture(scope="module")
def local_store(survey, tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("local") / "local.zarr"
    cubeslab.ingest(survey, store, layout=LAYOUT)
    return store


def generation(store: Path) -> int:
    return int(json.loads((store / "zarr.json").read_text())["attributes"]["cubeslab"]["generation"], 16)


def without_generation(data: bytes, store_generation: int, resumed: bool = False) -> bytes:
    """A file's bytes without its store's generation: in a JSON document the ``generation`` entries, in a
    shard the generation and the checksum over it in its identity block (``store/identity.rs``). A resumed
    ingest does not decode what the stopped one wrote, so it records no amplitude statistics."""
    text = f'"generation": "{store_generation:016x}"'.encode()
    if data.lstrip().startswith(b"{"):
        document = json.loads(data)
        document.get("attributes", {}).get("cubeslab", {}).pop("generation", None)
        if resumed:
            document.get("attributes", {}).pop("statsV1", None)
        return json.dumps(document, sort_keys=True).encode()
    assert text not in data
    magic = b"CUBESLAB\x01" + store_generation.to_bytes(8, "little")
    at = data.find(magic)
    assert at > 0, "every shard carries its identity"
    name_length = int.from_bytes(data[at + 17 : at + 19], "little")
    key_at = at + 19 + name_length
    end = key_at + 2 + int.from_bytes(data[key_at : key_at + 2], "little")
    return data[: at + 9] + data[at + 17 : end] + data[end + 4 :]


def assert_same_store(written: Path, expected: Path, resumed: bool = False) -> None:
    files = sorted(p.relative_to(expected) for p in expected.rglob("*") if p.is_file())
    assert sorted(p.relative_to(written) for p in written.rglob("*") if p.is_file()) == files
    ours, theirs = generation(written), generation(expected)
    assert ours != theirs
    for name in files:
        assert without_generation((written / name).read_bytes(), ours, resumed) == without_generation(
            (expected / name).read_bytes(), theirs, resumed
        ), name


def test_an_ingest_on_the_cluster_writes_the_store_a_local_ingest_writes(
    cluster, survey, local_store, tmp_path
):
    from distributed import Client, get_task_stream

    store = tmp_path / "cluster.zarr"
    with Client(cluster.address) as client, get_task_stream(client) as stream:
        summary = cubeslab.ingest(survey, store, layout=LAYOUT, client=client)
    ran_on = {task["worker"] for task in stream.data if task["key"].startswith("cubeslab-ingest-")}
    assert len(ran_on) == 2  # the tasks were spread over both workers
    assert summary["plan"]["layout"] == "10x10x100/10x10x100"
    assert_same_store(store, local_store)
    with segyio.open(survey, ignore_geometry=False) as f:
        np.testing.assert_array_equal(cubeslab.open(store).amplitude[...], segyio.tools.cube(f))
    assert cubeslab.verify(store)["ok"]


def test_the_cli_runs_an_ingest_on_the_scheduler_it_is_given(cluster, survey, local_store, tmp_path):
    store = tmp_path / "cli.zarr"
    done = subprocess.run(
        [str(CUBESLAB), "ingest", str(survey), str(store), "--layout", LAYOUT,
         "--scheduler", cluster.address],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert_same_store(store, local_store)


def shards_written(staging: Path) -> int:
    return sum(1 for p in (staging / "amplitude" / "c").rglob("*") if p.is_file() and p.suffix != ".tmp")


def wait_for_shards(staging: Path, count: int, running, seconds: float = 120) -> None:
    """Until ``count`` shards are in ``staging``, while ``running()``."""
    deadline = time.monotonic() + seconds
    while not (staging / "amplitude" / "c").is_dir() or shards_written(staging) < count:
        assert running(), "the ingest ended before the shards were counted"
        assert time.monotonic() < deadline, f"{staging}: no {count} shards after {seconds} s"
        time.sleep(0.01)


@pytest.fixture(scope="module")
def big_survey(tmp_path_factory) -> tuple[Path, Path]:
    """A 200 x 150 x 400 survey (48 MB) in 1200 tasks, and its local ingest."""
    folder = tmp_path_factory.mktemp("big")
    write_segy(folder / "big.sgy", SyntheticSurvey(200, 150, 400), sample_format=5)
    cubeslab.ingest(folder / "big.sgy", folder / "local.zarr", layout="5x5x400/5x5x400", compress="zstd:3")
    return folder / "big.sgy", folder / "local.zarr"


def test_a_worker_killed_midway_costs_only_its_tasks(big_survey, tmp_path):
    from distributed import Client

    survey, expected = big_survey
    store = tmp_path / "killed.zarr"
    staging = store.with_name(f".{store.name}.cubeslab-new")
    with DaskCluster(tmp_path / "dask") as cluster, Client(cluster.address) as client:
        outcome: dict = {}

        def run() -> None:
            try:
                outcome["summary"] = cubeslab.ingest(
                    survey, store, layout="5x5x400/5x5x400", compress="zstd:3", client=client
                )
            except BaseException as error:  # reported on the test's thread
                outcome["error"] = error

        victim = next(iter(client.run(os.getpid).values()))  # a worker process (its nanny starts another)
        ingest = threading.Thread(target=run)
        ingest.start()
        wait_for_shards(staging, 50, ingest.is_alive)
        os.kill(victim, signal.SIGKILL)
        killed_before_the_end = not (store / "zarr.json").exists()
        ingest.join(timeout=300)
        assert "error" not in outcome, outcome.get("error")
    assert killed_before_the_end
    assert_same_store(store, expected)


def test_resume_on_a_new_cluster_after_the_whole_cluster_and_the_ingest_stopped(big_survey, tmp_path):
    survey, expected = big_survey
    store = tmp_path / "resumed.zarr"
    staging = store.with_name(f".{store.name}.cubeslab-new")
    command = [str(CUBESLAB), "ingest", str(survey), str(store), "--layout", "5x5x400/5x5x400"]
    command += ["--compress", "zstd:3"]
    with DaskCluster(tmp_path / "first") as first:
        running = subprocess.Popen([*command, "--scheduler", first.address], stderr=subprocess.PIPE)
        wait_for_shards(staging, 50, lambda: running.poll() is None)
        running.kill()  # the machine that ran the ingest, and the cluster, go down together
        running.wait()
    written = shards_written(staging)
    assert 50 <= written < 1200
    assert not store.exists()
    with DaskCluster(tmp_path / "second") as second:
        done = subprocess.run(
            [*command, "--resume", "--scheduler", second.address], capture_output=True, text=True, timeout=300
        )
    assert done.returncode == 0, done.stderr
    assert_same_store(store, expected, resumed=True)


def test_a_scheduler_that_does_not_answer_is_named_and_nothing_is_written(survey, tmp_path):
    address = f"tcp://127.0.0.1:{free_port()}"
    store = tmp_path / "never.zarr"
    done = subprocess.run(
        [str(CUBESLAB), "ingest", str(survey), str(store), "--scheduler", address],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert address in done.stderr and "no Dask scheduler answers" in done.stderr
    assert "Traceback" not in done.stderr
    assert not store.exists() and not store.with_name(f".{store.name}.cubeslab-new").exists()
    with pytest.raises(ClusterError, match="no Dask scheduler"):
        cubeslab.ingest(survey, store, client=address)


def test_an_ingest_to_s3_runs_on_workers_that_upload_their_own_shards(
    survey, local_store, tmp_path, monkeypatch
):
    from distributed import Client

    server = S3Server(tmp_path / "s3", free_port()).start()
    # Workers with a temporary folder of their own and no AWS variables: they cannot write into this
    # process's staging folder, and connect with the options the tasks carry.
    alone = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    (tmp_path / "worker-tmp").mkdir()
    alone["TMPDIR"] = str(tmp_path / "worker-tmp")
    try:
        server.bucket("clustered")
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        with DaskCluster(tmp_path / "dask", env=alone) as cluster, Client(cluster.address) as client:
            cubeslab.ingest(survey, "s3://clustered/survey.zarr", layout=LAYOUT, client=client)
            with pytest.raises(InvalidInputError, match="orientation views are not done"):
                cubeslab.ingest(survey, "s3://clustered/views.zarr", views=["time"], client=client)
            assert client.run(lambda: os.environ.get("AWS_ACCESS_KEY_ID")) == dict.fromkeys(
                client.run(os.getpid), None
            )
        assert not list((tmp_path / "worker-tmp").glob("cubeslab-task-*"))  # each task's folder removed
        uploaded = tmp_path / "s3" / "clustered" / "survey.zarr"
        assert_same_store(uploaded, local_store)  # the server keeps each object as a file
        cube = cubeslab.open("s3://clustered/survey.zarr")
        with segyio.open(survey) as f:
            np.testing.assert_array_equal(cube.amplitude[...], segyio.tools.cube(f))
    finally:
        server.stop()
