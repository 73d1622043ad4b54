"""What ``cubeslab info FILE`` shows of a source file that is not SEG-Y: an imzML, NetCDF, HDF5, FITS,
SEPlib, ``.npy`` or raw file, described before any ingest."""

from __future__ import annotations

from pathlib import Path

from .hdf5_file import is_hdf5_file
from .msi import is_imzml
from .sources import array_source, is_netcdf
from .sources.unreadable import reading


def describe_file(path: Path) -> dict | None:
    """The description of ``path``, or None for a file to describe as SEG-Y."""
    with reading(path):
        if is_imzml(path):
            from .msi.imzml import describe as describe_imzml

            return describe_imzml(path)
        if is_netcdf(path):
            from .sources.netcdf import describe_netcdf

            return describe_netcdf(path)
        if is_hdf5_file(path):
            from .sources.hdf5 import describe_hdf5

            return describe_hdf5(path)
        array = array_source(path)
        return None if array is None else array.describe()
