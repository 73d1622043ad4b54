"""Shards that know where they belong (G3): a complete store wrote every shard, and each shard
carries its identity (store generation, array, key). A deleted shard read as fill values (NaN,
dead traces, NaN labels) and a swapped or copied one read as valid numbers at the wrong place,
with `cubeslab read` exiting 0 and `verify` saying "ok"; each is now an error naming the shard,
and `verify` exits 1. The shards stay readable by other tools (zarr-python here)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cubeslab
from cubeslab.synthetic import SyntheticSurvey, write_segy

CLI = Path(sys.executable).parent / "cubeslab"
LAYOUT = "8x8x16/16x16x64"  # 3 x 3 x 2 shards of amplitude, 3 x 3 of the trace arrays


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("identity")
    first, second = SyntheticSurvey(40, 36, 120, seed=3), SyntheticSurvey(40, 36, 120, seed=4)
    write_segy(root / "first.sgy", first)
    write_segy(root / "second.sgy", second)
    cubeslab.ingest(root / "first.sgy", root / "pristine.zarr", layout=LAYOUT)
    return root, first.volume()


@pytest.fixture
def store(sources, tmp_path):
    root, _ = sources
    copy = tmp_path / "survey.zarr"
    shutil.copytree(root / "pristine.zarr", copy)
    return copy


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), *map(str, args)], capture_output=True, text=True, timeout=120)


def read_everything(store: Path) -> None:
    with cubeslab.open(store) as cube:
        cube[...]
        cube.trace_mask  # noqa: B018 - the read is the point
        cube._array(cube.dims[-1])[...]
        cube._array("cdp_x")[...]


def assert_refused(store: Path, key: str, message: str, *, amplitude: bool = True) -> None:
    """Reads name the shard; `read` (of amplitudes) and `verify` exit 1 naming it."""
    with pytest.raises(cubeslab.CorruptDataError, match=message) as error:
        read_everything(store)
    assert key in str(error.value)
    if amplitude:
        read = cli("read", store, "--window", ":,:,:", "-o", store.parent / "out.npy")
        assert read.returncode == 1 and key in read.stderr, read.stderr
    verify = cli("verify", "--json", store)
    assert verify.returncode == 1, verify.stdout
    assert key in verify.stdout


def test_the_pristine_store_reads_equal_to_its_survey_and_verifies(sources, store):
    _, volume = sources
    with cubeslab.open(store) as cube:
        np.testing.assert_array_equal(cube[...], volume)
    assert cli("verify", store).returncode == 0


@pytest.mark.parametrize(
    "array, key",
    [("amplitude", "c/1/2/1"), ("trace_mask", "c/2/0"), ("time", "c/0"), ("cdp_x", "c/0/1")],
)
def test_a_deleted_shard_is_an_error_not_fill_values(store, array, key):
    (store / array / key).unlink()
    assert_refused(store, key, "missing", amplitude=array == "amplitude")


def test_two_swapped_shards_are_an_error_naming_them(store):
    a, b = store / "amplitude/c/0/0/0", store / "amplitude/c/1/1/0"
    assert a.stat().st_size == b.stat().st_size
    swap = store / "swap"
    a.rename(swap)
    b.rename(a)
    swap.rename(b)
    assert_refused(store, "c/0/0/0", "moved or copied")


def test_a_shard_copied_over_another_of_the_same_array_is_an_error(store):
    shutil.copyfile(store / "trace_mask/c/0/0", store / "trace_mask/c/1/1")
    assert_refused(store, "c/1/1", "moved or copied", amplitude=False)


def test_a_shard_copied_from_another_store_of_the_same_survey_is_an_error(sources, store, tmp_path):
    """Same source, same layout: the bytes differ only in the identity, and the values would even
    be right, but the store cannot tell that: a shard of another store is refused."""
    root, _ = sources
    other = tmp_path / "other.zarr"
    cubeslab.ingest(root / "first.sgy", other, layout=LAYOUT)
    shutil.copyfile(other / "amplitude/c/1/1/0", store / "amplitude/c/1/1/0")
    assert_refused(store, "c/1/1/0", "another store")


def test_a_shard_of_another_survey_copied_in_is_an_error(sources, store, tmp_path):
    root, _ = sources
    other = tmp_path / "other.zarr"
    cubeslab.ingest(root / "second.sgy", other, layout=LAYOUT)
    shutil.copyfile(other / "amplitude/c/0/1/1", store / "amplitude/c/0/1/1")
    assert_refused(store, "c/0/1/1", "another store")


def test_an_array_copied_from_another_store_is_refused_on_open(sources, store, tmp_path):
    root, _ = sources
    other = tmp_path / "other.zarr"
    cubeslab.ingest(root / "second.sgy", other, layout=LAYOUT)
    shutil.rmtree(store / "cdp_y")
    shutil.copytree(other / "cdp_y", store / "cdp_y")
    with pytest.raises(cubeslab.CorruptDataError, match="another store"):
        cubeslab.Array(store / "cdp_y")


def test_other_tools_read_the_shards_as_any_zarr_v3_shards(sources, store):
    import zarr

    _, volume = sources
    group = zarr.open_group(store, mode="r")
    np.testing.assert_array_equal(group["amplitude"][...], volume)
    with cubeslab.open(store) as cube:
        np.testing.assert_array_equal(group["trace_mask"][...], cube.trace_mask)
        np.testing.assert_array_equal(group["time"][...], cube.coords["time"])
    generation = json.loads((store / "zarr.json").read_text())["attributes"]["cubeslab"]["generation"]
    assert generation == group["amplitude"].attrs["cubeslab"]["generation"]


def write_source(kind: str, folder: Path, values: np.ndarray) -> tuple[Path, str]:
    """``values`` (x, y, m/z for imzML) written by another tool; the file and its array's name in a store."""
    if kind == "npy":
        np.save(folder / "v.npy", values)
        return folder / "v.npy", "data"
    if kind == "netcdf":
        import netCDF4

        with netCDF4.Dataset(folder / "v.nc", "w") as f:
            for name, n in zip("xyz", values.shape, strict=True):
                f.createDimension(name, n)
            f.createVariable("v", "f4", ("x", "y", "z"))[...] = values
        return folder / "v.nc", "v"
    from pyimzml.ImzMLWriter import ImzMLWriter

    mz = np.linspace(100.0, 200.0, values.shape[2])
    with ImzMLWriter(str(folder / "v.imzML"), mode="continuous") as w:
        for x in range(values.shape[0]):
            for y in range(values.shape[1]):
                w.addSpectrum(mz, values[x, y], (x + 1, y + 1))
    return folder / "v.imzML", "data"


