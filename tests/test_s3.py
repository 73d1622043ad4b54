"""Stores on S3-compatible object storage, against a real server process (s3s-fs, started here): ingest
to an ``s3://`` URL, read back equal to segyio; zarr-python (through obstore) and xarray read what
cubeslab wrote, and cubeslab reads what zarr-python wrote; a store is replaced only with --overwrite; an
upload cut short is never a store; unsupported schemes, missing buckets and keys, wrong credentials and
a server gone are clear errors naming the URL; credentials can come from an AWS profile."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import segyio
from conftest import run_while_paused, wait_for

import cubeslab
from cubeslab.errors import InvalidInputError, StoreNotFoundError
from cubeslab_bench.s3_server import S3Server, free_port

CLI = Path(sys.executable).parent / "cubeslab"


@pytest.fixture(scope="module")
def server(s3_server):
    return s3_server


def cli(*args, env=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(CLI), *map(str, args)], capture_output=True, text=True, timeout=300, env=env or os.environ.copy()
    )


def segy_cube(path: Path) -> np.ndarray:
    with segyio.open(path) as f:
        return segyio.tools.cube(f)


def zarr_store(server: S3Server, bucket: str, prefix: str, read_only: bool = True):
    from obstore.store import S3Store
    from zarr.storage import ObjectStore

    s3 = S3Store(
        bucket, prefix=prefix, endpoint=server.endpoint, access_key_id=server.env()["AWS_ACCESS_KEY_ID"],
        secret_access_key=server.env()["AWS_SECRET_ACCESS_KEY"], region="us-east-1",
        client_options={"allow_http": True},
    )  # fmt: skip
    return ObjectStore(s3, read_only=read_only)


@pytest.fixture(scope="module")
def f3_on_s3(server, segy_dir):
    """f3.sgy ingested by the CLI to s3://survey/raw/f3.zarr."""
    server.bucket("survey")
    result = cli("ingest", segy_dir / "f3.sgy", "s3://survey/raw/f3.zarr")
    assert result.returncode == 0, result.stderr
    return "s3://survey/raw/f3.zarr"


def test_an_ingest_to_s3_reads_back_equal_to_segyio(f3_on_s3, segy_dir):
    cube = cubeslab.open(f3_on_s3)
    expected = segy_cube(segy_dir / "f3.sgy")
    np.testing.assert_array_equal(cube.amplitude[...], expected)
    np.testing.assert_array_equal(cube.amplitude[5, ::3, 10:40:7], expected[5, ::3, 10:40:7])
    np.testing.assert_array_equal(cube.amplitude[:, 4, :], expected[:, 4, :])
    with segyio.open(segy_dir / "f3.sgy") as f:
        np.testing.assert_array_equal(cube.coords["inline"], f.ilines)


def test_info_describes_a_store_on_s3(f3_on_s3):
    result = cli("info", "--json", f3_on_s3)
    assert result.returncode == 0, result.stderr
    assert '"state": "complete"' in result.stdout and f3_on_s3 in result.stdout


def test_zarr_python_and_xarray_read_what_cubeslab_wrote(server, f3_on_s3, segy_dir):
    import xarray as xr
    import zarr

    expected = segy_cube(segy_dir / "f3.sgy")
    group = zarr.open_group(zarr_store(server, "survey", "raw/f3.zarr"), mode="r")
    np.testing.assert_array_equal(group["amplitude"][...], expected)
    dataset = xr.open_zarr(zarr_store(server, "survey", "raw/f3.zarr"), consolidated=False)
    np.testing.assert_array_equal(dataset["amplitude"].values, expected)


def test_cubeslab_reads_what_zarr_python_wrote(server):
    import zarr

    server.bucket("foreign")
    values = np.random.default_rng(3).normal(size=(30, 40, 50)).astype(np.float32)
    array = zarr.create_array(
        zarr_store(server, "foreign", "z.zarr", read_only=False), shape=values.shape, dtype="float32",
        chunks=(8, 8, 25), shards=(16, 16, 50), dimension_names=["a", "b", "c"],
    )  # fmt: skip
    array[...] = values
    # With fsspec-style options instead of the environment.
    opened = cubeslab.open("s3://foreign/z.zarr", storage_options=server.storage_options())
    np.testing.assert_array_equal(opened.amplitude[...], values)
    np.testing.assert_array_equal(opened.amplitude[29, 3:33:4, ::-1], values[29, 3:33:4, ::-1])


