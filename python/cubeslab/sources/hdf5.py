"""HDF5 datasets, read with h5py (the ``hdf5`` extra), slab by slab: chunked or contiguous, any numeric
type in either byte order. The dataset's attributes are kept, and its dimension scales name the store's
axes (with origin and step where evenly spaced)."""

from __future__ import annotations

import os

from .. import defaults
from ..errors import InvalidInputError
from ..hdf5_file import (
    auxiliary_coordinates,
    dataset_attributes,
    dataset_axes,
    datasets_in,
    h5py_module,
    open_dataset,
)
from . import fill_attribute
from .raw import ArraySource

__all__ = ["describe_hdf5", "hdf5_source"]


def describe_hdf5(path: str | os.PathLike) -> dict:
    """What ``cubeslab info`` shows of an HDF5 file: every dataset's type and shape, and which are
    dimension scales."""
    h5py = h5py_module()
    try:
        f = h5py.File(path, "r")
    except OSError as error:
        raise InvalidInputError(f"{path}: not an HDF5 file h5py reads: {error}") from None
    with f:
        datasets = {}
        for name in datasets_in(h5py, f):
            d = f[name]
            scale = " (dimension scale)" if d.attrs.get("CLASS") == b"DIMENSION_SCALE" else ""
            shape = "empty (null dataspace)" if d.shape is None else list(d.shape)
            link = f.get(name, getlink=True)
            where = f" (in {link.filename}, {link.path})" if isinstance(link, h5py.ExternalLink) else ""
            datasets[name] = f"{d.dtype} {shape}{scale}{where}"
        return {"file": os.fspath(path), "format": "hdf5", "datasets": datasets}


def in_place_reader(path: str | os.PathLike, dataset: str, *, variable: bool = False):
    """Rows ``start:stop`` of the dataset read by the engine in parallel, or None where it cannot read
    the dataset in place (a filter it lacks, compact storage): then h5py or netCDF4 reads it."""
    from ..hdf5_array import Hdf5Array

    try:
        array = Hdf5Array(path, variable=dataset) if variable else Hdf5Array(path, dataset)
    except InvalidInputError:
        return None
    return lambda start, stop: array[start:stop]


def stored_attributes(attributes: dict, dtype) -> dict:
    """An HDF5 dataset's ``attributes`` (as JSON values) for the store of an array of ``dtype``:
    ``_FillValue`` as xarray's Zarr engine reads it."""
    stored = dict(attributes)
    fill = stored.get("_FillValue")
    if isinstance(fill, (int, float)) and not isinstance(fill, bool):
        stored["_FillValue"] = fill_attribute.encode(fill, dtype)
    return stored


def hdf5_source(path: str | os.PathLike, dataset: str | None = None) -> ArraySource:
    _, data, dataset = open_dataset(path, dataset)
    auxiliary = {
        name: (axes, values, stored_attributes(own, values.dtype))
        for name, (axes, values, own) in auxiliary_coordinates(data, defaults.MEMORY_LIMIT // 4).items()
    }
    return ArraySource(
        os.fspath(path),
        data,
        "hdf5",
        dataset_axes(data),
        attributes={"hdf5_dataset": dataset, **stored_attributes(dataset_attributes(data), data.dtype)},
        slab_reader=in_place_reader(path, dataset),
        chunks=data.chunks,
        auxiliary=auxiliary,
    )
