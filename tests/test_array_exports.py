"""A store out to HDF5, NetCDF 4 and FITS (`cubeslab export STORE OUT.h5|.nc|.fits`), read back by the
format's own library (h5py, netCDF4 and xarray, astropy) as the oracle: values exact, axes as dimension
scales, coordinate variables or WCS, attributes kept, the store's chunk shape kept, deflate on request;
and an export ingested again gives the same store."""

from __future__ import annotations

import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest
import zarr
from conftest import netcdf_file

import cubeslab

CLI = [sys.executable, "-m", "cubeslab.cli"]


def cube_h5(path, dtype=">f4"):
    """An HDF5 file with a 3-D dataset, dimension scales (one in metres) and attributes."""
    rng = np.random.default_rng(3)
    data = (rng.standard_normal((20, 30, 40)) * 50).astype(dtype)
    with h5py.File(path, "w") as f:
        d = f.create_dataset("velocity", data=data, chunks=(10, 10, 20))
        d.attrs["units"] = "m/s"
        d.attrs["survey"] = "north"
        for i, (name, values) in enumerate(
            [("x", np.arange(20) * 12.5), ("y", 100 + np.arange(30) * 25.0), ("depth", np.arange(40) * 4.0)]
        ):
            scale = f.create_dataset(name, data=values)
            if name == "depth":
                scale.attrs["units"] = "m"
            scale.make_scale(name)
            d.dims[i].attach_scale(scale)
    return data


@pytest.mark.parametrize("compress", [None, "deflate:6"])
def test_an_hdf5_export_reads_in_h5py_as_the_store_and_ingests_back(tmp_path, compress):
    data = cube_h5(tmp_path / "in.h5")
    cubeslab.ingest(tmp_path / "in.h5", tmp_path / "s.zarr")
    store_chunks = cubeslab.open(tmp_path / "s.zarr").amplitude.chunks
    n = cubeslab.export(tmp_path / "s.zarr", tmp_path / "out.h5", compress=compress)
    assert n == data.size
    with h5py.File(tmp_path / "out.h5") as f:
        d = f["amplitude"] if "amplitude" in f else f["data"]
        np.testing.assert_array_equal(d[...], data)
        assert d.chunks == store_chunks
        assert d.compression == ("gzip" if compress else None)
        assert d.compression_opts == (6 if compress else None)
        assert d.attrs["units"] == "m/s" and d.attrs["survey"] == "north"
        assert [dim.label or dim[0].name.lstrip("/") for dim in d.dims] == ["x", "y", "depth"]
        np.testing.assert_array_equal(d.dims[1][0][...], 100 + np.arange(30) * 25.0)
        assert d.dims[2][0].attrs["units"] == "m"
    cubeslab.ingest(tmp_path / "out.h5", tmp_path / "again.zarr")
    np.testing.assert_array_equal(cubeslab.open(tmp_path / "again.zarr").amplitude[...], data)