def test_an_array_file_ingests_to_s3_too(server, tmp_path):
    server.bucket("arrays")
    values = np.arange(24 * 30 * 20, dtype=np.int16).reshape(24, 30, 20)
    np.save(tmp_path / "a.npy", values)
    result = cli("ingest", tmp_path / "a.npy", "s3://arrays/a.zarr")
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(cubeslab.open("s3://arrays/a.zarr").amplitude[...], values)


def test_text_labels_of_a_store_on_s3_read_as_from_a_folder(server, tmp_path):
    xr = pytest.importorskip("xarray")
    pytest.importorskip("netCDF4")
    server.bucket("labels")
    regions = ["north", "south", "Zürich"]
    data = xr.Dataset({"v": (("region", "t"), np.arange(6.0).reshape(3, 2))}, coords={"region": regions})
    data.to_netcdf(tmp_path / "r.nc", engine="netcdf4")
    result = cli("ingest", tmp_path / "r.nc", "s3://labels/r.zarr")
    assert result.returncode == 0, result.stderr
    cube = cubeslab.open("s3://labels/r.zarr", storage_options=server.storage_options())
    assert cube.coords["region"].tolist() == regions
    np.testing.assert_array_equal(cube.axis("region")["Zürich"], [4.0, 5.0])


def test_a_store_is_replaced_only_with_overwrite(server, tmp_path):
    server.bucket("replace")
    first, second = np.zeros((10, 12, 14), np.float32), np.ones((6, 7, 8), np.float32)
    np.save(tmp_path / "first.npy", first)
    np.save(tmp_path / "second.npy", second)
    url = "s3://replace/x.zarr"
    assert cli("ingest", tmp_path / "first.npy", url).returncode == 0
    refused = cli("ingest", tmp_path / "second.npy", url)
    assert refused.returncode == 1 and "already exists" in refused.stderr and url in refused.stderr
    np.testing.assert_array_equal(cubeslab.open(url).amplitude[...], first)
    assert cli("ingest", "--overwrite", tmp_path / "second.npy", url).returncode == 0
    np.testing.assert_array_equal(cubeslab.open(url).amplitude[...], second)


def test_overwrite_never_replaces_a_prefix_of_other_stores(server, tmp_path):
    """--overwrite to a prefix that holds stores (each key a Zarr key, but no zarr.json at the prefix's
    root) is refused, and every store under it stays."""
    server.bucket("proj")
    values = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.save(tmp_path / "v.npy", values)
    for name in ("a", "b"):
        assert cli("ingest", tmp_path / "v.npy", f"s3://proj/surveys/{name}.zarr").returncode == 0
    refused = cli("ingest", "--overwrite", tmp_path / "v.npy", "s3://proj/surveys")
    assert refused.returncode == 1, refused.stdout
    assert "holds objects that are not a Zarr store" in " ".join(refused.stderr.split())
    for name in ("a", "b"):
        np.testing.assert_array_equal(cubeslab.open(f"s3://proj/surveys/{name}.zarr").amplitude[...], values)


def test_credentials_in_an_endpoint_never_reach_a_message(server, tmp_path):
    endpoint = server.storage_options()["endpoint_url"].replace("://", "://admin:S3CR3T-PW@")
    result = cli("info", "s3://a_b/x.zarr", env={**os.environ, "AWS_ENDPOINT_URL": endpoint})
    said = result.stdout + result.stderr
    assert result.returncode != 0 and "S3CR3T-PW" not in said and "http://***@" in said, said


@pytest.mark.parametrize("url", ["gs://bucket/x.zarr", "https://host/x.zarr", "az://c/x.zarr"])
def test_unsupported_schemes_are_refused_not_taken_for_folders(tmp_path, segy_dir, url):
    commands = (
        ["ingest", segy_dir / "tiny.sgy", url],
        ["info", url],
        ["read", url, "--inline", "1", "-o", "x.npy"],
    )
    for args in commands:
        result = subprocess.run(
            [str(CLI), *map(str, args)], capture_output=True, text=True, timeout=60, cwd=tmp_path
        )
        assert result.returncode == 1, (args, result.stderr)
        assert "scheme is not supported" in result.stderr and url in result.stderr
    assert list(tmp_path.iterdir()) == []  # no folder named after the scheme
    with pytest.raises(InvalidInputError, match="not supported"):
        cubeslab.open(url)