@pytest.mark.parametrize("kind", ["npy", "netcdf", "imzml"])
@pytest.mark.parametrize("damage", ["delete", "swap"])
def test_a_store_ingested_from_an_array_file_knows_its_shards_places(tmp_path, damage, kind):
    """An .npy (an HDF5, FITS, SEPlib or raw file alike), a NetCDF variable and an imzML file ingest into
    stores whose data shards carry their identity, as a survey's do: a lost or swapped shard is an error,
    not wrong numbers."""
    values = np.arange(16 * 16 * 8, dtype="f4").reshape(16, 16, 8)
    source, name = write_source(kind, tmp_path, values)
    store = tmp_path / "v.zarr"
    cubeslab.ingest(source, store, layout="4x4x8/8x8x8")
    np.testing.assert_array_equal(cubeslab.open(store).amplitude[...], values)
    a, b = store / name / "c/0/0/0", store / name / "c/1/1/0"
    if damage == "delete":
        a.unlink()
    else:
        a.rename(store / "swap")
        b.rename(a)
        (store / "swap").rename(b)
    with pytest.raises(
        cubeslab.CorruptDataError, match="missing" if damage == "delete" else "moved or copied"
    ):
        cubeslab.open(store).amplitude[...]
    verify = cli("verify", "--json", store)
    assert verify.returncode == 1 and "c/0/0/0" in verify.stdout, verify.stdout


def test_the_views_of_an_imzml_ingest_know_their_shards_places(tmp_path):
    """A view is read in the cube's place: its swapped shards are an error too, not another pixel's ions."""
    values = np.arange(8 * 8 * 4096, dtype="f4").reshape(8, 8, 4096)
    source, _ = write_source("imzml", tmp_path, values)
    store = tmp_path / "v.zarr"
    cubeslab.ingest(source, store, views=["ion-images"])
    view = store / "data-ion-images"
    shards = sorted(p for p in (view / "c").rglob("*") if p.is_file())
    assert len(shards) >= 2
    a, b = shards[0], shards[-1]
    a.rename(store / "swap")
    b.rename(a)
    (store / "swap").rename(b)
    with pytest.raises(cubeslab.CorruptDataError, match="moved or copied"):
        cubeslab.Array(view)[...]
    verify = cli("verify", "--json", store)
    assert verify.returncode == 1, verify.stdout
