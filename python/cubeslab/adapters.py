"""xarray and dask views of arrays and cubes: thin adapters over `Array` reads."""

from __future__ import annotations

import numpy as np

from .array import Array


def to_dask(array: Array, chunks=None):
    """A dask array whose tasks read through the engine (default chunks: shards)."""
    import dask.array as da

    chunks = chunks or array.shards or array.chunks
    return da.from_array(
        array, chunks=chunks, lock=False, asarray=False, meta=np.empty((0,) * array.ndim, array.dtype)
    )


def _lazy(array: Array):
    """An xarray lazily-indexed wrapper: nothing is read until values are needed."""
    from xarray.backends import BackendArray
    from xarray.core import indexing

    class EngineBackendArray(BackendArray):
        def __init__(self, array: Array):
            self.array, self.shape, self.dtype = array, array.shape, array.dtype

        def __getitem__(self, key):
            return indexing.explicit_indexing_adapter(
                key, self.shape, indexing.IndexingSupport.BASIC, lambda k: self.array[k]
            )

    return indexing.LazilyIndexedArray(EngineBackendArray(array))


def to_xarray(cube):
    """The survey as an ``xarray.Dataset`` with coordinates; amplitudes stay lazy."""
    import xarray as xr

    coords = {dim: (dim, values) for dim, values in cube.coords.items()}
    data_vars = {"amplitude": xr.Variable(cube.dims, _lazy(cube.amplitude))}
    trace_dims = cube.dims[:-1]
    for name in ("trace_mask", "cdp_x", "cdp_y"):
        if (cube.path / name / "zarr.json").is_file():
            values = xr.Variable(trace_dims, _lazy(cube._array(name)))
            if name == "trace_mask":
                data_vars[name] = values
            else:
                coords[name] = values
    return xr.Dataset(
        data_vars, coords=coords, attrs={k: v for k, v in cube.attributes.items() if k != "cubeslab"}
    )
