"""Stores written by xarray and zarr-python (the oracles here) that a user points cubeslab at: valid Zarr
v3 that cubeslab misread or refused with a traceback, each read, described and exported as those tools
read it."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest

import cubeslab
from cubeslab.description import describe

xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")

CLI = [sys.executable, "-m", "cubeslab.cli"]


def cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=120)


def to_zarr(dataset, path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dataset.to_zarr(path, zarr_format=3, consolidated=False)


def test_auxiliary_and_scalar_coordinates_come_with_the_dataset(tmp_path):
    rng = np.random.default_rng(1)
    grid = {"lat": (("y", "x"), rng.random((5, 4))), "lon": (("y", "x"), rng.random((5, 4))), "height": 2.0}
    to_zarr(xr.Dataset({"tas": (("y", "x"), rng.random((5, 4)))}, coords=grid), tmp_path / "a.zarr")
    expected = xr.open_zarr(tmp_path / "a.zarr", consolidated=False)["tas"].load()
    for got in (
        cubeslab.open(tmp_path / "a.zarr").to_xarray()["tas"],
        xr.open_dataset(tmp_path / "a.zarr", engine="cubeslab")["tas"],
    ):
        for name in ("lat", "lon", "height"):
            np.testing.assert_array_equal(got[name].values, expected[name].values)
            assert got[name].dims == expected[name].dims and got[name].attrs == expected[name].attrs


def test_a_store_without_attributes_is_described_by_its_coordinates(tmp_path):
    x = xr.Variable("x", [100.0, 110.0, 120.0], {"units": "m"})
    to_zarr(xr.Dataset({"v": ("x", np.ones(3, "f4"))}, coords={"x": x}), tmp_path / "d.zarr")
    (axis,) = describe(tmp_path / "d.zarr")["axes"]
    assert (axis["origin"], axis["step"], axis["unit"]) == (100.0, 10.0, "m")
    cubeslab.export(tmp_path / "d.zarr", tmp_path / "d.H")
    header = (tmp_path / "d.H").read_text()
    assert "o1=100.0" in header and "d1=10.0" in header and 'unit1="m"' in header


def test_a_dimension_without_a_name_is_numbered(tmp_path):
    values = np.arange(12, dtype="f4").reshape(3, 4)
    zarr.create_array(tmp_path / "n.zarr", data=values, dimension_names=(None, "x"))
    cube = cubeslab.open(tmp_path / "n.zarr")
    assert cube.dims == ["dim_0", "x"]
    np.testing.assert_array_equal(cube[...], values)
    for command in ("info", "describe", "verify"):
        done = cli(command, tmp_path / "n.zarr")
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("index", ["end", "start"])
def test_shards_compressed_whole_read_as_zarr_python_reads_them(tmp_path, index):
    """zarr-python keeps its compressor after a sharding codec: whole shards are zstd frames, which
    decode to a shard and its index, not to a chunk (they were taken for damaged chunks)."""
    from zarr.codecs import BytesCodec, ShardingCodec, ZstdCodec

    values = (
        np.random.default_rng(2).random((20, 30)).astype("f4")
    )  # incompressible: a shard outgrows a chunk
    sharding = ShardingCodec(chunk_shape=(5, 5), index_location=index, codecs=[BytesCodec(), ZstdCodec()])
    array = zarr.create_array(
        tmp_path / "s.zarr", shape=values.shape, dtype="f4", chunks=(10, 15), serializer=sharding
    )
    array[...] = values
    assert [c["name"] for c in array.metadata.to_dict()["codecs"]] == ["sharding_indexed", "zstd"]
    np.testing.assert_array_equal(cubeslab.open(tmp_path / "s.zarr")[...], values)
    assert cubeslab.verify(tmp_path / "s.zarr")["ok"]


def test_a_0d_array_exports_where_the_format_holds_one_value_and_is_refused_elsewhere(tmp_path):
    zarr.create_array(tmp_path / "z.zarr", data=np.array(5.5))
    for suffix in (".nc", ".h5", ".npy"):
        out = tmp_path / f"one{suffix}"
        done = cli("export", tmp_path / "z.zarr", out)
        assert done.returncode == 0, done.stderr
    assert float(np.load(tmp_path / "one.npy")) == 5.5
    assert float(xr.open_dataset(tmp_path / "one.nc")["data"]) == 5.5
    for suffix in (".fits", ".H"):
        done = cli("export", tmp_path / "z.zarr", tmp_path / f"one{suffix}")
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert "a 0-d array (one value)" in done.stderr
        assert not (tmp_path / f"one{suffix}").exists()


def test_an_axis_of_length_zero_exports_to_hdf5(tmp_path):
    import h5py

    to_zarr(
        xr.Dataset({"v": (("t", "x"), np.zeros((0, 3), "f4"))}, coords={"x": [1, 2, 3]}), tmp_path / "e.zarr"
    )
    done = cli("export", tmp_path / "e.zarr", tmp_path / "e.h5")
    assert done.returncode == 0, done.stderr
    with h5py.File(tmp_path / "e.h5", "r") as f:
        assert f["v"].shape == (0, 3)


def test_exports_keep_global_attributes_and_auxiliary_arrays(tmp_path):
    import h5py

    dataset = xr.Dataset(
        {"tas": (("y", "x"), np.ones((2, 3)))},
        coords={"lat": (("y", "x"), np.arange(6.0).reshape(2, 3))},
        attrs={"title": "demo"},
    )
    to_zarr(dataset, tmp_path / "g.zarr")
    zarr.open_group(tmp_path / "g.zarr", mode="a").attrs["provenance"] = {"tool": "x"}
    for suffix in (".h5", ".nc"):
        assert cli("export", tmp_path / "g.zarr", tmp_path / f"g{suffix}").returncode == 0
    with h5py.File(tmp_path / "g.h5", "r") as f:
        assert f.attrs["title"] == "demo" and json.loads(f.attrs["provenance"]) == {"tool": "x"}
        np.testing.assert_array_equal(f["lat"][...], dataset["lat"].values)
    back = xr.open_dataset(tmp_path / "g.nc")
    assert back.attrs["title"] == "demo" and json.loads(back.attrs["provenance"]) == {"tool": "x"}
    # The .h5's lat, listed in tas's coordinates, is no second data variable to an ingest.
    done = cli("ingest", tmp_path / "g.h5", tmp_path / "again.zarr")
    assert done.returncode == 0, done.stderr
    np.testing.assert_array_equal(cubeslab.open(tmp_path / "again.zarr")[...], dataset["tas"].values)


def test_a_group_of_groups_names_its_members(tmp_path):
    group = zarr.open_group(tmp_path / "g.zarr", mode="w")
    group.create_group("inner").create_array("v", data=np.arange(3.0))
    with pytest.raises(cubeslab.InvalidInputError, match=r"without a data array here \(its members: inner\)"):
        cubeslab.open(tmp_path / "g.zarr")
    np.testing.assert_array_equal(cubeslab.open(tmp_path / "g.zarr" / "inner")[...], np.arange(3.0))


def test_a_survey_exported_to_netcdf_and_ingested_again_opens_in_xarray(tmp_path):
    """The export lists trace_mask among amplitude's coordinates; the engine keeps it a data variable."""
    from pathlib import Path

    segy = Path(__file__).resolve().parent / "data" / "segy" / "small.sgy"
    cubeslab.ingest(segy, tmp_path / "s.zarr")
    cubeslab.export(tmp_path / "s.zarr", tmp_path / "s.nc")
    cubeslab.ingest(tmp_path / "s.nc", tmp_path / "again.zarr", variable="amplitude")
    dataset = xr.open_dataset(tmp_path / "again.zarr", engine="cubeslab")
    np.testing.assert_array_equal(dataset["amplitude"].values, cubeslab.open(tmp_path / "s.zarr")[...])


