"""``verify --against`` for a store ingested from an N-D array file (HDF5, NetCDF, FITS, SEPlib, .npy,
raw bytes): the file read again as its ingest read it, slab by slab along the first axis, against the
store's data array."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from .. import _engine, defaults
from ..array import Array
from ..errors import InvalidInputError
from ..hdf5_file import is_hdf5_file
from . import array_source, is_netcdf
from .netcdf import SOURCE_VARIABLE, netcdf_source
from .raw import RAW_DTYPE, RAW_OFFSET, RAW_ORDER, ArraySource, raw_source


def is_array_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a file an N-D array ingest reads without options (raw bytes need them)."""
    try:
        return is_netcdf(path) or array_source(path) is not None
    except InvalidInputError:
        return True  # an array file that needs options (an HDF5 file of several datasets), or a bad one


def source_of(store: Path, against: str | os.PathLike, group: dict, data: Array) -> ArraySource:
    """``against`` opened as the store's ingest opened it, with the options the store recorded."""
    attributes = data.attributes
    if RAW_DTYPE in attributes:
        return raw_source(
            against, shape=data.shape, dtype=attributes[RAW_DTYPE], order=attributes[RAW_ORDER],
            offset=int(attributes[RAW_OFFSET]),
        )  # fmt: skip
    dataset = attributes.get("hdf5_dataset")
    if dataset is None and is_netcdf(against):
        variable = group.get("cubeslab", {}).get(SOURCE_VARIABLE) or Path(data.path).name
        return netcdf_source(against, variable)
    if dataset is not None and not is_hdf5_file(against):
        raise InvalidInputError(f"{store} was ingested from HDF5 dataset {dataset}; {against} is not HDF5")
    found = array_source(against, dataset=dataset, hdu=attributes.get("fits_hdu"))
    if found is None:
        raise InvalidInputError(
            f"{against}: not an N-D array file cubeslab reads, and {store} holds no survey from SEG-Y"
        )
    return found


def compare_with_array_file(
    store: Path, against: str | os.PathLike, group: dict, data: Array, memory_limit: int | None
) -> dict:
    """The error statistics of the store's data against the file's values (see compress/metrics.rs),
    and how many values differ (NaN in both is no difference)."""
    source = source_of(store, against, group, data)
    if source.shape != data.shape:
        raise InvalidInputError(
            f"{against} holds an array of shape {list(source.shape)}, the store's data is "
            f"{list(data.shape)}: not its source"
        )
    tally, differing = _engine.ErrorTally(), 0
    row_bytes = int(np.prod(data.shape[1:], dtype=np.int64)) * max(source.dtype.itemsize, data.dtype.itemsize)
    rows = max(1, int(memory_limit or defaults.MEMORY_LIMIT) // (4 * max(row_bytes, 1)))
    for start in range(0, data.shape[0], rows):
        stop = min(start + rows, data.shape[0])
        original, stored = source.read(start, stop), data[start:stop]
        tally.add(original.reshape(-1).view(np.uint8), original.dtype.name,
                  stored.reshape(-1).view(np.uint8), stored.dtype.name)  # fmt: skip
        same = original == stored
        if original.dtype.kind == "f" or stored.dtype.kind == "f":
            same |= np.isnan(original) & np.isnan(stored)
        differing += int(same.size - np.count_nonzero(same))
    return json.loads(tally.to_json()) | {"differing": differing}


__all__ = ["compare_with_array_file", "is_array_file"]