def test_missing_bucket_and_key_name_the_url(server):
    with pytest.raises(StoreNotFoundError, match=re.escape("s3://no-such-bucket/x.zarr")):
        cubeslab.open("s3://no-such-bucket/x.zarr")
    server.bucket("empty")
    with pytest.raises(StoreNotFoundError, match=re.escape("s3://empty/nothing.zarr")):
        cubeslab.open("s3://empty/nothing.zarr")


def test_a_store_on_s3_exports_to_segy_hdf5_and_npy(f3_on_s3, segy_dir, tmp_path):
    import h5py

    expected = segy_cube(segy_dir / "f3.sgy")
    assert cubeslab.export(f3_on_s3, tmp_path / "f3.sgy") == expected.shape[0] * expected.shape[1]
    np.testing.assert_array_equal(segy_cube(tmp_path / "f3.sgy"), expected)
    cubeslab.export(f3_on_s3, tmp_path / "f3.h5")
    with h5py.File(tmp_path / "f3.h5") as f:
        np.testing.assert_array_equal(f["amplitude"][...], expected)
    cubeslab.export(f3_on_s3, tmp_path / "f3.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "f3.npy"), expected)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f3.h5", "f3.npy", "f3.sgy"]  # no copy left


def test_credentials_region_and_endpoint_come_from_an_aws_profile(server, f3_on_s3, tmp_path):
    keys = server.env()
    (tmp_path / "credentials").write_text(
        "[default]\naws_access_key_id = not-this-one\n\n"
        f"[lab]\naws_access_key_id = {keys['AWS_ACCESS_KEY_ID']}\n"
        f"aws_secret_access_key = {keys['AWS_SECRET_ACCESS_KEY']}\n"
    )
    (tmp_path / "config").write_text(f"[profile lab]\nregion = us-east-1\nendpoint_url = {server.endpoint}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | {
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "credentials"),
        "AWS_CONFIG_FILE": str(tmp_path / "config"),
        "AWS_PROFILE": "lab",
    }
    result = cli("info", f3_on_s3, env=env)
    assert result.returncode == 0, result.stderr
    assert "inline" in result.stdout
    result = cli("info", f3_on_s3, env=env | {"AWS_PROFILE": "nosuch"})
    assert result.returncode == 1
    assert (
        "AWS_PROFILE=nosuch: no such profile" in result.stderr
        and str(tmp_path / "credentials") in result.stderr
    )


def test_wrong_credentials_are_an_error_that_does_not_print_the_secret(server, f3_on_s3):
    env = os.environ | {"AWS_SECRET_ACCESS_KEY": "wrong-secret-9f8e7d", "AWS_MAX_ATTEMPTS": "1"}
    result = cli("info", f3_on_s3, env=env)
    assert result.returncode == 1
    assert f3_on_s3 in result.stderr and "denied" in result.stderr
    assert "wrong-secret-9f8e7d" not in result.stderr + result.stdout