def test_hdf5_files_as_h5py_writes_them_ingest_and_open(tmp_path):
    import h5py

    values = np.arange(12, dtype="f4").reshape(3, 4)
    with h5py.File(tmp_path / "f.h5", "w") as f:
        data = f.create_dataset("data", data=values)
        data.attrs["_FillValue"] = np.float32(np.nan)  # stored by the ingest as Zarr's "NaN"
        f["group/alias"] = data  # the same dataset under a second name, as NeXus files link data
        names = f.create_dataset("city", data=np.array(["Zürich".encode(), b"Bern", b"Basel"]))
        names.make_scale("city")
        data.dims[0].attach_scale(names)
    cubeslab.ingest(tmp_path / "f.h5", tmp_path / "f.zarr")  # one dataset, whatever its names
    assert cubeslab.open(tmp_path / "f.zarr").coords["city"].tolist() == ["Zürich", "Bern", "Basel"]
    dataset = xr.open_dataset(tmp_path / "f.zarr", engine="cubeslab")
    np.testing.assert_array_equal(dataset["data"].values, values)


def test_an_hdf5_export_names_the_axes_of_its_auxiliary_arrays(tmp_path):
    lat = np.arange(9.0).reshape(3, 3)  # square: matching axes by size alone would transpose it
    dataset = xr.Dataset(
        {"v": (("y", "x"), np.ones((3, 3)))},
        coords={"y": [10, 20, 30], "x": [1, 2, 3], "lat": (("y", "x"), lat)},
    )
    to_zarr(dataset, tmp_path / "q.zarr")
    cubeslab.export(tmp_path / "q.zarr", tmp_path / "q.h5")
    back = xr.open_dataset(tmp_path / "q.h5", engine="netcdf4")
    assert back["lat"].dims == ("y", "x")
    assert float(back["lat"].sel(y=10, x=3)) == 2.0


