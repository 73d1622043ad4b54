"""Sources other than SEG-Y: which reader a file takes (by its signature, or the options that describe
raw bytes), and the formats refused until a reader exists."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InvalidInputError, OptionError
from ..hdf5_file import is_hdf5_file
from .fits import FITS_MAGIC, fits_source
from .hdf5 import hdf5_source
from .netcdf import NETCDF_CLASSIC_MAGICS
from .raw import NPY_MAGIC, ArraySource, npy_source, raw_source
from .seplib import is_seplib_header, seplib_source

FORMAT_BY_SUFFIX = {
    ".npy": "npy",
    ".H": "seplib",
    ".h5": "hdf5",
    ".hdf5": "hdf5",
    ".he5": "hdf5",
    ".nc": "netcdf",
    ".nc4": "netcdf",
    ".fits": "fits",
    ".fit": "fits",
    ".fts": "fits",
}
"""The N-D array formats by a file's suffix: what an export writes, and what a source so named must be."""

FORMAT_NAMES = {"npy": ".npy", "seplib": "SEPlib", "hdf5": "HDF5", "netcdf": "NetCDF", "fits": "FITS"}


def signature_of(path: str | os.PathLike) -> bytes:
    with open(path, "rb") as f:
        return f.read(16)


def is_netcdf(path: str | os.PathLike, dataset: str | None = None) -> bool:
    """Whether ``path`` is a NetCDF file (classic, or NetCDF 4 unless an HDF5 ``dataset`` is asked for)."""
    if not os.path.isfile(path):
        return False
    if signature_of(path).startswith(NETCDF_CLASSIC_MAGICS):
        return True
    if dataset is None and is_hdf5_file(path):
        try:
            import h5py
        except ImportError:
            return True  # netCDF4 reads it either way
        try:
            with h5py.File(path, "r") as f:
                # Files from netCDF-C before 4.4.1 have no _NCProperties; their dimensions are marked.
                return "_NCProperties" in f.attrs or any(_marked_dimension(h5py, f, name) for name in f)
        except OSError:
            return False  # the HDF5 reader says what is wrong
    return False


def _marked_dimension(h5py, group, name: str) -> bool:
    try:
        node = group[name]
    except KeyError:  # a link to nothing: not a dimension, and not this check's to report
        return False
    return isinstance(node, h5py.Dataset) and "_Netcdf4Dimid" in node.attrs


def array_source(
    path: str | os.PathLike,
    *,
    shape=None,
    dtype=None,
    order: str = "C",
    offset: int = 0,
    hdu: int | None = None,
    dataset: str | None = None,
) -> ArraySource | None:
    """The reader of ``path`` if it is an N-D array file (``.npy``, SEPlib, FITS, HDF5, or raw bytes
    described by ``shape`` and ``dtype``); None for a file to read as SEG-Y. A format cubeslab
    recognises but does not ingest yet is refused, never read as SEG-Y."""
    if not os.path.isfile(path):
        return None  # the SEG-Y reader says what is wrong with the path
    head = signature_of(path)
    hdf5 = is_hdf5_file(path)
    described = is_seplib_header(path) or hdf5 or head.startswith((NPY_MAGIC, FITS_MAGIC))
    given = [
        name for name, value in (("--shape", shape), ("--order", order != "C"), ("--offset", offset)) if value
    ]
    if described and given:
        raise InvalidInputError(
            f"{path}: {', '.join(given)} {'is' if len(given) == 1 else 'are'} for raw bytes; this file "
            "describes its own array"
        )
    fits = head.startswith(FITS_MAGIC)
    for option, value, format_name, applies in (
        ("--hdu", hdu, "FITS", fits),
        ("--dataset", dataset, "HDF5", hdf5),
    ):
        if value is not None and not applies:  # another format's option, which this reader would ignore
            raise OptionError(f"{path}: {option} is for {format_name} files; this is not one")
    if is_seplib_header(path):
        return seplib_source(path)
    if head.startswith(NPY_MAGIC):
        return npy_source(path)
    if fits:
        return fits_source(path, hdu)
    if hdf5:
        return hdf5_source(path, dataset)
    if shape is not None:
        return raw_source(path, shape=shape, dtype=dtype or "float32", order=order, offset=offset)
    named = FORMAT_BY_SUFFIX.get(Path(path).suffix)
    if named is not None:
        raise InvalidInputError(
            f"{path}: named as a {FORMAT_NAMES[named]} file, but its first bytes ({head[:8]!r}) are not a "
            f"{FORMAT_NAMES[named]} file's signature; it is damaged, or not what its name says"
        )
    if Path(path).suffix.lower() in (".raw", ".bin", ".dat"):
        raise InvalidInputError(f"{path}: raw bytes need --shape (and --dtype, --order, --offset) to be read")
    return None


__all__ = ["FORMAT_BY_SUFFIX", "ArraySource", "array_source", "is_netcdf", "signature_of"]
