"""Damaged or unexpected source files of the other formats, each written by its own library (numpy,
h5py, netCDF4, astropy) and then broken the way real files break: the CLI refuses each through a real
subprocess with exit 1, a message naming the file and what is wrong, no traceback, and no store. Files
that are odd but valid are ingested, with the values their library reads."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cubeslab

CLI = [sys.executable, "-m", "cubeslab.cli"]
IMZML = Path(__file__).parent / "data" / "imzml"


def seplib(folder: Path, extra: str) -> str:
    np.arange(24, dtype=">f4").tofile(folder / "c.H@")
    (folder / "c.H").write_text(f"n1=4 n2=3 n3=2 esize=4 data_format=xdr_float in=c.H@ {extra}\n")
    return "c.H"


def npy_9d(folder: Path) -> str:
    np.save(folder / "v.npy", np.zeros((1,) * 9, "f4"))
    return "v.npy"


def npy_broken_header(folder: Path) -> str:
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (3,"
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    (folder / "v.npy").write_bytes(
        b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + bytes(12)
    )
    return "v.npy"


def hdf5_float16(folder: Path) -> str:
    import h5py

    with h5py.File(folder / "x.h5", "w") as f:
        f["v"] = np.zeros((3, 4), "f2")
    return "x.h5"


def netcdf_classic_cut(folder: Path) -> str:
    import netCDF4

    with netCDF4.Dataset(folder / "whole.nc", "w", format="NETCDF3_CLASSIC") as d:
        d.createDimension("x", 200)
        d.createDimension("y", 100)
        d.createVariable("v", "f4", ("x", "y"))[:] = np.arange(20000, dtype="f4").reshape(200, 100)
    whole = (folder / "whole.nc").read_bytes()
    (folder / "x.nc").write_bytes(whole[: len(whole) // 2])
    return "x.nc"


def fits_without_naxis2(folder: Path) -> str:
    from astropy.io import fits

    fits.PrimaryHDU(np.zeros((3, 4), ">f4")).writeto(folder / "whole.fits")
    raw = (folder / "whole.fits").read_bytes()
    card = raw.index(b"NAXIS2  =")
    (folder / "f.fits").write_bytes(raw[:card] + b"COMMENT".ljust(80) + raw[card + 80 :])
    return "f.fits"


def imzml_far_pixel(folder: Path) -> str:
    for suffix in (".imzML", ".ibd"):
        shutil.copy(IMZML / f"Example_Continuous{suffix}", folder / f"e{suffix}")
    text = (folder / "e.imzML").read_text(encoding="latin-1")
    far = text.replace('name="position x" value="1"', 'name="position x" value="2000000000"', 1)
    (folder / "e.imzML").write_text(far, encoding="latin-1")
    return "e.imzML"


def imzml_arrays_of_two_lengths(folder: Path) -> str:
    from pyimzml.compression import ZlibCompression
    from pyimzml.ImzMLWriter import ImzMLWriter

    zlib = ZlibCompression()
    with ImzMLWriter(
        str(folder / "e.imzML"), mode="processed", mz_compression=zlib, intensity_compression=zlib
    ) as w:
        w.addSpectrum(np.array([100.0, 200.0, 300.0]), np.ones(2, "f4"), (1, 1, 1))
    return "e.imzML"


def imzml_offset_near_the_int64_limit(folder: Path) -> str:
    for suffix in (".imzML", ".ibd"):
        shutil.copy(IMZML / f"Example_Continuous{suffix}", folder / f"e{suffix}")
    text = (folder / "e.imzML").read_text(encoding="latin-1")
    far = re.sub(r'(name="external offset" value=")\d+', rf"\g<1>{2**63 - 1}", text, count=1)
    (folder / "e.imzML").write_text(far, encoding="latin-1")
    return "e.imzML"


def imzml_both_modes(folder: Path) -> str:
    for suffix in (".imzML", ".ibd"):
        shutil.copy(IMZML / f"Example_Continuous{suffix}", folder / f"e{suffix}")
    text = (folder / "e.imzML").read_text(encoding="latin-1")
    both = re.sub(
        r'(<cvParam[^>]*name="continuous"\s*/>)',
        r'\1<cvParam cvRef="IMS" accession="IMS:1000031" name="processed"/>',
        text,
        count=1,
    )
    assert both != text
    (folder / "e.imzML").write_text(both, encoding="latin-1")
    return "e.imzML"


def imzml_zlib_bomb(folder: Path) -> str:
    """The last spectrum's intensities point at 64 MiB of zeros packed by zlib; the imzML says 200 values."""
    import zlib

    from pyimzml.compression import ZlibCompression
    from pyimzml.ImzMLWriter import ImzMLWriter

    with ImzMLWriter(
        str(folder / "e.imzML"), mode="continuous", intensity_compression=ZlibCompression()
    ) as w:
        for x in (1, 2):
            w.addSpectrum(np.linspace(100, 500, 200), np.arange(200, dtype="f4"), (x, 1, 1))
    bomb = zlib.compress(bytes(64 << 20), 9)
    at = (folder / "e.ibd").stat().st_size
    with open(folder / "e.ibd", "ab") as f:
        f.write(bomb)
    text = (folder / "e.imzML").read_text(encoding="latin-1")
    text = re.sub(r'<cvParam[^>]*name="ibd SHA-1"[^>]*/>', "", text)  # the .ibd changed
    last_offset = list(re.finditer(r'name="external offset" value="(\d+)"', text))[-1]
    last_length = list(re.finditer(r'name="external encoded length" value="(\d+)"', text))[-1]
    for match, value in sorted([(last_offset, at), (last_length, len(bomb))], key=lambda m: -m[0].start(1)):
        text = text[: match.start(1)] + str(value) + text[match.end(1) :]
    (folder / "e.imzML").write_text(text, encoding="latin-1")
    return "e.imzML"


