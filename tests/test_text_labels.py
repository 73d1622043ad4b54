"""Text coordinates (an axis labelled by region names): stores xarray writes with them open, NetCDF
strings ingest as Zarr ``string`` arrays that zarr-python and xarray read, and they go back out to
.nc and .h5. Oracles: xarray, netCDF4, h5py and zarr-python."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

import cubeslab
from cubeslab.description import describe
from cubeslab.errors import InvalidInputError, LabelError
from cubeslab.store_report import store_report

xr = pytest.importorskip("xarray")
netCDF4 = pytest.importorskip("netCDF4")

CLI = [sys.executable, "-m", "cubeslab.cli"]
REGIONS = ["north", "south", "Zürich", ""]


def _dataset():
    temp = np.arange(12, dtype="f4").reshape(4, 3)
    return xr.Dataset(
        {"temp": (("region", "time"), temp, {"units": "K"})},
        coords={
            "region": REGIONS,
            "time": [10, 20, 30],
            "station": ("time", np.array(["a", "bb", "ccc"], dtype=object)),
        },
    )


@pytest.mark.parametrize("kind", [str, object])
def test_a_store_xarray_writes_with_text_labels_opens_and_verifies(tmp_path, kind):
    # '<U' labels become zarr-python's fixed_length_utf32, object ones its variable-length string.
    ds = _dataset().assign_coords(region=np.array(REGIONS, dtype=kind))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ds.to_zarr(tmp_path / "x.zarr", zarr_format=3, consolidated=False)
    cube = cubeslab.open(tmp_path / "x.zarr")
    assert cube.coords["region"].tolist() == REGIONS
    np.testing.assert_array_equal(cube.axis("region")["Zürich"], ds.temp.sel(region="Zürich").values)
    with pytest.raises(LabelError, match="'north', 'south'"):
        cube.axis("region")["east"]
    mine = cube.to_xarray()
    assert mine["region"].values.tolist() == REGIONS
    np.testing.assert_array_equal(mine["temp"].values, ds["temp"].values)
    assert cubeslab.verify(tmp_path / "x.zarr")["ok"]
    report = store_report(tmp_path / "x.zarr")
    assert report["ranges"] == {"time": [10.0, 30.0]}


def test_netcdf_text_coordinates_ingest_as_xarray_reads_them_and_export_back(tmp_path):
    _dataset().to_netcdf(tmp_path / "t.nc", engine="netcdf4")
    source = xr.open_dataset(tmp_path / "t.nc")
    cubeslab.ingest(tmp_path / "t.nc", tmp_path / "t.zarr")

    stored = xr.open_zarr(tmp_path / "t.zarr", consolidated=False)
    for name in ("region", "station"):
        assert stored[name].values.tolist() == source[name].values.tolist(), name
        assert stored[name].dims == source[name].dims
    import zarr

    assert zarr.open_array(tmp_path / "t.zarr" / "region", mode="r")[...].tolist() == REGIONS
    assert cubeslab.verify(tmp_path / "t.zarr")["ok"]

    cubeslab.export(tmp_path / "t.zarr", tmp_path / "back.nc")
    back = xr.open_dataset(tmp_path / "back.nc")
    for name in ("region", "station"):
        assert back[name].values.tolist() == source[name].values.tolist(), name
    np.testing.assert_array_equal(back["temp"].values, source["temp"].values)

    import h5py

    cubeslab.export(tmp_path / "t.zarr", tmp_path / "back.h5")
    with h5py.File(tmp_path / "back.h5", "r") as f:
        assert f["region"].asstr()[()].tolist() == REGIONS
        assert f["temp"].dims[0][0].name == "/region"
    # ... and an HDF5 file's text dimension scale labels the axis it ingests to.
    cubeslab.ingest(tmp_path / "back.h5", tmp_path / "again.zarr")
    assert cubeslab.open(tmp_path / "again.zarr").coords["region"].tolist() == REGIONS


@pytest.mark.parametrize("encoding", [None, "utf-8"])
def test_a_netcdf_coordinate_of_characters_is_stored_as_the_labels_xarray_joins(tmp_path, encoding):
    path = tmp_path / "c.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as d:  # characters: classic's only text
        d.createDimension("station", 3)
        d.createDimension("name_length", 4)
        names = d.createVariable("name", "S1", ("station", "name_length"))
        if encoding:
            names._Encoding = encoding
        names.long_name = "station name"
        names.set_auto_chartostring(False)
        names[:] = np.array([b"ab", "cdé".encode(), b"g"], dtype="S4").view("S1").reshape(3, 4)
        v = d.createVariable("v", "f4", ("station",))
        v[:] = [1.0, 2.0, 3.0]
        v.coordinates = "name"
    done = subprocess.run(
        [*CLI, "ingest", str(path), str(tmp_path / "c.zarr")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "not stored" not in done.stderr, done.stderr
    expected = xr.open_dataset(path)["name"]  # xarray joins the characters (bytes without _Encoding)
    labels = [x.decode() if isinstance(x, bytes) else x for x in expected.values.tolist()]
    assert labels == ["ab", "cdé", "g"]
    mine = xr.open_dataset(tmp_path / "c.zarr", engine="cubeslab")
    assert mine["name"].values.tolist() == labels and mine["name"].dims == ("station",)
    assert mine["name"].attrs == {"long_name": "station name"}
    np.testing.assert_array_equal(mine["v"].values, [1.0, 2.0, 3.0])


def test_create_with_text_coordinates_and_the_description_round_trip(tmp_path):
    array = cubeslab.create(
        tmp_path / "c.zarr", (4, 3), "f4", dims=["region", "time"], coords={"region": REGIONS}
    )
    array[...] = np.arange(12, dtype="f4").reshape(4, 3)
    array.close()
    description = describe(tmp_path / "c.zarr")
    assert description["axes"][0]["values"] == REGIONS
    cubeslab.create(tmp_path / "d.zarr", description=description).close()
    assert describe(tmp_path / "d.zarr") == description
    assert xr.open_zarr(tmp_path / "d.zarr", consolidated=False)["region"].values.tolist() == REGIONS

    mixed = {
        **description,
        "axes": [{**description["axes"][0], "values": ["a", 1, "b", "c"]}, description["axes"][1]],
    }
    with pytest.raises(InvalidInputError, match="text labels"):
        cubeslab.create(tmp_path / "e.zarr", description=mixed)
    assert not (tmp_path / "e.zarr").exists()


def test_a_picture_with_a_text_axis_names_its_labels(tmp_path):
    pytest.importorskip("matplotlib")
    from cubeslab.png import save_png

    labels = np.array(REGIONS)
    save_png(
        np.ones((4, 3), "f4"), tmp_path / "p.png", "t", (("region", labels), ("time", np.array([10, 20, 30])))
    )
    assert (tmp_path / "p.png").stat().st_size > 0
