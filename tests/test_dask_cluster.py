"""Dask on a real cluster: a ``dask scheduler`` and two ``dask worker`` processes started here. Stores
read with ``to_dask()`` (one task per shard) on the workers, from a folder and from S3 (the connection's
``storage_options`` travel with the tasks: the workers have no AWS variables), and dask arrays written
with ``cubeslab.store`` (each task whole shards), checked against segyio and numpy."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import segyio

import cubeslab
from cubeslab_bench.dask_cluster import DaskCluster
from cubeslab_bench.s3_server import S3Server, free_port


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from distributed import Client

    # The workers see no AWS_* variables: what they read from S3 they read with the options the tasks carry.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    with (
        DaskCluster(tmp_path_factory.mktemp("dask"), env=env) as cluster,
        Client(cluster.address) as connected,
    ):
        yield connected


def workers_that_ran(client) -> set[str]:
    return {address for address, keys in client.has_what().items() if keys}


def test_to_dask_reads_a_store_on_the_workers_one_task_per_shard(client, segy_dir, tmp_path):
    store = tmp_path / "f3.zarr"
    cubeslab.ingest(segy_dir / "f3.sgy", store, layout="8x6x75/8x6x75")
    with segyio.open(segy_dir / "f3.sgy") as f:
        expected = segyio.tools.cube(f)
    lazy = cubeslab.open(store).to_dask()
    assert lazy.chunksize == (8, 6, 75)
    assert cubeslab.open(store).to_dask(chunks="inner").chunksize == (8, 6, 75)
    kept = client.persist(lazy)
    np.testing.assert_array_equal(kept.compute(), expected)
    assert len(workers_that_ran(client)) == 2  # the shards were spread over both workers
    np.testing.assert_allclose(
        lazy.sum(axis=2).compute(), expected.sum(axis=2, dtype=np.float64), rtol=1e-5, atol=1e-3
    )


def test_to_dask_reads_an_s3_store_with_the_options_the_tasks_carry(client, segy_dir, tmp_path):
    server = S3Server(tmp_path / "s3", free_port()).start()
    try:
        server.bucket("cluster")
        cubeslab.ingest(segy_dir / "f3.sgy", tmp_path / "local.zarr", layout="8x6x75/8x6x75")
        env = os.environ | server.env()
        done = subprocess.run(
            [str(Path(sys.executable).parent / "cubeslab"), "ingest", "--layout", "8x6x75/8x6x75",
             str(segy_dir / "f3.sgy"), "s3://cluster/f3.zarr"],
            env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        cube = cubeslab.open("s3://cluster/f3.zarr", storage_options=server.storage_options())
        with segyio.open(segy_dir / "f3.sgy") as f:
            expected = segyio.tools.cube(f)
        np.testing.assert_array_equal(client.compute(cube.to_dask()).result(), expected)
    finally:
        server.stop()


def test_store_writes_a_dask_array_in_whole_shards_from_the_workers(client, tmp_path):
    import dask.array as da

    values = np.arange(40 * 36 * 50, dtype=np.float32).reshape(40, 36, 50)
    source = da.from_array(values, chunks=(7, 11, 50))  # not aligned with the store's shards
    target = tmp_path / "out.zarr"
    written = cubeslab.store(source, target, chunks=(5, 6, 25), shards=(10, 12, 50), compute=False)
    client.compute(written).result()
    np.testing.assert_array_equal(cubeslab.open(target).amplitude[...], values)
    assert cubeslab.verify(target)["ok"]


def test_store_writes_a_dask_array_to_s3_from_the_workers(client, tmp_path):
    import dask.array as da

    server = S3Server(tmp_path / "s3", free_port()).start()
    try:
        server.bucket("written")
        options = server.storage_options()  # the workers have no AWS_* variables: the options travel
        values = np.random.default_rng(4).normal(size=(24, 30, 40)).astype(np.float32)
        source = da.from_array(values, chunks=(5, 30, 40))
        url = "s3://written/out.zarr"
        written = cubeslab.store(
            source, url, chunks=(6, 10, 40), shards=(12, 10, 40), storage_options=options, compute=False
        )
        client.compute(written).result()
        np.testing.assert_array_equal(cubeslab.open(url, storage_options=options).amplitude[...], values)
        # The URL names a store now: refused as a target, and written into when opened for writing.
        values[:12] = 1.5
        with pytest.raises(cubeslab.StoreExistsError, match="already exists"):
            cubeslab.store(da.from_array(values, chunks=(12, 30, 40)), url, storage_options=options)
        with cubeslab.open(url, "r+", storage_options=options) as existing:
            cubeslab.store(da.from_array(values, chunks=(12, 30, 40)), existing)
        np.testing.assert_array_equal(cubeslab.open(url, storage_options=options).amplitude[...], values)
        assert cubeslab.verify(url, storage_options=options)["ok"]
    finally:
        server.stop()


def test_the_graph_of_a_million_shard_array_builds_in_seconds(tmp_path):
    cubeslab.create(tmp_path / "wide.zarr", (1000, 1000, 64), "float32", chunks=(1, 1, 64), shards=(1, 1, 64))
    cube = cubeslab.open(tmp_path / "wide.zarr")
    started = time.monotonic()
    lazy = cube.to_dask()
    assert lazy.numblocks == (1000, 1000, 1)
    assert time.monotonic() - started < 10


def test_store_refuses_values_the_existing_array_would_change(tmp_path):
    """As a window write: float64 values (NaN, 1e6, 1.7) into an int16 store would become 0, 16960 and
    1; refused, and the store keeps what it held."""
    import dask.array as da

    with cubeslab.create(tmp_path / "i.zarr", (4, 4, 4), "int16", fill_value=3) as array:
        array[...] = 3
    values = da.from_array(np.full((4, 4, 4), 1.7), chunks=2)
    with cubeslab.open(tmp_path / "i.zarr", "r+") as target:
        with pytest.raises(cubeslab.InvalidInputError, match="storing float64 values into a int16 array"):
            cubeslab.store(values, target)
        assert (target[...] == 3).all()
        cubeslab.store(values.astype("int16"), target)  # converted by the caller: written
        assert (cubeslab.open(tmp_path / "i.zarr")[...] == 1).all()
        assert (target[...] == 1).all()  # the target sees what the tasks wrote


def test_store_refuses_values_beyond_the_stored_type_s_range_as_a_window_write_does(tmp_path):
    """float64 values past float32's range would be stored as infinity: refused, and the shard that would
    hold them keeps its values (other tasks' shards may be written)."""
    import dask.array as da

    with cubeslab.create(tmp_path / "f.zarr", (4, 4), "float32", chunks=(2, 2)) as array:
        array[...] = 1.0
    values = da.from_array(np.full((4, 4), 0.5), chunks=2)
    values[3, 3] = 1e300
    with (
        cubeslab.open(tmp_path / "f.zarr", "r+") as target,
        pytest.raises(cubeslab.InvalidInputError, match="casting='unsafe'"),
    ):
        cubeslab.store(values, target)
    assert (cubeslab.open(tmp_path / "f.zarr")[2:, 2:] == 1.0).all()


def test_store_replaces_no_store_unless_given_one_open_for_writing(tmp_path):
    """A path or URL is a new store, as create makes one: a store there is refused and keeps its values;
    a store opened read-only is refused too."""
    import dask.array as da

    with cubeslab.create(tmp_path / "s.zarr", (4, 6), "float32") as array:
        array[...] = 7
    twos = da.full((4, 6), 2.0, dtype="float32", chunks=2)
    with pytest.raises(
        cubeslab.StoreExistsError, match=r"s\.zarr already exists.*cubeslab\.open\(path, 'r\+'\)"
    ):
        cubeslab.store(twos, tmp_path / "s.zarr")
    with pytest.raises(cubeslab.InvalidInputError, match="open read-only"):
        cubeslab.store(twos, cubeslab.open(tmp_path / "s.zarr"))
    assert (cubeslab.open(tmp_path / "s.zarr")[...] == 7).all()
    with pytest.raises(cubeslab.InvalidInputError, match="create options apply to a new store"):
        cubeslab.store(twos, cubeslab.open(tmp_path / "s.zarr", "r+"), compress="zstd")
