"""xarray and dask views of arrays and cubes: thin adapters over `Array` reads."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .array import Array

if TYPE_CHECKING:
    import xarray

    from .cube import Cube


def to_dask(array: Array, chunks=None):
    """A dask array whose tasks read through the engine (default chunks: shards)."""
    import dask.array as da

    chunks = chunks or array.shards or array.chunks
    return da.from_array(
        array, chunks=chunks, lock=False, asarray=False, meta=np.empty((0,) * array.ndim, array.dtype)
    )


def to_xarray(cube: Cube, chunks: Any = None) -> xarray.Dataset:
    """The survey as an ``xarray.Dataset``, read through the engine (see :mod:`cubeslab.xarray_backend`).

    ``chunks=None``: lazy numpy-backed variables, read when values are asked for (no dask).
    ``chunks={}`` or ``"shards"``: dask-backed, one chunk per shard. A tuple: chunk sizes along
    the amplitude's dimensions in order. Otherwise what ``xarray.open_dataset`` takes:
    ``{"inline": 64}`` (other dimensions by shard), ``"auto"``, ``-1`` ...
    """
    import xarray as xr

    from .xarray_backend import CubeslabBackendEntrypoint

    if isinstance(chunks, str) and chunks == "shards":
        chunks = {}
    elif isinstance(chunks, (tuple, list)):
        chunks = dict(zip(cube.dims, chunks, strict=True))
    # xarray hands any object on to the backend, which takes this open cube (its read settings kept);
    # xarray's own annotation names only paths, buffers and stores
    return xr.open_dataset(cube, engine=CubeslabBackendEntrypoint, chunks=chunks)  # type: ignore[arg-type]