def test_dimension_labels_go_through_as_hdf5_labels_not_as_an_attribute(tmp_path):
    with h5py.File(tmp_path / "in.h5", "w") as f:
        d = f.create_dataset("data", data=np.arange(12, dtype="f4").reshape(3, 4))
        d.dims[1].label = "depth"
    cubeslab.ingest(tmp_path / "in.h5", tmp_path / "s.zarr")
    assert "DIMENSION_LABELS" not in cubeslab.open(tmp_path / "s.zarr").amplitude.attributes
    cubeslab.export(tmp_path / "s.zarr", tmp_path / "out.h5")
    # Read in a child: a malformed label attribute aborts the HDF5 library.
    read = "import h5py, sys; print([d.label for d in h5py.File(sys.argv[1])['data'].dims])"
    done = subprocess.run([sys.executable, "-c", read, tmp_path / "out.h5"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "['dim_0', 'depth']", done.stderr


@pytest.mark.parametrize("compress", [None, "deflate"])
def test_a_netcdf_export_opens_in_xarray_as_the_source_did(tmp_path, compress):
    import netCDF4
    import xarray as xr

    netcdf_file(tmp_path / "in.nc", "NETCDF4")
    cubeslab.ingest(tmp_path / "in.nc", tmp_path / "s.zarr")
    cubeslab.export(tmp_path / "s.zarr", tmp_path / "out.nc", compress=compress)
    expected = xr.open_dataset(tmp_path / "in.nc")
    got = xr.open_dataset(tmp_path / "out.nc")
    xr.testing.assert_identical(got["temp"], expected["temp"])  # values, CF decoding, fill, coordinates
    assert got.attrs["title"] == "a test grid"
    with netCDF4.Dataset(tmp_path / "out.nc") as d:
        assert d.data_model == "NETCDF4"
        assert d["temp"].filters()["zlib"] is (compress is not None)
        assert tuple(d["temp"].chunking()) == cubeslab.open(tmp_path / "s.zarr").amplitude.chunks


def test_a_netcdf_file_from_another_tool_round_trips(tmp_path, data_dir):
    import netCDF4
    import xarray as xr

    source = tmp_path / "cth.nc"
    shutil.copy(data_dir / "netcdf" / "20171025_2056.Cloud_Top_Height.nc", source)
    cubeslab.ingest(source, tmp_path / "s.zarr", variable="HT")
    cubeslab.export(tmp_path / "s.zarr", tmp_path / "out.nc", compress="deflate")
    with netCDF4.Dataset(source) as a, netCDF4.Dataset(tmp_path / "out.nc") as b:
        a.set_auto_maskandscale(False)
        b.set_auto_maskandscale(False)
        np.testing.assert_array_equal(b["HT"][...], a["HT"][...])  # the stored values, exactly
        assert b["HT"].getncattr("_FillValue") == a["HT"].getncattr("_FillValue")
    expected = xr.open_dataset(source)["HT"]
    got = xr.open_dataset(tmp_path / "out.nc")["HT"]
    # Decoded alike: NaN where filled, and by the file's float32 scale_factor, float32 again after the trip.
    assert got.dtype == expected.dtype == np.float32
    np.testing.assert_array_equal(got.values, expected.values)
    assert sorted(got.coords) == sorted(expected.coords)
    assert (
        got.attrs["units"] == expected.attrs["units"]
        and got.attrs["long_name"] == expected.attrs["long_name"]
    )


def typed_attributes(path, variables) -> dict:
    """The global attributes and those of ``variables`` of a NetCDF file, as netCDF4 reads them."""
    import netCDF4

    with netCDF4.Dataset(path) as d:
        return {
            name: {k: node.getncattr(k) for k in node.ncattrs()}
            for name, node in [("/", d), *((v, d[v]) for v in variables)]
        }


def assert_same_types_and_values(got: dict, expected: dict) -> None:
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        value, back = np.asarray(value), np.asarray(got[name])
        assert (back.dtype, back.shape) == (value.dtype, value.shape), name
        np.testing.assert_array_equal(back, value, err_msg=name)


def test_a_netcdf_round_trip_keeps_each_attributes_type(tmp_path):
    import netCDF4
    import xarray as xr

    with netCDF4.Dataset(tmp_path / "in.nc", "w") as d:
        d.levels = np.array([1.5, 2.5])
        d.counts = np.array([3, 4], "i2")
        d.ratio = np.float32(0.25)
        d.createDimension("x", 3)
        x = d.createVariable("x", "f4", ("x",))
        x[:] = [0.5, 1.5, 2.5]
        x.actual_range = np.array([0.5, 2.5], "f4")
        flags = d.createVariable("flags", "i1", ("x",))
        flags[:] = [1, 2, 3]
        flags.flag_values = np.array([1, 2, 3], "i1")
        flags.flag_meanings = "low mid high"
        flags.valid_min, flags.valid_max = np.int8(1), np.int8(3)
        packed = d.createVariable("packed", "i2", ("x",), fill_value=np.int16(-1))
        packed.set_auto_maskandscale(False)
        packed[:] = [10, 20, -1]
        packed.scale_factor, packed.add_offset = np.float32(0.5), np.float32(100)
        packed.valid_range = np.array([0, 1000], "i2")
        packed.actual_range = np.array([105, 110], "f4")
        packed.coordinates = "flags"
    cubeslab.ingest(tmp_path / "in.nc", tmp_path / "s.zarr", variable="packed")
    cubeslab.export(tmp_path / "s.zarr", tmp_path / "out.nc")
    expected = typed_attributes(tmp_path / "in.nc", ["x", "flags", "packed"])
    got = typed_attributes(tmp_path / "out.nc", ["x", "flags", "packed"])
    for name in expected:
        assert_same_types_and_values(got[name], expected[name])
    # Decoded by the float32 scale_factor, as the file is: float32 values.
    decoded = [xr.open_dataset(tmp_path / name)["packed"] for name in ("out.nc", "in.nc")]
    xr.testing.assert_identical(*decoded)


def test_an_hdf5_export_writes_numeric_lists_as_arrays_of_the_types_cf_gives(tmp_path):
    with h5py.File(tmp_path / "in.h5", "w") as f:
        d = f.create_dataset("d", data=np.arange(12, dtype="i2").reshape(3, 4))
        d.attrs["flag_masks"] = np.array([1, 2], "i2")
        d.attrs["valid_max"] = np.int16(9)
        d.attrs["levels"] = np.array([1.5, 2.5])
        d.attrs["names"] = ["a", "bc"]
    cubeslab.ingest(tmp_path / "in.h5", tmp_path / "s.zarr")
    cubeslab.export(tmp_path / "s.zarr", tmp_path / "out.h5")
    with h5py.File(tmp_path / "in.h5") as a, h5py.File(tmp_path / "out.h5") as b:
        back = b["data"].attrs  # a lone array's name
        for name in ("flag_masks", "valid_max", "levels"):
            assert_same_types_and_values({name: back[name]}, {name: a["d"].attrs[name]})
        assert list(back["names"]) == ["a", "bc"]


def test_a_boolean_store_exports_to_netcdf_as_xarray_writes_booleans(tmp_path):
    import netCDF4
    import xarray as xr

    values = np.arange(12).reshape(3, 4) % 3 == 0
    np.save(tmp_path / "b.npy", values)
    cubeslab.ingest(tmp_path / "b.npy", tmp_path / "b.zarr")
    done = subprocess.run([*CLI, "export", str(tmp_path / "b.zarr"), str(tmp_path / "b.nc")],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stderr
    got = xr.open_dataset(tmp_path / "b.nc")["data"]
    assert got.dtype == bool
    np.testing.assert_array_equal(got.values, values)
    xr.Dataset({"data": (got.dims, values)}).to_netcdf(tmp_path / "xarray.nc")
    with netCDF4.Dataset(tmp_path / "b.nc") as ours, netCDF4.Dataset(tmp_path / "xarray.nc") as theirs:
        assert ours["data"].dtype == theirs["data"].dtype == np.int8
        assert ours["data"].getncattr("dtype") == theirs["data"].getncattr("dtype") == "bool"


def test_a_fits_image_from_another_tool_round_trips_with_its_wcs(tmp_path, data_dir):
    from astropy.io import fits

    cubeslab.ingest(data_dir / "fits" / "arange.fits", tmp_path / "s.zarr")
    cubeslab.export(tmp_path / "s.zarr", tmp_path / "out.fits")
    with fits.open(data_dir / "fits" / "arange.fits") as a, fits.open(tmp_path / "out.fits") as b:
        np.testing.assert_array_equal(b[0].data, a[0].data)
        assert b[0].data.dtype == a[0].data.dtype
        for i in (1, 2, 3):
            assert b[0].header[f"NAXIS{i}"] == a[0].header[f"NAXIS{i}"]


@pytest.mark.parametrize(
    "cards",
    [
        {
            "CTYPE1": "RA---TAN", "CRVAL1": 10.0, "CRPIX1": 3.0, "CDELT1": -0.01, "CUNIT1": "deg",
            "CTYPE2": "DEC--TAN", "CRVAL2": 20.0, "CRPIX2": 2.0, "CDELT2": 0.01, "CUNIT2": "deg",
            "PC1_2": 0.2, "PC2_1": -0.2, "CTYPE3": "FREQ", "CRVAL3": 1e9, "CDELT3": 1e6, "CUNIT3": "Hz",
        },
        {"CTYPE1": "FREQ", "CRVAL1": 1e9, "CD1_1": 1e6, "CTYPE2": "VRAD", "CRVAL2": 5.0, "CD2_2": 2.0},
        {"CTYPE1": "WAVE", "CRVAL1": 5e-7, "CDELT1": 1e-9},
    ],
    ids=["celestial-rotated", "cd-matrix", "crpix-missing"],
)  # fmt: skip
def test_a_fits_export_keeps_the_source_wcs(tmp_path, cards):
    from astropy.io import fits
    from astropy.wcs import WCS

    hdu = fits.PrimaryHDU(np.arange(4 * 5 * 6, dtype=">f4").reshape(4, 5, 6))
    hdu.header.update(cards)
    hdu.writeto(tmp_path / "in.fits")
    cubeslab.ingest(tmp_path / "in.fits", tmp_path / "s.zarr")
    cubeslab.export(tmp_path / "s.zarr", tmp_path / "out.fits")
    pixels = np.indices((6, 5, 4)).reshape(3, -1)  # every pixel, FITS's axis order
    source, exported = WCS(hdu.header), WCS(fits.getheader(tmp_path / "out.fits"))
    np.testing.assert_array_equal(exported.all_pix2world(*pixels, 0), source.all_pix2world(*pixels, 0))


def test_a_fits_export_of_a_checksummed_extension_is_a_consistent_primary_image(tmp_path):
    import warnings

    from astropy.io import fits

    image = fits.ImageHDU(np.arange(12, dtype=">i2").reshape(3, 4), name="SCI")
    image.header["BLANK"] = 5  # the store holds float32 with NaN for it: the export writes no BLANK
    fits.HDUList([fits.PrimaryHDU(), image]).writeto(tmp_path / "in.fits", checksum=True)
    cubeslab.ingest(tmp_path / "in.fits", tmp_path / "s.zarr")
    cubeslab.export(tmp_path / "s.zarr", tmp_path / "out.fits")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # astropy warns of a checksum that does not match
        with fits.open(tmp_path / "out.fits", checksum=True) as f:
            f.verify("exception")
            header, data = f[0].header, f[0].data
    for key in ("XTENSION", "EXTNAME", "PCOUNT", "GCOUNT", "CHECKSUM", "DATASUM", "BLANK", "BZERO"):
        assert key not in header
    np.testing.assert_array_equal(data, fits.getdata(tmp_path / "in.fits", 1))


def test_a_fits_export_gives_a_linear_wcs_only_to_evenly_spaced_axes(tmp_path):
    from astropy.io import fits
    from astropy.wcs import WCS

    depth = np.array([0.0, 1.0, 3.0, 7.0])  # not evenly spaced: no linear WCS describes it
    x = 100.0 + 12.5 * np.arange(5)
    with cubeslab.create(tmp_path / "s.zarr", (4, 5), dims=["depth", "x"], coords={"depth": depth, "x": x}):
        pass
    cubeslab.export(tmp_path / "s.zarr", tmp_path / "out.fits")
    header = fits.getheader(tmp_path / "out.fits")
    np.testing.assert_allclose(WCS(header).pixel_to_world_values(np.arange(5), np.zeros(5))[0], x)
    assert header["CTYPE2"] == "depth"
    assert not {"CRVAL2", "CDELT2", "CRPIX2", "CUNIT2"} & set(header)


@pytest.mark.parametrize(
    "dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "float32", "float64"]
)
def test_every_fits_type_round_trips_through_astropy(tmp_path, dtype):
    from astropy.io import fits

    info = np.iinfo(dtype) if np.dtype(dtype).kind in "iu" else None
    rng = np.random.default_rng(1)
    data = (
        rng.integers(info.min, info.max, size=(6, 7, 8), dtype=dtype, endpoint=True)
        if info
        else rng.standard_normal((6, 7, 8)).astype(dtype)
    )
    np.save(tmp_path / "a.npy", data)
    cubeslab.ingest(tmp_path / "a.npy", tmp_path / "s.zarr")
    cubeslab.export(tmp_path / "s.zarr", tmp_path / "out.fits")
    with fits.open(tmp_path / "out.fits") as f:
        assert f[0].data.dtype.newbyteorder("=") == np.dtype(dtype)
        np.testing.assert_array_equal(f[0].data, data)


def test_an_mdio_store_exports_to_hdf5(tmp_path, data_dir):
    mdio = data_dir / "mdio" / "f3.mdio"
    cubeslab.export(mdio, tmp_path / "f3.h5")
    expected = zarr.open_group(mdio, mode="r")["amplitude"][...]
    with h5py.File(tmp_path / "f3.h5") as f:
        np.testing.assert_array_equal(f["amplitude"][...], expected)
        np.testing.assert_array_equal(f["inline"][...], zarr.open_group(mdio, mode="r")["inline"][...])


@pytest.mark.parametrize("kind", ["i2", "u2", "f4"])
def test_a_fits_export_of_cf_packed_values_reads_in_astropy_as_xarray_decodes_them(tmp_path, kind):
    """scale_factor, add_offset and _FillValue become BSCALE, BZERO and BLANK (an integer image's,
    on top of a uint16's offset), or the values scaled with NaN for the fill (a float image's); units
    BUNIT. The raw counts were written alone."""
    import netCDF4
    import xarray as xr
    from astropy.io import fits

    fill = {"i2": -999, "u2": 65535, "f4": -1e30}[kind]
    raw = np.arange(24).reshape(4, 6).astype(kind)
    raw[1, 2] = fill
    with netCDF4.Dataset(tmp_path / "p.nc", "w") as f:
        f.createDimension("y", 4)
        f.createDimension("x", 6)
        v = f.createVariable("v", kind, ("y", "x"), fill_value=np.array(fill, kind))
        v.set_auto_maskandscale(False)
        v.scale_factor, v.add_offset, v.units = 0.5, 10.0, "K"
        v[...] = raw
    cubeslab.ingest(tmp_path / "p.nc", tmp_path / "p.zarr")
    cubeslab.export(tmp_path / "p.zarr", tmp_path / "p.fits")
    with xr.open_dataset(tmp_path / "p.nc") as source, fits.open(tmp_path / "p.fits") as exported:
        np.testing.assert_allclose(exported[0].data, source["v"].values, rtol=1e-6)  # NaN where the fill is
        assert exported[0].header["BUNIT"] == "K"


def test_a_store_with_views_exports_its_data_once(tmp_path, segy_dir):
    """The orientation copies hold the data again: the file gets the amplitudes and the survey's own
    arrays, not each copy as a coordinate of them."""
    import xarray as xr

    cubeslab.ingest(segy_dir / "f3.sgy", tmp_path / "v.zarr", views=["inline", "time"])
    cubeslab.export(tmp_path / "v.zarr", tmp_path / "v.nc")
    with xr.open_dataset(tmp_path / "v.nc") as exported:
        names = set(exported.variables)
        assert not any(name.startswith("amplitude_") for name in names), names
        np.testing.assert_array_equal(exported["amplitude"].values, cubeslab.open(tmp_path / "v.zarr")[...])


def test_the_command_line_exports_and_refuses_to_overwrite(tmp_path):
    cube_h5(tmp_path / "in.h5")
    cubeslab.ingest(tmp_path / "in.h5", tmp_path / "s.zarr")
    (tmp_path / "out.nc").write_bytes(b"keep me")
    done = subprocess.run(
        [*CLI, "export", str(tmp_path / "s.zarr"), str(tmp_path / "out.nc")], capture_output=True, text=True
    )
    assert done.returncode == 1 and "already exists" in done.stderr + done.stdout
    assert (tmp_path / "out.nc").read_bytes() == b"keep me"
    done = subprocess.run(
        [
            *CLI,
            "export",
            str(tmp_path / "s.zarr"),
            str(tmp_path / "out.nc"),
            "--overwrite",
            "--compress",
            "deflate",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "wrote 24,000 elements" in done.stdout
    bad = subprocess.run(
        [*CLI, "export", str(tmp_path / "s.zarr"), str(tmp_path / "x.h5"), "--compress", "zstd"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "deflate" in bad.stderr + bad.stdout
    assert not (tmp_path / "x.h5").exists() and not (tmp_path / "x.h5.tmp").exists()


def test_boolean_attributes_export_to_netcdf_as_ones_and_zeros(tmp_path):
    import netCDF4

    with cubeslab.create(tmp_path / "b.zarr", (3,), attributes={"flag": True, "flags": [True, False]}) as c:
        c[...] = 1.0
    cubeslab.export(tmp_path / "b.zarr", tmp_path / "b.nc")
    with netCDF4.Dataset(tmp_path / "b.nc") as f:
        assert f["data"].getncattr("flag") == 1 and f["data"].getncattr("flag").dtype == np.int8
