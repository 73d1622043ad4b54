"""Sources other than SEG-Y: which reader a file takes (by its signature, or the options that describe
raw bytes), and the formats refused until a reader exists."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InvalidInputError
from .fits import FITS_MAGIC, fits_source
from .hdf5 import HDF5_MAGIC, hdf5_source
from .raw import NPY_MAGIC, ArraySource, npy_source, raw_source
from .seplib import is_seplib_header, seplib_source

SIGNATURES = {
    b"CDF\x01": "NetCDF classic",
    b"CDF\x02": "NetCDF 64-bit offset",
    b"CDF\x05": "NetCDF CDF5",
}


def signature_of(path: str | os.PathLike) -> bytes:
    with open(path, "rb") as f:
        return f.read(16)


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
    if is_seplib_header(path):
        return seplib_source(path)
    head = signature_of(path)
    if head.startswith(NPY_MAGIC):
        return npy_source(path)
    if head.startswith(FITS_MAGIC):
        return fits_source(path, hdu)
    if head.startswith(HDF5_MAGIC):
        return hdf5_source(path, dataset)
    for magic, name in SIGNATURES.items():
        if head.startswith(magic):
            raise InvalidInputError(
                f"{path}: a {name} file; cubeslab does not ingest {name} yet (h5py, netCDF4 or astropy "
                "read it)"
            )
    if shape is not None:
        return raw_source(path, shape=shape, dtype=dtype or "float32", order=order, offset=offset)
    if Path(path).suffix.lower() in (".raw", ".bin", ".dat"):
        raise InvalidInputError(f"{path}: raw bytes need --shape (and --dtype, --order, --offset) to be read")
    return None


__all__ = ["ArraySource", "array_source"]