def test_a_server_gone_mid_read_is_a_bounded_retry_then_a_clear_error(tmp_path, segy_dir):
    lone = S3Server(tmp_path / "root", free_port()).start()
    try:
        lone.bucket("lone")
        env = os.environ | lone.env() | {"AWS_MAX_ATTEMPTS": "2"}
        assert cli("ingest", segy_dir / "small.sgy", "s3://lone/s.zarr", env=env).returncode == 0
        script = (
            "import sys, cubeslab\n"
            "cube = cubeslab.open('s3://lone/s.zarr')\n"
            "print('opened', flush=True)\n"
            "sys.stdin.readline()\n"
            "cube.amplitude[...]\n"
        )
        reader = subprocess.Popen(
            [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        assert reader.stdout is not None and reader.stdout.readline().strip() == "opened"
        lone.stop()
        started = time.monotonic()
        _, stderr = reader.communicate("\n", timeout=120)
        assert reader.returncode != 0
        assert "s3://lone/s.zarr" in stderr and "read failed" in stderr
        assert time.monotonic() - started < 60
    finally:
        lone.stop()


def test_an_upload_cut_short_is_never_a_store(tmp_path):
    lone = S3Server(tmp_path / "root", free_port()).start()
    try:
        lone.bucket("lone")
        env = os.environ | lone.env() | {"AWS_MAX_ATTEMPTS": "1"}
        values = np.random.default_rng(1).normal(size=(64, 64, 512)).astype(np.float32)
        np.save(tmp_path / "big.npy", values)
        ingest = subprocess.Popen(
            [str(CLI), "ingest", "--layout", "8x8x64/8x8x64", str(tmp_path / "big.npy"), "s3://lone/big.zarr"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        # Stop the server once the first objects have arrived, before the upload can finish.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(list(lone.root.glob("*.bucket-*"))) < 20:
            if ingest.poll() is not None:
                break
            time.sleep(0.002)
        lone.stop()
        _, stderr = ingest.communicate(timeout=120)
        assert ingest.returncode == 1, stderr
        assert "s3://lone/big.zarr" in stderr
        lone.start()
        with pytest.raises(StoreNotFoundError, match="did not finish"):
            cubeslab.open("s3://lone/big.zarr", storage_options=lone.storage_options())
    finally:
        lone.stop()


def put_object(server: S3Server, bucket: str, key: str, data: bytes) -> None:
    import obstore
    from obstore.store import S3Store

    s3 = S3Store(
        bucket, endpoint=server.endpoint, access_key_id=server.env()["AWS_ACCESS_KEY_ID"],
        secret_access_key=server.env()["AWS_SECRET_ACCESS_KEY"], region="us-east-1",
        client_options={"allow_http": True},
    )  # fmt: skip
    obstore.put(s3, key, data)


def test_sources_on_s3_ingest_as_local_ones(server, segy_dir, data_dir):
    server.bucket("raw")
    put_object(server, "raw", "seismic/f3.sgy", (segy_dir / "f3.sgy").read_bytes())
    result = cli("ingest", "s3://raw/seismic/f3.sgy", "s3://raw/f3.zarr")
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(
        cubeslab.open("s3://raw/f3.zarr").amplitude[...], segy_cube(segy_dir / "f3.sgy")
    )
    # An imzML file comes with its .ibd.
    example = data_dir / "imzml" / "Example_Continuous"
    for suffix in (".imzML", ".ibd"):
        put_object(server, "raw", f"msi/Example_Continuous{suffix}", example.with_suffix(suffix).read_bytes())
    result = cli("ingest", "s3://raw/msi/Example_Continuous.imzML", "s3://raw/msi.zarr")
    assert result.returncode == 0, result.stderr
    from pyimzml.ImzMLParser import ImzMLParser

    parser = ImzMLParser(str(example.with_suffix(".imzML")))
    msi = cubeslab.open("s3://raw/msi.zarr")
    x, y, _ = parser.coordinates[4]
    np.testing.assert_array_equal(msi.spectrum(x, y)[1], parser.getspectrum(4)[1])
    missing = cli("ingest", "s3://raw/seismic/none.sgy", "s3://raw/none.zarr")
    assert missing.returncode == 1 and "s3://raw/seismic/none.sgy" in missing.stderr


def test_verify_reads_every_shard_of_a_store_on_s3_and_names_the_bad_one(server, tmp_path):
    server.bucket("checked")
    values = np.random.default_rng(5).normal(size=(20, 24, 30)).astype(np.float32)
    np.save(tmp_path / "v.npy", values)
    url = "s3://checked/v.zarr"
    assert cli("ingest", "--layout", "5x6x30/10x12x30", tmp_path / "v.npy", url).returncode == 0
    good = cli("verify", "--json", url)
    assert good.returncode == 0, good.stderr
    report = cubeslab.verify(url)
    assert report["ok"] and report["arrays"]["data"]["shards_read"] == 4  # an array file's data array
    # Flip a byte of one shard's chunk data: its checksum no longer matches.
    shard = "v.zarr/data/c/1/0/0"
    data = bytearray(get_object(server, "checked", shard))
    data[10] ^= 0xFF
    put_object(server, "checked", shard, bytes(data))
    bad = cli("verify", url)
    assert bad.returncode == 1
    report = cubeslab.verify(url)
    assert not report["ok"] and [b["chunk"] for b in report["arrays"]["data"]["bad"]] == ["c/1/0/0"]


def get_object(server: S3Server, bucket: str, key: str) -> bytes:
    import obstore
    from obstore.store import S3Store

    s3 = S3Store(
        bucket, endpoint=server.endpoint, access_key_id=server.env()["AWS_ACCESS_KEY_ID"],
        secret_access_key=server.env()["AWS_SECRET_ACCESS_KEY"], region="us-east-1",
        client_options={"allow_http": True},
    )  # fmt: skip
    return bytes(obstore.get(s3, key).bytes())


@pytest.mark.parametrize("damage", ["swap", "delete"])
def test_a_swapped_or_missing_shard_on_s3_is_an_error_not_numbers_from_elsewhere(server, tmp_path, damage):
    """As in a folder: each shard carries its identity, checked with its index (and a whole shard's
    bytes); a store that records a generation wrote every shard, so one gone is lost data."""
    import obstore
    from obstore.store import S3Store

    bucket = f"placed-{damage}"
    server.bucket(bucket)
    values = np.random.default_rng(6).normal(size=(20, 24, 30)).astype(np.float32)
    np.save(tmp_path / "v.npy", values)
    url = f"s3://{bucket}/v.zarr"
    assert cli("ingest", "--layout", "5x6x30/10x12x30", tmp_path / "v.npy", url).returncode == 0
    np.testing.assert_array_equal(cubeslab.open(url)[...], values)
    a, b = "v.zarr/data/c/0/0/0", "v.zarr/data/c/1/1/0"
    first, second = get_object(server, bucket, a), get_object(server, bucket, b)
    if damage == "swap":
        put_object(server, bucket, a, second)
        put_object(server, bucket, b, first)
    else:
        s3 = S3Store(
            bucket, endpoint=server.endpoint, access_key_id=server.env()["AWS_ACCESS_KEY_ID"],
            secret_access_key=server.env()["AWS_SECRET_ACCESS_KEY"], region="us-east-1",
            client_options={"allow_http": True},
        )  # fmt: skip
        obstore.delete(s3, a)
    expected = "moved or copied" if damage == "swap" else "missing"
    for window in ((slice(None),) * 3, (slice(0, 3), slice(0, 4), 7), (2,)):  # whole shards, then partial
        with pytest.raises(cubeslab.CorruptDataError, match=expected):
            cubeslab.open(url)[window]
    np.testing.assert_array_equal(cubeslab.open(url)[10:, :12], values[10:, :12])  # the shards in place
    report = cli("verify", url)
    assert report.returncode == 1, report.stdout


def test_reads_of_a_store_on_s3_with_views_go_to_the_view_and_equal_segyio(server, segy_dir):
    server.bucket("viewed")
    url = "s3://viewed/f3.zarr"
    made = cli("ingest", "--views", "time", segy_dir / "f3.sgy", url)
    assert made.returncode == 0, made.stderr
    amplitude = cubeslab.open(url).amplitude
    expected = segy_cube(segy_dir / "f3.sgy")
    # A time slice goes to the view laid out for it, an inline to the volume; both equal segyio's.
    assert amplitude.source_for((slice(None), slice(None), 30)) == f"{url}/amplitude_time"
    assert amplitude.source_for((3, slice(None), slice(None))) == f"{url}/amplitude"
    np.testing.assert_array_equal(amplitude[:, :, 30], expected[:, :, 30])
    np.testing.assert_array_equal(amplitude[3], expected[3])
    np.testing.assert_array_equal(amplitude[...], expected)


def cli_background(*args, env) -> subprocess.Popen:
    return subprocess.Popen(
        [str(CLI), *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def test_an_ingest_whose_upload_stopped_resumes_by_uploading_and_never_mixes_sources(
    tmp_path, synthetic_segy
):
    """The store is staged whole, then the server goes midway through the upload: a plain ingest is
    told to resume, a resume from another source is refused, and one from the same source uploads the
    staged store, which then equals segyio and verifies."""
    segy = synthetic_segy(64, 64, 512, name="cut.sgy")
    other = synthetic_segy(64, 64, 512, name="other.sgy")
    other.path.write_bytes(other.path.read_bytes()[:-4] + b"\x3f\x80\x00\x00")  # its last sample differs
    lone = S3Server(tmp_path / "root", free_port()).start()
    try:
        lone.bucket("lone")
        (tmp_path / "tmp").mkdir()
        env = os.environ | lone.env() | {"AWS_MAX_ATTEMPTS": "1", "TMPDIR": str(tmp_path / "tmp")}
        url, layout = "s3://lone/cut.zarr", ("--layout", "8x8x64/8x8x64")
        ingest = cli_background("ingest", *layout, segy.path, url, env=env)
        wait_for(lambda: len(list(lone.root.glob("*.bucket-*"))) >= 20, ingest, "the upload began")
        lone.stop()
        _, stderr = ingest.communicate(timeout=120)
        assert ingest.returncode == 1, stderr
        lone.start()
        plain = cli("ingest", *layout, segy.path, url, env=env)
        assert plain.returncode == 1 and "--resume" in plain.stderr, plain.stderr
        mixed = cli("ingest", "--resume", *layout, other.path, url, env=env)
        assert mixed.returncode == 1 and "another source" in " ".join(mixed.stderr.split()), mixed.stderr
        resumed = cli("ingest", "--resume", *layout, segy.path, url, env=env)
        assert resumed.returncode == 0, resumed.stderr
        cube = cubeslab.open(url, storage_options=lone.storage_options())
        np.testing.assert_array_equal(cube.amplitude[...], segy_cube(segy.path))
        verified = cli("verify", url, env=env)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        assert not list((tmp_path / "tmp" / "cubeslab-upload").rglob("zarr.json")), "the staging was kept"
    finally:
        lone.stop()


def test_a_second_ingest_to_a_url_is_refused_while_the_first_runs(server, tmp_path, synthetic_segy):
    """Two runs on one machine share the staging folder of a URL: one that holds it is never cleared by
    another, even with --overwrite, and its store is the first source's alone."""

    server.bucket("busy")
    first = synthetic_segy(64, 64, 512, name="first.sgy")
    second = synthetic_segy(6, 5, 20, name="second.sgy")
    (tmp_path / "tmp").mkdir()
    env = os.environ | {"TMPDIR": str(tmp_path / "tmp")}
    url = "s3://busy/x.zarr"
    # Staged per endpoint: a bucket of the same name on another server is another store.
    endpoint = server.endpoint.replace("%", "%25").replace("/", "%2F")
    lock = tmp_path / "tmp" / "cubeslab-upload" / endpoint / "busy" / "x.zarr.cubeslab-new" / ".cubeslab.lock"
    running = cli_background("ingest", "--layout", "8x8x64/8x8x64", first.path, url, env=env)
    wait_for(lock.exists, running, "its staging lock was taken")
    refused = run_while_paused(running, lambda: cli("ingest", "--overwrite", second.path, url, env=env))
    said = " ".join(refused.stderr.split())
    assert refused.returncode == 1 and f"{url} is being written by process {running.pid}" in said, said
    np.testing.assert_array_equal(cubeslab.open(url).amplitude[...], segy_cube(first.path))
    verified = cli("verify", url, env=env)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_an_ingest_from_s3_records_the_url_and_resumes_after_a_kill(server, tmp_path, synthetic_segy):
    """The store records the object, not the temporary copy, as its source, so a killed ingest resumes
    (each run downloads afresh, to a new path with a new time) to the values segyio reads."""
    segy = synthetic_segy(64, 64, 512, name="remote.sgy")
    server.bucket("src")
    put_object(server, "src", "raw/remote.sgy", segy.path.read_bytes())
    url, store = "s3://src/raw/remote.sgy", tmp_path / "r.zarr"
    options = ("--threads", "1", "--layout", "8x8x64/8x8x64")
    running = cli_background("ingest", *options, url, store, env=os.environ.copy())
    shards = tmp_path / ".r.zarr.cubeslab-new" / "amplitude" / "c"
    wait_for(lambda: shards.is_dir() and any(p.is_file() for p in shards.rglob("*")), running, "a shard")
    running.kill()
    running.wait()
    resumed = cli("ingest", "--resume", *options, url, store)
    assert resumed.returncode == 0, resumed.stderr
    np.testing.assert_array_equal(cubeslab.open(store).amplitude[...], segy_cube(segy.path))
    recorded = json.loads((store / "zarr.json").read_text())["attributes"]["cubeslab"]
    assert recorded["source"] == url and recorded["fingerprint"]["source"] == url


def test_errors_about_an_s3_source_name_its_url_not_a_temporary_copy(server, tmp_path):
    server.bucket("junk")
    put_object(server, "junk", "raw/bad.sgy", b"\x00" * 5000)
    bad = cli("ingest", "s3://junk/raw/bad.sgy", tmp_path / "bad.zarr")
    assert bad.returncode == 1 and "s3://junk/raw/bad.sgy" in bad.stderr, bad.stderr
    assert "cubeslab-source-" not in bad.stderr, bad.stderr
    for url in ("s3://junk/", "s3://junk", "s3://junk/raw/"):
        refused = cli("ingest", url, tmp_path / "x.zarr")
        said = " ".join(refused.stderr.split())
        assert refused.returncode == 1 and "names a bucket or a folder, not a file" in said, said
    assert not (tmp_path / "x.zarr").exists()


def test_keys_are_written_as_given_so_other_tools_find_the_store(server, tmp_path):
    """object_store would percent-encode ``ü``, ``#`` or ``%`` in a key; the store must be where
    zarr-python (through obstore) and the AWS tools look for the URL as written."""
    server.bucket("names")
    values = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    np.save(tmp_path / "v.npy", values)
    url = "s3://names/proj/ü #1%.zarr"
    assert cli("ingest", tmp_path / "v.npy", url).returncode == 0
    np.testing.assert_array_equal(cubeslab.open(url).amplitude[...], values)
    import zarr

    array = zarr.open_group(zarr_store(server, "names", "proj/ü #1%.zarr"), mode="r")["data"]
    np.testing.assert_array_equal(array[...], values)


@pytest.mark.parametrize(
    "url, why",
    [
        ("s3://names/a//x.zarr", "empty path segment"),
        ("s3://names//x.zarr", "empty path segment"),
        ("s3://names/x.zarr//", "empty path segment"),
        ("s3:/names/x.zarr", "an S3 URL begins s3://"),
        ("S3:names/x.zarr", "an S3 URL begins s3://"),
        ("s3:/AK:S3CR3T@names/x.zarr", "an S3 URL begins s3://"),
        ("s3://names/a/../x.zarr", "cannot name an object"),
        ("s3://my bucket/x.zarr", "a bucket name holds only"),
        ("s3://AK:S3CR3T@bucket/x.zarr", "a bucket name holds only"),
    ],
)
def test_urls_that_cannot_name_an_object_are_refused_before_anything_is_written(tmp_path, url, why):
    np.save(tmp_path / "v.npy", np.zeros((2, 3, 4), np.float32))
    work = tmp_path / "cwd"  # where a URL taken for a relative path (a folder named s3:) would be written
    work.mkdir()
    result = subprocess.run(
        [str(CLI), "ingest", str(tmp_path / "v.npy"), url],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=work,
    )
    assert result.returncode == 1 and why in " ".join(result.stderr.split()), result.stderr
    assert "internal error" not in result.stderr and "S3CR3T" not in result.stderr
    assert list(work.iterdir()) == []


@pytest.mark.parametrize(
    "setting, why",
    [
        ({"AWS_ENDPOINT_URL": "localhost:9000"}, "is not an http:// or https:// URL"),
        ({"AWS_ENDPOINT_URL": "http://admin:S3CR3T@"}, "is not an http:// or https:// URL"),
        ({"AWS_REGION": "us east"}, "is not a region name"),
    ],
)
def test_a_malformed_endpoint_or_region_is_a_clear_error_not_a_crash(server, setting, why):
    result = cli("info", "s3://names/x.zarr", env=os.environ | setting)
    said = " ".join(result.stderr.split())
    assert result.returncode == 1 and why in said and "internal error" not in said, said
    assert "S3CR3T" not in said


def test_outputs_named_by_url_are_refused_and_file_urls_are_local_paths(f3_on_s3, tmp_path):
    for args in (
        ["read", f3_on_s3, "--inline", "111", "-o", "s3://survey/il.npy"],
        ["export", f3_on_s3, "s3://survey/f3.npy"],
    ):
        result = subprocess.run([str(CLI), *args], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        said = " ".join(result.stderr.split())
        assert result.returncode == 1 and "written on this machine, not to object storage" in said, said
    assert list(tmp_path.iterdir()) == []  # no folder named s3:
    wrote = cli("read", f3_on_s3, "--inline", "111", "-o", f"file://{tmp_path}/il.npy")
    assert wrote.returncode == 0, wrote.stderr
    assert np.load(tmp_path / "il.npy").shape == cubeslab.open(f3_on_s3).inline[111].shape
    exported = cli("export", f3_on_s3, f"file://localhost{tmp_path}/f3.npy")
    assert exported.returncode == 0, exported.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "f3.npy"), cubeslab.open(f3_on_s3).amplitude[...])
    remote_host = cli("export", f3_on_s3, "file://server/f3.npy")
    assert remote_host.returncode == 1 and "names a path on this machine" in remote_host.stderr


@pytest.mark.parametrize(
    "url, why",
    [
        ("s3:/malformed/x.zarr", "an S3 URL begins s3://"),
        ("s3://malformed//x.zarr", "its key has an empty path segment"),
    ],
)
def test_a_url_with_one_slash_or_an_empty_key_segment_writes_nothing_anywhere(
    server, tmp_path, monkeypatch, url, why
):
    """Not a folder named ``s3:``, not the key without the empty segment (docs/object-storage.md)."""
    import obstore
    from obstore.store import S3Store

    server.bucket("malformed")
    np.save(tmp_path / "v.npy", np.zeros((2, 3, 4), np.float32))
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    result = subprocess.run(
        [str(CLI), "ingest", str(tmp_path / "v.npy"), url], capture_output=True, text=True, timeout=120
    )
    said = " ".join(result.stderr.split())
    assert result.returncode == 1 and url in said and why in said, said
    for call in (lambda: cubeslab.ingest(tmp_path / "v.npy", url), lambda: cubeslab.open(url)):
        with pytest.raises(InvalidInputError, match=re.escape(why)):
            call()
    assert list(work.iterdir()) == []
    s3 = S3Store(
        "malformed", endpoint=server.endpoint, access_key_id=server.env()["AWS_ACCESS_KEY_ID"],
        secret_access_key=server.env()["AWS_SECRET_ACCESS_KEY"], region="us-east-1",
        client_options={"allow_http": True},
    )  # fmt: skip
    assert [o["path"] for batch in obstore.list(s3) for o in batch] == []


def test_info_of_a_store_on_s3_names_the_readers_of_every_array_as_of_a_folder(server, tmp_path):
    """A text-label coordinate, here one the data variable lists (no dimension's), is an array TensorStore
    refuses (the oracle, opening it from the folder): no store of it, on S3 or not, names TensorStore."""
    import tensorstore as ts
    import xarray as xr

    from cubeslab.locations import store_path
    from cubeslab.store_report import store_report

    server.bucket("readers")
    data = xr.Dataset(
        {"v": (("region", "t"), np.arange(6.0).reshape(3, 2))},
        coords={"region": [1, 2, 3], "place": ("region", ["north", "south", "Zürich"])},
    )
    data.to_netcdf(tmp_path / "r.nc", engine="netcdf4")
    cubeslab.ingest(tmp_path / "r.nc", tmp_path / "r.zarr")
    assert cli("ingest", tmp_path / "r.nc", "s3://readers/r.zarr").returncode == 0
    with pytest.raises(ValueError, match="string"):
        ts.open(
            {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(tmp_path / "r.zarr/place")}}
        ).result()
    local = store_report(tmp_path / "r.zarr")["readable_by"]
    remote = store_report(store_path("s3://readers/r.zarr", server.storage_options()))["readable_by"]
    assert remote == local and "TensorStore" not in local and "zarr-python / xarray.open_zarr" in local