def fits_infinite_step(folder: Path) -> str:
    from astropy.io import fits

    hdu = fits.PrimaryHDU(np.zeros((3, 4), ">f4"))
    hdu.header["CDELT1"] = 1.0
    hdu.writeto(folder / "whole.fits")
    raw = (folder / "whole.fits").read_bytes()
    card = raw.index(b"CDELT1  =")
    (folder / "f.fits").write_bytes(
        raw[:card] + b"CDELT1  =              1.0E999".ljust(80) + raw[card + 80 :]
    )
    return "f.fits"


def hdf5_damaged_lzf_chunk(folder: Path) -> str:
    """A dataset in a filter only h5py decodes (lzf), one chunk overwritten: HDF5 fails in the filter."""
    import h5py

    with h5py.File(folder / "x.h5", "w") as f:
        values = np.random.default_rng(0).standard_normal((40, 30)).astype("f4")
        data = f.create_dataset("x", data=values, chunks=(8, 8), compression="lzf")
        offsets: list[int] = []
        data.id.chunk_iter(lambda chunk: offsets.append(chunk.byte_offset))
    with open(folder / "x.h5", "r+b") as f:
        f.seek(offsets[3] + 4)
        f.write(b"\xff" * 40)
    return "x.h5"


def hdf5_null_dataspace(folder: Path) -> str:
    """A dataset of HDF5's null dataspace (h5py.Empty): no values at all, not a scalar."""
    import h5py

    with h5py.File(folder / "x.h5", "w") as f:
        f.create_dataset("nothing", data=h5py.Empty("f4"))
    return "x.h5"


def netcdf_damaged_chunk(folder: Path) -> str:
    """A szip-compressed NetCDF 4 variable (a filter only netCDF-C decodes here), one chunk overwritten:
    netCDF-C fails reading it."""
    import h5py
    import netCDF4

    with netCDF4.Dataset(folder / "d.nc", "w") as f:
        f.createDimension("t", 64)
        f.createDimension("x", 64)
        v = f.createVariable(
            "v", "f4", ("t", "x"), compression="szip", szip_coding="nn", szip_pixels_per_block=8,
            chunksizes=(16, 64),
        )  # fmt: skip
        v[:] = np.random.default_rng(1).random((64, 64))
    with h5py.File(folder / "d.nc") as f:
        chunk = f["v"].id.get_chunk_info(1)
    with open(folder / "d.nc", "r+b") as f:
        f.seek(chunk.byte_offset)
        f.write(b"\xab" * chunk.size)
    return "d.nc"


def named_but_not(name: str, content: bytes):
    def make(folder: Path) -> str:
        (folder / name).write_bytes(content)
        return name

    return make


