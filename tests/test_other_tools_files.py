"""Files written by other tools (tests/data, provenance in its README) ingested and read back against their
own library: FITS images from astropy's test data, NetCDF files from netCDF4-python's, HDF5 files with
types cubeslab refuses from h5py's."""

from __future__ import annotations

import numpy as np
import pytest

import cubeslab


@pytest.mark.parametrize("name", ["scale.fits", "blank.fits", "arange.fits"])
def test_fits_images_from_astropy_ingest_as_astropy_reads_them(tmp_path, data_dir, name):
    from astropy.io import fits

    cubeslab.ingest(data_dir / "fits" / name, tmp_path / "s.zarr")
    with fits.open(data_dir / "fits" / name) as f:
        expected = f[0].data  # scaled as astropy scales: BSCALE, BZERO, BLANK
    got = cubeslab.open(tmp_path / "s.zarr").amplitude[...]
    assert got.dtype == expected.dtype.newbyteorder("=")
    np.testing.assert_array_equal(got, expected)


def test_a_fits_file_whose_primary_hdu_has_no_data_takes_the_first_image(tmp_path, data_dir):
    from astropy.io import fits

    path = data_dir / "fits" / "test0.fits"
    with pytest.raises(cubeslab.InvalidInputError, match=r"test0\.fits: HDU 0 holds no image data"):
        cubeslab.ingest(path, tmp_path / "x.zarr", hdu=0)
    assert not (tmp_path / "x.zarr").exists()
    cubeslab.ingest(path, tmp_path / "s.zarr", hdu=2)
    with fits.open(path) as f:
        np.testing.assert_array_equal(cubeslab.open(tmp_path / "s.zarr").amplitude[...], f[2].data)


def test_a_netcdf4_file_from_another_tool_ingests_with_its_coordinates(tmp_path, data_dir):
    import xarray as xr

    path = data_dir / "netcdf" / "20171025_2056.Cloud_Top_Height.nc"
    cubeslab.ingest(path, tmp_path / "s.zarr", variable="HT")
    expected = xr.open_dataset(path)["HT"]
    got = xr.open_zarr(tmp_path / "s.zarr")["HT"].load()
    # The file packs with a float32 scale_factor; a store's attributes are JSON numbers, so xarray decodes
    # the store to float64 (as it does after its own to_zarr): equal to float32 precision.
    np.testing.assert_allclose(got.values, expected.values, rtol=1e-6)
    assert np.isnan(got.values).sum() == np.isnan(expected.values).sum()
    assert sorted(got.coords) == sorted(expected.coords)
    for name in expected.coords:  # x and y are packed with float32 factors too
        np.testing.assert_allclose(
            got[name].values.astype(float), expected[name].values.astype(float), rtol=1e-6, atol=1e-8
        )
    # Zarr's reader shows the store's own record (its generation) beside the file's attributes.
    assert got.attrs.pop("cubeslab")["generation"]
    np.testing.assert_equal(dict(got.attrs), dict(expected.attrs))
    # cubeslab's engine, which xarray picks for the store, leaves it out: the data writes back to NetCDF.
    opened = xr.open_dataset(tmp_path / "s.zarr")
    np.testing.assert_equal(dict(opened["HT"].attrs), dict(expected.attrs))
    opened.to_netcdf(tmp_path / "back.nc")
    with xr.open_dataset(tmp_path / "back.nc") as back:
        np.testing.assert_allclose(back["HT"].values, expected.values, rtol=1e-6)


def test_a_shuffled_netcdf4_variable_ingests_exactly(tmp_path, data_dir):
    import netCDF4

    path = data_dir / "netcdf" / "issue672.nc"
    cubeslab.ingest(path, tmp_path / "s.zarr", variable="azi_angle_trip")
    with netCDF4.Dataset(path) as d:
        d.set_auto_maskandscale(False)
        expected = d["azi_angle_trip"][...]
    np.testing.assert_array_equal(cubeslab.open(tmp_path / "s.zarr").amplitude[...], expected)


def test_a_classic_netcdf_file_from_another_tool_ingests(tmp_path, data_dir):
    import netCDF4

    path = data_dir / "netcdf" / "CRM032_test1.nc"
    cubeslab.ingest(path, tmp_path / "s.zarr", variable="MSLP")
    with netCDF4.Dataset(path) as d:
        d.set_auto_maskandscale(False)
        expected = d["MSLP"][...]
    np.testing.assert_array_equal(cubeslab.open(tmp_path / "s.zarr").amplitude[...], expected)


@pytest.mark.parametrize(
    ("name", "kind"), [("compound-dtype-complex.h5", "holds"), ("vlen_string_dset.h5", "holds")]
)
def test_hdf5_types_that_are_not_numbers_are_refused_at_ingest(tmp_path, data_dir, name, kind):
    import h5py

    path = data_dir / "hdf5" / name
    with h5py.File(path) as f:
        dataset = next(iter(f))
    with pytest.raises(cubeslab.InvalidInputError, match=rf"{name}: dataset /{dataset} {kind}"):
        cubeslab.ingest(path, tmp_path / "x.zarr", dataset=dataset)
    assert not (tmp_path / "x.zarr").exists()


def test_a_seplib_cube_shows_its_axes_as_coordinates_in_xarray(tmp_path):
    import xarray as xr

    data = np.arange(4 * 5 * 6, dtype=">f4").reshape(4, 5, 6)
    data.tofile(tmp_path / "c.H@")
    (tmp_path / "c.H").write_text(
        'n1=6 o1=0.5 d1=0.004 label1="time" unit1="s"\nn2=5 o2=100 d2=25 label2="cmp"\n'
        'n3=4 o3=0 d3=1 label3="line"\nesize=4 data_format=xdr_float in="c.H@"\n'
    )
    cubeslab.ingest(tmp_path / "c.H", tmp_path / "s.zarr")
    ds = xr.open_zarr(tmp_path / "s.zarr")
    np.testing.assert_allclose(ds["time"].values, 0.5 + 0.004 * np.arange(6))
    np.testing.assert_allclose(ds["cmp"].values, 100 + 25 * np.arange(5))
    assert "line" not in ds.coords  # origin 0, step 1, no unit: nothing to say
    np.testing.assert_array_equal(ds["data"].values, data)