def test_a_text_axis_slices_by_its_labels(tmp_path):
    to_zarr(
        xr.Dataset(
            {"v": (("station", "t"), np.arange(8.0).reshape(4, 2))}, coords={"station": ["a", "b", "c", "d"]}
        ),
        tmp_path / "t.zarr",
    )
    axis = cubeslab.open(tmp_path / "t.zarr").axis("station")
    assert axis[:].shape == (4, 2)
    np.testing.assert_array_equal(axis[::2][:, 0], [0.0, 4.0])
    np.testing.assert_array_equal(axis["b":"d"][:, 0], [2.0, 4.0])
    with pytest.raises(cubeslab.SelectionError, match="whole number of labels"):
        axis[::0.5]


def test_a_float_labelled_axis_slices_by_value_as_xarray_sel(tmp_path):
    # Labels 1.5 apart on a first axis: a label-range slice must give every plane in [a, b), as .sel does.
    dataset = xr.Dataset(
        {"v": (("t", "x"), np.arange(12.0).reshape(6, 2))}, coords={"t": np.arange(6) * 1.5, "x": [0, 1]}
    )
    to_zarr(dataset, tmp_path / "f.zarr")
    axis = cubeslab.open(tmp_path / "f.zarr").axis("t")
    for key in [slice(0.0, 6.0), slice(1.5, None), slice(None, 4.5), slice(0.0, 7.5, 3.0)]:
        # .sel includes its stop; a cube slice, as Python's, does not
        stop = None if key.stop is None else key.stop - 1e-9
        expected = dataset.v.sel(t=slice(key.start, stop)).values[:: 1 if key.step is None else 2]
        np.testing.assert_array_equal(axis[key], expected, err_msg=str(key))
    np.testing.assert_array_equal(axis[4.5:0.0:-1.5], dataset.v.values[3:0:-1])
    with pytest.raises(cubeslab.SelectionError, match="not a multiple"):
        axis[0.0:6.0:1.0]