CASES = {
    "9-D npy": (npy_9d, r"v\.npy: an array of 9 dimensions"),
    "npy header cut": (npy_broken_header, r"v\.npy: cannot read it"),
    "float16 HDF5": (hdf5_float16, r"x\.h5: element type float16 is not one cubeslab stores"),
    "HDF5 null dataspace": (hdf5_null_dataspace, r"x\.h5: no N-D numeric dataset; .*/nothing empty float32"),
    "NetCDF chunk damaged": (netcdf_damaged_chunk, r"d\.nc: cannot read it: RuntimeError: NetCDF: HDF error"),
    "HDF5 lzf chunk damaged": (
        hdf5_damaged_lzf_chunk,
        r"x\.h5: cannot read it: OSError: .*filter returned failure",
    ),
    "classic NetCDF cut short": (netcdf_classic_cut, r"x\.nc: .* describe 80,000 bytes of variable data"),
    "FITS without NAXIS2": (fits_without_naxis2, r"f\.fits: cannot read it: KeyError: NAXIS2"),
    "imzML pixel far away": (imzml_far_pixel, r"e\.imzML: pixel x runs 1\.\.2000000000"),
    "imzML offset near the int64 limit": (
        imzml_offset_near_the_int64_limit,
        r"e\.ibd: (spectrum 0's .* past the end|the array at byte 9223372036854775807)",
    ),
    "imzML in both modes": (imzml_both_modes, r"says both continuous \(IMS:1000030\) and processed"),
    "imzML zlib bomb": (
        imzml_zlib_bomb,
        r"e\.ibd: the zlib array at byte \d+ inflates to more than 800 bytes",
    ),
    "FITS step of 1e999": (
        fits_infinite_step,
        r"f\.fits: HDU 0 axis 1: CRVAL1, CRPIX1 and CDELT1 give no finite",
    ),
    # Found only while writing the store: its staging folder goes too.
    "imzML m/z and intensities of two lengths": (imzml_arrays_of_two_lengths, r"e\.imzML: cannot read it"),
    "SEPlib esize not an integer": (lambda f: seplib(f, "esize=4.0"), r"c\.H: esize=4\.0 is not an integer"),
    "SEPlib origin NaN": (lambda f: seplib(f, "o1=nan"), r"c\.H: o1=nan is not a finite number"),
    "SEPlib empty axis": (lambda f: seplib(f, "n2=0"), r"c\.H: n2=0: an axis needs at least one sample"),
    "SEPlib in= a folder": (
        lambda f: (f / "d").mkdir() or seplib(f, "in=d"),
        r"c\.H: in=d: a folder, not a file",
    ),
    # Named as an array format but not one: refused, never read as SEG-Y.
    "empty .npy": (named_but_not("v.npy", b""), r"v\.npy: named as a \.npy file, but its first bytes"),
    "text named .nc": (
        named_but_not("v.nc", b"x,y\n1,2\n" * 500),
        r"v\.nc: named as a NetCDF file, but its first bytes \(b'x,y\\n1,2\\n'\)",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_damaged_source_is_refused_naming_the_file(tmp_path, case):
    make, message = CASES[case]
    source = make(tmp_path)
    for command in (["ingest", source, "out.zarr"], ["info", source]):
        done = subprocess.run(CLI + command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        if command[0] == "info" and done.returncode == 0:
            continue  # describing needs less of the file than ingesting it
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr and "panicked" not in done.stderr, done.stderr
        assert re.search(message, " ".join(done.stderr.split())), done.stderr
    assert not any(p.name.startswith((".out.zarr", "out.zarr")) for p in tmp_path.iterdir())


def test_a_null_dataspace_asked_for_is_called_empty_not_a_scalar(tmp_path):
    hdf5_null_dataspace(tmp_path)
    for attempt in (
        lambda: cubeslab.ingest(tmp_path / "x.h5", tmp_path / "o.zarr", dataset="/nothing"),
        lambda: cubeslab.open(tmp_path / "x.h5", dataset="/nothing"),
    ):
        with pytest.raises(cubeslab.InvalidInputError, match=r"/nothing is empty \(a null dataspace"):
            attempt()
    assert not (tmp_path / "o.zarr").exists()


def test_odd_but_valid_files_ingest_with_the_values_their_library_reads(tmp_path):
    """A dangling link elsewhere in an HDF5 file, text and 2-D dimension scales, and NetCDF text
    variables (one a coordinate) beside the numeric one: none of them stops the ingest."""
    import h5py
    import netCDF4

    values = np.arange(12, dtype="f4").reshape(3, 4)
    with h5py.File(tmp_path / "x.h5", "w") as f:
        v = f.create_dataset("v", data=values)
        f["l"] = h5py.SoftLink("/nowhere")
        f["names"] = np.array([b"a", b"b", b"c"])
        f["names"].make_scale("names")
        v.dims[0].attach_scale(f["names"])
        f["grid"] = np.zeros((4, 2))
        f["grid"].make_scale("grid")
        v.dims[1].attach_scale(f["grid"])
    with netCDF4.Dataset(tmp_path / "x.nc", "w") as d:
        d.createDimension("x", 3)
        d.createVariable("x", str, ("x",))[:] = np.array(["a", "b", "c"], dtype=object)
        d.createVariable("label", str, ("x",))[:] = np.array(["p", "q", "r"], dtype=object)
        d.createVariable("v", "f4", ("x",), fill_value=False)[:] = values[:, 0]
    for source, choice, oracle in (("x.h5", "--dataset", values), ("x.nc", "--variable", values[:, 0])):
        command = [*CLI, "ingest", source, f"{source}.zarr", choice, "v"]
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        np.testing.assert_array_equal(cubeslab.open(tmp_path / f"{source}.zarr")[...], oracle)


def test_an_hdf5_file_with_a_user_block_is_read_as_hdf5(tmp_path):
    """HDF5 lets a file start with a user block (512, 1024... bytes) before its signature; h5py writes
    one on request. Ingest, info and the in-place reader all find the signature after it."""
    import h5py

    values = np.arange(6 * 7 * 5, dtype="<i2").reshape(6, 7, 5)
    with h5py.File(tmp_path / "u.h5", "w", userblock_size=1024) as f:
        f.create_dataset("chunked", data=values, chunks=(4, 4, 4))
        f.create_dataset("contiguous", data=values[::-1])
    for name in ("chunked", "contiguous"):
        command = [*CLI, "ingest", "u.h5", f"{name}.zarr", "--dataset", name]
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        with h5py.File(tmp_path / "u.h5", "r") as f:
            oracle = f[name][()]
        np.testing.assert_array_equal(cubeslab.open(tmp_path / f"{name}.zarr")[...], oracle)
        np.testing.assert_array_equal(
            cubeslab.open(tmp_path / "u.h5", dataset=name)[1:5, ::2, 3], oracle[1:5, ::2, 3]
        )
    done = subprocess.run([*CLI, "info", "u.h5"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "/chunked" in done.stdout, done.stderr


def test_raw_byte_options_on_a_file_that_describes_itself_are_refused(tmp_path):
    np.save(tmp_path / "v.npy", np.zeros((2, 3), "f4"))
    command = [*CLI, "ingest", "v.npy", "out.zarr", "--shape", "3,2", "--offset", "8"]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "v.npy: --shape, --offset are for raw bytes" in " ".join(done.stderr.split())
    assert not (tmp_path / "out.zarr").exists()


DATA = Path(__file__).resolve().parent / "data"


@pytest.mark.parametrize(
    ("source", "option", "named"),
    [
        ("v.npy", ["--threads", "2"], "threads applies to SEG-Y ingest"),
        ("v.npy", ["--dtype", "float64"], "dtype applies to SEG-Y ingest"),
        ("v.npy", ["--endian", "little"], "endian applies to SEG-Y ingest"),
        ("v.npy", ["--depth"], "vertical applies to SEG-Y ingest"),
        ("v.npy", ["--inline-byte", "9"], "inline_byte applies to SEG-Y ingest"),
        ("imzml/Example_Continuous.imzML", ["--dtype", "float64"], "dtype applies to SEG-Y ingest"),
        # The default's own value, given: still an option this source would ignore.
        ("imzml/Example_Continuous.imzML", ["--dtype", "float32"], "dtype applies to SEG-Y ingest"),
        ("v.npy", ["--dtype", "float32"], "dtype applies to SEG-Y ingest"),
        ("imzml/Example_Continuous.imzML", ["--sample-interval", "4000"], "sample_interval_us applies"),
        ("imzml/Example_Continuous.imzML", ["--dataset", "/x"], "dataset applies to array files"),
        ("segy/small.sgy", ["--hdu", "1"], "--hdu is for FITS files; this is not one"),
        ("segy/small.sgy", ["--order", "F"], "order applies to array files"),
        ("v.npy", ["--dataset", "/x"], "--dataset is for HDF5 files; this is not one"),
        ("v.npy", ["--hdu", "1"], "--hdu is for FITS files; this is not one"),
    ],
)
def test_an_option_the_source_would_ignore_is_refused(tmp_path, source, option, named):
    if source == "v.npy":
        np.save(tmp_path / source, np.zeros((2, 3), "f4"))
    else:
        shutil.copytree(DATA / Path(source).parent, tmp_path / Path(source).parent)
    command = [*CLI, "ingest", source, "out.zarr", *option]
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr  # a usage error
    assert named in " ".join(done.stderr.split()) and source in done.stderr
    assert not (tmp_path / "out.zarr").exists()
