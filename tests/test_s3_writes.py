"""Window writes and `create` on S3-compatible object storage, against a real server process (s3s-fs,
started here): what cubeslab writes there reads back equal to a numpy oracle through zarr-python (over
obstore) and through cubeslab; a shard is replaced by one conditional put, so two writers of one shard
never lose each other's data silently, and writers of different shards both succeed; a store with
orientation views refuses writes; lossy rewrites are recorded; verify passes after writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cubeslab
from cubeslab.errors import CubeslabError, InvalidInputError, StoreBusyError, StoreExistsError

CLI = Path(sys.executable).parent / "cubeslab"


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=300)


def zarr_read(server, url: str) -> np.ndarray:
    """The array at ``url`` as zarr-python reads it (over obstore), the independent oracle."""
    import zarr
    from obstore.store import S3Store
    from zarr.storage import ObjectStore

    bucket, _, key = url.removeprefix("s3://").partition("/")
    env = server.env()
    s3 = S3Store(
        bucket, prefix=key, endpoint=server.endpoint, access_key_id=env["AWS_ACCESS_KEY_ID"],
        secret_access_key=env["AWS_SECRET_ACCESS_KEY"], region="us-east-1",
        client_options={"allow_http": True},
    )  # fmt: skip
    return zarr.open_array(ObjectStore(s3, read_only=True), mode="r")[...]


@pytest.fixture(scope="module")
def bucket(s3_server):
    s3_server.bucket("writes")
    return "s3://writes"


def test_create_on_s3_then_window_writes_read_back_equal_through_zarr_python(s3_server, bucket):
    url = f"{bucket}/made.zarr"
    expected = np.full((30, 40, 50), np.nan, np.float32)  # NaN, the fill value of a new float array
    with cubeslab.create(url, (30, 40, 50), "float32", chunks=(10, 10, 25), shards=(10, 20, 50)) as cube:
        rng = np.random.default_rng(1)
        block = rng.normal(size=(12, 17, 50)).astype(np.float32)
        cube.amplitude[3:15, 5:22, :] = block  # parts of shards: read, changed, put back
        expected[3:15, 5:22, :] = block
        cube.amplitude[20:30, 20:40, :] = 7.5  # one whole shard, a scalar broadcast
        expected[20:30, 20:40, :] = 7.5
        cube.amplitude[::4, 1, ::3] = -1.0
        expected[::4, 1, ::3] = -1.0
        # Reads see the writes before any flush.
        np.testing.assert_array_equal(cube.amplitude[...], expected)
    np.testing.assert_array_equal(zarr_read(s3_server, url), expected)
    np.testing.assert_array_equal(cubeslab.open(url).amplitude[...], expected)
    # Opened again for writing: the shards written above are read back and changed.
    with cubeslab.open(url, "r+") as cube:
        cube.amplitude[0, :, 0] = 3.0
        expected[0, :, 0] = 3.0
    info = cube.amplitude.cache_info()
    assert info["flushes"] == 2 and info["misses"] == 2 and info["dirty_bytes"] == 0
    np.testing.assert_array_equal(zarr_read(s3_server, url), expected)


def test_a_small_cache_evicts_and_writes_back_to_s3(s3_server, bucket):
    url = f"{bucket}/evicted.zarr"
    values = np.arange(24 * 24 * 24, dtype=np.int32).reshape(24, 24, 24)
    cube = cubeslab.create(url, values.shape, "int32", chunks=(4, 4, 24), shards=(8, 8, 24), cache="20KiB")
    for i in range(0, 24, 2):
        cube.amplitude[i : i + 2] = values[i : i + 2]
    assert cube.amplitude.cache_info()["evictions"] > 0  # written back before the flush
    cube.close()
    np.testing.assert_array_equal(zarr_read(s3_server, url), values)


def test_create_on_s3_with_coordinates_and_from_a_json_description(s3_server, bucket, tmp_path):
    url = f"{bucket}/labelled.zarr"
    labels = np.arange(100, 120, dtype=np.int32)
    with cubeslab.create(
        url, (20, 6), "float32", dims=["inline", "sample"], coords={"inline": labels}
    ) as cube:
        cube.amplitude[4] = 2.0
    again = cubeslab.open(url)
    np.testing.assert_array_equal(again.coords["inline"], labels)
    assert again.amplitude[4].tolist() == [2.0] * 6 and np.isnan(again.amplitude[5]).all()
    # The CLI's create takes a description as it does for a folder.
    description = tmp_path / "d.json"
    description.write_text(json.dumps(cubeslab.describe(url)))
    made = cli("create", "--from-json", description, f"{bucket}/described.zarr")
    assert made.returncode == 0, made.stderr
    assert cubeslab.open(f"{bucket}/described.zarr").shape == (20, 6)
    # A store there is never replaced by create.
    with pytest.raises(StoreExistsError, match=r"labelled\.zarr"):
        cubeslab.create(url, (4, 4), "float32")
    again_cli = cli("create", "--from-json", description, url)
    assert again_cli.returncode == 1 and "labelled.zarr" in again_cli.stderr


def test_an_ingested_store_on_s3_takes_writes_and_verifies_after(s3_server, bucket, tmp_path):
    values = np.random.default_rng(2).normal(size=(16, 20, 30)).astype(np.float32)
    np.save(tmp_path / "v.npy", values)
    url = f"{bucket}/ingested.zarr"
    assert (
        cli("ingest", "--compress", "zstd", "--layout", "4x5x30/8x10x30", tmp_path / "v.npy", url).returncode
        == 0
    )
    with cubeslab.open(url, "r+") as cube:
        np.testing.assert_array_equal(cube.amplitude[2, 3, :], values[2, 3, :])  # one shard's index kept
        cube.amplitude[1:7, 3, :] = 0.25
    values[1:7, 3, :] = 0.25
    # The writer's own reads after its flush see the shards it put, not the indexes it read before.
    np.testing.assert_array_equal(cube.amplitude[2, 3, :], values[2, 3, :])
    np.testing.assert_array_equal(cube.amplitude[...], values)
    np.testing.assert_array_equal(cubeslab.open(url).amplitude[...], values)
    np.testing.assert_array_equal(zarr_read(s3_server, f"{url}/data"), values)  # the store's data array
    checked = cli("verify", url)  # checksums and shard identities were written with the data
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_two_writers_of_one_shard_never_lose_data_silently(s3_server, bucket):
    url = f"{bucket}/shared.zarr"
    with cubeslab.create(url, (8, 8), "float32", chunks=(4, 4), shards=(4, 8), fill_value=0) as cube:
        cube.amplitude[0, 7] = 0.5  # the shard exists: writers below are checked by its entity tag
    first, second = cubeslab.open(url, "r+"), cubeslab.open(url, "r+")
    first.amplitude[0, 0] = 1.0
    second.amplitude[0, 1] = 2.0  # the same shard, read before the first writer put it back
    first.flush()
    with pytest.raises(StoreBusyError, match="another writer"):
        second.flush()
    stored = cubeslab.open(url).amplitude[...]
    # The first writer's value and the earlier one are there; the refused write is not half applied.
    assert (stored[0, 0], stored[0, 7], stored[0, 1]) == (1.0, 0.5, 0.0)
    # Writers of different shards both succeed.
    third, fourth = cubeslab.open(url, "r+"), cubeslab.open(url, "r+")
    third.amplitude[1, 1] = 3.0
    fourth.amplitude[5, 5] = 4.0
    third.close()
    fourth.close()
    stored = zarr_read(s3_server, url)
    assert (stored[0, 0], stored[1, 1], stored[5, 5]) == (1.0, 3.0, 4.0)


def test_a_shard_replaced_after_this_handle_read_it_is_written_from_the_new_version(s3_server, bucket):
    url = f"{bucket}/reread.zarr"
    # Compressed, so the other writer's version of the shard has its chunks at other offsets.
    with cubeslab.create(
        url, (8, 8), "float32", chunks=(2, 2), shards=(4, 4), fill_value=0, compress="zstd"
    ) as cube:
        cube.amplitude[...] = 1.0
    first = cubeslab.open(url, "r+")
    first.amplitude[0:2, 4:6]  # a read: this handle keeps shard (0, 1)'s index
    with cubeslab.open(url, "r+") as second:
        second.amplitude[0, 4] = 7.0
    first.amplitude[1, 5] = 9.0  # the same shard: read again, from the other writer's version
    first.close()
    stored = zarr_read(s3_server, url)
    assert (stored[0, 4], stored[1, 5], stored[0, 5]) == (7.0, 9.0, 1.0)


def test_two_processes_creating_one_absent_shard_cannot_both_win(s3_server, bucket):
    url = f"{bucket}/race.zarr"
    cubeslab.create(url, (4, 4), "float32", chunks=(4, 4)).close()
    first, second = cubeslab.open(url, "r+"), cubeslab.open(url, "r+")
    first.amplitude[0, 0] = 5.0
    second.amplitude[3, 3] = 6.0  # both found the shard absent
    first.flush()
    with pytest.raises(StoreBusyError):
        second.flush()
    assert zarr_read(s3_server, url)[0, 0] == 5.0


def test_lossy_rewrites_on_s3_are_recorded_and_partial_chunks_refused(s3_server, bucket):
    url = f"{bucket}/lossy.zarr"
    values = np.random.default_rng(3).normal(size=(8, 8, 16)).astype(np.float32)
    with cubeslab.create(
        url, values.shape, "float32", chunks=(4, 4, 16), shards=(8, 8, 16), compress="zfp:tolerance=0.01"
    ) as cube:
        cube.amplitude[...] = values
    stored = zarr_read(s3_server, url)
    assert np.abs(stored - values).max() <= 0.01
    record = cubeslab.open(url).amplitude.metadata["attributes"]["cubeslab"]["rewrites"]
    assert record["chunks"] == 4 and 0 < record["max_abs_error"] <= 0.01
    with cubeslab.open(url, "r+") as cube, pytest.raises(InvalidInputError, match="part of a shard"):
        cube.amplitude[0, 0, 0] = 1.0


def test_a_store_on_s3_with_orientation_views_refuses_writes(s3_server, bucket, segy_dir):
    url = f"{bucket}/views.zarr"
    made = cli("ingest", "--views", "time", segy_dir / "f3.sgy", url)
    assert made.returncode == 0, made.stderr
    with pytest.raises(InvalidInputError, match="orientation views"):
        cubeslab.open(url, "r+")


def test_storage_options_reach_ingest_create_writes_and_reads_without_aws_variables(
    s3_server, bucket, segy_dir, tmp_path, monkeypatch
):
    import segyio

    from cubeslab import _engine

    options = s3_server.storage_options()
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    for name in ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):  # not this machine's profiles either
        monkeypatch.setenv(name, str(tmp_path / "none"))
    with cubeslab.create(
        f"{bucket}/options.zarr", (4, 4), "int16", chunks=(2, 4), storage_options=options
    ) as c:
        c.amplitude[1] = 9
    reopened = cubeslab.open(f"{bucket}/options.zarr", storage_options=options)
    assert reopened.amplitude[1].tolist() == [9] * 4
    with segyio.open(segy_dir / "f3.sgy") as f:
        expected = segyio.tools.cube(f)
    # A SEG-Y source on S3 (put there by cubeslab's own upload), ingested to S3.
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "f3.sgy").write_bytes((segy_dir / "f3.sgy").read_bytes())
    _engine.upload_folder(tmp_path / "raw", f"{bucket}/raw", options)
    cubeslab.ingest(f"{bucket}/raw/f3.sgy", f"{bucket}/options-f3.zarr", storage_options=options)
    cube = cubeslab.open(f"{bucket}/options-f3.zarr", storage_options=options)
    np.testing.assert_array_equal(cube.amplitude[...], expected)
    values = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    np.save(tmp_path / "v.npy", values)
    cubeslab.ingest(tmp_path / "v.npy", f"{bucket}/options-v.zarr", storage_options=options)
    np.testing.assert_array_equal(
        cubeslab.open(f"{bucket}/options-v.zarr", storage_options=options).amplitude[...], values
    )
    # Without them, the same store is not reachable: nothing above used AWS_* variables.
    with pytest.raises(CubeslabError, match=r"options-v\.zarr"):
        cubeslab.open(f"{bucket}/options-v.zarr")
    # A source on S3 into a local store: the options are the source's.
    cubeslab.ingest(f"{bucket}/raw/f3.sgy", tmp_path / "local.zarr", storage_options=options)
    np.testing.assert_array_equal(cubeslab.open(tmp_path / "local.zarr").amplitude[...], expected)


def test_a_create_on_s3_that_fails_leaves_nothing_that_blocks_the_next(s3_server, bucket):
    url = f"{bucket}/retried.zarr"
    with pytest.raises(InvalidInputError, match="chunks"):
        cubeslab.create(url, (4, 4), "float32", shards=(2, 2))  # shards= without chunks=
    with cubeslab.create(url, (4, 4), "float32", chunks=(2, 2), fill_value=0) as cube:
        cube.amplitude[0] = 1.0
    assert cubeslab.open(url).amplitude[0].tolist() == [1.0] * 4
    # A second create there is refused as a local one is, without offering an option create lacks.
    with pytest.raises(
        cubeslab.StoreExistsError, match="already exists; create makes a new store"
    ) as refused:
        cubeslab.create(url, (4, 4), "float32", chunks=(2, 2))
    assert "--overwrite" not in str(refused.value)
    assert cubeslab.open(url).amplitude[0].tolist() == [1.0] * 4
