"""dask views of arrays: thin adapters over `Array` reads."""

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
